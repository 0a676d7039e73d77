"""Each model's mean and each pair's difference over the pools' per-query values (inferred.py's
VALUE_SCHEMA: from the citations alone and with the judged sample), with the report's
queries-and-draws interval, and what the intervals support about a pair's order
(docs/evaluation.md, "Beyond citations: judged samples").

- For each pair of models, the mean difference with the citations alone and with the sample,
  each with the queries-and-draws interval of the report (evaluation/variance.py:
  half_widths over the Q x R matrix of per-query values), and the shift between the two
  (`differences`); each model's mean likewise (`means`). Each interval stays inside its
  range (`bounded_interval`: a mean's on the logit scale, a difference's clipped) and is
  never a point (every value the same: Clopper-Pearson's bound on the share that differs);
  a pair is "reversed" only where the interval with the sample excludes 0 on the other side
  (`verdict`).

The cells are sorted (pool size, scope, metric; models by name), so the rows are the same
whatever the order of the values.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import polars as pl

from pipeline.evaluation.significance import agreeing_interval, logit_interval
from pipeline.evaluation.variance import LEVEL, Interval, decompose, half_widths
from pipeline.layout import parse_pool_name

MEAN_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String, "model": pl.String,
               "queries": pl.Int64, "draws": pl.Int64, "cited": pl.Float64,
               "cited_low": pl.Float64, "cited_high": pl.Float64, "inferred": pl.Float64,
               "low": pl.Float64, "high": pl.Float64, "cited_agree": pl.Boolean,
               "agree": pl.Boolean}
PAIR_SCHEMA = {"size": pl.Int64, "scope": pl.String, "metric": pl.String, "a": pl.String,
               "b": pl.String, "queries": pl.Int64, "draws": pl.Int64, "cited": pl.Float64,
               "cited_low": pl.Float64, "cited_high": pl.Float64, "inferred": pl.Float64,
               "low": pl.Float64, "high": pl.Float64, "shift": pl.Float64,
               "shift_low": pl.Float64, "shift_high": pl.Float64, "reversed": pl.Boolean,
               "verdict": pl.String, "cited_agree": pl.Boolean, "agree": pl.Boolean,
               "shift_agree": pl.Boolean}
# the range of a metric (every one estimated here lies in [0, 1]), of a difference of two, and
# of a difference of two differences (the shift)
METRIC_RANGE, DIFFERENCE_RANGE, SHIFT_RANGE = (0.0, 1.0), (-1.0, 1.0), (-2.0, 2.0)
# the queries at which benchmarks/bounded_intervals.py simulated the means' interval (the
# captions say where a row lies outside): 25 to 1,000, with 1 and 3 draws
SIMULATED_QUERIES = (25, 1000)


def _cells(values: pl.DataFrame) -> list[tuple[tuple[int, str, str], pl.DataFrame]]:
    """`values` (VALUE_SCHEMA, several pools) by pool size, scope and metric, sorted; each
    part's rows model, query, repeat, cited, inferred."""
    names = values["pool"].unique().sort()
    parsed = pl.DataFrame([{"pool": name, **parse_pool_name(name)._asdict()} for name in names],
                          schema={"pool": pl.String, "scope": pl.String, "size": pl.Int64,
                                  "repeat": pl.Int64, "seed": pl.Int64, "split": pl.String,
                                  "exclusion": pl.String})
    rows = values.join(parsed, on="pool")
    parts = rows.partition_by("size", "scope", "metric", as_dict=True)
    return [(key, parts[key].select("model", "query", "repeat", "cited", "inferred"))
            for key in sorted(parts)]


def _matrices(cell: pl.DataFrame, models: list[str]) -> tuple[dict[str, np.ndarray], ...]:
    """Each model's Q x R matrices (cited, inferred) over the queries every model of `models`
    has in every repeat of the cell, rows by query, columns by repeat."""
    repeats = sorted(cell["repeat"].unique().to_list())
    mine = cell.filter(pl.col("model").is_in(models))
    complete = (mine.group_by("query").agg(pl.len())
                .filter(pl.col("len") == len(models) * len(repeats))["query"].sort())
    out: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] = ({}, {})
    for model in models:
        rows = mine.filter(pl.col("model") == model, pl.col("query").is_in(complete.implode()))
        for kind, found in zip(("cited", "inferred"), out, strict=True):
            wide = (rows.pivot("repeat", index="query", values=kind)
                    .select("query", *map(str, repeats)).sort("query"))
            found[model] = wide.drop("query").to_numpy().astype(np.float64)
    return out


