"""Where the variance of a mean comes from, intervals that account for it, and how many queries
and pool draws are enough (issue 42).

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
(query, draw) and has the same decomposition. Var(dbar) = MS_Q/(QR) + (MS_R - MS_E)/(QR): the
queries-only paired t's variance plus the draw term (truncated at 0); the interval scales each
part by the t quantile of its own degrees of freedom (`difference_interval`: Satterthwaite's
(1946) single t under-covered with 3 draws). The queries-only interval (the paired t-test's:
per-query differences averaged over draws) ignores the draw term.

Topic set size (Sakai 2016): the fewest queries n for a two-sided paired t-test at level alpha
to have power >= `power` against a difference delta, from scipy's noncentral t with n-1
degrees of freedom and noncentrality delta / sqrt((s2_query + s2_resid/R)/n + s2_draw/R). With
s2_draw = 0 it is Sakai's paired-t topic set size; with s2_draw > 0 no number of queries may
reach the power with R draws (the draw term alone bounds the noncentrality): None.

Values reach every sum sorted by query id, then draw, so the numbers do not depend on the
rows' order or polars' threads.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.evaluation.significance import MIN_QUERIES, ordered

KEYS = ["size", "scope", "metric"]  # a pool size of one scope and a metric: one decomposition
LEVEL = 0.95  # the intervals' confidence level
MAX_QUERIES = 10_000_000  # topic_set_size's search stops here (None beyond)


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


def decompose(values: np.ndarray) -> Components:
    """The mean squares of a Q x R matrix (rows queries sorted by id, columns draws sorted)."""
    y = np.asarray(values, dtype=np.float64)
    q, r = y.shape
    mean = float(y.mean())
    rows, cols = y.mean(axis=1), y.mean(axis=0)
    ms_q = r * float(((rows - mean) ** 2).sum()) / (q - 1) if q > 1 else math.nan
    if r < 2:
        return Components(q, r, mean, ms_q, math.nan, math.nan)
    ms_r = q * float(((cols - mean) ** 2).sum()) / (r - 1)
    resid = y - rows[:, None] - cols[None, :] + mean
    ms_e = float((resid ** 2).sum()) / ((q - 1) * (r - 1)) if q > 1 else math.nan
    return Components(q, r, mean, ms_q, ms_r, ms_e)


@dataclass(frozen=True)
class Interval:
    """A mean difference and its `LEVEL` intervals: over queries only (the paired t-test's)
    and over queries and draws (`difference_interval`)."""

    difference: float
    queries_low: float
    queries_high: float
    low: float
    high: float


def difference_interval(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> Interval:
    """Two models' Q x R matrices, paired on (query, draw): the intervals of mean(a - b).

    Queries only: t(Q-1) * sqrt(MS_Q/(QR)), the paired t-test's interval on the per-query
    differences averaged over draws. Both sources: each of Var(dbar)'s two estimated parts
    scaled by the t quantile of its own degrees of freedom, half-width
    sqrt(t(Q-1)^2 MS_Q/(QR) + t(R-1)^2 max(MS_R - MS_E, 0)/(QR)) (the modified large-sample
    idea of Graybill & Wang 1980). A t interval on Satterthwaite's degrees of freedom covered
    92.8-93.8% at Q=100, R=3 once the draw made half the variance (its degrees of freedom are
    estimated from the very mean square that is too small when it misses); this one covered
    95.4-96.6% (docs/evaluation.md). One draw: the draw's variance is unknown, both intervals
    are the queries'."""
    from scipy.stats import t

    c = decompose(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    q, r = c.queries, c.draws
    half = (1 + level) / 2
    queries_part = float(t.ppf(half, q - 1)) ** 2 * c.ms_query / (q * r) if q > 1 else math.nan
    draw_part = (float(t.ppf(half, r - 1)) ** 2 * max(c.ms_draw - c.ms_resid, 0.0) / (q * r)
                 if r > 1 else 0.0)
    queries_half, width = math.sqrt(queries_part), math.sqrt(queries_part + draw_part)
    return Interval(c.mean, c.mean - queries_half, c.mean + queries_half, c.mean - width,
                    c.mean + width)


def power_of(queries: int, delta: float, s2_query: float, s2_draw: float = 0.0,
             s2_resid: float = 0.0, draws: int = 1, alpha: float = 0.05) -> float:
    """The power of the two-sided paired t-test on `queries` queries and `draws` draws
    (noncentral t, queries - 1 degrees of freedom; see the module's docstring)."""
    from scipy.stats import nct, t

    scale = math.sqrt((s2_query + s2_resid / draws) / queries + s2_draw / draws)
    if scale == 0:
        return 1.0
    df, ncp = queries - 1, abs(delta) / scale
    crit = float(t.ppf(1 - alpha / 2, df))
    return float(nct.sf(crit, df, ncp) + nct.cdf(-crit, df, ncp))


def topic_set_size(delta: float, s2_query: float, s2_draw: float = 0.0, s2_resid: float = 0.0,
                   draws: int = 1, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """The fewest queries (>= 2) whose paired t-test reaches `power` against `delta`; None
    when none does with `draws` draws (the draw term alone keeps the power below it)."""
    from scipy.stats import norm

    if s2_draw > 0:  # the power as queries grow without bound: a z test on the draw term
        ncp = abs(delta) / math.sqrt(s2_draw / draws)
        z = float(norm.ppf(1 - alpha / 2))
        if float(norm.sf(z - ncp) + norm.cdf(-z - ncp)) < power:
            return None

    def enough(n: int) -> bool:
        return power_of(n, delta, s2_query, s2_draw, s2_resid, draws, alpha) >= power

    high = 2
    while not enough(high):
        if high >= MAX_QUERIES:
            return None
        high *= 2
    low = high // 2  # not enough (or below 2)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return max(high, 2)


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
POOLED_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
                 "pairs": pl.Int64, "queries": pl.Int64, "draws": pl.Int64,
                 "s2_query": pl.Float64, "s2_draw": pl.Float64, "s2_resid": pl.Float64,
                 "identical": pl.List(pl.String)}
SIZE_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String,
               "delta": pl.Float64, "draws": pl.Int64, "queries": pl.Int64,
               "measured_draws": pl.Int64, "identical": pl.List(pl.String)}


def _cells(rows: pl.DataFrame) -> list[tuple[tuple, pl.DataFrame]]:
    """`rows` (null values dropped, a cell's duplicate rows averaged) split by KEYS, in their
    sorted order (metrics by name), each part's rows model, query, repeat, value."""
    data = (rows.filter(pl.col("value").is_not_null())
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
    fewer than MIN_QUERIES queries in every draw has its mean and no variance (nulls)."""
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


def _distinct(pairs: list[tuple[str, str, np.ndarray]]
              ) -> tuple[list[tuple[str, str, np.ndarray]], list[str]]:
    """`pairs` (`_pairs`: a before b by name) without the models that score exactly as a
    model before them on every (query, draw) they share (a copy of a run: its difference is
    0 everywhere, and would pull the pooled variance toward 0 and double another pair's
    weight), and those models' names."""
    copies = sorted({b for _, b, d in pairs if not d.any()})
    return [p for p in pairs if p[0] not in copies and p[1] not in copies], copies


def pooled(rows: pl.DataFrame) -> pl.DataFrame:
    """The components of a model difference per pool size, scope and metric, pooled over its
    pairs of models (the mean of each pair's unbiased moment estimate, then truncated at 0, as
    Sakai pools the variance over systems); draw and interaction null with one draw. A model
    identical to another (`_distinct`) is left out, named in `identical`; a cell of identical
    models only has no row."""
    out = []
    for (size, scope, metric), cell in _cells(rows):
        kept, copies = _distinct([p for p in _pairs(cell) if p[2].shape[0] >= MIN_QUERIES])
        found = [decompose(d) for _, _, d in kept]
        if not found:
            continue
        q, r = min(c.queries for c in found), min(c.draws for c in found)
        ms = np.array([[c.ms_query, c.ms_draw, c.ms_resid] for c in found]).mean(axis=0)
        if r < 2:
            s2 = (float(ms[0]), None, None)
        else:
            s2 = (max((ms[0] - ms[2]) / r, 0.0), max((ms[1] - ms[2]) / q, 0.0), float(ms[2]))
        out.append({"size": size, "scope": scope, "metric": metric, "pairs": len(found),
                    "queries": q, "draws": r, "s2_query": s2[0], "s2_draw": s2[1],
                    "s2_resid": s2[2], "identical": copies})
    return pl.DataFrame(out, schema=POOLED_SCHEMA)


def queries_needed(pooled_rows: pl.DataFrame, deltas: tuple[float, ...] = (0.01, 0.02, 0.05),
                   draws: tuple[int, ...] = (1, 3, 5, 10), alpha: float = 0.05,
                   power: float = 0.8) -> pl.DataFrame:
    """`topic_set_size` for each row of `pooled` (its variances), delta and number of draws
    (SIZE_SCHEMA; queries null: not reachable with those draws). Measured with one draw, the
    draw component is unknown: only draws = 1 is given (no row for the others), with s2_draw
    taken as 0 (Sakai's queries-only number). `identical`: the models `pooled` left out as
    copies of another."""
    out = []
    for row in pooled_rows.sort("size", "scope", "metric").iter_rows(named=True):
        measured = row["draws"]
        for delta in deltas:
            for r in draws:
                if measured < 2 and r != 1:
                    continue  # the draw component is unknown
                if measured < 2:
                    n = topic_set_size(delta, row["s2_query"], alpha=alpha, power=power)
                else:
                    n = topic_set_size(delta, row["s2_query"], row["s2_draw"], row["s2_resid"],
                                       r, alpha, power)
                out.append({"size": row["size"], "scope": row["scope"],
                            "metric": row["metric"], "delta": delta, "draws": r,
                            "queries": n, "measured_draws": measured,
                            "identical": row["identical"]})
    return pl.DataFrame(out, schema=SIZE_SCHEMA)
