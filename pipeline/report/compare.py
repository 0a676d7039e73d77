"""Comparing runs without writing anything (`pipeline.compare`, docs/api.md), as ranx's
`compare` does, with the statistics `make report` shows: each run scored as `pipeline.score`
scores it, then per metric the report's paired test over the same queries
(significance.compare: the t-test or Fisher's randomization test, Holm-Bonferroni over the
pairs), its 95% bootstrap intervals (significance.intervals) and its marks (the best mean in
bold, a run significantly below it with †: tables.column_marks).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core.annotations import Alpha, Metrics, NamedRuns, Qrels
from pipeline.core.errors import InputError
from pipeline.evaluation.score import (
    as_qrels,
    as_run,
    query_values,
    score_metrics,
    under_asked_names,
)
from pipeline.evaluation.significance import compare as paired_tests
from pipeline.evaluation.significance import intervals, significance_test
from pipeline.report.tables import (
    column_marks,
    interval_cell,
    latex_table,
    markdown_table,
    marked,
    metric_name,
    p_cell,
)

CORRECTIONS = ("holm", "none")  # Holm-Bonferroni over a metric's pairs (the report's), or none
TEST_TITLES = {"t-test": "t-test", "fisher": "randomization"}  # as the report heads them
PAIR_SCHEMA = {"metric": pl.String, "a": pl.String, "b": pl.String, "mean_a": pl.Float64,
               "mean_b": pl.Float64, "queries": pl.Int64, "p": pl.Float64,
               "p_adjusted": pl.Float64, "significant": pl.Boolean}
MEAN_SCHEMA = {"model": pl.String, "metric": pl.String, "queries": pl.Int64,
               "mean": pl.Float64, "low": pl.Float64, "high": pl.Float64, "mark": pl.String}


class Comparison:
    """What `compare` found, held in memory (ranx's Report): `.frame()` each run's mean,
    interval and mark per metric; `.pairs` each pair's test; `.to_markdown()`,
    `.to_latex()` and `str()` the table."""

    def __init__(self, means: pl.DataFrame, pairs: pl.DataFrame, metrics: tuple[str, ...],
                 test: str, correction: str, alpha: float):
        self.means, self.pairs, self.metrics = means, pairs, metrics
        self.test, self.correction, self.alpha = test, correction, alpha

    def frame(self) -> pl.DataFrame:
        """One row per run and metric: model, metric, queries, mean, low and high (its 95%
        bootstrap interval), mark ("best", "worse" or "")."""
        return self.means

    def _models(self) -> list[str]:
        return list(dict.fromkeys(self.means["model"].to_list()))

    def _table(self) -> tuple[list[str], list[list[str]]]:
        """The runs' table: a row per run, a cell per metric (mean x100, marked)."""
        header = ["model", *(metric_name(m) for m in self.metrics)]
        cells = {(r["model"], r["metric"]): marked(f"{r['mean'] * 100:.1f}", r["mark"])
                 for r in self.means.iter_rows(named=True)}
        return header, [[model, *(cells[(model, m)] for m in self.metrics)]
                        for model in self._models()]

    def _caption(self) -> str:
        correction = (", Holm-Bonferroni over the pairs of a metric"
                      if self.correction == "holm" else "")
        test = "t-test" if self.test == "t-test" else f"{TEST_TITLES[self.test]} test"
        return (f"Mean over queries (x100); bold: the best run, †: significantly below it "
                f"(paired {test}{correction}, p < {self.alpha:g})")

    def to_markdown(self) -> str:
        """The runs' table, every pair's test, and the 95% bootstrap intervals, in Markdown."""
        header, rows = self._table()
        p_title = f"{TEST_TITLES[self.test]} p" + (" (Holm)" if self.correction == "holm"
                                                   else "")
        pairs = [[metric_name(r["metric"]), r["a"], r["b"], f"{r['mean_a'] * 100:.1f}",
                  f"{r['mean_b'] * 100:.1f}",
                  p_cell(r["p"], r["p_adjusted"] if self.correction == "holm" else None,
                         r["queries"])] for r in self.pairs.iter_rows(named=True)]
        bounds = [[metric_name(r["metric"]), r["model"], f"{r['mean'] * 100:.1f}",
                   interval_cell(r["low"], r["high"], r["queries"], r["mean"])]
                  for r in self.means.sort(pl.col("metric").replace_strict(
                      {m: i for i, m in enumerate(self.metrics)}), maintain_order=True)
                  .iter_rows(named=True)]
        return (f"{self._caption()}\n\n{markdown_table(header, rows)}\n"
                + markdown_table(["metric", "a", "b", "mean a", "mean b", p_title], pairs)
                + "\n95% bootstrap intervals of the mean over queries (x100)\n\n"
                + markdown_table(["metric", "model", "mean", "95% interval"], bounds))

    def to_latex(self) -> str:
        """The runs' table as a LaTeX table (booktabs), as the report writes its tables."""
        header, rows = self._table()
        return latex_table(header, rows, self._caption())

    def __str__(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        return (f"Comparison(models={self._models()!r}, metrics={list(self.metrics)!r}, "
                f"test={self.test!r}, correction={self.correction!r}, alpha={self.alpha!r})")


def _checked(correction: Any) -> None:
    """compare's correction, which no annotation says (its other arguments: at its door)."""
    if correction not in CORRECTIONS:
        raise InputError(f"correction={correction!r}: use one of {', '.join(CORRECTIONS)}")


def compare(qrels: Qrels, runs: NamedRuns, metrics: Metrics, *,
            test: str = "t-test", correction: str = "holm", alpha: Alpha = 0.05
            ) -> Comparison:
    """Every pair of `runs` (name -> run, each in a form `pipeline.score` takes; ranx's order,
    the qrels first: a call in the old order is refused, `check_order`) compared on
    each metric over the queries of `qrels`, as `make report` compares models: `test` the
    paired t-test ("t-test", "t", "student") or Fisher's randomization test ("fisher",
    "randomization"), `correction` "holm" (Holm-Bonferroni over a metric's pairs) or "none",
    significant below `alpha`. Writes nothing; returns a Comparison."""
    _checked(correction)
    test = significance_test(test)
    asked = score_metrics(metrics)
    names = tuple(asked)  # each metric under the name it was asked by
    judged = as_qrels(qrels)
    values = {name: under_asked_names(query_values(
        as_run(run, f"runs[{name!r}]"), judged, tuple(dict.fromkeys(asked.values())),
        f"runs[{name!r}]"), asked) for name, run in runs.items()}
    means, pairs = [], []
    for metric in names:
        per_query = pl.concat([v.select(model=pl.lit(name), query="query", value=metric)
                               for name, v in values.items()]).sort("model", "query")
        table = paired_tests(per_query, test, alpha)
        adjusted = table["p_holm"] if correction == "holm" else table["p"]
        table = table.with_columns(p_adjusted=adjusted, significant=adjusted < alpha)
        marks = column_marks(per_query, table)
        pairs.append(table.select(pl.lit(metric).alias("metric"), *list(PAIR_SCHEMA)[1:]))
        means.append(intervals(per_query).select(
            "model", metric=pl.lit(metric), queries="queries", mean="mean", low="low",
            high="high", mark=pl.col("model").replace_strict(marks, default="")))
    order = {name: i for i, name in enumerate(runs)}  # the runs in the order given
    frame = pl.concat([pl.DataFrame(schema=MEAN_SCHEMA), *means]).sort(
        pl.col("model").replace_strict(order), maintain_order=True)
    return Comparison(frame, pl.concat([pl.DataFrame(schema=PAIR_SCHEMA), *pairs]), names,
                      test, correction, float(alpha))