def _bounds(low: float, high: float) -> tuple[float | None, float | None]:
    return (None if math.isnan(low) else low), (None if math.isnan(high) else high)


def _agree(y: np.ndarray) -> bool:
    """Whether every value of `y` is the same (up to float rounding)."""
    return bool(y.size) and float(np.ptp(y)) <= 1e-12 * max(1.0, float(np.abs(y).max()))


def bounded_interval(y: np.ndarray, level: float = LEVEL,
                     bounds: tuple[float, float] = METRIC_RANGE, logit: bool = True
                     ) -> tuple[Interval, bool]:
    """The mean of a Q x R matrix (rows queries, columns draws) with the report's
    queries-and-draws interval (`variance.half_widths`; the queries' t with one draw) kept
    inside `bounds`, the range the mean's truth lies in, and never a point; and whether
    every value agreed:

    - every value the same (all 1, all 0): `agreeing_interval`, the share of queries that
      differ bounded by Clopper-Pearson's one-sided `level` bound for 0 of Q (a one-sided
      bound at 0 or 1: [0.887, 1] for 25 queries all at 1);
    - else mean ± half on the logit scale of `bounds` (`logit_interval`: the means, level
      simulated in benchmarks/bounded_intervals.py), or (logit False: differences, whose
      sign the verdicts read) mean ± half clipped to `bounds`, which keeps its level and
      whether it holds 0;
    - half 0 while the values differ (the draws' mean square 0 and the queries' at most the
      interaction's): the half-width again with MS_R raised to MS_E, which it exceeds in
      expectation (E MS_R = sigma_e^2 + Q sigma_draw^2), and MS_Q untruncated.

    Fewer than 2 queries: NaN (no spread over queries to read)."""
    y = np.asarray(y, dtype=np.float64)
    c = decompose(y)
    if c.queries < 2:
        return Interval(c.mean, math.nan, math.nan, math.nan, math.nan), False
    if _agree(y):
        low, high = agreeing_interval(c.mean, c.queries, level, bounds)
        return Interval(c.mean, low, high, low, high), True
    halves = [float(h) for h in half_widths(c.ms_query, c.ms_draw, c.ms_resid, c.queries,
                                            c.draws, level)]
    if not halves[1] > 0:
        halves[1] = float(half_widths(c.ms_query, max(c.ms_draw, c.ms_resid), 0.0, c.queries,
                                      c.draws, level)[1])
    if not halves[0] > 0:
        halves[0] = halves[1]
    low, high = bounds
    found = [logit_interval(c.mean, half, bounds) if logit else
             (max(c.mean - half, low), min(c.mean + half, high)) for half in halves]
    return Interval(c.mean, *found[0], *found[1]), False


def means(values: pl.DataFrame, level: float = LEVEL) -> pl.DataFrame:
    """Each model's mean per pool size, scope and metric (MEAN_SCHEMA), from the citations
    alone and inferred, each with its queries-and-draws interval inside [0, 1]
    (`bounded_interval`: on the logit scale; where every value agrees, the one-sided bound of
    `agreeing_interval`, `cited_agree` and `agree` true); a model's queries: those it has in
    every repeat."""
    out = []
    for (size, scope, metric), cell in _cells(values):
        for model in sorted(cell["model"].unique().to_list()):
            cited, inferred = (m[model] for m in _matrices(cell, [model]))
            if cited.size == 0:
                continue
            row: dict[str, Any] = {"size": size, "scope": scope, "metric": metric,
                                   "model": model, "queries": cited.shape[0],
                                   "draws": cited.shape[1]}
            for kind, y in (("cited", cited), ("inferred", inferred)):
                interval, agree = bounded_interval(y, level, METRIC_RANGE)
                low, high = _bounds(interval.low, interval.high)
                prefix = "cited_" if kind == "cited" else ""
                row |= {kind: interval.difference, f"{prefix}low": low, f"{prefix}high": high,
                        f"{prefix}agree": agree}
            out.append(row)
    return pl.DataFrame(out, schema=MEAN_SCHEMA)


