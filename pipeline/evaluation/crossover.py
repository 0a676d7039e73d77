"""Where two models' curves cross: the pool size at which one overtakes the other (issues 42, 47).

For one scope (the dataset-level pools, or one field's), one metric and two models A and B
measured at two or more pool sizes: per size, each model's mean over the queries and the
repeats (pool draws); the gap D(s) = A(s) - B(s) fitted as c + d*log(s) by least squares over
the measured sizes (each model's metric a line in log size); the crossing log s* = -c/d.

The design it reads (MDCR §3): the queries of a seed are the same in every pool, and repeat r's
pools are nested (its 10k pool inside its 20k), so a repeat's pool draw effects are correlated
across sizes (about sqrt(s_i/s_j)). Each (query, repeat) therefore has its own line over the
sizes, and every quantity here is a contrast of it: the gap at log size x (a + u*b, with
u = x - mean log size), the slope b, the departures from the line. A contrast's values form a
queries x repeats table, queries crossed with draws whatever the correlation across sizes,
and its mean gets the queries-and-draws interval of the variance section
(pipeline/evaluation/variance.py, `half_widths`: each part's own t half-width, in quadrature;
it holds its level wherever the variance comes from). Independent bootstraps of each size's
repeats covered 88% (78% at correlation 0.8), a joint one 82-91%: three draws are too few for
a percentile bootstrap.

- The line is tested first (3+ sizes): the departures from it, as orthonormal polynomial
  contrasts of degree 2 and up, each at level 1 - 0.05/K (Bonferroni over the K = sizes - 2):
  a departure that excludes 0 means the curves are not lines in log size, and no crossing is
  given. With 2 sizes the line cannot be checked, said in the outcome.
- The crossing's interval is the set of measured sizes where the gap's interval holds 0 (the
  test inverted, as Fieller's interval for a ratio): it covers the true crossing whenever the
  gap's interval at it covers 0 (95% or more, the interval being conservative;
  tests/evaluation/test_crossover.py simulates the nested design: 97.6%). It is open on a side
  ("> 2M") when the set reaches the measured range's end: nothing beyond was measured.
- An extrapolated crossing (outside the measured sizes) is a point only, without interval; and
  none is given toward a model at its floor (`at_floor`: the random retriever), nor where
  either model's own line (its mean per size fitted in log size, from the rows the gap is
  fitted on) leaves the metric's range (below 0, above 1: `glossary.metric_range`) or falls
  below the floor before the lines meet (issue 58: two falling lines met at 171k candidates
  where both were below MAP 0), nor further outside the measured sizes than they span (a line
  fitted over 2k-10k, a factor of 5, is followed down to 400 candidates, not to the demo's
  71.4). The floor is the line of a model at its floor measured at the pair's sizes (random's),
  else the metric's minimum; the outcome says which limit stopped it.
- Nor where the lines meet within their noise of a limit (issue 71): at the crossing, each
  model's line gets the gap's kind of interval (each (query, repeat)'s line there, over
  queries and draws); where one's holds the floor (the greater of the metric's minimum and
  the floors' fitted lines there) or the metric's maximum, that model cannot be told from
  chance (or from perfect) where they meet, and their meeting says nothing. The demo's bm25
  against RRF(bm25, random) passes every limit and is given ("extrapolated: 36.1k"): the
  lines meet 3.6 times past its 10k pools (a factor of 5 allowed) at MAP 0.0354, random's line
  there at -0.0034 (below 0: the floor is 0), bm25's interval [0.0119, 0.0589] and the
  fusion's [0.0064, 0.0644] clear of it.
- Pool sizes are counts of candidates: a size under 1 (or not a whole number, or missing) is
  refused, in one line; a whole size stored as a float (2000.0) is read as the integer (issue
  79: it printed as "2.0k"). No crossing is given under the least pool the grid can build:
  a pool holds every query's cited papers (`pools.build` refuses a smaller size), which
  runs/results.parquet does not carry but each pool's manifest does (`positives`): the
  report passes the greatest of a scope's pools (`crossover_rows`' `least`; issue 79:
  crossings at 1.17 and 2.92 candidates were given); from results alone (the API) it is
  LEAST, 1 candidate. Issue 71: sizes 10 to 100k, a factor of 10^4, were followed down to
  0.001 candidates: lines meeting at 0.5 gave "extrapolated: 0.485 candidates".
- Draws for a 4x interval (issue 58): with 3 draws the interval is rarely closed (the draw part
  carries t(2) = 4.3), and more sizes do not narrow it. From the gap's mean squares at the
  crossing (MS_Q, MS_R, MS_E): the fewest draws R whose interval would span a factor of FACTOR
  in pool size, 2 x half-width / |slope| <= ln FACTOR in log size, with the queries' component
  as measured and the draw part t(R-1)^2 MS_R / (QR) (MS_R's expectation does not change with
  R): `draws_for`; "not reachable" (inf) where the queries' part alone is wider.
- The trend ("gap closing"/"gap widening") is said only when the slope's interval excludes 0.

With fewer than MIN_QUERIES queries shared by every pool there is no interval (the queries'
part of the variance is unseen), said in the outcome; with one draw per size the interval is
over queries only, said too. Nothing is random: the same numbers whatever the rows' order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.logs import counted
from pipeline.evaluation.significance import (
    MIN_QUERIES,
    WHERE_COLUMNS,
    measured,
    ordered,
    too_few,
)
from pipeline.evaluation.variance import half_widths
from pipeline.glossary import canonical_metric, metric_range
from pipeline.layout import MANIFEST, format_size, pool_dir
from pipeline.models import REGISTRY

LEVEL = 0.95
LACK_OF_FIT = 0.05  # the line's test: its level over all the departures (Bonferroni)
GRID = 4001  # points of the measured log-size range where the gap's interval is checked
FAR = 1000  # a crossing more than this many times outside the measured sizes: shown as such
FLAT = 1e-12  # a slope (gap per unit of log size) at or below this: parallel lines
# the smallest pool there can be, in candidates: one candidate (a pool holds every query's
# cited papers too, but the results do not carry how many: no crossing is given below this)
LEAST = 1
UNIT = "candidates"  # what a pool size counts
FLOOR_KINDS = ("random",)  # model kinds whose curve is chance: never a crossing toward them
FACTOR = 4.0  # the span in pool size (high / low) that `draws_for` aims the interval at
MAX_DRAWS = 10**9  # draws_for's search ends here (the queries' part alone just fits)
# the keys that split a results table into sets of shared queries (one scope of one seed)
SPLIT_KEYS = ("corpus", "split", "seed", "exclusion", "negatives", "level", "scope")


def at_floor(model: str) -> bool:
    """Whether `model` is at its floor: a registered model whose kind is in FLOOR_KINDS (the
    random retriever). Its metric is chance at every size, so a line through its values says
    nothing about where another model would meet it."""
    entry = REGISTRY.get(model)
    return entry is not None and entry.kind in FLOOR_KINDS


@dataclass(frozen=True)
class Crossover:
    """The fit and its interval for one scope, metric and pair (sizes in candidates)."""

    sizes: tuple[int, ...]  # the measured sizes both models have
    queries: int
    repeats: int  # the repeats measured at every size (the pools of one repeat are nested)
    gap_min: float | None  # the fitted A - B at the smallest and the largest size
    gap_max: float | None
    slope: float | None  # d: the gap's change per unit of log size
    slope_low: float | None  # its 95% interval over queries and draws
    slope_high: float | None
    line: str  # the line's check: "fits", "does not fit", "unchecked" (2 sizes), "-"
    crossing: float | None  # s*, in candidates (None: no fit, not a line, or toward a floor)
    low: float | None  # its 95% interval within the measured sizes (0 / inf: open there)
    high: float | None
    outcome: str  # crosses, beyond, below, parallel, curved, degenerate
    text: str  # the outcome said in words
    # the draws whose interval would span FACTOR (`draws_for`; inf: not reachable; None: no
    # crossing within the measured sizes, one draw, or too few queries)
    draws_4x: float | None = None


@dataclass(frozen=True)
class Limits:
    """What an extrapolated crossing must stay inside (issue 58): each model of the pair's own
    line, fitted to its mean per measured size over the rows the gap is fitted on (and, at the
    crossing, its interval from those rows: issue 71); the metric's range; the lines of models
    at their floor measured at those sizes (none: the minimum)."""

    models: tuple[tuple[str, np.ndarray], ...]  # (model, its query x size x repeat values)
    low: float = 0.0  # the metric's least value
    high: float = 1.0  # its greatest (inf: none)
    floors: tuple[tuple[str, np.ndarray], ...] = ()  # (floor model, mean per size)
    least: int = LEAST  # the least pool these queries allow (their cited papers; else LEAST)


def _size(value: float, sizes: tuple[int, ...] | list[int]) -> str:
    """A crossing size as the report writes sizes (20k, 2M), to 3 significant digits; beyond
    FAR times the measured range, only that (a line followed so far says nothing more)."""
    if value > sizes[-1] * FAR:
        return f"> {FAR} x {format_size(sizes[-1])}"
    if value < sizes[0] / FAR:
        return f"< {format_size(sizes[0])} / {FAR}"
    rounded = float(f"{value:.3g}")
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if rounded >= scale:
            return f"{rounded / scale:g}{unit}"
    return f"{rounded:g}"


def _interval(low: float | None, high: float | None, sizes: tuple[int, ...]) -> str:
    """An interval in the measured range; an open end (0, inf) as beyond the measured size."""
    if low is None or high is None:
        return ""
    left = f"< {format_size(sizes[0])}" if low == 0 else _size(low, sizes)
    right = f"> {format_size(sizes[-1])}" if math.isinf(high) else _size(high, sizes)
    return f"[{left}, {right}]"


def _degenerate(sizes: tuple[int, ...], queries: int, repeats: int, why: str) -> Crossover:
    """No fit: `why` says why."""
    return Crossover(sizes, queries, repeats, None, None, None, None, None, "-", None, None,
                     None, "degenerate", why)


@dataclass(frozen=True)
class _Table:
    """A pair's values on the rows the fit reads: (model, query, size, repeat), models a, b."""

    values: np.ndarray
    sizes: list[int]
    queries: list[str]
    repeats: list[int]
    note: str  # what was left out


