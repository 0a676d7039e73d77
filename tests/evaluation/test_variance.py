"""Variance decomposition, intervals over queries and draws, topic set size (issue 42):
simulations whose truth is known, seeded."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import nct, norm, t, ttest_1samp

from pipeline.evaluation.variance import (
    INTERVAL_TEST,
    PAIRED_T,
    UNKNOWN_DRAW,
    components,
    decompose,
    difference_interval,
    differences,
    draw_upper,
    expected_square_range,
    half_widths,
    interval_power,
    mean_squares,
    pair_components,
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


def test_the_difference_interval_covers_at_its_nominal_rate():
    """At least its nominal 95%, and not so wide that it covers almost always: of 4,000
    simulated data sets it covers no fewer than a 95% interval would with probability 0.999,
    and no more than a 99% one would with probability 0.999 (binomial bounds, so any seed
    passes unless the interval is wrong; 99% is above the 95.0-98.8% of its simulated map,
    benchmarks/interval_level.py). The queries-only interval (the paired t's) fails it."""
    from scipy.stats import binom

    datasets = 4000
    both, queries_only = coverage(datasets=datasets)
    at_least, at_most = binom.ppf(0.001, datasets, 0.95), binom.isf(0.001, datasets, 0.99)
    assert at_least <= both <= at_most, (both, at_least, at_most)
    assert queries_only < at_least, (queries_only, at_least)


def test_the_queries_only_interval_under_covers_when_draws_vary(covered):
    """The queries-only interval (the paired t-test's) misses the draw's variance."""
    assert covered[1] < 372, covered
    assert covered[1] < covered[0] - 40


def test_topic_set_size_is_the_classic_paired_t_one_without_draw_variance():
    """s2_draw = 0: the smallest n whose noncentral-t power reaches 0.8 (counted up from 2,
    independently), within 1 of Sakai's closed-form approximation."""
    for delta, s2 in ((0.05, 0.0025), (0.02, 0.01), (0.01, 0.04)):
        n = topic_set_size(delta, s2).queries
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
    n = topic_set_size(delta, s2).queries
    rates = {}
    for size in (n - 1, n):
        d = rng.normal(delta, math.sqrt(s2), (20_000, size))
        rates[size] = float((ttest_1samp(d, 0.0, axis=1).pvalue < 0.05).mean())
    assert rates[n] >= 0.8 - 3 * math.sqrt(0.16 / 20_000), rates
    assert rates[n - 1] < 0.8 and rates[n - 1] < rates[n], rates
    assert abs(rates[n] - power_of(n, delta, s2)) < 0.01


def interval_rejections(queries: int, delta: float, s2_query: float, s2_draw: float,
                        s2_resid: float, draws: int = 3, datasets: int = 4000,
                        seed: int = 0) -> float:
    """The share of `datasets` simulated differences (queries x draws, the draw effect shared
    by every query of the difference, as both models search the same draw) whose report
    interval (`half_widths`, queries and draws) excludes 0; drawn 4,000 data sets at a time
    (the first 4,000 the same whatever `datasets`)."""
    rng = np.random.default_rng(seed)
    rejected = 0
    for start in range(0, datasets, 4000):
        chunk = min(4000, datasets - start)
        d = (delta + rng.normal(0, math.sqrt(s2_query), (chunk, queries, 1))
             + rng.normal(0, math.sqrt(s2_draw), (chunk, 1, draws))
             + rng.normal(0, math.sqrt(s2_resid), (chunk, queries, draws)))
        mean, ms_q, ms_r, ms_e = mean_squares(d)
        _, half = half_widths(ms_q, ms_r, ms_e, queries, draws)
        rejected += int((np.abs(mean) > half).sum())
    return rejected / datasets


def test_queries_needed_give_the_report_interval_its_power():
    """Issue 47: the number was a known-draw-variance t-test's, which no one can run. Now, at
    the n returned for 3 draws, 4,000 simulated data sets' queries-and-draws intervals exclude
    0 at least 0.78 of the time and below 0.8 at n - 1; at delta 0 at most 0.05 (the interval
    is conservative: Banerjee's); the integrated power is within 0.01 of each."""
    truth = (0.002, 0.00003, 0.001)  # s2_query, s2_draw, s2_resid of the difference
    needed = topic_set_size(0.05, *truth, draws=3)
    n = needed.queries
    assert needed.test == INTERVAL_TEST and n is not None and n > 3, needed
    found = {m: interval_rejections(m, 0.05, *truth) for m in (n - 1, n)}
    assert found[n] >= 0.78 and found[n - 1] < 0.8, found
    for m, rate in found.items():
        assert abs(interval_power(m, 0.05, *truth, 3) - rate) < 0.01, (m, rate)
    false_positives = interval_rejections(n, 0.0, *truth, seed=1)
    assert false_positives <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000), false_positives
    assert abs(interval_power(n, 0.0, *truth, 3) - false_positives) < 0.01


