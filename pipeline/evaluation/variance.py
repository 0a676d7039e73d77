"""Where the variance of a mean comes from, intervals that account for it, and how many queries
and pool draws are enough (issues 42, 47).

Within one seed, every repeat (pool draw) of a pool size has the same queries (MDCR §3): a
model's per-query values at one size form a crossed Q x R design, queries x draws. Its two-way
random-effects model without replication, y_qr = mu + a_q + b_r + e_qr (Bodoff & Li 2007's
generalizability theory; Urbano, Marrero & Martín 2013), is estimated by the ANOVA moments
(expected mean squares), truncated at 0:

    MS_Q = R sum_q (ybar_q. - ybar)^2 / (Q-1),  MS_R = Q sum_r (ybar_.r - ybar)^2 / (R-1),
    MS_E = the residual sum of squares / ((Q-1)(R-1));
    s2_query = (MS_Q - MS_E) / R,  s2_draw = (MS_R - MS_E) / Q,  s2_resid = MS_E.

The variance of the grand mean is s2_query/Q + s2_draw/R + s2_resid/(QR); each term's share of
it is reported (query sample, pool draw, query x draw interaction).

Two models searched the same draws with the same queries: their difference d_qr pairs on
(query, draw) and has the same decomposition. Var(dbar) = (MS_Q - MS_E)/(QR) + MS_R/(QR):
the queries' part and the draws' (the draw effect and the interaction); the interval scales
each part by the t quantile of its own degrees of freedom, in quadrature (`half_widths`:
Banerjee's 1960 construction, applied with max(MS_Q - MS_E, 0) on the queries' side, which
his theorem on sums of independent variance estimates does not cover: its level is what
benchmarks/interval_level.py maps, at most 0.050 from 30 queries, not a proof). The
queries-only interval (the paired t-test's: per-query differences averaged over draws)
ignores the draw term.

Queries needed (topic set size, Sakai 2016): the fewest queries n at which a test the report
runs reaches a power against a difference delta with R draws, from one pair's difference's
components: with R >= 2 draws the queries-and-draws interval excluding 0 (`interval_power`),
whatever the draw estimate, 0 included (the interval's draw part, t(R-1)^2 MS_R, stays however
small the estimate); the paired t over queries (noncentral t, n-1 degrees of freedom) only for
one draw measured with one draw, where no draw variance was measured. `topic_set_size` gives
the n as if given components were the truth (None when the interval's draw part alone keeps it below
the power: not reachable with R draws; `limit_power`, the draw means' noncentral t, a number
however large the effect).

The report's number (issue 89; `queries_needed`'s `queries`) plans at the draw variance's one-
sided `UPPER_LEVEL` upper confidence bound (`draw_upper`, from MS_R's chi-square on R-1 degrees
of freedom, MS_R taken at least MS_E: a smaller one is chance, and planning from it as if the
draws did not vary made the numbers printed fall short), the query and interaction components
at their estimates (on Q-1 and (Q-1)(R-1) degrees of freedom: precise). With 3 draws the draw
estimate rests on 2 degrees of freedom and is 0 in many pilots whose draw variance is not;
planned at the estimate, the number then fell short. Power at a given n falls as the draw
variance rises, so wherever the bound is at or above the true draw variance (90% of pilots, by
its construction) the planned design's power at the truth is at least the stated power: the
number holds as worded, with no condition on the unknown draw variance. Power at a given n
rises with the draws at fixed variances, and the bound does not depend on the draws planned, so
the number never rises with R, and "not reachable with R draws" (the draw part alone at the
bound keeps the power below the target) holds for every smaller R too; it comes with the fewest
draws that reach the power at the bound (`fewest_draws`). An earlier rule (issue 71, the power
expected over the components' posterior among the components each R could handle) averaged each
R over a different set of variances, and its number could rise with R
(benchmarks/results/queries_needed.md maps the rule that replaced it).

Values reach every sum sorted by query id, then draw, so the numbers do not depend on the
rows' order or polars' threads.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.evaluation.significance import MIN_QUERIES, measured, ordered

log = logging.getLogger(__name__)

KEYS = ["size", "scope", "metric"]  # a pool size of one scope and a metric: one decomposition
LEVEL = 0.95  # the intervals' confidence level
MAX_QUERIES = 10_000_000  # topic_set_size's search stops here (None beyond)
# A mean square at or below this share of the mean squared value is float rounding, not
# variance: 0 (values equal up to 1e-16 gave shares of 0.0 and 0.889 from noise). float64
# sums of values of one size err by about 1e-16 of it, squared about 1e-32: far below.
NOISE = 1e-12
UPPER_LEVEL = 0.9  # the one-sided confidence of the draw variance's upper bound (`draw_upper`)


@dataclass(frozen=True)
class Components:
    """The decomposition of one Q x R matrix. With one draw (R = 1) the draw and interaction
    components cannot be estimated (NaN): s2_query then holds a query's whole variance."""

    queries: int
    draws: int
    mean: float
    ms_query: float
    ms_draw: float
    ms_resid: float

    @property
    def s2_query(self) -> float:
        if self.draws < 2:
            return self.ms_query
        return max((self.ms_query - self.ms_resid) / self.draws, 0.0)

    @property
    def s2_draw(self) -> float:
        return max((self.ms_draw - self.ms_resid) / self.queries, 0.0) if self.draws > 1 \
            else math.nan

    @property
    def s2_resid(self) -> float:
        return self.ms_resid if self.draws > 1 else math.nan

    @property
    def terms(self) -> tuple[float, float, float]:
        """The variance of the mean's three terms: query sample, pool draw, interaction."""
        q, r = self.queries, self.draws
        return self.s2_query / q, self.s2_draw / r, self.s2_resid / (q * r)

    @property
    def variance(self) -> float:
        """The variance of the grand mean (queries only when R = 1)."""
        if self.draws < 2:
            return self.s2_query / self.queries
        return sum(self.terms)

    @property
    def shares(self) -> tuple[float, float, float]:
        """Each term's share of `variance` (NaN with one draw, or no variance)."""
        total = self.variance
        if self.draws < 2 or not total > 0:
            return math.nan, math.nan, math.nan
        q, d, e = self.terms
        return q / total, d / total, e / total