def differences(values: pl.DataFrame, level: float = LEVEL) -> pl.DataFrame:
    """Every pair of models (by name, a before b) per pool size, scope and metric
    (PAIR_SCHEMA): the mean difference a - b from the citations alone (`cited`) and with the
    judged sample (`inferred`), each with the queries-and-draws interval of the report, the
    shift between them (inferred - cited, paired on query and draw) with its interval, each
    inside its range (a difference in [-1, 1], the shift in [-2, 2]: `bounded_interval`,
    clipped; where every difference agrees, `agreeing_interval`, `*_agree` true);
    `reversed` where the interval with the sample excludes 0 on the other side of the
    citations' order, and `verdict` in words (`verdict`)."""
    out = []
    for (size, scope, metric), cell in _cells(values):
        models = sorted(cell["model"].unique().to_list())
        for a, b in itertools.combinations(models, 2):
            cited, inferred = _matrices(cell, [a, b])
            if cited[a].size == 0:
                continue
            gap_before, gap_after = cited[a] - cited[b], inferred[a] - inferred[b]
            (before, was_agree), (after, agree), (shift, shift_agree) = (
                bounded_interval(y, level, bounds, logit=False) for y, bounds in (
                    (gap_before, DIFFERENCE_RANGE), (gap_after, DIFFERENCE_RANGE),
                    (gap_after - gap_before, SHIFT_RANGE)))
            out.append({"size": size, "scope": scope, "metric": metric, "a": a, "b": b,
                        "queries": cited[a].shape[0], "draws": cited[a].shape[1],
                        "cited": before.difference,
                        **dict(zip(("cited_low", "cited_high"),
                                   _bounds(before.low, before.high), strict=True)),
                        "inferred": after.difference,
                        **dict(zip(("low", "high"), _bounds(after.low, after.high),
                                   strict=True)),
                        "shift": shift.difference,
                        **dict(zip(("shift_low", "shift_high"),
                                   _bounds(shift.low, shift.high), strict=True)),
                        "reversed": reversed_order(before, after),
                        "verdict": verdict(before, after, a, b), "cited_agree": was_agree,
                        "agree": agree, "shift_agree": shift_agree})
    return pl.DataFrame(out, schema=PAIR_SCHEMA)


def _side(low: float, high: float) -> int:
    """1 where an interval lies above 0, -1 below, 0 where it holds 0 (or is undefined)."""
    return 1 if low > 0 else -1 if high < 0 else 0


def _sign(difference: float) -> str:
    return ">" if difference > 0 else "<" if difference < 0 else "="


def _direction(difference: float) -> int:
    return 1 if difference > 0 else -1 if difference < 0 else 0


def reversed_order(before: Any, after: Any) -> bool:
    """Whether the judged sample reverses a pair's order: the interval with the sample
    excludes 0 on the other side of the citations' difference (a point estimate that only
    changes sign, its interval holding 0, is not a reversal: `verdict` says not
    determined)."""
    was = _direction(before.difference)
    return was != 0 and _side(after.low, after.high) == -was


def verdict(before: Any, after: Any, a: str, b: str) -> str:
    """What the intervals support about a pair's order with the judged sample, in words:
    "reversed" only where the interval with the sample excludes 0 on the other side of the
    citations' order (`reversed_order`), "kept" only where it excludes 0 on the same side,
    "ordered" where the citations tie the pair and it excludes 0, else "not determined" (the
    interval with the sample holds 0, whatever the point estimates do); then whether the
    citations' own interval excluded 0, and the point estimates' order."""
    was, now = _side(before.low, before.high), _side(after.low, after.high)
    order = (f"{a} {_sign(before.difference)} {b} -> {a} {_sign(after.difference)} {b}")
    old = _direction(before.difference)
    if now != 0 and old == -now:
        what = ("reversed, significantly" if was != 0 else
                "reversed, the new order significant (the citations' was not)")
    elif now != 0 and old == now:
        what = "kept, significant both ways" if was != 0 else "kept, now significant"
    elif now != 0:
        what = "ordered by the sample, significant (the citations tie the pair)"
    else:
        what = ("not determined: the interval with the sample holds 0"
                + (" (the citations' excludes it)" if was != 0 else
                   ", as the citations' does"))
    return f"{what} ({order})"