def share_setting(queries: int, draws: int, draw_share: float, resid_share: float
                  ) -> tuple[float, float, float]:
    """s2_query, s2_draw, s2_resid of a difference whose mean has variance 1, the draw term
    `draw_share` of it and the interaction `resid_share` of the rest."""
    rest = 1 - draw_share
    return (rest * (1 - resid_share) * queries, draw_share * draws,
            rest * resid_share * queries * draws)


DRAW_SHARES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99)
RESID_SHARES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)


def false_positive_map(queries: int, draws: int) -> np.ndarray:
    """The interval's rejection rate at delta 0 (`interval_power`) over the draw and
    interaction shares."""
    return np.array([[interval_power(queries, 0.0, *share_setting(queries, draws, d, e), draws)
                      for d in DRAW_SHARES] for e in RESID_SHARES])


@pytest.mark.parametrize("queries", [30, 100, 1000])
def test_the_interval_holds_its_level_whatever_the_shares(queries):
    """Issue 47: a false positive at most 0.05 (0.0505: quadrature) wherever the variance comes
    from, 2 to 10 draws (from 30 queries: 10 queries x 10 draws reach 0.054, documented); with
    10 draws within 0.04-0.05 everywhere. The first form
    (max(MS_R - MS_E, 0) under R-1 degrees of freedom) reached 0.086 with 3 draws and 0.128
    with 2 where the interaction was large."""
    for draws in (2, 3, 5, 10):
        rates = false_positive_map(queries, draws)
        assert rates.max() <= 0.0505, (draws, rates.round(3))
        if draws == 10:
            assert rates.min() >= 0.04, rates.round(3)


def test_the_interval_holds_its_level_where_the_interaction_is_large():
    """Simulated (4,000 data sets, 30 queries x 3 draws, draw share 0.7, interaction 0.9 of
    the rest): the first form rejected a true 0 in about 8% of them; now at most 5% (within 3
    standard errors), as integrated."""
    setting = share_setting(30, 3, 0.7, 0.9)
    rate = interval_rejections(30, 0.0, *setting, seed=2)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000), rate
    assert abs(interval_power(30, 0.0, *setting, 3) - rate) < 0.01, rate


