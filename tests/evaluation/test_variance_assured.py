"""Queries needed from what a 3-draw pilot can know (issue 71): the report's number is the
expected power's over the components' posterior (`variance.assured_size`), the number at the
estimates beside it; the draw part's noncentral t without NaN, 2 draws included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t

from pipeline.evaluation import variance
from pipeline.evaluation.variance import (
    INTERVAL_TEST,
    MAX_QUERIES,
    assured_size,
    expected_power,
    half_widths,
    interval_power,
    limit_power,
    mean_squares,
    power_of,
    reach_limit,
    topic_set_size,
)


def simulated_limit(delta: float, s2_draw: float, draws: int, datasets: int = 400_000,
                    seed: int = 0) -> float:
    """The draw part's t-test on `draws` draw means, simulated: |mean| / (sd / sqrt(R)) above
    t(R-1)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(delta, math.sqrt(s2_draw), (datasets, draws))
    stat = np.abs(means.mean(axis=1)) / (means.std(axis=1, ddof=1) / math.sqrt(draws))
    return float((stat > t.ppf(0.975, draws - 1)).mean())


def test_the_draw_parts_power_is_a_number_however_large_the_effect():
    """Issue 71: with 2 draws scipy's noncentral t gave NaN from a noncentrality of about 7.5
    (its lower tail), `limit_power` passed it on, and the search ran to "more than
    10,000,000 queries" where the answer is "not reachable". Now a number in [0, 1], rising
    with the effect, equal to the simulated t-test on the draw means (400,000 data sets,
    within 0.003), for 2, 3, 5 and 10 draws and noncentralities up to 200."""
    for draws in (2, 3, 5, 10):
        found = [limit_power(k * math.sqrt(0.0001 / draws), 0.0001, draws)
                 for k in (0.5, 3.0, 7.5, 12.0, 40.0, 200.0)]
        assert all(0.0 <= p <= 1.0 for p in found) and found == sorted(found), (draws, found)
    for draws, k in ((2, 7.5), (2, 12.0), (3, 12.0), (10, 12.0)):
        delta = k * math.sqrt(0.0001 / draws)
        found = limit_power(delta, 0.0001, draws)
        assert abs(found - simulated_limit(delta, 0.0001, draws)) < 0.003, (draws, k, found)
    assert power_of(10**7, 0.05, 0.01) == 1.0  # the paired t's search far out: no NaN


def test_two_draws_say_not_reachable_where_the_draw_part_keeps_the_power_below():
    """The issue's case: 2 draws, a draw sd of 0.01 and a difference at a noncentrality of 8
    or 12 (the draw part's limit 0.47 and 0.65): scipy's NaN made the search run to "more
    than 10,000,000 queries"; now "not reachable with 2 draws", as at 7.5 and 10, where
    scipy gave a number. A difference at 45 (limit 0.99) has a number, at which the
    interval's power reaches 0.8; `reach_limit` is the draw variance at which the limit is
    0.8, with 2 draws and more."""
    for k, limit in ((7.5, 0.444), (8.0, 0.470), (10.0, 0.567), (12.0, 0.654)):
        delta = k * math.sqrt(0.0001 / 2)
        assert abs(limit_power(delta, 0.0001, 2) - limit) < 0.001, k
        found = topic_set_size(delta, 0.02, 0.0001, 0.005, 2)
        assert found == variance.Needed(None, INTERVAL_TEST, "not reachable with 2 draws"), k
    delta = 45 * math.sqrt(0.0001 / 2)
    large = topic_set_size(delta, 0.02, 0.0001, 0.005, 2)
    assert large.queries is not None and large.reason is None, large
    assert interval_power(large.queries, delta, 0.02, 0.0001, 0.005, 2) >= 0.8
    for draws in (2, 3, 5, 10):
        edge = reach_limit(0.02, draws)
        assert abs(limit_power(0.02, edge, draws) - 0.8) < 1e-6, draws
        assert limit_power(0.02, edge * 1.01, draws) < 0.8 <= limit_power(0.02, edge * 0.99,
                                                                          draws)
    # measured with 2 draws: the report's number from 1 degree of freedom, no NaN either
    rng = np.random.default_rng(2)
    d = (rng.normal(0, math.sqrt(0.02), (40, 1)) + rng.normal(0, 0.001, (1, 2))
         + rng.normal(0, math.sqrt(0.001), (40, 2)))
    _, ms_q, ms_r, ms_e = (float(v) for v in mean_squares(d))
    for delta, planned in ((0.05, 2), (0.3, 2), (0.05, 3), (0.05, 10)):
        found = assured_size(delta, ms_q, ms_r, ms_e, 40, 2, planned)
        point = topic_set_size(delta, max(ms_q - ms_e, 0) / 2, max(ms_r - ms_e, 0) / 40,
                               ms_e, planned)
        assert (found.queries is None) == (point.queries is None), (delta, planned, found)
        assert found.queries is None or found.queries >= point.queries
        assert found.reason is None or found.reason.startswith("not reachable"), found


