"""Paired tests, Holm-Bonferroni and bootstrap intervals against direct computations."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scipy.stats import bootstrap, ttest_rel

from pipeline.core.errors import InputError
from pipeline.evaluation.significance import (
    TESTS,
    bootstrap_ci,
    compare,
    holm,
    intervals,
    paired,
    randomization_p,
)


def test_holm_matches_its_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1, then running maximum
    assert holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm(np.array([0.5, 0.9])).tolist() == [1.0, 1.0]


def test_randomization_test():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    assert randomization_p(a, a.copy()) == 1.0
    assert randomization_p(a + 0.2, a) == pytest.approx(1 / 10_001)  # never reached by chance
    noise = a + rng.normal(0, 0.3, 200)
    p = randomization_p(noise, a)
    assert 0.01 < p <= 1 and p == randomization_p(noise, a)  # seeded: reproducible


def test_compare_pairs_models_on_common_queries():
    rng = np.random.default_rng(1)
    base = rng.random(100)
    values = pl.concat([
        pl.DataFrame({"model": m, "query": [str(i) for i in range(100)], "value": v})
        for m, v in (("a", base), ("b", base + rng.normal(0.05, 0.1, 100)),
                     ("c", base + rng.normal(0, 0.1, 100)))])
    values = values.filter(~((pl.col("model") == "c") & (pl.col("query") == "0")))
    table = compare(values)
    assert table.select("a", "b").rows() == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = table.row(0, named=True)
    b = values.filter(pl.col("model") == "b").sort("query")["value"].to_numpy()
    a_sorted = values.filter(pl.col("model") == "a").sort("query")["value"].to_numpy()
    assert ab["queries"] == 99  # query 0 lacks model c: left out of every pair
    keep = values.filter(pl.col("model") == "a").sort("query")["query"] != "0"
    assert ab["p"] == pytest.approx(ttest_rel(a_sorted[keep], b[keep]).pvalue)
    assert table["p_holm"].to_list() == pytest.approx(holm(table["p"].to_numpy()).tolist())
    assert ab["significant"]


def test_bootstrap_is_scipys_seeded_percentile_interval():
    values = np.random.default_rng(2).random(500)
    lo, hi = bootstrap_ci(values, resamples=1000, seed=7)
    expected = bootstrap((values,), np.mean, n_resamples=1000, confidence_level=0.95,
                         method="percentile", rng=np.random.default_rng(7)).confidence_interval
    assert (lo, hi) == (expected.low, expected.high)
    # by hand: 1,000 resamples of 500 indices from the seeded generator, their means' 2.5th
    # and 97.5th percentiles
    means = values[np.random.default_rng(7).integers(0, 500, (1000, 500))].mean(axis=1)
    assert [lo, hi] == pytest.approx(np.percentile(means, [2.5, 97.5]).tolist(), abs=1e-12)
    assert lo < values.mean() < hi
    assert bootstrap_ci(values, seed=7) == (lo, hi)  # seeded: reproducible
    assert bootstrap_ci(values, seed=8) != (lo, hi)


def test_bootstrap_of_one_or_no_query():
    """No interval (NaN), never the point [0.25, 0.25] (issue 46)."""
    assert all(np.isnan(bootstrap_ci(np.array([0.25]))))
    assert all(np.isnan(bootstrap_ci(np.array([]))))


def test_compare_rejects_an_unknown_test():
    values = pl.DataFrame({"model": ["a", "b"], "query": ["1", "1"], "value": [0.1, 0.2]})
    with pytest.raises(InputError, match="unknown significance test 'wilcoxon'"):
        compare(values, "wilcoxon")
    assert set(TESTS) == {"t-test", "fisher"}
    for test in TESTS:
        assert compare(values, test).height == 1


def three_models(n: int = 60) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    base = rng.random(n)
    queries = [f"q{i}" for i in range(n)]
    return pl.concat([pl.DataFrame({"model": m, "query": queries, "value": v})
                      for m, v in (("a", base), ("b", base + rng.normal(0.02, 0.1, n)),
                                   ("c", base + rng.normal(0, 0.2, n)))])


def test_tests_and_intervals_do_not_depend_on_the_rows_order():
    """Issue 29: the sign flips and the resamples are drawn per position, so the values reach
    them sorted by query id; the same p-values and intervals, bit for bit, whatever order the
    queries come in."""
    values = three_models()
    expected = {test: compare(values, test) for test in TESTS}
    bounds = intervals(values)
    for seed in range(4):
        shuffled = values.sample(fraction=1, shuffle=True, seed=seed)
        assert shuffled["query"].to_list() != values["query"].to_list()
        for test in TESTS:
            assert_frame_equal(compare(shuffled, test), expected[test], check_exact=True)
        assert_frame_equal(intervals(shuffled), bounds, check_exact=True)
    # each interval is bootstrap_ci of the model's values in query id order
    for model, queries, mean, low, high in bounds.iter_rows():
        mine = values.filter(pl.col("model") == model).sort("query")["value"].to_numpy()
        assert (queries, (low, high)) == (60, bootstrap_ci(mine))
        assert mean == pytest.approx(mine.mean(), abs=1e-15)


def test_models_are_paired_by_query_id_never_by_position():
    """Model b's rows in reverse order, one query missing from model c: each pair is made by
    the query id, and the randomization test sees the pairs in query id order."""
    values = three_models()
    reversed_b = pl.concat([values.filter(pl.col("model") != "b"),
                            values.filter(pl.col("model") == "b").reverse()])
    reversed_b = reversed_b.filter(~((pl.col("model") == "c") & (pl.col("query") == "q7")))
    queries, wide = paired(reversed_b)
    assert wide.columns == ["a", "b", "c"]
    assert queries.to_list() == sorted(f"q{i}" for i in range(60) if i != 7)
    by_id = {m: dict(values.filter(pl.col("model") == m).select("query", "value").iter_rows())
             for m in ("a", "b")}
    a, b = ([by_id[m][q] for q in queries] for m in ("a", "b"))
    assert wide["a"].to_list() == a and wide["b"].to_list() == b
    fisher = compare(reversed_b, "fisher").row(0, named=True)
    assert (fisher["a"], fisher["b"], fisher["queries"]) == ("a", "b", 59)
    assert fisher["p"] == randomization_p(np.array(a), np.array(b))


def test_a_model_may_be_named_as_any_column():
    """Models named "query", "value" or "model" are compared as any other name."""
    values = three_models()
    names = {"a": "model", "b": "query", "c": "value"}  # in the same order as a, b, c
    renamed = compare(values.with_columns(pl.col("model").replace_strict(names)))
    plain = compare(values).with_columns(pl.col("a", "b").replace_strict(names))
    assert_frame_equal(renamed.sort("a", "b"), plain.sort("a", "b"))


def test_one_query_gives_no_p_value_and_no_interval():
    """Issue 46: one query printed "p 1 (1)" and an interval "[39.5, 39.5]" as if measured.
    Two models 20 points apart on their one query: no test can tell them apart, and the
    bootstrap of one value is a point: n/a, never significant; two queries get numbers."""
    from pipeline.report.tables import significance_section

    one = pl.DataFrame({"model": ["a", "b"], "query": ["q1", "q1"], "value": [0.395, 0.195]})
    for test in TESTS:
        row = compare(one, test).row(0, named=True)
        assert np.isnan(row["p"]) and np.isnan(row["p_holm"]) and not row["significant"]
    assert np.isnan(bootstrap_ci(np.array([0.395]))).all()
    assert intervals(one).select("low", "high").null_count().row(0) == (0, 0)
    text = "\n".join(t.markdown for t in significance_section(
        one.with_columns(size=pl.lit(1000), scope=pl.lit("all"), metric=pl.lit("map"))))
    assert "| all-1k | map | a | b | 39.5 | 19.5 | n/a (1 query) | n/a (1 query) |" in text
    assert "| all-1k | map | a | 1 | 39.5 | n/a (1 query) |" in text and "[39.5, 39.5]" not in text
    two = pl.concat([one, one.with_columns(query=pl.lit("q2"), value=pl.col("value") + 0.1)])
    assert not np.isnan(compare(two)["p"][0])
    low, high = bootstrap_ci(np.array([0.395, 0.495]))
    assert low < high


def test_a_value_that_is_not_finite_is_refused_and_a_null_counted(caplog):
    """Issue 56: the same rule as crossover and variance (`measured`): a NaN or inf refused in
    one line naming the model and query, a null row left out and said."""
    import logging

    values = pl.DataFrame({"model": ["a", "a", "a", "b", "b", "b"],
                           "query": ["q1", "q2", "q3"] * 2,
                           "value": [0.1, 0.2, 0.3, 0.2, float("inf"), 0.4]})
    for call in (lambda: compare(values), lambda: intervals(values)):
        with pytest.raises(InputError, match=r"1 value\(s\) are NaN or infinite \(the first: "
                                             r"model b, query q2, column value = inf\)"):
            call()
    holed = values.with_columns(value=pl.when(pl.col("value").is_infinite()).then(None)
                                .otherwise("value"))
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.significance"):
        assert compare(holed)["queries"].to_list() == [2]
        assert intervals(holed)["queries"].to_list() == [3, 2]
    assert caplog.text.count("1 row with a null value left out of 6") == 2