def test_the_issue_example_is_not_reachable_with_three_draws():
    """Issue 47's example (s2_query 0.02, s2_draw 0.0001, s2_resid 0.005, delta 0.02): 1,235
    queries were given for 3 draws; the interval's draw part (2 degrees of freedom) keeps its
    power below 0.47 however many queries. With 5 draws about 1,360 (not 682); with one draw
    no test separates the draw's variance. Issue 58: a measured draw estimate of 0 keeps the
    interval (more queries than the paired t's: its draw part t(2)^2 MS_R stays); the paired
    t only where none was measured (NaN) and one draw is planned."""
    example = (0.02, 0.02, 0.0001, 0.005)
    three = topic_set_size(*example, draws=3)
    assert three.queries is None and three.reason == (
        f"not reachable with 3 draws; {three.draws_needed} draws reach it"), three
    assert 3 < three.draws_needed <= 5  # 5 draws reach it, below
    assert interval_power(100_000, *example, 3) < 0.48
    five = topic_set_size(*example, draws=5)
    assert five.test == INTERVAL_TEST and 1300 <= five.queries <= 1420, five
    assert power_of(five.queries, *example, 5) > 0.9  # the known-variance test's power there
    assert topic_set_size(*example, draws=1).queries is None
    paired = topic_set_size(0.02, 0.02 + 0.005 / 3)
    assert paired.test == PAIRED_T and paired.queries is not None
    assert topic_set_size(0.02, 0.02, math.nan, 0.005 / 3) == paired  # one draw: the same
    zero = topic_set_size(0.02, 0.02, 0.0, 0.005, 3)
    assert zero.test == INTERVAL_TEST and zero.queries > paired.queries, (zero, paired)
    assert interval_power(paired.queries, 0.02, 0.02, 0.0, 0.005, 3) < 0.8
    unknown = topic_set_size(0.02, 0.02, math.nan, 0.005, 3)
    assert unknown.queries is None and unknown.reason == UNKNOWN_DRAW, unknown


@pytest.mark.parametrize("queries", [25, 100])
@pytest.mark.parametrize("s2_resid", [0.0005, 0.02])
def test_queries_needed_are_the_reports_test_whatever_the_draw_estimate(queries, s2_resid):
    """Issue 58: 400 differences of `queries` x 3 draws (s2_query 0.01, a real draw sd of
    0.3 MAP points, a small or large query x draw interaction): the draw estimate is 0 in
    30-64% of them, where the paired t's n was given, at which the report's interval has
    power 0.44-0.79 (integrated). Through the report's frames (delta 0.05), for the first
    data set with an estimate of 0 and the one with the smallest positive estimate (the
    other side of the old switch): no paired t for R > 1, no test for R = 1; the n at the
    estimates for 3 draws (`queries_point`) the smallest whose integrated power reaches 0.8
    there, and at it 10,000 simulated data sets with the estimated components as the truth
    give the queries-and-draws interval excluding 0 at least 0.78 of the time (Monte Carlo
    standard error 0.004: 0.78 is 5 of them below 0.8); the report's number (issue 89:
    planned at the draw variance's 90% upper bound) never below it or "not reachable",
    above it where the estimate is 0; and the paired t's n falls short."""
    rng = np.random.default_rng(58)
    d = (rng.normal(0, 0.1, (400, queries, 1)) + rng.normal(0, 0.003, (400, 1, 3))
         + rng.normal(0, math.sqrt(s2_resid), (400, queries, 3)))
    _, _, ms_r, ms_e = mean_squares(d)
    zero = ms_r <= ms_e  # the draw estimate (MS_R - MS_E)/Q truncated to 0
    assert 0.2 < zero.mean() < 0.7, zero.mean()
    smallest = int(np.argmin(np.where(zero, np.inf, ms_r - ms_e)))
    for i in (int(np.argmax(zero)), smallest):
        pairs = pair_components(rows({"a": 0.3 + d[i], "b": np.full(d[i].shape, 0.3)}))
        c = pairs.row(0, named=True)
        assert (c["s2_draw"] == 0) == bool(zero[i]) and c["draws"] == 3
        table = queries_needed(pairs, (0.05,), (1, 3, 10))
        assert PAIRED_T not in table["test"].to_list(), table
        by = {r["draws"]: r for r in table.iter_rows(named=True)}
        assert by[1]["queries"] is None and by[1]["reason"].startswith("one draw"), by[1]
        truth = (c["s2_query"], c["s2_draw"], c["s2_resid"])
        n = by[3]["queries_point"]
        assert interval_power(n - 1, 0.05, *truth, 3) < 0.8 <= interval_power(n, 0.05, *truth, 3)
        rate = interval_rejections(n, 0.05, *truth, datasets=10_000, seed=i + 1)
        assert rate >= 0.78, (i, truth, n, rate)
        for r in (3, 10):
            row = by[r]
            assert (row["queries"] is None and row["reason"].startswith(
                f"not reachable with {r} draws") or row["queries"] >= row["queries_point"]), row
        if c["s2_draw"] > 0:
            continue
        assert by[3]["queries"] is None or by[3]["queries"] > n, by[3]
        paired = topic_set_size(0.05, c["s2_query"] + c["s2_resid"] / 3).queries  # the old n
        assert paired < n and interval_power(paired, 0.05, *truth, 3) < 0.8, (paired, n)