def mean_squares(values: np.ndarray) -> tuple[np.ndarray, ...]:
    """The grand mean, MS_Q, MS_R and MS_E of each Q x R matrix in the last two axes of
    `values` (rows queries, columns draws): arrays of the leading shape; NaN where undefined
    (MS_Q with one query, MS_R and MS_E with one draw); 0 where at most NOISE of the
    values' mean square (`_denoised`)."""
    y = np.asarray(values, dtype=np.float64)
    q, r = y.shape[-2:]
    mean = y.mean(axis=(-2, -1))
    rows, cols = y.mean(axis=-1), y.mean(axis=-2)
    nan = np.full(mean.shape, math.nan)
    ms_q = r * ((rows - mean[..., None]) ** 2).sum(axis=-1) / (q - 1) if q > 1 else nan
    if r < 2:
        return mean, *_denoised((ms_q,), y), nan, nan
    ms_r = q * ((cols - mean[..., None]) ** 2).sum(axis=-1) / (r - 1)
    resid = y - rows[..., :, None] - cols[..., None, :] + mean[..., None, None]
    ms_e = (resid ** 2).sum(axis=(-2, -1)) / ((q - 1) * (r - 1)) if q > 1 else nan
    return mean, *_denoised((ms_q, ms_r, ms_e), y)


