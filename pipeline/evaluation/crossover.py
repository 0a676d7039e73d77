"""Where two models' curves cross: the pool size at which one overtakes the other (issue 42).

For one scope (the dataset-level pools, or one field's), one metric and two models A and B
measured at two or more pool sizes: per size, each model's mean over the queries and the
repeats (pool draws); the gap D(s) = A(s) - B(s) fitted as c + d*log(s) by least squares over
the measured sizes (each model's metric a line in log size); the crossing log s* = -c/d.

Its 95% interval is a percentile bootstrap over queries AND draws: a resample draws the query
ids with replacement (one draw for every size and both models: the queries of a seed are the
same in every pool, MDCR §3), and each size's repeats with replacement, independently (a
repeat is one pool draw that both models searched, so the two models keep their pairing).
The values reach the generator sorted by query id, then size and repeat, and the generator is
seeded: the same numbers whatever the rows' order (as pipeline/evaluation/significance.py).

A resample whose slope is 0 or of the other sign than the fit's has no crossing on the fit's
side: it counts as a crossing at infinity on the side the fitted crossing moves to as the
slope shrinks, so the interval can be open ("no crossing in N of 1,000 resamples").

With fewer than MIN_QUERIES queries shared by every pool there is no interval (a resample of
one query is that query: the queries' part of the variance is unseen), said in the outcome;
with one draw per size the interval is over queries only, said too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.evaluation.significance import MIN_QUERIES, ordered, too_few
from pipeline.layout import format_size

RESAMPLES = 1000
CHUNK = 250  # resamples drawn and summed at a time: bounded memory (queries x CHUNK weights)
LEVEL = 0.95
FAR = 1000  # a crossing more than this many times outside the measured sizes: shown as such
FLAT = 1e-12  # a slope (gap per unit of log size) at or below this: parallel lines
# the keys that split a results table into sets of shared queries (one scope of one seed)
SPLIT_KEYS = ("corpus", "split", "seed", "exclusion", "negatives", "level", "scope")


@dataclass(frozen=True)
class Crossover:
    """The fit and its interval for one scope, metric and pair (sizes in candidates)."""

    sizes: tuple[int, ...]  # the measured sizes both models have
    queries: int
    repeats: int  # the fewest repeats of a size
    gap_min: float | None  # the fitted A - B at the smallest and the largest size
    gap_max: float | None
    slope: float | None  # d: the gap's change per unit of log size
    crossing: float | None  # s*, in candidates
    low: float | None  # its 95% interval (inf: open on that side)
    high: float | None
    resamples: int
    no_crossing: int  # resamples without a crossing on the fit's side
    outcome: str  # crosses, beyond, below, parallel, degenerate
    text: str  # the outcome said in words


def _size(value: float, sizes: tuple[int, ...] | list[int], bound: bool = False) -> str:
    """A crossing size as the report writes sizes (20k, 2M), to 3 significant digits; beyond
    FAR times the measured range, only that (a line followed so far says nothing more); an
    interval's open end (`bound`) as inf or 0."""
    if bound and math.isinf(value):
        return "inf" if value > 0 else "0"
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
    return ("" if low is None or high is None
            else f"[{_size(low, sizes, True)}, {_size(high, sizes, True)}]")


def _degenerate(sizes: tuple[int, ...], queries: int, repeats: int, why: str,
                resamples: int) -> Crossover:
    """No fit: `why` says why."""
    return Crossover(sizes, queries, repeats, None, None, None, None, None, None, resamples, 0,
                     "degenerate", why)


def _matrix(values: pl.DataFrame, a: str, b: str
            ) -> tuple[np.ndarray, list[int], list[list[int]], int, str]:
    """The paired differences A - B as a (query x (size, repeat)) matrix, rows by query id,
    columns by size then repeat, over the queries every (size, repeat, model) has; the sizes,
    each size's repeats, the number of queries, and a note of what was left out."""
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
    data = data.join(cells, on=["size", "repeat"])
    wanted = cells.height * 2
    shared = (data.group_by("query").agg(pl.len().alias("cells"))
              .filter(pl.col("cells") == wanted)["query"])
    if data["query"].n_unique() > shared.len():
        notes.append(f"{data['query'].n_unique() - shared.len()} queries not in every pool")
    wide = (data.filter(pl.col("query").is_in(shared.implode()))
            .pivot("model", index=["query", "size", "repeat"], values="value")
            .sort("query", "size", "repeat"))
    keys = cells.sort("size", "repeat")
    repeats = [keys.filter(pl.col("size") == s)["repeat"].to_list() for s in sizes]
    sizes = [s for s, r in zip(sizes, repeats, strict=True) if r]
    repeats = [r for r in repeats if r]
    columns = sum(len(r) for r in repeats)
    diff = (wide[a] - wide[b]).to_numpy() if wide.height else np.zeros(0)
    return (diff.reshape(-1, columns) if columns else np.zeros((0, 0)), sizes, repeats,
            shared.len(), "; ".join(notes))