def test_the_search_finds_the_smallest_n_whatever_the_guess():
    """`_smallest` (doubling or halving from a guess, then bisection) against counting: the
    first n at which a rising condition holds, for a guess below, at, above or far above it
    (the interval's search guesses a known-variance t-test's n, which can be too large), and
    None beyond MAX_QUERIES."""
    from pipeline.evaluation.variance import MAX_QUERIES, _smallest

    for answer in (2, 3, 17, 64, 65, 1000):
        for guess in (None, 2, answer - 1, answer, answer + 1, 10 * answer, MAX_QUERIES * 2):
            assert _smallest(lambda n, a=answer: n >= a, 2, guess) == answer, (answer, guess)
    assert _smallest(lambda n: n >= 5, 9, 3) == 9  # never below low
    assert _smallest(lambda n: False, 2, 100) is None


def test_the_draw_upper_bound_holds_its_level():
    """The 90% upper bound of s2_draw (from MS_R's chi-square, 2 degrees of freedom with 3
    draws): 9.49 times MS_R on E[MS_R], MS_R taken at least MS_E, so never 0 from a small
    MS_R (at least 8.49 MS_E / Q). At or above the true s2_draw in 0.9 of 20,000 simulated
    data sets where the interaction is negligible (within 3 Monte Carlo standard errors,
    0.002 each), in more where it is real (the floor only raises it), and in far more than
    the bound without the floor where the interaction hides the draws: its price in width
    is what buys the plans it makes."""
    from scipy.stats import chi2

    assert math.isclose(float(draw_upper(1.0, 0.0, 1, 3)), 2 / chi2.ppf(0.1, 2))
    assert math.isclose(float(draw_upper(1.0, 0.0, 1, 3)), 9.49, abs_tol=0.005)
    assert math.isclose(float(draw_upper(0.0, 0.01, 30, 3)), (2 / chi2.ppf(0.1, 2) - 1)
                        * 0.01 / 30)
    assert float(draw_upper(0.0, 0.0, 30, 3)) == 0.0
    rng = np.random.default_rng(59)
    se = 3 * math.sqrt(0.09 / 20_000)
    for s2_resid in (1e-6, 0.003):
        d = (rng.normal(0, 0.1, (20_000, 30, 1)) + rng.normal(0, 0.01, (20_000, 1, 3))
             + rng.normal(0, math.sqrt(s2_resid), (20_000, 30, 3)))
        _, _, ms_r, ms_e = mean_squares(d)
        covered = float((draw_upper(ms_r, ms_e, 30, 3) >= 0.0001).mean())
        unfloored = float((np.maximum(2 * ms_r / chi2.ppf(0.1, 2) - ms_e, 0) / 30
                           >= 0.0001).mean())
        assert covered >= 0.9 - se, (s2_resid, covered)
        if s2_resid < 1e-5:
            assert abs(covered - 0.9) <= se, covered
        else:
            assert abs(unfloored - 0.9) <= se and covered >= unfloored + 0.05, (
                covered, unfloored)


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
    for frame in (components, differences, pair_components):
        assert frame(data).equals(frame(shuffled)), frame.__name__
    assert components(data)["model"].to_list() == ["bm25", "scincl", "specter"]
    assert differences(data).select("a", "b").rows() == [
        ("bm25", "scincl"), ("bm25", "specter"), ("scincl", "specter")]
    table = queries_needed(pair_components(data))
    assert table.height == 3 * 3 * 4 and table["draw_df"].to_list() == [2] * 36


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
    table = queries_needed(pair_components(data))
    assert table["draws"].to_list() == [1, 1, 1] and table["queries"].is_not_null().all()
    assert table["test"].to_list() == [PAIRED_T] * 3 and table["draw_df"].to_list() == [0] * 3


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
    assert sizes.equals(queries_needed(pair_components(data), (0.05,), (3,)))
    with pytest.raises(InputError, match="several corpus"):
        pipeline.variance(table)