def _denoised(squares: tuple[np.ndarray, ...], y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each mean square, 0 where it is at most NOISE times the mean squared value of its
    matrix (rounding, not variance: an exactly constant model has none)."""
    scale = NOISE * (y ** 2).mean(axis=(-2, -1))
    return tuple(np.where(ms <= scale, 0.0, ms) for ms in squares)


def decompose(values: np.ndarray) -> Components:
    """The mean squares of a Q x R matrix (rows queries sorted by id, columns draws sorted)."""
    q, r = np.shape(values)
    return Components(q, r, *map(float, mean_squares(values)))


def expected_square_range(df: int, level: float = LEVEL) -> tuple[float, float]:
    """The `level` two-sided interval of a mean square's expectation, as multiples of the mean
    square, from its `df` degrees of freedom: df MS / E[MS] is chi-square on df, so E[MS] lies
    in [df / chi2_{(1+level)/2}(df), df / chi2_{(1-level)/2}(df)] times MS (0.27 to 39.5 with
    2). It bounds the draws' mean square MS_R, not the draw component (E[MS_R] - MS_E) / Q:
    an estimate of that truncated at 0 still has a positive upper bound (`draw_upper`)."""
    from scipy.stats import chi2

    return (df / float(chi2.ppf((1 + level) / 2, df)),
            df / float(chi2.ppf((1 - level) / 2, df)))


@dataclass(frozen=True)
class Interval:
    """A mean difference and its `LEVEL` intervals: over queries only (the paired t-test's)
    and over queries and draws (`difference_interval`; the queries' alone with one draw)."""

    difference: float
    queries_low: float
    queries_high: float
    low: float
    high: float


@functools.lru_cache(maxsize=1024)
def _t_squared(quantile: float, df: float) -> float:
    """Student's t `quantile` on `df` degrees of freedom, squared: cached, as scipy's ppf
    costs a millisecond and the power's search (`interval_power`, thousands of calls in a
    report) asks for the same few again and again."""
    from scipy.stats import t

    return float(t.ppf(quantile, df)) ** 2


def half_widths(ms_query: np.ndarray | float, ms_draw: np.ndarray | float,
                ms_resid: np.ndarray | float, queries: int, draws: int,
                level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The half-widths of the two intervals of a difference's mean from its mean squares
    (arrays or floats): queries only, t(Q-1) sqrt(MS_Q/(QR)); queries and draws, Var(dbar) =
    (MS_Q - MS_E)/(QR) + MS_R/(QR) with each part scaled by the t quantile of its own degrees
    of freedom, in quadrature: sqrt(t(Q-1)^2 max(MS_Q - MS_E, 0)/(QR) + t(R-1)^2 MS_R/(QR))
    (Banerjee 1960's construction; with MS_E subtracted his theorem does not apply, and the
    level is simulated: benchmarks/interval_level.py). MS_E is subtracted on the queries'
    side, where Q-1 and (Q-1)(R-1) degrees of freedom make the difference precise; subtracted
    from MS_R (R-1 degrees of freedom) the interval rejected a true 0 in up to 8.6% of data
    sets when the interaction was large (docs/evaluation.md). One draw: both are the
    queries'."""
    q, r = queries, draws
    half = (1 + level) / 2
    t_q = _t_squared(half, q - 1) if q > 1 else math.nan
    ms_q = np.asarray(ms_query, dtype=np.float64)
    queries_part = t_q * ms_q / (q * r)
    if r < 2:
        return np.sqrt(queries_part), np.sqrt(queries_part)
    both = (t_q * np.maximum(ms_q - np.asarray(ms_resid), 0.0)
            + _t_squared(half, r - 1) * np.asarray(ms_draw)) / (q * r)
    return np.sqrt(queries_part), np.sqrt(both)


def difference_interval(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> Interval:
    """Two models' Q x R matrices, paired on (query, draw): the intervals of mean(a - b)
    (`half_widths`). Satterthwaite's single t covered 92.8-93.8% at Q=100, R=3 once the draw
    made half the variance (its degrees of freedom come from the very mean square that is too
    small when it misses); this one 95.0-98.8% in the simulated map from 30 queries
    (benchmarks/interval_level.py, docs/evaluation.md; no theorem covers it)."""
    c = decompose(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    queries_half, width = map(float, half_widths(c.ms_query, c.ms_draw, c.ms_resid,
                                                 c.queries, c.draws, level))
    return Interval(c.mean, c.mean - queries_half, c.mean + queries_half, c.mean - width,
                    c.mean + width)


# ---- queries needed: the power of the test the report runs -----------------------------------
PAIRED_T = "paired t over queries"  # one draw measured and planned: the queries' test
INTERVAL_TEST = "queries-and-draws interval excludes 0"  # `half_widths`' wider interval
NODES = (32, 256, 8)  # the power's quadrature nodes over MS_Q, MS_R, MS_E
UNKNOWN_DRAW = "the draw variance is unknown (measured with one draw)"
MAX_DRAWS = 100  # the search for the fewest draws that reach the power stops here


def _t_power(crit: float, df: float, ncp: float) -> float:
    """P(|T| > crit), T noncentral t on `df` degrees of freedom with noncentrality `ncp`:
    scipy's nct where both tails are numbers, else (its lower tail is NaN far out: from a
    noncentrality of 7.6 on 1 degree of freedom, 7.9 on 2, 8.7 on 9) `_t_power_integrated`."""
    from scipy.stats import nct

    total = float(nct.sf(crit, df, ncp)) + float(nct.cdf(-crit, df, ncp))
    if math.isfinite(total) and 0.0 <= total <= 1.0:
        return total
    return _t_power_integrated(crit, df, ncp)


def _t_power_integrated(crit: float, df: float, ncp: float) -> float:
    """P(|Z + ncp| > crit S), S = sqrt(chi2(df)/df) independent of the standard normal Z, as
    two integrals over Z of the normal density times P(S < |Z + ncp| / crit) (a regularized
    incomplete gamma), one for each side: smooth, bounded terms (adaptive quadrature over
    Z within 40 of 0, beyond which the density is below 1e-300), so no tail is NaN however
    far out."""
    from scipy.integrate import quad
    from scipy.special import gammainc

    def side(z: float) -> float:
        x = (z + ncp) / crit
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) * float(
            gammainc(df / 2, df * x * x / 2))

    upper = quad(side, max(-ncp, -40.0), 40.0, limit=200)[0]
    lower = quad(side, -40.0, -ncp, limit=200)[0] if ncp < 40 else 0.0
    return min(max(upper + lower, 0.0), 1.0)


def power_of(queries: int, delta: float, s2_query: float, s2_draw: float = 0.0,
             s2_resid: float = 0.0, draws: int = 1, alpha: float = 0.05) -> float:
    """The power of the two-sided paired t-test on the per-query differences averaged over
    `draws` draws (noncentral t, queries - 1 degrees of freedom), were the draw variance
    known: the test an oracle could run (`interval_power` is the report's)."""
    scale = math.sqrt((s2_query + s2_resid / draws) / queries + s2_draw / draws)
    if scale == 0:
        return 1.0
    df = queries - 1
    return _t_power(math.sqrt(_t_squared(1 - alpha / 2, df)), df, abs(delta) / scale)


@functools.lru_cache(maxsize=4096)
def _quantiles(df: float, nodes: int) -> np.ndarray:
    """chi2(df)/df at the midpoints of `nodes` equal-probability bins: a mean square over its
    expectation, for the midpoint rule in probability (read-only: cached, a search asks for
    the same degrees of freedom again and again)."""
    from scipy.stats import chi2

    found = chi2.ppf((np.arange(nodes) + 0.5) / nodes, df) / df
    found.flags.writeable = False
    return found


def interval_power(queries: int, delta: float, s2_query: float, s2_draw: float,
                   s2_resid: float, draws: int, alpha: float = 0.05) -> float:
    """P(the 1 - alpha queries-and-draws interval excludes 0) on `queries` x `draws` under the
    crossed normal model: the mean difference ~ N(delta, V) independent of the three mean
    squares (scaled chi-squares on Q-1, R-1 and (Q-1)(R-1) degrees of freedom), so the power is
    the mean over the mean squares of the normal's mass beyond the interval's half-width,
    integrated by the midpoint rule in probability (`NODES`; its accuracy is checked against
    simulated data sets in tests/evaluation/test_variance.py)."""
    from scipy.special import ndtr  # the standard normal's cdf, without scipy.stats' checks

    q, r = queries, draws
    expected = (s2_resid + r * s2_query, s2_resid + q * s2_draw, s2_resid)  # E[MS_Q, MS_R, MS_E]
    ms_q = expected[0] * _quantiles(q - 1, NODES[0])[:, None, None]
    ms_r = expected[1] * _quantiles(r - 1, NODES[1])[None, :, None]
    ms_e = expected[2] * _quantiles((q - 1) * (r - 1), NODES[2])[None, None, :]
    _, half = half_widths(ms_q, ms_r, ms_e, q, r, 1 - alpha)
    sd = math.sqrt((expected[0] + expected[1] - expected[2]) / (q * r))
    if sd == 0:
        return 1.0
    return float((ndtr((abs(delta) - half) / sd) + ndtr((-half - abs(delta)) / sd)).mean())


# where the variance of a difference's mean comes from, as benchmarks/interval_level.py maps
# the interval's level: the draw term's share of it, and the interaction's share of the rest
LEVEL_DRAW_SHARES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99)
LEVEL_RESID_SHARES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)


@functools.lru_cache(maxsize=256)
def level_range(queries: int, draws: int, alpha: float = 0.05) -> tuple[float, float]:
    """The lowest and highest false-positive rate of the 1 - alpha queries-and-draws interval
    at a difference of 0 on `queries` x `draws`, over where the variance comes from
    (LEVEL_DRAW_SHARES x LEVEL_RESID_SHARES), each integrated (`interval_power`): what a
    caption can say of its own table's designs (0.022-0.050 at 25 x 3, 0.008-0.071 at 2 x 3).
    Cached."""
    rates = []
    for draw in LEVEL_DRAW_SHARES:
        for resid in LEVEL_RESID_SHARES:
            rest = 1 - draw  # components of a mean with variance 1
            rates.append(interval_power(queries, 0.0, rest * (1 - resid) * queries,
                                        draw * draws, rest * resid * queries * draws, draws,
                                        alpha))
    return min(rates), max(rates)


def limit_power(delta: float, s2_draw: float, draws: int, alpha: float = 0.05) -> float:
    """The queries-and-draws interval's power as queries grow without bound: its draw part
    alone, a t-test on the R draw means (noncentral t, R-1 degrees of freedom, noncentrality
    delta / sqrt(s2_draw / R); `_t_power`: a number however large the noncentrality, where
    scipy's nct gave NaN with 2 draws)."""
    if s2_draw == 0:  # the draw part's MS_R/(QR) vanishes with it: the power reaches 1
        return 1.0
    df = draws - 1
    return _t_power(math.sqrt(_t_squared(1 - alpha / 2, df)), df,
                    abs(delta) / math.sqrt(s2_draw / draws))


@functools.lru_cache(maxsize=256)
def _reach_noncentrality(draws: int, alpha: float, power: float) -> float:
    """The noncentrality at which the draw part's t-test (R-1 degrees of freedom) has
    `power` (0 where the level alone reaches it)."""
    from scipy.optimize import brentq

    df = draws - 1
    crit = math.sqrt(_t_squared(1 - alpha / 2, df))

    def short(k: float) -> float:
        return _t_power(crit, df, k) - power

    if short(0.0) >= 0:
        return 0.0
    high = crit + 1.0
    while short(high) < 0:
        high *= 2
    return float(brentq(short, 0.0, high, xtol=1e-12, rtol=1e-12))


def reach_limit(delta: float, draws: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The largest draw variance with which the queries-and-draws interval reaches `power`
    against `delta` with `draws` draws however many queries (`limit_power` = power there,
    below it beyond): R delta^2 / k^2, k the draw part's noncentrality for `power`."""
    k = _reach_noncentrality(draws, alpha, power)
    return math.inf if k == 0 else draws * delta ** 2 / k ** 2


def fewest_draws(delta: float, s2_draw: float, draws: int, alpha: float = 0.05,
                 power: float = 0.8) -> int | None:
    """The fewest draws beyond `draws` with which the queries-and-draws interval can reach
    `power` against `delta` at this draw variance (`limit_power`, which rises with the
    draws), None where not even MAX_DRAWS can."""
    return next((r for r in range(draws + 1, MAX_DRAWS + 1)
                 if limit_power(delta, s2_draw, r, alpha) >= power), None)


@dataclass(frozen=True)
class Needed:
    """`topic_set_size`'s answer: the fewest queries (None: none reaches the power, `reason`
    says why) and the test that number is for."""

    queries: int | None
    test: str
    reason: str | None = None
    draws_needed: int | None = None  # not reachable: the fewest draws that reach the power


def _smallest(enough: Callable[[int], bool], low: int, guess: int | None = None
              ) -> int | None:
    """The smallest n >= max(low, 2) with enough(n) (enough rising with n), None beyond
    MAX_QUERIES: a bracket by halving down from `guess` (where it is enough) or doubling up
    from it (else; from low without a guess), then bisection. A guess near the answer saves
    the doublings from 2; a wrong one costs a few steps, never the answer."""
    low = max(low, 2)
    start = min(max(guess or low, low), MAX_QUERIES)
    if enough(start):
        high = start
        while high > low:  # halve down to a point not enough
            probe = max(low, high // 2)
            if not enough(probe):
                low = probe
                break
            high = probe
        if high == low:
            return low
    else:
        low, high = start, min(start * 2, MAX_QUERIES)
        while not enough(high):
            if high >= MAX_QUERIES:
                return None
            low, high = high, min(high * 2, MAX_QUERIES)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def draw_upper(ms_draw: np.ndarray | float, ms_resid: np.ndarray | float, queries: int,
               draws: int, level: float = UPPER_LEVEL) -> np.ndarray:
    """The one-sided `level` upper confidence bound of s2_draw from a Q x R matrix's mean
    squares (arrays or floats): (R-1) MS_R / E[MS_R] is chi-square on R-1 degrees of freedom,
    so E[MS_R] <= (R-1) MS_R / chi2_{1-level}(R-1) at `level`, and s2_draw = (E[MS_R] -
    MS_E)/Q at most that less MS_E, over Q (MS_E, on (Q-1)(R-1) degrees of freedom, taken as
    known). MS_R enters at least MS_E (E[MS_R] is at least E[MS_E]; a smaller MS_R is chance,
    the draws' 2 degrees of freedom against MS_E's many): the bound only rises, so it keeps
    its level, and it never says 0 from an unluckily small MS_R, which would plan as if the
    draws did not vary exactly where the interaction hides them. With 3 draws the bound on
    E[MS_R] is 9.5 times the mean square (90%), so the bound is at least 8.5 MS_E / Q."""
    from scipy.stats import chi2

    df = draws - 1
    resid = np.asarray(ms_resid, dtype=np.float64)
    expected = df * np.maximum(np.asarray(ms_draw, dtype=np.float64), resid) / float(
        chi2.ppf(1 - level, df))
    return np.maximum(expected - resid, 0.0) / queries


@functools.lru_cache(maxsize=4096)
def topic_set_size(delta: float, s2_query: float, s2_draw: float = math.nan,
                   s2_resid: float = 0.0, draws: int = 1, alpha: float = 0.05,
                   power: float = 0.8) -> Needed:
    """The fewest queries (>= 2) at which a test of level `alpha` that the report runs reaches
    `power` against a difference `delta`, were these variance components the truth, with `draws`
    draws (`queries_needed` plans with the draw variance at its upper bound). s2_draw NaN (not
    measured: one draw): the paired t over queries for one draw (Sakai 2016's topic set size;
    the draws not separated), None for more (the draw variance unknown). s2_draw measured (0
    included: an estimate of 0 from few draws is no proof of none): the queries-and-draws
    interval (`interval_power`) for 2 or more draws; None when its draw part alone keeps it
    below `power` (`limit_power`: not reachable with R draws), and for one draw, whose variance
    no test on one draw can separate; not reachable comes with the fewest draws that reach
    `power` (`draws_needed`, `fewest_draws`). Cached (a pure function of its arguments): a
    report asks again for the same pairs' numbers."""
    if math.isnan(s2_draw):
        if draws > 1:
            return Needed(None, INTERVAL_TEST, UNKNOWN_DRAW)
        n = _smallest(lambda n: power_of(n, delta, s2_query, 0.0, s2_resid, draws, alpha)
                      >= power, 2)
        return Needed(n, PAIRED_T, None if n else f"more than {MAX_QUERIES:,} queries")
    if draws < 2:
        return Needed(None, INTERVAL_TEST, "one draw: its variance cannot be separated, no "
                                           "test on one draw holds its level")
    if limit_power(delta, s2_draw, draws, alpha) < power:
        more = fewest_draws(delta, s2_draw, draws, alpha, power)
        return Needed(None, INTERVAL_TEST, f"not reachable with {draws} draws; " + (
            f"{more} draws reach it" if more else f"nor with up to {MAX_DRAWS}"), more)
    # the n of a t-test that knew the draw variance (`power_of`) as the search's guess: near,
    # but no lower bound (no query variance, 10 draws, 3 queries: 0.89 against its 0.78)
    oracle = _smallest(lambda n: power_of(n, delta, s2_query, s2_draw, s2_resid, draws, alpha)
                       >= power, 2)
    n = _smallest(lambda n: interval_power(n, delta, s2_query, s2_draw, s2_resid, draws, alpha)
                  >= power, 2, oracle)
    return Needed(n, INTERVAL_TEST, None if n else f"more than {MAX_QUERIES:,} queries")


# ---- frames: the report's rows (scope, size, metric, model, query, repeat, value) -------------
COMPONENT_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
                    "model": pl.String, "queries": pl.Int64, "draws": pl.Int64,
                    "mean": pl.Float64, "se": pl.Float64, "s2_query": pl.Float64,
                    "s2_draw": pl.Float64, "s2_resid": pl.Float64, "share_query": pl.Float64,
                    "share_draw": pl.Float64, "share_interaction": pl.Float64}
DIFFERENCE_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
                     "a": pl.String, "b": pl.String, "queries": pl.Int64, "draws": pl.Int64,
                     "difference": pl.Float64, "queries_low": pl.Float64,
                     "queries_high": pl.Float64, "low": pl.Float64, "high": pl.Float64}
PAIR_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
               "a": pl.String, "b": pl.String, "queries": pl.Int64, "draws": pl.Int64,
               "s2_query": pl.Float64, "s2_draw": pl.Float64, "s2_resid": pl.Float64,
               "ms_query": pl.Float64, "ms_draw": pl.Float64, "identical": pl.List(pl.String)}
SIZE_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
               "a": pl.String, "b": pl.String, "delta": pl.Float64, "draws": pl.Int64,
               "queries": pl.Int64, "test": pl.String, "reason": pl.String,
               "draws_needed": pl.Int64, "s2_draw": pl.Float64, "s2_draw_upper": pl.Float64,
               "queries_point": pl.Int64, "reason_point": pl.String,
               "measured_draws": pl.Int64, "draw_df": pl.Int64,
               "identical": pl.List(pl.String)}


def _cells(rows: pl.DataFrame) -> list[tuple[tuple, pl.DataFrame]]:
    """`rows` (null values left out and counted, a NaN or inf refused: `measured`; a cell's
    duplicate rows averaged) split by
    KEYS, in their sorted order (metrics by name), each part's rows model, query, repeat,
    value."""
    data = (measured(rows, "variance")  # a NaN would make a mean NaN, drop a pair's query
            .group_by(*KEYS, "model", "query", "repeat").agg(ordered("value").mean()))
    parts = data.partition_by(KEYS, as_dict=True)
    return [(key, parts[key].drop(KEYS)) for key in sorted(parts)]


def matrix(values: pl.DataFrame, column: str = "value") -> np.ndarray:
    """query x repeat of `column` (query, repeat, column): the queries with a value in every
    repeat, rows by query id, columns by repeat."""
    repeats = sorted(values["repeat"].unique().to_list())
    wide = (values.pivot("repeat", index="query", values=column)
            .select("query", *map(str, repeats)).drop_nulls().sort("query"))
    return wide.drop("query").to_numpy().astype(np.float64).reshape(wide.height, len(repeats))


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def components(rows: pl.DataFrame) -> pl.DataFrame:
    """Each model's decomposition per pool size, scope and metric (COMPONENT_SCHEMA; se: the
    square root of the mean's variance), sorted by size, scope, metric, model. A model with
    fewer than MIN_QUERIES queries in every draw has its mean and no variance (nulls); one
    whose values are all equal (no mean square beyond NOISE) has se 0 and null shares, said
    in a log line."""
    out = []
    for (size, scope, metric), cell in _cells(rows):
        for model in sorted(cell["model"].unique().to_list()):
            y = matrix(cell.filter(pl.col("model") == model))
            if y.shape[0] == 0:
                continue
            if y.shape[0] < MIN_QUERIES:  # no spread over queries: no variance to split
                out.append({"size": size, "scope": scope, "metric": metric, "model": model,
                            "queries": y.shape[0], "draws": y.shape[1],
                            "mean": float(y.mean())})
                continue
            c = decompose(y)
            if c.variance == 0:
                log.warning(f"[variance] {model} at size {size}, scope {scope}, {metric}: "
                            f"every value is {c.mean:.6g} (no variance beyond {NOISE:g} of "
                            "its square): se 0, the shares undefined (null)")
            out.append({"size": size, "scope": scope, "metric": metric, "model": model,
                        "queries": c.queries, "draws": c.draws, "mean": c.mean,
                        "se": math.sqrt(c.variance), "s2_query": c.s2_query,
                        "s2_draw": _finite(c.s2_draw), "s2_resid": _finite(c.s2_resid),
                        **dict(zip(("share_query", "share_draw", "share_interaction"),
                                   map(_finite, c.shares), strict=True))})
    return pl.DataFrame(out, schema=COMPONENT_SCHEMA)


def _pairs(cell: pl.DataFrame) -> list[tuple[str, str, np.ndarray]]:
    """Every two models (by name) of a cell: a - b on the (query, repeat)s both have, as
    `matrix` lays it out (the queries with a difference in every repeat of the pair)."""
    queries = cell["query"].unique().sort()
    repeats = cell["repeat"].unique().sort()
    grid = pl.DataFrame({"query": queries}).join(pl.DataFrame({"repeat": repeats}),
                                                 how="cross")
    wide = grid.join(cell.pivot("model", index=["query", "repeat"], values="value"),
                     on=["query", "repeat"], how="left", maintain_order="left")
    models = sorted(c for c in wide.columns if c not in ("query", "repeat"))
    shape = (len(queries), len(repeats))
    values = {m: wide[m].to_numpy().astype(np.float64).reshape(shape) for m in models}
    out = []
    for a, b in itertools.combinations(models, 2):
        d = values[a] - values[b]  # NaN where either lacks the (query, repeat)
        present = ~np.isnan(d)
        kept = present.any(axis=0)  # the repeats the pair has
        d = d[:, kept]
        d = d[~np.isnan(d).any(axis=1)]
        if d.size:
            out.append((a, b, d))
    return out


def differences(rows: pl.DataFrame, level: float = LEVEL) -> pl.DataFrame:
    """Every pair of models per pool size, scope and metric: the mean difference a - b and its
    intervals (`difference_interval`; DIFFERENCE_SCHEMA), sorted by size, scope, metric, a, b;
    the intervals null with fewer than MIN_QUERIES queries."""
    out = []
    for (size, scope, metric), cell in _cells(rows):
        for a, b, d in _pairs(cell):
            i = difference_interval(d, np.zeros_like(d), level)
            bounds = (i.queries_low, i.queries_high, i.low, i.high)
            out.append({"size": size, "scope": scope, "metric": metric, "a": a, "b": b,
                        "queries": d.shape[0], "draws": d.shape[1],
                        "difference": i.difference,
                        **dict(zip(("queries_low", "queries_high", "low", "high"),
                                   map(_finite, bounds), strict=True))})
    return pl.DataFrame(out, schema=DIFFERENCE_SCHEMA)


def separated(row: dict) -> bool | None:
    """Whether a row of `differences` tells its two models apart: its LEVEL interval (over
    queries and draws with two or more draws; with one, over queries: the paired t-test's,
    whose p is below 1 - LEVEL exactly where it excludes 0) excludes 0; None without an
    interval (fewer than MIN_QUERIES queries). The report's one test of "significantly below
    the best": the main tables' † (`below_best`) and the summary's "best" and "not
    distinguishable" (report/summary.py) both ask it, each pair at LEVEL, unadjusted."""
    if row["low"] is None or row["high"] is None:
        return None
    return row["low"] > 0 or row["high"] < 0


def below_best(rows: pl.DataFrame, best: str, level: float = LEVEL) -> list[str]:
    """The models of `rows` (size, scope, metric, model, query, repeat, value: one column of
    a table) significantly below `best`: their difference with it `separated`, `best` above,
    in every cell (size, scope, metric) where the pair was measured; sorted by name."""
    verdicts: dict[str, list[bool]] = {}
    for row in differences(rows, level).iter_rows(named=True):
        if best not in (row["a"], row["b"]):
            continue
        other, ahead = ((row["b"], row["difference"] > 0) if row["a"] == best
                        else (row["a"], row["difference"] < 0))
        verdicts.setdefault(other, []).append(bool(separated(row)) and ahead)
    return sorted(model for model, found in verdicts.items() if all(found))


def _distinct(pairs: list[tuple[str, str, np.ndarray]]
              ) -> tuple[list[tuple[str, str, np.ndarray]], list[str]]:
    """`pairs` (`_pairs`: a before b by name) without the models that score exactly as a
    model before them on every (query, draw) they share (a copy of a run: its difference is
    0 everywhere: no variance, and queries needed of 2 for any delta), and those models'
    names."""
    copies = sorted({b for _, b, d in pairs if not d.any()})
    return [p for p in pairs if p[0] not in copies and p[1] not in copies], copies


def pair_components(rows: pl.DataFrame) -> pl.DataFrame:
    """The components of each pair's difference a - b per pool size, scope and metric
    (PAIR_SCHEMA; draw, interaction and the draws' mean square ms_draw, which the truncated
    s2_draw loses and `draw_upper` needs, null with one draw), the pairs with MIN_QUERIES queries
    or more. Per pair, not pooled over pairs: the pairs' variances differ (a random floor's
    difference with any model is its own), and a pooled mean answers for no pair. A model
    identical to another (`_distinct`: a zero difference everywhere) is left out, named in
    `identical`."""
    out = []
    for (size, scope, metric), cell in _cells(rows):
        kept, copies = _distinct([p for p in _pairs(cell) if p[2].shape[0] >= MIN_QUERIES])
        for a, b, d in kept:
            c = decompose(d)
            out.append({"size": size, "scope": scope, "metric": metric, "a": a, "b": b,
                        "queries": c.queries, "draws": c.draws, "s2_query": c.s2_query,
                        "s2_draw": _finite(c.s2_draw), "s2_resid": _finite(c.s2_resid),
                        "ms_query": c.ms_query, "ms_draw": _finite(c.ms_draw),
                        "identical": copies})
    return pl.DataFrame(out, schema=PAIR_SCHEMA)


def queries_needed(pairs: pl.DataFrame, deltas: tuple[float, ...] = (0.01, 0.02, 0.05),
                   draws: tuple[int, ...] = (1, 3, 5, 10), alpha: float = 0.05,
                   power: float = 0.8, upper_level: float = UPPER_LEVEL) -> pl.DataFrame:
    """The queries needed for each row of `pair_components`, delta and number of draws
    (SIZE_SCHEMA): `queries`, the planned number (null with the `reason`; `test` the test it
    is for), is `topic_set_size` with the draw variance at its one-sided `upper_level` upper
    confidence bound `s2_draw_upper` (`draw_upper`) and the query and interaction components
    at their estimates; where that bound's draw part alone keeps the power below `power`,
    "not reachable", with `draws_needed` the fewest draws that reach it at the bound.
    Wherever the bound is at or above the true draw variance (`upper_level` of pilots), the
    planned design's power at the truth is at least its power at the bound, since power falls
    as the draw variance rises; and at fixed variances power rises with the draws, so the
    number never rises with R. `queries_point` (null with `reason_point`), a side column, is
    the number at the estimates as if they were the truth: not the planned number (an
    estimate of 0 on 2 degrees of freedom makes it optimistic). `draw_df`: the draw
    estimate's degrees of freedom, measured draws - 1. Measured with one draw the draw
    component is unknown: only draws = 1 is given, the paired t over queries with the draws
    not separated, at the estimate, and no bound."""
    out = []
    for row in pairs.sort("size", "scope", "metric", "a", "b").iter_rows(named=True):
        measured, queries = row["draws"], row["queries"]
        s2_resid = 0.0 if row["s2_resid"] is None else row["s2_resid"]
        if measured < 2:
            s2_draw = upper = math.nan
        else:
            s2_draw = row["s2_draw"]
            upper = float(draw_upper(row["ms_draw"], s2_resid, queries, measured, upper_level))
        for delta in deltas:
            for r in draws:
                if measured < 2 and r != 1:
                    continue  # the draw component is unknown
                planned = topic_set_size(delta, row["s2_query"],
                                         s2_draw if measured < 2 else upper, s2_resid, r,
                                         alpha, power)
                point = topic_set_size(delta, row["s2_query"], s2_draw, s2_resid, r, alpha,
                                       power)
                out.append({**{k: row[k] for k in ("size", "scope", "metric", "a", "b")},
                            "delta": delta, "draws": r, "queries": planned.queries,
                            "test": planned.test, "reason": planned.reason,
                            "draws_needed": planned.draws_needed,
                            "s2_draw": _finite(s2_draw), "s2_draw_upper": _finite(upper),
                            "queries_point": point.queries, "reason_point": point.reason,
                            "measured_draws": measured, "draw_df": measured - 1,
                            "identical": row["identical"]})
    return pl.DataFrame(out, schema=SIZE_SCHEMA)
