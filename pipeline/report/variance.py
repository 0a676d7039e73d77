"""The report's variance section (issue 42): where the variance of a mean comes from (queries
or pool draws), intervals of two models' difference over both, and the queries needed
(pipeline/evaluation/variance.py; docs/evaluation.md, Variance)."""

from __future__ import annotations

import polars as pl

from pipeline.evaluation.significance import MIN_QUERIES, too_few
from pipeline.evaluation.variance import components, differences, pooled, queries_needed
from pipeline.layout import format_size
from pipeline.report.tables import MISSING, main_metric, metric_key, metric_name

DELTAS = (0.01, 0.02, 0.05)  # the differences the queries-needed table is for (metric units)
DRAWS = (1, 3, 5, 10)  # its numbers of pool draws
ALPHA, POWER = 0.05, 0.8
UNREACHABLE = "not reachable"


def _pools(size: int, scope: str) -> str:
    return f"{scope}-{format_size(size)}"


def _share(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.0f}%"


def _se(row: dict) -> str:
    return too_few(row["queries"]) if row["se"] is None else f"{row['se'] * 100:.2f}"


def _bounds(low: float | None, high: float | None, queries: int) -> str:
    return too_few(queries) if low is None else f"[{low * 100:.1f}, {high * 100:.1f}]"


def _few_queries(found: pl.DataFrame) -> str:
    """The caption's note on pools with too few queries for a variance (MIN_QUERIES)."""
    if not (found["queries"] < MIN_QUERIES).any():
        return ""
    return (f"; n/a: fewer than {MIN_QUERIES} queries in every draw, so no variance, no "
            "interval and no queries needed")


def _identical(pooled_rows: pl.DataFrame) -> str:
    """The queries-needed caption's note on the models left out of the pooling as copies."""
    names = sorted({n for names in pooled_rows["identical"].to_list() for n in names})
    if not names:
        return ""
    return (f"; left out of the pooling: {', '.join(names)}, identical to another model on "
            "every query and draw (a zero difference would shrink the variance)")


def variance_tables(results: pl.DataFrame, corpus: str
                    ) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(name, caption, header, rows) of the section's tables from the full queries' rows, on
    the main metric (MAP when there is one: the metric the report's other tables mark; the
    API's `variance` gives every metric). None without a value."""
    scored = results.filter(pl.col("value").is_not_null())
    metric = main_metric(sorted(scored["metric"].unique().to_list(), key=metric_key))
    if metric is None:
        return []
    rows = scored.filter(pl.col("metric") == metric)
    name = metric_name(metric)
    found = components(rows)
    if found.is_empty():
        return []
    one_draw = (found["draws"] < 2).any()
    tables = [("variance", (
        f"{corpus}: where the variance of each model's mean {name} comes from, per pool size "
        "(two-way random-effects ANOVA over queries x pool draws, moment estimates truncated "
        "at 0): mean and its standard error x100, and the shares of that error's variance due "
        "to the query sample, the pool draw and their interaction"
        + ("; -: one draw, the draw's share cannot be estimated and SE is the queries' alone"
           if one_draw else "")
        + "; with 3 draws the draw component rests on 2 degrees of freedom (its 95% interval "
        "spans 0.27 to 39.5 times the estimate)" + _few_queries(found)),
        ["pools", "model", "queries x draws", "mean", "SE", "query", "draw", "query x draw"],
        [[_pools(r["size"], r["scope"]), r["model"], f"{r['queries']} x {r['draws']}",
          f"{r['mean'] * 100:.1f}", _se(r), _share(r["share_query"]),
          _share(r["share_draw"]), _share(r["share_interaction"])]
         for r in found.iter_rows(named=True)])]
    pairs = differences(rows)
    if pairs.height:
        tables.append(("variance-differences", (
            f"{corpus}: {name} difference a - b x100 per pool size and pair of models (paired on "
            "query and pool draw), its 95% interval over queries only (the paired t-test's, "
            "values averaged over draws) and over queries and draws (each variance part with "
            "its own t quantile: queries Q-1, draws R-1 degrees of freedom)"
            + ("; with one draw both are the queries'" if one_draw else "")
            + _few_queries(pairs)),
            ["pools", "a", "b", "difference", "95% queries only", "95% queries and draws"],
            [[_pools(r["size"], r["scope"]), r["a"], r["b"], f"{r['difference'] * 100:.1f}",
              _bounds(r["queries_low"], r["queries_high"], r["queries"]),
              _bounds(r["low"], r["high"], r["queries"])]
             for r in pairs.iter_rows(named=True)]))
    components_of = pooled(rows)
    largest = components_of.filter(pl.col("size") == pl.col("size").max().over("scope"))
    if largest.height:
        table = queries_needed(largest, DELTAS, DRAWS, ALPHA, POWER)
        cells = {(r["scope"], r["delta"], r["draws"]): r["queries"]
                 for r in table.iter_rows(named=True)}
        measured = {r["scope"]: r["draws"] for r in largest.iter_rows(named=True)}
        body = []
        for r in largest.sort("size", "scope").iter_rows(named=True):
            for delta in DELTAS:
                row = [_pools(r["size"], r["scope"]), f"{delta * 100:g}"]
                for draws in DRAWS:
                    key = (r["scope"], delta, draws)
                    row.append(MISSING if key not in cells else
                               UNREACHABLE if cells[key] is None else str(cells[key]))
                body.append(row)
        few = sorted(s for s, d in measured.items() if d < 2)
        tables.append(("queries-needed", (
            f"{corpus}: queries needed for a two-sided paired t-test (alpha {ALPHA}, power "
            f"{POWER}) to detect a {name} difference of delta x100 with R pool draws (topic set "
            "size, Sakai 2016; noncentral t, Q-1 degrees of freedom), from each scope's largest "
            "pool's variance components of a model difference, the mean over its pairs of models"
            f"; {UNREACHABLE}: the draws' variance alone keeps the power below {POWER}"
            + (f"; -: measured with one draw ({', '.join(few)}), the draw's variance is "
               "unknown, R=1 assumes none" if few else "") + _identical(largest)),
            ["pools", "delta", *[f"R={d}" for d in DRAWS]], body))
    return tables