def test_a_model_identical_to_another_changes_no_queries_needed():
    """Issue 46: a copy of a model is left out, named; the other pairs' numbers are those
    without it. Three copies of one model: nothing to plan with, no row."""
    rng = np.random.default_rng(21)
    data = rows({m: crossed(rng, 60, 3, 0.01, 0.0002, 0.004, mu) for m, mu in
                 (("bm25", 0.35), ("minilm", 0.3), ("specter", 0.32))})
    copy = pl.concat([data, data.filter(pl.col("model") == "minilm").with_columns(
        model=pl.lit("minilm2"))])
    alone, with_copy = pair_components(data), pair_components(copy)
    assert with_copy.drop("identical").equals(alone.drop("identical"))
    assert with_copy["identical"].to_list() == [["minilm2"]] * 3
    assert queries_needed(with_copy)["identical"].to_list()[0] == ["minilm2"]
    only = pl.concat([data.filter(pl.col("model") == "bm25").with_columns(model=pl.lit(m))
                      for m in ("a", "b", "c")])
    assert pair_components(only).is_empty()


def test_queries_needed_are_per_pair_and_leave_the_floor_out_of_the_report():
    """Issue 47: the variances were pooled over every pair, the random floor's included, so
    a random floor changed every pair's number. Per pair, adding it changes none of the
    others; the report's table has no pair with random, its notes say so, its caption names
    the test and its notes the draw estimate's degrees of freedom."""
    from pipeline.report.variance import variance_tables

    rng = np.random.default_rng(23)
    models = {m: crossed(rng, 60, 3, 0.004, 0.00002, 0.002, mu) for m, mu in
              (("bm25", 0.35), ("minilm", 0.3), ("specter", 0.32))}
    data = rows(models)
    floor = rows({**models, "random": crossed(rng, 60, 3, 0.0001, 0.0, 0.0001, 0.01)})
    plain = queries_needed(pair_components(data))
    both = queries_needed(pair_components(floor))
    assert both.filter(~pl.col("b").eq("random") & ~pl.col("a").eq("random")).equals(plain)
    assert plain["queries"].drop_nulls().n_unique() > 3  # the pairs' numbers differ
    tables = {name: (caption, header, body, notes) for name, caption, header, body, notes in
              variance_tables(floor.with_columns(scope=pl.lit("dataset")), "demo")}
    caption, header, body, notes = tables["queries-needed"]
    prose = " ".join([caption, *notes])
    assert {(r[1], r[2]) for r in body} == {("bm25", "minilm"), ("bm25", "specter"),
                                            ("minilm", "specter")}
    assert "random left out" in prose and "queries-and-draws interval excludes 0" in caption
    assert "the draw estimate's 2 degrees of freedom" in prose and "paired t" not in prose


def test_a_nan_value_is_refused_everywhere():
    """Issue 47: a NaN made a model's mean NaN while the pair's difference dropped the query
    silently. Every frame refuses it, naming the model, query and what to rerun."""
    from pipeline.core.errors import InputError

    rng = np.random.default_rng(24)
    data = rows({m: crossed(rng, 20, 3, 0.01, 0.001, 0.004, mu) for m, mu in
                 (("a", 0.3), ("b", 0.35))})
    broken = data.with_columns(value=pl.when((pl.col("model") == "a")
                                             & (pl.col("query") == "q003"))
                               .then(float("nan")).otherwise(pl.col("value")))
    for frame in (components, differences, pair_components):
        with pytest.raises(InputError, match="3 value.*NaN.*model a, .*query q003"):
            frame(broken)