def _matrix(values: pl.DataFrame, a: str, b: str) -> _Table:
    """A's and B's values as a (model x query x size x repeat) array, by query id, size and
    repeat, over the queries every (size, repeat, model) has and the repeats measured at every
    size (a repeat's pools are nested: one unit across sizes); the sizes, the queries, the
    repeats, and a note of what was left out."""
    data = (values.filter(pl.col("model").is_in([a, b]), pl.col("value").is_not_null())
            .group_by("size", "repeat", "model", "query").agg(ordered("value").mean()))
    notes = []
    by_model = {m: set(data.filter(pl.col("model") == m)["size"].unique().to_list())
                for m in (a, b)}
    for model in (a, b):
        missing = sorted((by_model[a] | by_model[b]) - by_model[model])
        if missing:
            notes.append(f"{model} not measured at {', '.join(map(format_size, missing))}")
    sizes = sorted(by_model[a] & by_model[b])
    cells = (data.filter(pl.col("size").is_in(sizes)).group_by("size", "repeat")
             .agg(pl.col("model").n_unique().alias("models")).filter(pl.col("models") == 2)
             .select("size", "repeat"))
    sizes = sorted(cells["size"].unique().to_list())
    every = (cells.group_by("repeat").agg(pl.len().alias("sizes"))
             .filter(pl.col("sizes") == len(sizes))["repeat"])
    partial = cells.filter(~pl.col("repeat").is_in(every.implode())).height
    if partial:
        notes.append(f"{counted(partial, 'pool draw')} of repeats not "
                     "measured at every size left out")
    cells = cells.filter(pl.col("repeat").is_in(every.implode()))
    data = data.join(cells, on=["size", "repeat"])
    shared = (data.group_by("query").agg(pl.len().alias("cells"))
              .filter(pl.col("cells") == cells.height * 2)["query"])
    if data["query"].n_unique() > shared.len():
        notes.append(f"{data['query'].n_unique() - shared.len()} queries not in every pool")
    wide = (data.filter(pl.col("query").is_in(shared.implode()))
            .pivot("model", index=["query", "size", "repeat"], values="value")
            .sort("query", "size", "repeat"))
    shape = (2, shared.len(), len(sizes), every.len())
    both = (np.stack([wide[a].to_numpy(), wide[b].to_numpy()]) if wide.height
            else np.zeros(shape))
    return _Table(both.reshape(shape), sizes, sorted(shared.to_list()), sorted(every.to_list()),
                  "; ".join(notes))