def posterior_rate(pilot: tuple[float, float, float], pilot_queries: int, queries: int,
                   delta: float, draws: int = 3, samples: int = 600_000, seed: int = 0
                   ) -> tuple[float, int]:
    """The rejection rate of the queries-and-draws interval on `queries` x `draws` over the
    posterior, by brute force: expected mean squares drawn from df MS / chi2(df) (Jeffreys),
    kept where E[MS_Q] and E[MS_R] are at least E[MS_E] and the draw component is within
    `reach_limit` (rejection sampling), one planned data set simulated for each (its mean
    and mean squares). (rate, kept)."""
    rng = np.random.default_rng(seed)
    ms_q, ms_r, ms_e = pilot
    dq, dr = pilot_queries - 1, 2
    lam_q = dq * ms_q / rng.chisquare(dq, samples)
    lam_r = dr * ms_r / rng.chisquare(dr, samples)
    lam_e = dq * dr * ms_e / rng.chisquare(dq * dr, samples)
    s2_draw = (lam_r - lam_e) / pilot_queries
    keep = (lam_q >= lam_e) & (s2_draw >= 0) & (s2_draw <= reach_limit(delta, draws))
    lam_q, lam_e, s2_draw = lam_q[keep], lam_e[keep], s2_draw[keep]
    n, r = queries, draws
    lam_rn = lam_e + n * s2_draw
    mean = rng.normal(delta, np.sqrt((lam_q + lam_rn - lam_e) / (n * r)))
    k = len(mean)
    _, half = half_widths(lam_q * rng.chisquare(n - 1, k) / (n - 1),
                          lam_rn * rng.chisquare(r - 1, k) / (r - 1),
                          lam_e * rng.chisquare((n - 1) * (r - 1), k) / ((n - 1) * (r - 1)),
                          n, r)
    return float((np.abs(mean) > half).mean()), k


@pytest.mark.parametrize("ms_draw", [0.0025, 0.0062])  # a draw estimate of 0, and positive
def test_the_expected_power_is_the_rate_over_what_the_pilot_allows(ms_draw):
    """`expected_power` (4,096 quasi-Monte Carlo points, importance weights for the
    restrictions) against the brute force of `posterior_rate` (600,000 posterior draws, those
    kept each with a simulated planned data set): within 3 standard errors plus 0.003, at
    three numbers of queries, for a pilot of 25 queries x 3 draws with an interaction of
    0.005 whose draw estimate is 0 and one whose estimate is positive."""
    pilot = (0.065, ms_draw, 0.005)
    width = 25 * reach_limit(0.02, 3)
    posterior = variance._posterior(*pilot, 25, 3, width)
    for queries in (300, 700, 1500):
        found = expected_power(queries, 0.02, posterior, 25, 3)
        rate, kept = posterior_rate(pilot, 25, queries, 0.02, seed=queries)
        assert kept > 20_000, kept
        assert abs(found - rate) < 3 * math.sqrt(rate * (1 - rate) / kept) + 0.003, (
            queries, found, rate, kept)


def pilot_numbers(delta: float, s2_query: float, draw_sd: float, s2_resid: float,
                  queries: int, pilots: int, seed: int) -> tuple[list, list]:
    """The report's number and the number at the estimates, 3 draws, from `pilots` pilots of
    `queries` x 3 draws."""
    rng = np.random.default_rng(seed)
    d = (rng.normal(0, math.sqrt(s2_query), (pilots, queries, 1))
         + rng.normal(0, draw_sd, (pilots, 1, 3))
         + rng.normal(0, math.sqrt(s2_resid), (pilots, queries, 3)))
    _, ms_q, ms_r, ms_e = mean_squares(d)
    assured, point = [], []
    for i in range(pilots):
        c = variance.Components(queries, 3, 0.0, float(ms_q[i]), float(ms_r[i]),
                                float(ms_e[i]))
        assured.append(assured_size(delta, c.ms_query, c.ms_draw, c.ms_resid, queries, 3,
                                    3).queries)
        point.append(topic_set_size(delta, c.s2_query, c.s2_draw, c.s2_resid, 3).queries)
    return assured, point


