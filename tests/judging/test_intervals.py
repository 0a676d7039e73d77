"""The models' means and the pairs' differences over per-query values, their intervals and
verdicts (pipeline/judging/intervals.py): on values made to reach each case."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.evaluation.significance import logit_interval
from pipeline.judging.intervals import bounded_interval, differences, means, verdict
from tests.conftest import pair_values


def test_a_mean_near_a_bound_stays_inside_and_keeps_its_symmetric_level_in_the_middle():
    rng = np.random.default_rng(71)
    low_values = np.zeros((25, 3))  # two queries retrieve something: a mean of 0.012
    low_values[0], low_values[1] = 0.2, 0.1 + rng.uniform(0, 0.01, 3)
    interval, agree = bounded_interval(low_values)
    assert not agree and 0 < interval.low < interval.difference < interval.high < 1
    # the symmetric interval it replaces left [0, 1] there
    symmetric = bounded_interval(low_values, bounds=(-np.inf, np.inf), logit=False)[0]
    assert symmetric.low < 0 < interval.low
    high_values = np.where(rng.random((25, 3)) < 0.9, 1.0, 0.5)  # P@10 of 0.95
    interval = bounded_interval(high_values)[0]
    assert interval.low < interval.difference < interval.high < 1
    # in the middle the logit interval is the symmetric one to a few parts in a thousand
    middle = 0.5 + rng.normal(0, 0.1, (50, 3))
    logit, plain = bounded_interval(middle)[0], bounded_interval(middle, logit=False)[0]
    assert logit.high - logit.low == pytest.approx(plain.high - plain.low, rel=0.01)
    # vectorised as the benchmark reads it: logit_interval of the mean and the half-width
    half = plain.high - plain.difference
    assert logit_interval(plain.difference, half) == pytest.approx((logit.low, logit.high))


def test_a_point_interval_from_varying_values_is_widened():
    """Column means equal (MS_R 0) and query means equal (MS_Q 0 <= MS_E): the shipped
    half-width is 0 though the values differ; the interval is not a point."""
    y = np.array([[0.2, 0.4], [0.4, 0.2]] * 5)
    interval, agree = bounded_interval(y)
    assert not agree and interval.low < interval.difference < interval.high


def test_verdicts_read_the_new_interval():
    from pipeline.evaluation.variance import Interval

    def gap(d: float, low: float, high: float) -> Interval:
        return Interval(d, low, high, low, high)

    above, below, holds = gap(0.05, 0.01, 0.09), gap(-0.05, -0.09, -0.01), gap(0.01, -0.02, 0.04)
    assert verdict(above, below, "a", "b").startswith("reversed, significantly")
    assert verdict(holds, below, "a", "b").startswith("reversed, the new order significant")
    assert verdict(above, above, "a", "b").startswith("kept, significant both ways")
    assert verdict(holds, above, "a", "b").startswith("kept, now significant")
    assert verdict(above, gap(-0.01, -0.04, 0.02), "a", "b") == (
        "not determined: the interval with the sample holds 0 (the citations' excludes it) "
        "(a > b -> a < b)")
    assert verdict(gap(0.0, -0.01, 0.01), below, "a", "b").startswith("ordered by the sample")


def test_a_pair_whose_order_the_sample_reverses_says_so():
    values = pair_values({f"all-2k-r{r}": (0.05, -0.05) for r in range(3)}
                         | {f"all-5k-r{r}": (0.05, 0.04) for r in range(3)}, 0.02, 30)
    pairs = differences(values).sort("size")
    reversed_, kept = pairs.row(0, named=True), pairs.row(1, named=True)
    assert (reversed_["size"], reversed_["draws"], reversed_["queries"]) == (2000, 3, 30)
    assert reversed_["reversed"] and reversed_["verdict"].startswith("reversed, significantly")
    assert reversed_["cited"] == pytest.approx(0.05, abs=0.01)
    assert reversed_["inferred"] == pytest.approx(-0.05, abs=0.01)
    assert reversed_["shift"] == pytest.approx(-0.10, abs=0.01)
    assert reversed_["shift_high"] < 0 < reversed_["cited_low"]
    assert not kept["reversed"] and kept["verdict"].startswith("kept")
    table = means(values)
    assert table.height == 4 and set(table["model"]) == {"a", "b"}
    assert (table["low"] < table["inferred"]).all() and (table["inferred"] < table["high"]).all()