def _floor_lines(values: pl.DataFrame, table: _Table, pair: tuple[str, str]
                 ) -> tuple[tuple[str, np.ndarray], ...]:
    """The mean per size of each model at its floor (`at_floor`, not of the pair) over the
    pair's queries and repeats, for those measured at every one of the pair's sizes there."""
    lines = []
    others = sorted(m for m in values["model"].unique().to_list() if m not in pair)
    for model in filter(at_floor, others):
        rows = (values.filter(pl.col("model") == model, pl.col("value").is_not_null(),
                              pl.col("size").is_in(table.sizes),
                              pl.col("repeat").is_in(table.repeats),
                              pl.col("query").is_in(table.queries))
                .group_by("size", "repeat", "query").agg(ordered("value").mean())
                .group_by("size").agg(ordered("value").mean()).sort("size"))
        if rows["size"].to_list() == table.sizes:
            lines.append((model, rows["value"].to_numpy()))
    return tuple(lines)


def _limits(values: pl.DataFrame, table: _Table, pair: tuple[str, str]) -> Limits:
    """`Limits` of a pair's table: each model's mean per size, the range of the metric that
    `values` holds (0 to 1 where it holds none or several), the floors' lines."""
    metrics = (values["metric"].drop_nulls().unique().to_list() if "metric" in values.columns
               else [])
    low, high = metric_range(metrics[0]) if len(metrics) == 1 else (0.0, 1.0)
    return Limits(((pair[0], table.values[0]), (pair[1], table.values[1])), low, high,
                  _floor_lines(values, table, pair))