def test_the_reports_number_reaches_its_power_from_3_draw_pilots():
    """The issue's hard setting (a query sd of 14 MAP points, a draw sd of 0.3 points, an
    interaction of 0.005, a difference of 2 points, 25 queries x 3 draws: 666 queries
    needed): over 30 pilots the report's number gives its own test a median true power of
    at least 0.78 (benchmarks/results/queries_needed.md: 200 pilots a setting); the number
    at the estimates (the report's before) falls short; "not reachable" (decided over the
    posterior since issue 79) in no more pilots than at the estimates, at most half."""
    truth = (0.02, 0.003 ** 2, 0.005)
    assert topic_set_size(0.02, *truth, 3).queries == 666
    assured, point = pilot_numbers(0.02, 0.02, 0.003, 0.005, 25, pilots=30, seed=71)
    assert all(p is None for a, p in zip(assured, point, strict=True) if a is None)
    assert sum(n is None for n in assured) <= 15
    power = {n: interval_power(n, 0.02, *truth, 3) for n in {*assured, *point} - {None}}
    found = np.median([power[n] for n in assured if n is not None])
    before = np.median([power[n] for n in point if n is not None])
    assert found >= 0.78 and before < 0.75, (found, before)
    assert all(a >= p for a, p in zip(assured, point, strict=True)
               if a is not None and p is not None)


def test_not_reachable_is_decided_over_the_posterior():
    """Issue 79: "not reachable" was the estimates' call alone. A pilot whose estimate lies at
    half or 1.5 times the reach limit (the plug-in says "not reachable" at 1.5) gets a number,
    as the posterior still gives reachable components a probability of at least alpha; one
    at 20 times it does not: "not reachable", its probability below 0.05."""
    delta, q = 0.02, 25
    edge = reach_limit(delta, 3)
    ms_e = 0.005
    for share, reachable in ((0.5, True), (1.5, True), (20.0, False)):
        ms_r = ms_e + q * edge * share
        plug_in = topic_set_size(delta, (0.065 - ms_e) / 3, (ms_r - ms_e) / q, ms_e, 3)
        assert (plug_in.queries is None) == (share > 1), (share, plug_in)
        chance = variance.reach_probability(ms_r, ms_e, q, 3, q * edge)
        found = assured_size(delta, 0.065, ms_r, ms_e, q, 3, 3)
        assert (chance >= 0.05) == reachable, (share, chance)
        if reachable:
            assert found.queries is not None and found.queries <= MAX_QUERIES, found
        else:
            assert found.reason == "not reachable with 3 draws", found


def test_not_reachable_is_rare_where_the_truth_is_reachable():
    """Pilots of 25 queries x 3 draws with no draw variance (an interaction of 0.005: 517
    queries suffice at a difference of 2 points): the plug-in said "not reachable" in 20-26%
    of them (issue 79); over the posterior, at most alpha (it is the p-value of the
    chi-square test of a reachable draw component): at most 0.07 of 600 pilots, where the
    plug-in says it in more than 0.2."""
    delta, q = 0.02, 25
    width = q * reach_limit(delta, 3)
    rng = np.random.default_rng(79)
    d = rng.normal(0, math.sqrt(0.02), (600, q, 1)) + rng.normal(0, math.sqrt(0.005),
                                                                  (600, q, 3))
    _, _, ms_r, ms_e = mean_squares(d)
    posterior = np.mean([variance.reach_probability(float(r), float(e), q, 3, width) < 0.05
                         for r, e in zip(ms_r, ms_e, strict=True)])
    plug_in = np.mean(ms_r - ms_e > width)
    assert posterior <= 0.07 and plug_in > 0.2, (posterior, plug_in)


def test_the_reports_number_is_cached_and_the_same_every_run():
    """`assured_size` is a pure function of its arguments: cached, and the same number from a
    cold start (its quasi-Monte Carlo points are seeded)."""
    args = (0.02, 0.065, 0.004, 0.005, 25, 3, 3)
    first = assured_size(*args)
    assert assured_size(*args) is first and first.queries is not None
    for cache in (variance._points, variance._exact_chi, variance._posterior):
        cache.cache_clear()
    assert assured_size.__wrapped__(*args) == first
