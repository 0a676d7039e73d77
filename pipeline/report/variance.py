"""The report's variance section (issue 42): where the variance of a mean comes from (queries
or pool draws), intervals of two models' difference over both, and the queries needed
(pipeline/evaluation/variance.py; docs/evaluation.md, Variance)."""

from __future__ import annotations

import polars as pl

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
        "spans 0.27 to 39.5 times the estimate)"),
        ["pools", "model", "queries x draws", "mean", "SE", "query", "draw", "query x draw"],
        [[_pools(r["size"], r["scope"]), r["model"], f"{r['queries']} x {r['draws']}",
          f"{r['mean'] * 100:.1f}", f"{r['se'] * 100:.2f}", _share(r["share_query"]),
          _share(r["share_draw"]), _share(r["share_interaction"])]
         for r in found.iter_rows(named=True)])]
    pairs = differences(rows)
    if pairs.height:
        tables.append(("variance-differences", (
            f"{corpus}: {name} difference a - b x100 per pool size and pair of models (paired on "
            "query and pool draw), its 95% interval over queries only (the paired t-test's, "
            "values averaged over draws) and over queries and draws (each variance part with "
            "its own t quantile: queries Q-1, draws R-1 degrees of freedom)"
            + ("; with one draw both are the queries'" if one_draw else "")),
            ["pools", "a", "b", "difference", "95% queries only", "95% queries and draws"],
            [[_pools(r["size"], r["scope"]), r["a"], r["b"], f"{r['difference'] * 100:.1f}",
              f"[{r['queries_low'] * 100:.1f}, {r['queries_high'] * 100:.1f}]",
              f"[{r['low'] * 100:.1f}, {r['high'] * 100:.1f}]"]
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
               "unknown, R=1 assumes none" if few else "")),
            ["pools", "delta", *[f"R={d}" for d in DRAWS]], body))
    return tables