def test_one_draw_says_the_interval_is_the_queries_alone():
    """Issue 47: with one draw the queries-and-draws cell repeated the queries-only interval
    without a word; it says queries only now."""
    from pipeline.report.variance import variance_tables

    rng = np.random.default_rng(25)
    data = rows({m: crossed(rng, 30, 1, 0.01, 0.0, 0.004, mu) for m, mu in
                 (("a", 0.3), ("b", 0.35))}).with_columns(scope=pl.lit("dataset"))
    tables = {name: (" ".join([caption, *notes]), header, body)
              for name, caption, header, body, notes in variance_tables(data, "d")}
    caption, _, body = tables["variance-differences"]
    assert body[0][5] == "queries only (1 draw)" and body[0][4].startswith("[")
    prose, header, needed = tables["queries-needed"]
    assert [r[header.index("R")] for r in needed] == ["1"]  # one draw measured: R=1 alone
    assert needed[0][header.index("sd+")] == "-"
    assert all(c.isdigit() for c in needed[0][5:]), needed
    assert "R=1 (one draw measured): the paired t-test over queries" in prose
    assert "where the estimate is 0" not in prose


def test_a_draw_estimate_of_0_is_called_that_and_keeps_the_interval():
    """Issue 58: a pair whose draws' mean square is half the interaction's (estimate 0 from 2
    degrees of freedom) was planned with the paired t under "no draw variance was measured".
    The table keeps the interval and plans at the draw sd's 90% upper bound (sd+, above 0),
    and the notes name the estimate for what it is. Issue 89: each cell's number is
    `topic_set_size` at the bound, above the number at the estimates (the API's
    queries_point), and never rises with R."""

    from pipeline.report.tables import latex_text, markdown_table
    from pipeline.report.variance import variance_tables

    rng = np.random.default_rng(28)
    d = crossed(rng, 60, 3, 0.004, 0.0, 0.002)
    d -= d.mean(axis=0)  # no draw effect at all ...
    ms_e = decompose(d).ms_resid
    d += math.sqrt(0.5 * ms_e / 60) * np.array([1.0, -1.0, 0.0]) + 0.02  # ... MS_R = MS_E / 2
    data = rows({"a": 0.3 + d, "b": np.full(d.shape, 0.3)}).with_columns(scope=pl.lit("all"))
    pair = pair_components(data).row(0, named=True)
    assert pair["s2_draw"] == 0 and math.isclose(pair["ms_draw"], ms_e / 2, rel_tol=1e-6)
    tables = {name: (" ".join([caption, *notes]), header, body)
              for name, caption, header, body, notes in variance_tables(data, "demo")}
    prose, header, body = tables["queries-needed"]
    assert header == ["pools", "a", "b", "R", "sd+", "1", "2", "5"], header
    assert [row[3] for row in body] == ["3", "5", "10"]  # no row for one draw
    assert all(float(row[4]) > 0 for row in body)
    sizes = queries_needed(pair_components(data), (0.01, 0.02, 0.05), (3, 5, 10))
    for row, (_, group) in zip(body, sizes.group_by("draws", maintain_order=True),
                               strict=True):
        for cell, found in zip(row[5:], group.iter_rows(named=True), strict=True):
            assert cell == (str(found["queries"]) if found["queries"] is not None
                            else f"R≥{found['draws_needed']}"), (cell, found)
            # the bound costs queries beside the estimate of 0
            assert found["queries"] is None or found["queries"] > found["queries_point"]
    for column in range(5, 8):
        numbers = [math.inf if not row[column].isdigit() else int(row[column]) for row in body]
        assert numbers == sorted(numbers, reverse=True), column  # never rising with R
    assert any(c.startswith("R≥") for row in body for c in row)  # a small delta
    assert ("sd+ rests on the draw estimate's 2 degrees of freedom (where the estimate is 0"
            in prose and "one-sided 90% upper confidence bound" in prose), prose
    assert "R=1 (one draw measured)" not in prose
    rendered = markdown_table(header, body)
    number = next(c for row in body for c in row[5:] if c.isdigit())
    assert number in rendered and "sd+" in rendered
    assert latex_text(number) == number  # nothing LaTeX reads as markup


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
    assert pair_components(data).is_empty()
    tables = {name: (" ".join([caption, *notes]), body) for name, caption, _, body, notes
              in variance_tables(data.with_columns(scope=pl.lit("all")), "demo")}
    assert tables["variance"][1][0][4] == "n/a (1 query)"
    assert tables["variance-differences"][1][0][4:] == ["n/a (1 query)"] * 2
    assert "fewer than 2 queries" in tables["variance"][0]