def _mean_squares(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The two-way mean squares (query, draw, interaction) of a queries x repeats table, as a
    bilinear form of two tables (y = z: variance.decompose's mean squares). With one repeat,
    the draw and interaction ones are 0 (unseen)."""
    q, r = y.shape
    ym, zm = y.mean(), z.mean()
    yq, zq = y.mean(axis=1) - ym, z.mean(axis=1) - zm
    ms_q = r * float(yq @ zq) / (q - 1) if q > 1 else math.nan
    if r < 2 or q < 2:
        return np.array([ms_q, 0.0, 0.0])
    yr, zr = y.mean(axis=0) - ym, z.mean(axis=0) - zm
    ey, ez = y - yq[:, None] - yr[None, :] - ym, z - zq[:, None] - zr[None, :] - zm
    return np.array([ms_q, q * float(yr @ zr) / (r - 1),
                     float((ey * ez).sum()) / ((q - 1) * (r - 1))])


def _half_squared(ms: np.ndarray, q: int, r: int, level: float) -> np.ndarray:
    """The squared half-width of the queries-and-draws interval of a table's mean from its
    mean squares (..., 3): the variance section's (`variance.half_widths`), which holds its
    level where the interaction is large, as a line's departures leave it (its earlier form,
    subtracting MS_E from the draws' 2-degree-of-freedom mean square, rejected a true line in
    24% of simulated data sets). One repeat: the queries' part only."""
    return half_widths(ms[..., 0], ms[..., 1], ms[..., 2], q, r, level)[1] ** 2


def _departure(diff: np.ndarray, x: np.ndarray) -> int | None:
    """The line's check: the degree (2 and up) of the first orthonormal polynomial contrast of
    the sizes whose interval (level 1 - LACK_OF_FIT/K, K = sizes - 2) excludes 0, or None."""
    q, s, r = diff.shape
    z = (x - x.mean()) / x.std()
    basis = np.linalg.qr(np.vander(z, s, increasing=True))[0][:, 2:]
    tables = np.einsum("qsr,sk->kqr", diff, basis)
    level = 1 - LACK_OF_FIT / basis.shape[1]
    for k, table in enumerate(tables):
        if table.mean() ** 2 > _half_squared(_mean_squares(table, table), q, r, level):
            return k + 2
    return None


def _accepted(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Where on the grid u (log size less its mean) the gap's LEVEL interval holds 0: the gap
    there is the table a + u*b (each (query, repeat)'s line at u)."""
    q, r = a.shape
    ms = (_mean_squares(a, a)[None, :] + 2 * u[:, None] * _mean_squares(a, b)[None, :]
          + u[:, None] ** 2 * _mean_squares(b, b)[None, :])
    return (a.mean() + u * b.mean()) ** 2 <= _half_squared(ms, q, r, LEVEL)


def _crossing_interval(accepted: np.ndarray, u: np.ndarray, centre: float
                       ) -> tuple[float, float]:
    """The hull of the grid points where the gap's interval holds 0, widened to the next grid
    point out; 0 or inf where it reaches the end of the measured range (open there)."""
    where = np.flatnonzero(accepted)
    first, last = int(where[0]), int(where[-1])
    low = 0.0 if first == 0 else math.exp(centre + u[first - 1])
    high = math.inf if last == len(u) - 1 else math.exp(centre + u[last + 1])
    return low, high


def crossover(values: pl.DataFrame, a: str, b: str, least: int = LEAST) -> Crossover:
    """The crossing of A's and B's curves from `values` (size, repeat, model, query, value: one
    scope and metric; a NaN or inf refused, nulls left out and counted: `measured`; a size
    under one candidate refused: `_check_sizes`; sizes read as whole numbers, 2000.0 as
    2000). `least`: the least pool the grid can build with these queries (a pool holds their
    cited papers: `pools.build`), under which no crossing is given."""
    _check_pair(a, b)
    values = _whole_sizes(measured(values, "crossover"))
    table = _matrix(values, a, b)
    floor = next((m for m in (b, a) if at_floor(m)), None)
    limits = replace(_limits(values, table, (a, b)), least=max(int(least), LEAST))
    return from_table(table.values[0] - table.values[1], table.sizes, floor, table.note, limits)


def _whole_sizes(values: pl.DataFrame) -> pl.DataFrame:
    """`values` with its sizes checked (`_check_sizes`) and as integers: a size stored as a
    float (2000.0) is the count 2000, printed as the report prints sizes (2k, not 2.0k)."""
    _check_sizes(values)
    return values.with_columns(pl.col("size").cast(pl.Int64))


def _check_sizes(values: pl.DataFrame | list[int]) -> None:
    """Refuse a pool size that no pool can have, in one line: missing, under one candidate,
    or not a whole number (a size counts candidates; its log is the fit's variable). `values`:
    rows with a `size` column (the first bad row named), or the sizes."""
    if isinstance(values, pl.DataFrame):
        size = pl.col("size").cast(pl.Float64)
        bad = values.filter(size.is_null() | ~size.is_finite() | (size < LEAST)
                            | (size != size.floor()))
        if not bad.height:
            return
        keys = [k for k in WHERE_COLUMNS if k in bad.columns]
        first = bad.sort(keys, nulls_last=False).row(0, named=True)
        said = (f"{counted(bad.height, 'row')} with {_said(first['size'])} "
                "(the first: " + ", ".join(f"{k} {first[k]}" for k in keys if k != "size")
                + ")")
        fix = "correct the size column or leave those rows out"
    else:
        wrong = [v for v in values if v is None or not math.isfinite(v) or v < LEAST
                 or v != math.floor(v)]
        if not wrong:
            return
        said, fix = _said(wrong[0]), "give the sizes in candidates"
    raise InputError(f"crossover: {said}: a pool size is a count of candidates, a whole "
                     f"number of {LEAST} or more; {fix}")


def _said(size: float | None) -> str:
    """A refused pool size in words: "pool size 0.5", "no pool size"."""
    return "no pool size" if size is None else f"pool size {size:g}"


def from_table(diff: np.ndarray, sizes: list[int], floor: str | None = None, note: str = "",
               limits: Limits | None = None) -> Crossover:
    """`crossover` of a (query x size x repeat) array of A - B at `sizes` (sorted, each a
    whole number of LEAST or more candidates: others refused); `floor`: the pair's model at
    its floor, if any (`at_floor`); `limits`: what an extrapolated crossing must stay inside
    (None: the gap alone, every extrapolation to LEAST candidates or more given)."""
    _check_sizes(list(sizes))
    sizes = [int(size) for size in sizes]  # whole numbers (checked): 2000.0 prints as 2k
    queries, _, repeats = diff.shape if diff.ndim == 3 else (0, 0, 0)
    suffix = f" ({note})" if note else ""
    if len(sizes) < 2 or queries == 0 or repeats == 0:
        why = (f"{counted(len(sizes), 'pool size')} measured with both "
               "models: no line to fit" if len(sizes) < 2 else
               "no repeat (pool draw) measured at every size" if repeats == 0 else
               "no queries that both models answer in every pool")
        return _degenerate(tuple(sizes), queries, repeats, why + suffix)
    x = np.log(np.asarray(sizes, dtype=np.float64))
    centred = x - x.mean()
    lines_a = diff.mean(axis=1)  # each (query, repeat)'s line: its mean gap and slope
    lines_b = (diff * centred[None, :, None]).sum(axis=1) / (centred**2).sum()
    mean, slope = float(lines_a.mean()), float(lines_b.mean())
    lo_gap, hi_gap = mean + slope * centred[0], mean + slope * centred[-1]
    measured = f"[{format_size(sizes[0])}, {format_size(sizes[-1])}]"
    enough = queries >= MIN_QUERIES
    caveats = []
    if not enough:
        caveats.append(f"no interval from {queries} query (an interval over queries needs "
                       f"{MIN_QUERIES} or more)")
    elif repeats < 2:
        caveats.append("one pool draw per size: the intervals are over queries only")
    slope_low = slope_high = None
    if enough:
        half = math.sqrt(float(_half_squared(_mean_squares(lines_b, lines_b), queries,
                                             repeats, LEVEL)))
        slope_low, slope_high = slope - half, slope + half
    if len(sizes) == 2:
        line = "unchecked"
        caveats.append("2 sizes: the line in log size cannot be checked")
    elif not enough:
        line = "-"
    elif repeats < 2:
        line = "unchecked"
        caveats.append("one pool draw per size: the line cannot be checked (a draw's effect at "
                       "a size looks like a departure from it)")
    else:
        degree = _departure(diff, x)
        line = "fits" if degree is None else "does not fit"
        if degree is not None:
            text = (f"no crossing given: the gap is not a line in log size over {measured} "
                    f"(its degree-{degree} departure excludes 0 at {LACK_OF_FIT:.0%})")
            return Crossover(tuple(sizes), queries, repeats, lo_gap, hi_gap, slope, slope_low,
                             slope_high, line, None, None, None, "curved",
                             "; ".join([text, *caveats]) + suffix)
    parts = [tuple(sizes), queries, repeats, lo_gap, hi_gap, slope, slope_low, slope_high, line]
    if abs(slope) <= FLAT:
        text = ("tied at every measured size" if abs(mean) <= FLAT else
                f"no crossing in the measured range {measured}: parallel lines")
        return Crossover(*parts, None, None, None, "parallel",
                         "; ".join([text, *caveats]) + suffix)
    log_cross = float(x.mean() - mean / slope)
    with np.errstate(over="ignore"):
        crossing = float(np.exp(log_cross))  # inf for a slope of nearly 0
    u = np.linspace(centred[0], centred[-1], GRID)
    accepted = _accepted(lines_a, lines_b, u) if enough else np.zeros(GRID, dtype=bool)
    where = _size(crossing, sizes)
    low = high = draws = None
    if lo_gap * hi_gap <= 0:
        outcome, text = "crosses", f"crosses at {where} {UNIT} within the measured range {measured}"
        if enough:
            low, high = _crossing_interval(accepted, u, float(x.mean()))
            at = log_cross - float(x.mean())
            ms = (_mean_squares(lines_a, lines_a) + 2 * at * _mean_squares(lines_a, lines_b)
                  + at**2 * _mean_squares(lines_b, lines_b))
            draws = draws_for(ms, queries, repeats, slope) if repeats > 1 else None
            if low == 0 and math.isinf(high):
                text += (f"; where is not determined with {counted(repeats, 'draw')} and "
                         f"{queries} queries: the gap's interval holds 0 across the measured range")
            elif low == 0 or math.isinf(high):
                text += "; its interval is open where it reaches the measured range's end"
    else:
        outcome = "beyond" if log_cross > x[-1] else "below"
        trend = _trend(abs(hi_gap) < abs(lo_gap), slope_low, slope_high)
        text = f"no crossing in the measured range {measured}{trend}"
        stop = _stop(limits, x, log_cross, sizes)
        if floor is not None:
            text += (f"; none extrapolated: {floor} is at its floor (chance at every size: "
                     "its line is no trend to meet)")
            crossing = None
        elif stop is not None:
            text += f"; none extrapolated: {stop}"
            crossing = None
        else:
            place = ("beyond the largest measured pool" if outcome == "beyond"
                     else "below the smallest measured pool")
            text += (f"; extrapolated: {where} {UNIT}, {place} (the line's point only: no "
                     "interval beyond the measured sizes)")
        if accepted.any():
            lo_in, hi_in = _crossing_interval(accepted, u, float(x.mean()))
            text += (f"; a crossing in {_interval(lo_in, hi_in, tuple(sizes))} {UNIT} is not "
                     "ruled out")
    return Crossover(*parts, crossing, low, high, outcome,
                     "; ".join([text, *caveats]) + suffix, draws)


def _stop(limits: Limits | None, x: np.ndarray, log_cross: float, sizes: list[int]
          ) -> str | None:
    """Why no crossing is extrapolated to log size `log_cross`, in words, or None. Going out
    from the measured end toward it, the first place where a model's line (fitted in log size
    `x` to its means) leaves the metric's range or falls below a floor's line (a line already
    outside at the measured end stops it there), where it is followed further than the sizes
    span, or where the pool size falls under LEAST candidates; past all of those, at the
    crossing itself, a model's line whose interval there holds the floor or the maximum
    (`_within_noise`). `limits` None: the gap alone, only LEAST stops it."""
    beyond = log_cross > x[-1]
    edge = float(x[-1] if beyond else x[0])
    found: tuple[float, str] | None = None
    least = LEAST if limits is None else limits.least
    if not beyond and log_cross < math.log(least):
        held = ("the least a pool holds" if least == LEAST else
                "the least pool these queries allow: it holds their cited papers")
        found = (edge - math.log(least), f"the pool size falls under "
                 f"{counted(least, 'candidate')} ({held}), before the lines meet")
    if limits is None:
        return None if found is None else found[1]
    bounds = [(limits.low, 0.0, 1.0, f"below {limits.low:g} (the metric's minimum)")]
    if math.isfinite(limits.high):
        bounds.append((limits.high, 0.0, -1.0, f"above {limits.high:g} (the metric's maximum)"))
    for name, means in limits.floors:
        slope, level = np.polyfit(x - edge, means, 1)
        bounds.append((float(level), float(slope), 1.0, f"below the floor ({name})"))
    for model, values in limits.models:
        slope, level = np.polyfit(x - edge, values.mean(axis=(0, 2)), 1)
        for bound_level, bound_slope, sign, words in bounds:
            # inside while sign * (line - bound) >= 0; both lines, so it leaves at most once
            start = sign * (float(level) - bound_level)
            rate = sign * (float(slope) - bound_slope)
            end = start + rate * (log_cross - edge)
            if start < 0:
                at, said = 0.0, (f"{model}'s line is {words} at the "
                                 f"{'largest' if beyond else 'smallest'} measured pool "
                                 f"({format_size(sizes[-1] if beyond else sizes[0])})")
            elif end < 0:
                at = -start / rate
                verb = "rises" if sign < 0 else "falls"
                with np.errstate(over="ignore"):
                    place = _size(float(np.exp(edge + at)), sizes)  # inf: far beyond
                said = f"{model}'s line {verb} {words} at {place} {UNIT}"
            else:
                continue
            if found is None or abs(at) < found[0]:
                found = (abs(at), f"{said}, before the lines meet")
    span = float(x[-1] - x[0])  # how far the measured sizes reach, in log size
    if abs(log_cross - edge) > span and (found is None or span < found[0]):
        factor = math.exp(span)
        with np.errstate(over="ignore"):
            reach = _size(float(np.exp(edge + span if beyond else edge - span)), sizes)
        found = (span, f"a line fitted over a factor of {factor:.3g} in pool size is followed no "
                       f"further than another factor of {factor:.3g} ({reach} {UNIT}), before "
                       "the lines meet")
    return found[1] if found is not None else _within_noise(limits, x, log_cross, sizes)


def _within_noise(limits: Limits, x: np.ndarray, log_cross: float, sizes: list[int]
                  ) -> str | None:
    """Where the lines meet (log size `log_cross`), the first model (a, then b) whose line's
    LEVEL interval there holds the floor (the greatest of the metric's minimum and the floors'
    fitted lines there) or the metric's maximum, in words; None when both are clear of them or
    there are too few queries for an interval. A model's line there is each (query, repeat)'s
    line at that log size, a queries x repeats table, with the gap's interval
    (`_half_squared`: the variance section's)."""
    floor, words = limits.low, f"{limits.low:g} (the metric's minimum)"
    for name, means in limits.floors:
        slope, level = np.polyfit(x, means, 1)
        if level + slope * log_cross > floor:
            floor = float(level + slope * log_cross)
            words = f"{floor:.3g} ({name}'s line there)"
    u = (x - x.mean())[None, :, None]
    where = _size(math.exp(log_cross), sizes)
    for model, values in limits.models:
        queries, _, repeats = values.shape
        if queries < MIN_QUERIES:
            return None
        level = values.mean(axis=1)  # each (query, repeat)'s line: at the mean log size
        slope = (values * u).sum(axis=1) / (u**2).sum()
        at = level + (log_cross - x.mean()) * slope
        mean = float(at.mean())
        half = math.sqrt(float(_half_squared(_mean_squares(at, at), queries, repeats, LEVEL)))
        low, high = mean - half, mean + half
        if low <= floor:
            limit = f"the floor, {words}"
        elif high >= limits.high:
            limit = f"the metric's maximum, {limits.high:g}"
        else:
            continue
        return (f"where the lines meet ({where} {UNIT}) {model}'s line is {mean:.3g}, its "
                f"{LEVEL:.0%} interval [{low:.3g}, {high:.3g}] holding {limit}: a meeting "
                "within the noise of a limit")
    return None


def draws_for(ms: np.ndarray, queries: int, repeats: int, slope: float,
              factor: float = FACTOR) -> float:
    """The fewest pool draws (2 or more) at which the crossing's interval would span `factor`
    in pool size, from the gap's mean squares at the crossing `ms` (MS_Q, MS_R, MS_E, measured
    with `queries` x `repeats`) and the fitted `slope`: the interval's half-width in log size
    is the gap's half-width there (the variance section's, `half_widths`) over |slope|, and
    it must be at most ln(factor) / 2. At R draws the queries' component is the measured one
    (MS_Q - MS_E, at least 0, grows as R) and MS_R's expectation is unchanged, so the draw part
    is t(R-1)^2 MS_R / (QR). inf ("not reachable") where the queries' part alone is too wide."""
    ms_q, ms_r, ms_e = (float(v) for v in ms)
    target = (math.log(factor) * abs(slope) / 2) ** 2

    def too_wide(draws: int, ms_draw: float = ms_r) -> bool:
        grown = ms_e + max(ms_q - ms_e, 0.0) * draws / repeats  # the queries' component
        return float(half_widths(grown, ms_draw, ms_e, queries, draws, LEVEL)[1]) ** 2 > target

    if too_wide(repeats, 0.0):  # the queries' part alone (no draw part at any R)
        return math.inf
    high = 2
    while too_wide(high):
        if high >= MAX_DRAWS:
            return math.inf
        high *= 2
    low = high // 2  # too wide at low (or low < 2), not at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if too_wide(mid) else (low, mid)
    return float(max(high, 2))


def _trend(closing: bool, low: float | None, high: float | None) -> str:
    """The gap's trend in words, only where the slope's interval excludes 0."""
    if low is None or high is None:
        return ""
    if low <= 0 <= high:
        return " (no trend: the slope's 95% interval holds 0)"
    return " (gap closing)" if closing else " (gap widening)"


SCHEMA = {"metric": pl.String, "a": pl.String, "b": pl.String, "sizes": pl.List(pl.Int64),
          "queries": pl.Int64, "repeats": pl.Int64, "gap_min": pl.Float64,
          "gap_max": pl.Float64, "slope": pl.Float64, "slope_low": pl.Float64,
          "slope_high": pl.Float64, "line": pl.String, "crossing": pl.Float64,
          "low": pl.Float64, "high": pl.Float64, "outcome": pl.String, "text": pl.String,
          "draws_4x": pl.Float64}


def crossovers(results: pl.DataFrame, a: str, b: str, metric: str = "map") -> pl.DataFrame:
    """`crossover` of A and B on `metric` for every set of shared queries of `results` (rows
    of runs/results.parquet: split by SPLIT_KEYS, those it has), in sorted order: the keys,
    then SCHEMA's columns. `metric` in any tool's words (`MAP`, `AP`, `ndcg_cut_10`: read as
    the results write it, ranx's name). A metric or model that `results` does not hold is
    refused, listing those it holds; so is one model given as both a and b (a curve against
    itself has no crossing), and a pool size under one candidate (`_check_sizes`)."""
    _check_pair(a, b)
    metric = _as_written(metric)
    _check_name("metric", metric, results)
    for model in (a, b):
        _check_name("model", model, results)
    keys = [k for k in SPLIT_KEYS if k in results.columns]
    floors = [m for m in results["model"].drop_nulls().unique().to_list() if at_floor(m)]
    data = _whole_sizes(measured(results.filter(pl.col("metric") == metric,
                                                pl.col("model").is_in([a, b, *floors])),
                                 "crossover"))
    rows = []
    parts = data.partition_by(keys, as_dict=True) if keys else {(): data}
    for key in sorted(parts, key=lambda k: tuple((v is None, "" if v is None else v)
                                                 for v in k)):
        found = crossover(parts[key], a, b)
        rows.append({**dict(zip(keys, key, strict=True)), "metric": metric, "a": a, "b": b,
                     **asdict(found), "sizes": list(found.sizes)})
    schema = {k: results.schema[k] for k in keys} | SCHEMA
    return pl.DataFrame(rows, schema=schema)


def _check_pair(a: str, b: str) -> None:
    """Refuse one model as both sides of a pair: its gap with itself is 0 at every size."""
    if a == b:
        raise InputError(f"crossover: a={a!r} and b={b!r} are the same model: give two "
                         "models (a curve crosses another model's, never its own)")


def _as_written(metric: str) -> str:
    """`metric` as the results write it (glossary.canonical_metric: ranx's name); a name no
    tool has stays as given, for _check_name to refuse with the names the results hold."""
    try:
        return canonical_metric(metric)
    except InputError:
        return metric


def _check_name(column: str, name: str, results: pl.DataFrame) -> None:
    """Refuse a `column` value (a metric, a model) that no row of `results` holds, with the
    ones it does hold (and the one that differs only in case, if any)."""
    known = sorted(results[column].drop_nulls().unique().to_list())
    if name in known:
        return
    same = [k for k in known if k.lower() == name.lower()]
    hint = f" (did you mean {same[0]!r}?)" if same else ""
    raise InputError(f"crossover: no {column} {name!r} in the results{hint}; they hold "
                     f"{', '.join(map(repr, known)) or 'none'}")


def no_rows_reason(results: pl.DataFrame, metric: str) -> str:
    """Why `crossover_rows` gives no row for `results` and `metric`: a single model, or every
    scope measured at one pool size."""
    data = results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
    if data["model"].n_unique() < 2:
        return ("one model was evaluated on these pools: there is no pair of curves to "
                "cross")
    return ("every scope was measured at one pool size, and a curve against pool size needs "
            "two or more")


def draws_text(found: Crossover) -> str:
    """The draws-for-a-4x-interval cell: the number, "not reachable", or "-" (none: no
    crossing within the measured sizes, one draw, too few queries)."""
    if found.draws_4x is None:
        return "-"
    return "not reachable" if math.isinf(found.draws_4x) else f"{found.draws_4x:,.0f}"


def pair_text(found: Crossover) -> list[str]:
    """A report row's cells after the pair: sizes, fitted gaps x100, crossing, interval,
    draws for a 4x interval, outcome."""
    sizes = ", ".join(map(format_size, found.sizes)) or "-"
    gap = ["-" if g is None else f"{g * 100:+.1f}" for g in (found.gap_min, found.gap_max)]
    if found.low is not None:
        interval = _interval(found.low, found.high, found.sizes)
    elif found.crossing is None:
        interval = "-"
    elif found.queries < MIN_QUERIES:
        interval = too_few(found.queries)
    else:
        interval = "none (extrapolated)"
    return [sizes, *gap, "-" if found.crossing is None else _size(found.crossing, found.sizes),
            interval, draws_text(found), found.text]


REFERENCE = "bm25"  # the model every other is paired with when the corpus has it (the paper's)
HEADER = ["pools", "pair (a - b)", "sizes", "gap at smallest", "gap at largest",
          f"crossing ({UNIT})", f"95% interval ({UNIT})", f"draws for a {FACTOR:g}x interval",
          "outcome"]


def pairs(models: list[str]) -> list[tuple[str, str]]:
    """(REFERENCE, other) for each other model when REFERENCE is among `models`; else every
    pair, sorted by name."""
    names = sorted(set(models))
    if REFERENCE in names:
        return [(REFERENCE, m) for m in names if m != REFERENCE]
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def pool_least(corpus_dir: Path | None, pools: list[str]) -> dict[str, int]:
    """Per pool name, the least pool its queries allow: its manifest's `positives` (a pool
    holds every query's cited papers; `pools.build` refuses a smaller size). Pools without a
    readable manifest (or no corpus folder) are left out: LEAST stands for them."""
    if corpus_dir is None:
        return {}
    found = {}
    for name in sorted(set(pools)):
        path = pool_dir(corpus_dir, name) / MANIFEST
        if path.is_file():
            positives = read_json(path).get("counts", {}).get("positives")
            if isinstance(positives, int) and positives >= LEAST:
                found[name] = positives
    return found


def crossover_rows(results: pl.DataFrame, metric: str,
                   least: dict[str, int] | None = None) -> list[list[str]]:
    """The report's rows (HEADER): per scope measured at two or more pool sizes (levels and
    scopes sorted), each pair (`pairs` of the corpus's models) on `metric`; [] when every
    scope has one pool size or there is one model (`no_rows_reason`); values checked by
    `measured`, sizes by `_check_sizes` (under one candidate: refused). `least`: per pool
    name, the least pool its queries allow (its manifest's positives): the scope's greatest
    is the least pool the grid can build there, under which no crossing is given."""
    data = _whole_sizes(measured(results.filter(pl.col("metric") == metric), "crossover"))
    least = least or {}
    models = data["model"].unique().to_list()
    rows = []
    parts = data.partition_by("level", "scope", as_dict=True)
    for level, scope in sorted(parts):
        part = parts[(level, scope)]
        if part["size"].n_unique() < 2:
            continue
        field = part["field"].drop_nulls()
        where = "dataset" if level == "dataset" else (field[0] if field.len() else scope)
        pools = part["pool"].unique().to_list() if "pool" in part.columns else []
        floor = max([least[p] for p in pools if p in least] or [LEAST])
        for a, b in pairs(models):
            found = crossover(part, a, b, floor)
            rows.append([where, f"{a} - {b}", *pair_text(found)])
    return rows