def _fit(gaps: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of gaps (..., size) on x = log size: the mean gap and the slope."""
    centred = x - x.mean()
    slope = (gaps * centred).sum(axis=-1) / (centred**2).sum()
    return gaps.mean(axis=-1), slope


def crossover(values: pl.DataFrame, a: str, b: str, resamples: int = RESAMPLES, seed: int = 0,
              draws: bool = True) -> Crossover:
    """The crossing of A's and B's curves from `values` (size, repeat, model, query, value: one
    scope and metric). `draws=False` resamples the queries only (what the significance
    section's intervals do), to see what the draws add."""
    diff, sizes, repeats, queries, note = _matrix(values, a, b)
    fewest = min((len(r) for r in repeats), default=0)
    suffix = f" ({note})" if note else ""
    if len(sizes) < 2 or queries == 0:
        why = ("no queries that both models answer in every pool" if sizes and not queries
               else f"{len(sizes)} pool size{'s' if len(sizes) != 1 else ''} measured with both "
               "models: no line to fit")
        return _degenerate(tuple(sizes), queries, fewest, why + suffix, resamples)
    x = np.log(np.asarray(sizes, dtype=np.float64))
    bounds = np.cumsum([0, *map(len, repeats)])
    per_size = np.stack([diff[:, lo:hi].mean(axis=1) for lo, hi in
                         zip(bounds[:-1], bounds[1:], strict=True)], axis=1).mean(axis=0)
    mean, slope = _fit(per_size, x)
    lo_gap, hi_gap = (float(mean + slope * (v - x.mean())) for v in (x[0], x[-1]))
    measured = f"[{format_size(sizes[0])}, {format_size(sizes[-1])}]"
    if abs(slope) <= FLAT:
        text = ("tied at every measured size" if abs(mean) <= FLAT else
                f"no crossing in the measured range {measured}: parallel lines")
        return Crossover(tuple(sizes), queries, fewest, lo_gap, hi_gap, float(slope), None,
                         None, None, resamples, 0, "parallel", text + suffix)
    log_cross = float(x.mean() - mean / slope)
    with np.errstate(over="ignore"):
        crossing = float(np.exp(log_cross))  # inf for a slope of nearly 0
    low, high, none = (None, None, 0) if queries < MIN_QUERIES else _crossing_interval(
        diff, x, bounds, float(mean), float(slope), resamples, seed, draws)
    where = _size(crossing, sizes)
    if lo_gap * hi_gap <= 0:
        outcome, text = "crosses", f"crosses at {where} within the measured range {measured}"
        if low is not None and high is not None and (low < sizes[0] or high > sizes[-1]):
            text += (f"; its interval {_interval(low, high, tuple(sizes))} runs past the "
                     "measured range")
    else:
        closing = abs(hi_gap) < abs(lo_gap)
        trend = "gap closing" if closing else "gap widening"
        outcome = "beyond" if log_cross > x[-1] else "below"
        place = ("beyond the largest measured pool" if outcome == "beyond"
                 else "below the smallest measured pool")
        text = (f"no crossing in the measured range {measured} ({trend}); extrapolated: "
                f"{where}, {place}")
    if none:
        text += (f"; {none} of {resamples} resamples ({none / resamples:.0%}) have no crossing "
                 "on the fit's side")
    if queries < MIN_QUERIES:
        text += (f"; no interval from {queries} query (a bootstrap over queries needs "
                 f"{MIN_QUERIES} or more)")
    elif draws and fewest < 2:
        text += "; one pool draw per size: the interval is over queries only"
    return Crossover(tuple(sizes), queries, fewest, lo_gap, hi_gap, float(slope), crossing,
                     low, high, resamples, none, outcome, text + suffix)


def _crossing_interval(diff: np.ndarray, x: np.ndarray, bounds: np.ndarray, mean: float,
                       slope: float, resamples: int, seed: int, draws: bool
                       ) -> tuple[float, float, int]:
    """The crossing's LEVEL percentile interval over `_bootstrap`'s resamples (a resample
    without a crossing on the fit's side at infinity on the side it moves to), and how many
    resamples have none."""
    gap_mean, gap_slope = _bootstrap(diff, x, bounds, resamples, seed, draws)
    crosses = np.sign(gap_slope) == np.sign(slope)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        logs = np.where(crosses, x.mean() - gap_mean / np.where(crosses, gap_slope, 1.0),
                        np.where(-gap_mean * np.sign(slope) > 0, np.inf, -np.inf))
        low, high = (float(v) for v in np.exp(np.quantile(
            logs, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf")))
    return low, high, int((~crosses).sum())


def _counts(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """n resamples of k positions drawn with replacement, as counts per position (n x k,
    float): the multinomial weights of a bootstrap, drawn as indices (much faster)."""
    drawn = rng.integers(0, k, size=(n, k)) + np.arange(n)[:, None] * k
    return np.bincount(drawn.ravel(), minlength=n * k).reshape(n, k).astype(np.float64)


def _bootstrap(diff: np.ndarray, x: np.ndarray, bounds: np.ndarray, resamples: int,
               seed: int, draws: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's mean gap and slope: query weights (`_counts`: one draw for every
    column) times the query x (size, repeat) matrix, then each size's repeats reweighted by a
    draw of its own; CHUNK resamples at a time."""
    rng = np.random.default_rng(seed)
    queries, columns = diff.shape
    means, slopes = [], []
    for start in range(0, resamples, CHUNK):
        n = min(CHUNK, resamples - start)
        column_means = _counts(rng, n, queries) @ diff / queries  # (n, columns)
        gaps = np.empty((n, len(x)))
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            r = hi - lo
            draw = _counts(rng, n, r) if draws else np.ones((n, r))
            gaps[:, i] = (column_means[:, lo:hi] * draw).sum(axis=1) / r
        mean, slope = _fit(gaps, x)
        means.append(mean)
        slopes.append(slope)
    return np.concatenate(means), np.concatenate(slopes)


SCHEMA = {"metric": pl.String, "a": pl.String, "b": pl.String, "sizes": pl.List(pl.Int64),
          "queries": pl.Int64, "repeats": pl.Int64, "gap_min": pl.Float64,
          "gap_max": pl.Float64, "slope": pl.Float64, "crossing": pl.Float64,
          "low": pl.Float64, "high": pl.Float64, "resamples": pl.Int64,
          "no_crossing": pl.Int64, "outcome": pl.String, "text": pl.String}


def crossovers(results: pl.DataFrame, a: str, b: str, metric: str = "map",
               resamples: int = RESAMPLES, seed: int = 0) -> pl.DataFrame:
    """`crossover` of A and B on `metric` for every set of shared queries of `results` (rows
    of runs/results.parquet: split by SPLIT_KEYS, those it has), in sorted order: the keys,
    then SCHEMA's columns. A metric or model that `results` does not hold is refused (names
    are matched exactly, as the results write them), listing those it holds."""
    _check_name("metric", metric, results)
    for model in (a, b):
        _check_name("model", model, results)
    keys = [k for k in SPLIT_KEYS if k in results.columns]
    data = results.filter(pl.col("metric") == metric, pl.col("model").is_in([a, b]))
    rows = []
    parts = data.partition_by(keys, as_dict=True) if keys else {(): data}
    for key in sorted(parts, key=lambda k: tuple((v is None, "" if v is None else v)
                                                 for v in k)):
        found = crossover(parts[key], a, b, resamples, seed)
        rows.append({**dict(zip(keys, key, strict=True)), "metric": metric, "a": a, "b": b,
                     **asdict(found), "sizes": list(found.sizes)})
    schema = {k: results.schema[k] for k in keys} | SCHEMA
    return pl.DataFrame(rows, schema=schema)


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


def pair_text(found: Crossover) -> list[str]:
    """A report row's cells after the pair: sizes, fitted gaps x100, crossing, interval,
    outcome."""
    sizes = ", ".join(map(format_size, found.sizes)) or "-"
    gap = ["-" if g is None else f"{g * 100:+.1f}" for g in (found.gap_min, found.gap_max)]
    interval = _interval(found.low, found.high, found.sizes) or (
        too_few(found.queries) if found.crossing is not None else "-")
    return [sizes, *gap, "-" if found.crossing is None else _size(found.crossing, found.sizes),
            interval, found.text]


REFERENCE = "bm25"  # the model every other is paired with when the corpus has it (the paper's)
HEADER = ["pools", "pair (a - b)", "sizes", "gap at smallest", "gap at largest", "crossing",
          "95% interval", "outcome"]


def pairs(models: list[str]) -> list[tuple[str, str]]:
    """(REFERENCE, other) for each other model when REFERENCE is among `models`; else every
    pair, sorted by name."""
    names = sorted(set(models))
    if REFERENCE in names:
        return [(REFERENCE, m) for m in names if m != REFERENCE]
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def crossover_rows(results: pl.DataFrame, metric: str, resamples: int = RESAMPLES,
                   seed: int = 0) -> list[list[str]]:
    """The report's rows (HEADER): per scope measured at two or more pool sizes (levels and
    scopes sorted), each pair (`pairs` of the corpus's models) on `metric`; [] when every
    scope has one pool size or there is one model (`no_rows_reason`)."""
    data = results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
    models = data["model"].unique().to_list()
    rows = []
    parts = data.partition_by("level", "scope", as_dict=True)
    for level, scope in sorted(parts):
        part = parts[(level, scope)]
        if part["size"].n_unique() < 2:
            continue
        field = part["field"].drop_nulls()
        where = "dataset" if level == "dataset" else (field[0] if field.len() else scope)
        for a, b in pairs(models):
            found = crossover(part, a, b, resamples, seed)
            rows.append([where, f"{a} - {b}", *pair_text(found)])
    return rows