def test_an_infinite_value_is_refused_and_a_null_counted(caplog):
    """Issue 56: an inf gave a mean of inf and an se of NaN, and a null value dropped its
    query silently (10 queries became 9): inf is refused in one line naming where it is, a
    null row is left out and said in a log line."""
    import logging

    from pipeline.core.errors import InputError

    rng = np.random.default_rng(26)
    data = rows({m: crossed(rng, 10, 3, 0.01, 0.001, 0.004, mu) for m, mu in
                 (("a", 0.3), ("b", 0.35))})
    at = (pl.col("model") == "a") & (pl.col("query") == "q003") & (pl.col("repeat") == 1)
    infinite = data.with_columns(value=pl.when(at).then(float("inf")).otherwise("value"))
    for frame in (components, differences, pair_components):
        with pytest.raises(InputError) as caught:
            frame(infinite)
        assert "\n" not in str(caught.value)
        assert ("variance: 1 value(s) are NaN or infinite (the first: model a, size 1000, "
                "repeat 1, scope dataset, query q003, metric map, column value = inf)"
                in str(caught.value))
    null = data.with_columns(value=pl.when(at).then(None).otherwise("value"))
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.significance"):
        found = components(null)
    assert "[variance] 1 row with a null value left out of 60" in caplog.text
    assert found.filter(pl.col("model") == "a")["queries"].item() == 9


def test_a_constant_model_has_no_variance_and_no_shares(caplog):
    """Issue 56: values equal up to float rounding (1e-16) gave shares from noise (query 0.0,
    draw 0.889); mean squares at or below NOISE of the values' square are 0, and the shares of
    a variance of 0 are null, said in a log line."""
    import logging

    base = np.full((10, 3), 0.3)
    noisy = base + np.array([0.0, 5.551115123125783e-17, -5.551115123125783e-17])[None, :]
    assert decompose(noisy).ms_draw == 0.0 and decompose(noisy).variance == 0.0
    rng = np.random.default_rng(27)
    data = rows({"flat": noisy, "b": crossed(rng, 10, 3, 0.01, 0.001, 0.004, 0.35)})
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.variance"):
        found = components(data).filter(pl.col("model") == "flat").row(0, named=True)
    assert found["se"] == 0.0 and found["s2_draw"] == 0.0
    assert (found["share_query"], found["share_draw"], found["share_interaction"]) == (
        None, None, None)
    assert "flat at size 1000, scope dataset, map: every value is 0.3" in caplog.text
    # a real spread well above the rounding keeps its components
    assert decompose(base + rng.normal(0, 1e-6, (10, 3))).variance > 0


