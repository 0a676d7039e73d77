"""Variance decomposition, intervals over queries and draws, topic set size (issue 42):
simulations whose truth is known, seeded."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import nct, norm, t, ttest_1samp

from pipeline.evaluation.variance import (
    components,
    decompose,
    difference_interval,
    differences,
    pooled,
    power_of,
    queries_needed,
    topic_set_size,
)


def crossed(rng: np.random.Generator, queries: int, draws: int, s2_query: float,
            s2_draw: float, s2_resid: float, mu: float = 0.0) -> np.ndarray:
    """y_qr = mu + a_q + b_r + e_qr, each effect normal with its variance."""
    return (mu + rng.normal(0, math.sqrt(s2_query), (queries, 1))
            + rng.normal(0, math.sqrt(s2_draw), (1, draws))
            + rng.normal(0, math.sqrt(s2_resid), (queries, draws)))


def test_the_components_and_shares_are_recovered():
    """200 data sets of 200 queries x 10 draws: the mean estimate of each component is within
    10% of its true value, and the mean shares within 0.03 of the true shares (query 0.20,
    draw 0.79, interaction 0.01): a decomposition that swapped query and draw fails both."""
    rng = np.random.default_rng(42)
    truth = (0.02, 0.004, 0.01)
    q, r = 200, 10
    found = [decompose(crossed(rng, q, r, *truth)) for _ in range(200)]
    estimated = np.array([[c.s2_query, c.s2_draw, c.s2_resid] for c in found]).mean(axis=0)
    np.testing.assert_allclose(estimated, truth, rtol=0.10)
    terms = np.array([truth[0] / q, truth[1] / r, truth[2] / (q * r)])
    shares = np.array([c.shares for c in found]).mean(axis=0)
    np.testing.assert_allclose(shares, terms / terms.sum(), atol=0.03)
    one = found[0]
    assert math.isclose(one.variance, sum(one.terms)) and math.isclose(sum(one.shares), 1.0)


def coverage(seed: int = 7, datasets: int = 400) -> tuple[int, int]:
    """Two models on 100 queries x 3 draws, true difference 0.03, queries and draws both
    varying the difference (the draw half of its mean's variance): how many of `datasets`
    95% intervals cover 0.03, over both sources and over queries only."""
    rng = np.random.default_rng(seed)
    both = queries_only = 0
    for _ in range(datasets):
        shared = rng.normal(0, 0.15, (100, 1))  # a query's difficulty, the same for both
        a = shared + crossed(rng, 100, 3, 0.01, 0.0005, 0.0025, mu=0.33)
        b = shared + crossed(rng, 100, 3, 0.01, 0.0005, 0.0025, mu=0.30)
        i = difference_interval(a, b)
        both += i.low <= 0.03 <= i.high
        queries_only += i.queries_low <= 0.03 <= i.queries_high
    return both, queries_only


@pytest.fixture(scope="module")
def covered() -> tuple[int, int]:
    return coverage()


def test_the_difference_interval_covers_at_its_nominal_rate(covered):
    assert 372 <= covered[0] <= 388, covered


def test_the_queries_only_interval_under_covers_when_draws_vary(covered):
    """The queries-only interval (the paired t-test's) misses the draw's variance."""
    assert covered[1] < 372, covered
    assert covered[1] < covered[0] - 40


def test_topic_set_size_is_the_classic_paired_t_one_without_draw_variance():
    """s2_draw = 0: the smallest n whose noncentral-t power reaches 0.8 (counted up from 2,
    independently), within 1 of Sakai's closed-form approximation."""
    for delta, s2 in ((0.05, 0.0025), (0.02, 0.01), (0.01, 0.04)):
        n = topic_set_size(delta, s2)
        crit = t.ppf(0.975, np.arange(1, n + 1))
        ncp = delta / np.sqrt(s2 / np.arange(2, n + 2))
        powers = nct.sf(crit, np.arange(1, n + 1), ncp) + nct.cdf(-crit, np.arange(1, n + 1),
                                                                   ncp)
        assert int(np.argmax(powers >= 0.8)) + 2 == n, (delta, s2)
        effect = delta / math.sqrt(s2)
        z_a, z_b = norm.ppf(0.975), norm.ppf(0.8)
        assert abs(n - (((z_a + z_b) / effect) ** 2 + z_a ** 2 / 2)) <= 1.0, (delta, s2, n)


def test_topic_set_size_agrees_with_a_simulated_power():
    """At the n returned, 20,000 simulated paired t-tests reject at least 0.8 of the time (less
    3 standard errors); at n - 1, less often and below 0.8."""
    rng = np.random.default_rng(3)
    delta, s2 = 0.05, 0.0025
    n = topic_set_size(delta, s2)
    rates = {}
    for size in (n - 1, n):
        d = rng.normal(delta, math.sqrt(s2), (20_000, size))
        rates[size] = float((ttest_1samp(d, 0.0, axis=1).pvalue < 0.05).mean())
    assert rates[n] >= 0.8 - 3 * math.sqrt(0.16 / 20_000), rates
    assert rates[n - 1] < 0.8 and rates[n - 1] < rates[n], rates
    assert abs(rates[n] - power_of(n, delta, s2)) < 0.01


def test_draws_bound_the_topic_set_size():
    """More draws need fewer queries; a draw variance that no number of queries overcomes with
    R draws: None; the n returned is the first whose power reaches 0.8."""
    sizes = [topic_set_size(0.02, 0.02, 0.0001, 0.005, r) for r in (3, 5, 10)]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    for r, n in zip((3, 5, 10), sizes, strict=True):
        assert power_of(n, 0.02, 0.02, 0.0001, 0.005, r) >= 0.8
        assert power_of(n - 1, 0.02, 0.02, 0.0001, 0.005, r) < 0.8
    assert topic_set_size(0.02, 0.02, 0.0001, 0.005, 1) is None  # z power 0.52
    assert topic_set_size(0.01, 0.02, 0.0001, 0.005, 3) is None


def rows(values: dict[str, np.ndarray], size: int = 1000) -> pl.DataFrame:
    """The report's rows of one pool size: model -> Q x R matrix, queries q000..."""
    return pl.DataFrame([
        {"scope": "dataset", "size": size, "metric": "map", "model": model,
         "query": f"q{i:03d}", "repeat": r, "value": float(y[i, r])}
        for model, y in values.items() for i in range(y.shape[0]) for r in range(y.shape[1])])


def test_frames_in_a_fixed_order_whatever_the_rows_order():
    rng = np.random.default_rng(5)
    data = rows({m: crossed(rng, 30, 3, 0.01, 0.001, 0.004, mu) for m, mu in
                 (("specter", 0.3), ("bm25", 0.35), ("scincl", 0.32))})
    shuffled = data.sample(fraction=1.0, shuffle=True, seed=1)
    for frame in (components, differences, pooled):
        assert frame(data).equals(frame(shuffled)), frame.__name__
    assert components(data)["model"].to_list() == ["bm25", "scincl", "specter"]
    assert differences(data).select("a", "b").rows() == [
        ("bm25", "scincl"), ("bm25", "specter"), ("scincl", "specter")]
    table = queries_needed(pooled(data))
    assert table.height == 3 * 4 and table["measured_draws"].to_list() == [3] * 12


def test_one_draw_gives_the_queries_alone():
    """R = 1: no draw or interaction component, no shares; the difference's interval is the
    queries'; the topic set size only for one draw (the draw's variance unknown)."""
    rng = np.random.default_rng(9)
    data = rows({m: crossed(rng, 40, 1, 0.01, 0.0, 0.004, mu) for m, mu in
                 (("a", 0.3), ("b", 0.35))})
    found = components(data)
    assert found["draws"].to_list() == [1, 1]
    assert found.select("s2_draw", "s2_resid", "share_query", "share_draw",
                        "share_interaction").null_count().row(0) == (2, 2, 2, 2, 2)
    assert (found["se"] > 0).all()
    pair = differences(data).row(0, named=True)
    assert (pair["low"], pair["high"]) == (pair["queries_low"], pair["queries_high"])
    table = queries_needed(pooled(data))
    assert table["draws"].to_list() == [1, 1, 1] and table["queries"].is_not_null().all()


def test_the_api_selects_the_rows_a_report_reads():
    """pipeline.variance and pipeline.topic_set_size on a results frame: one corpus and seed,
    full queries only; several corpora without corpus=: refused."""
    import pipeline
    from pipeline.core.errors import InputError

    rng = np.random.default_rng(11)
    data = rows({m: crossed(rng, 20, 3, 0.01, 0.001, 0.004, mu) for m, mu in
                 (("bm25", 0.3), ("minilm", 0.32))})
    table = pl.concat([
        data.with_columns(corpus=pl.lit("demo"), seed=0, negatives=pl.lit("all")),
        data.with_columns(corpus=pl.lit("demo"), seed=0, negatives=pl.lit("all"),
                          model=pl.col("model") + "~title", value=pl.col("value") - 0.1),
        data.with_columns(corpus=pl.lit("other"), seed=0, negatives=pl.lit("all"),
                          value=pl.col("value") + 0.1)])
    assert pipeline.variance(table, corpus="demo").equals(components(data))
    sizes = pipeline.topic_set_size(table, deltas=[0.05], draws=[3], corpus="demo")
    assert sizes.equals(queries_needed(pooled(data), (0.05,), (3,)))
    with pytest.raises(InputError, match="several corpus"):
        pipeline.variance(table)


def test_a_model_identical_to_another_changes_no_queries_needed():
    """Issue 46: adding a copy of a model changed queries-needed from 953 to 636 (its zero
    difference with the original was pooled). The copy is left out, named; the numbers are
    those without it. Three copies of one model: nothing to pool, no row."""
    rng = np.random.default_rng(21)
    data = rows({m: crossed(rng, 60, 3, 0.01, 0.0002, 0.004, mu) for m, mu in
                 (("bm25", 0.35), ("minilm", 0.3), ("specter", 0.32))})
    copy = pl.concat([data, data.filter(pl.col("model") == "minilm").with_columns(
        model=pl.lit("minilm2"))])
    alone, with_copy = pooled(data), pooled(copy)
    needed, wanted = queries_needed(with_copy)["queries"], queries_needed(alone)["queries"]
    assert needed.drop_nulls().len() > 0 and needed.equals(wanted)
    variances = ["pairs", "s2_query", "s2_draw", "s2_resid"]
    assert with_copy.select(variances).equals(alone.select(variances))
    assert with_copy["identical"].to_list() == [["minilm2"]]
    assert queries_needed(with_copy)["identical"].to_list()[0] == ["minilm2"]
    only = pl.concat([data.filter(pl.col("model") == "bm25").with_columns(model=pl.lit(m))
                      for m in ("a", "b", "c")])
    assert pooled(only).is_empty()


def test_one_query_gives_a_mean_without_a_variance():
    """Issue 46: with one query a variance or an interval is not defined: the model's mean is
    given with null SE and shares, the pair's difference with null intervals, and the report
    says n/a; never a number with nothing behind it, never a model silently left out."""
    from pipeline.report.variance import variance_tables

    rng = np.random.default_rng(22)
    data = rows({m: crossed(rng, 1, 3, 0.01, 0.001, 0.004, mu) for m, mu in
                 (("a", 0.3), ("b", 0.5))})
    found = components(data)
    assert found["model"].to_list() == ["a", "b"] and found["queries"].to_list() == [1, 1]
    assert found["se"].null_count() == 2 and found["mean"].null_count() == 0
    pair = differences(data).row(0, named=True)
    assert pair["difference"] < 0 and pair["low"] is None and pair["queries_low"] is None
    assert pooled(data).is_empty()
    tables = {name: (caption, body) for name, caption, _, body in variance_tables(
        data.with_columns(scope=pl.lit("all")), "demo")}
    assert tables["variance"][1][0][4] == "n/a (1 query)"
    assert tables["variance-differences"][1][0][4:] == ["n/a (1 query)"] * 2
    assert "fewer than 2 queries" in tables["variance"][0]