def test_the_cached_quantiles_and_sizes_are_the_computed_ones():
    """half_widths takes t's quantiles from a cache and topic_set_size is cached (a report's
    search for the queries needed asks for the same ones again and again): the same numbers,
    bit for bit, as scipy's quantiles put in the formula afresh and the uncached function."""
    rng = np.random.default_rng(5)
    ms_q, ms_r, ms_e = rng.gamma(2.0, 0.001, size=(3, 40))
    for q, r, level in ((30, 3, 0.95), (100, 1, 0.95), (7, 10, 0.9)):
        half = (1 + level) / 2
        t_q = float(t.ppf(half, q - 1)) ** 2
        queries_only = np.sqrt(t_q * ms_q / (q * r))
        both = queries_only if r < 2 else np.sqrt(
            (t_q * np.maximum(ms_q - ms_e, 0.0) + float(t.ppf(half, r - 1)) ** 2 * ms_r)
            / (q * r))
        for _ in range(2):  # computed, then from the cache
            got = half_widths(ms_q, ms_r, ms_e, q, r, level)
            assert np.array_equal(got[0], queries_only) and np.array_equal(got[1], both)
    found = []
    for args in ((0.02, 0.004, 0.00002, 0.002, 3), (0.05, 0.01, math.nan, 0.0, 1),
                 (0.01, 0.003, 0.0, 0.001, 5), (0.01, 0.003, 0.01, 0.001, 3)):
        first = topic_set_size(*args)
        assert topic_set_size(*args) == first == topic_set_size.__wrapped__(*args), args
        found.append(first.queries)
    assert None in found and len({n for n in found if n}) == 3  # numbers and a None


def test_the_mean_square_interval_is_scipys_and_holds_the_expectation():
    """Issue 89: `expected_square_range` is the 95% interval of a mean square's expectation,
    as multiples of the mean square: its ends are scipy's chi-square quantiles for the degrees
    of freedom asked, and over simulated mean squares (df MS / E[MS] ~ chi2(df)) it holds the
    expectation in 95% of them."""
    from scipy.stats import chi2

    rng = np.random.default_rng(89)
    for df in (2, 4, 9):
        low, high = expected_square_range(df)
        assert math.isclose(low, df / chi2.ppf(0.975, df), rel_tol=1e-12)
        assert math.isclose(high, df / chi2.ppf(0.025, df), rel_tol=1e-12)
        ms = 0.3 * rng.chisquare(df, 200_000) / df  # E[MS] = 0.3
        held = float(((low * ms <= 0.3) & (high * ms >= 0.3)).mean())
        assert abs(held - 0.95) < 0.003, (df, held)


@pytest.mark.parametrize("draws", [3, 5])
def test_the_variance_notes_state_what_the_draws_interval_bounds(draws):
    """Issue 89: a draw estimate of 0 (MS_R below MS_E) has no interval [0, 0]: the notes give
    the interval of the draws' mean square's expectation for the table's own degrees of
    freedom (scipy's, not 2's where the draws are 5), say the draw component's upper end is
    above 0, and point the queries-needed table's draw df to its upper-bound column, whose
    cells are above 0."""
    from pipeline.report.variance import variance_tables

    rng = np.random.default_rng(28)
    d = crossed(rng, 60, draws, 0.004, 0.0, 0.002)
    d -= d.mean(axis=0)  # no draw effect at all ...
    ms_e = decompose(d).ms_resid
    shift = np.zeros(draws)
    shift[:2] = (1.0, -1.0)
    d += math.sqrt(0.25 * ms_e * (draws - 1) / 60) * shift + 0.02  # ... MS_R = MS_E / 2
    data = rows({"a": 0.3 + d, "b": np.full(d.shape, 0.3)}).with_columns(scope=pl.lit("all"))
    pair = pair_components(data).row(0, named=True)
    assert pair["s2_draw"] == 0 and math.isclose(pair["ms_draw"], ms_e / 2, rel_tol=1e-6)
    tables = {name: (header, body, notes)
              for name, caption, header, body, notes in variance_tables(data, "demo")}
    low, high = expected_square_range(draws - 1)
    span = f"{low:.2g} to {high:.3g} times it with {draws - 1}"
    _, _, notes = tables["variance"]
    [note] = [n for n in notes if "mean square MS_R" in n]
    assert span in note and "an estimate of 0 (MS_R at most MS_E) is no bound of 0" in note
    assert "times the estimate" not in " ".join(notes)
    header, body, notes = tables["queries-needed"]
    [note] = [n for n in notes if n.startswith("The draws' mean square behind sd+")]
    assert span in note
    assert all(float(r[header.index("sd+")]) > 0 for r in body)
