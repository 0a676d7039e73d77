"""Paired significance between models on the same queries, Holm-Bonferroni across the pairs,
and bootstrap confidence intervals over queries (issue 8).

Per-query values come from `runs/results.parquet`; the queries of a seed are the same in every
repeat and pool size (MDCR §3), so a query's value is first averaged over the repeats, then
models are compared query by query:
- Student's paired t-test (scipy's `ttest_rel`, two-sided: what ranx's `compare` runs);
- Fisher's randomization test: the paired differences' signs flipped at random (10,000
  permutations, seeded, so a report is reproducible), two-sided, p = (hits + 1) / (n + 1);
- Holm-Bonferroni over all pairs of a comparison (one table cell: a pool size or field);
- a 95% percentile bootstrap interval of each model's mean over queries (scipy's `bootstrap`,
  1,000 resamples, seeded).

Seeded is not enough for a reproducible number: a sign flip or a resample is drawn per
position, so the values must reach the generator in one order. Here they always come sorted by
query id, and two models' values are paired by joining on the query id (`paired`), never by
their positions, so the rows' order in `runs/results.parquet` and polars' number of threads
change no p-value and no interval. Means are summed over sorted values (`ordered`): a plain
group_by mean adds per-thread partial sums, whose last bits vary with the number of threads.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import polars as pl

from pipeline.core.errors import InputError

log = logging.getLogger(__name__)

MIN_QUERIES = 2  # a paired test or an interval over queries needs two: one has no spread
TESTS = ("t-test", "fisher")  # compare's tests: Student's paired t-test, Fisher's randomization
# the names each test goes by elsewhere (ranx's `stat_test`: student, fisher) -> ours
TEST_NAMES = {"t-test": "t-test", "t": "t-test", "student": "t-test", "fisher": "fisher",
              "randomization": "fisher", "permutation": "fisher"}


def significance_test(test: str) -> str:
    """A significance test's name or alias (TEST_NAMES) as `compare` takes it."""
    if not isinstance(test, str) or test not in TEST_NAMES:
        raise InputError(f"unknown significance test {test!r}: use one of "
                         f"{', '.join(TEST_NAMES)} (the paired "
                         "t-test, or Fisher's randomization test)")
    return TEST_NAMES[test]


def too_few(queries: int) -> str:
    """What a statistic over queries shows with fewer than MIN_QUERIES of them, in place of a
    p-value or an interval that would look precise with nothing behind it."""
    return f"n/a ({queries} {'query' if queries == 1 else 'queries'})"


# the columns that say where a value was measured, named in a refusal when the rows have them
WHERE_COLUMNS = ("model", "pool", "size", "repeat", "scope", "query", "metric")


def measured(rows: pl.DataFrame, where: str, column: str = "value") -> pl.DataFrame:
    """`rows` whose `column` holds a number, the one check crossover, variance and the
    significance tests share: a NaN or infinite value is refused in one line naming the first
    one's model, pool, query and metric (a metric is a finite number: a mean or a test over it
    would be NaN, or a verdict drawn from NaN gaps); rows with a null value are left out, their
    number said in one log line."""
    bad = rows.filter(pl.col(column).is_not_null() & ~pl.col(column).is_finite())
    if bad.height:
        keys = [c for c in WHERE_COLUMNS if c in rows.columns]
        first = bad.sort(keys).row(0, named=True)
        said = ", ".join(f"{k} {first[k]}" for k in keys)
        raise InputError(f"{where}: {bad.height} value(s) are NaN or infinite (the first: "
                         f"{said}, column {column} = {first[column]}): a metric is a finite "
                         "number; rerun that run's evaluation (make eval), or leave the row out")
    kept = rows.filter(pl.col(column).is_not_null())
    if kept.height < rows.height:
        nulls = rows.height - kept.height
        log.warning(f"[{where}] {nulls} row{'s' if nulls != 1 else ''} with a null {column} "
                    f"left out of {rows.height:,}")
    return kept


def ordered(column: str = "value") -> pl.Expr:
    """`column`'s values sorted, for an aggregation whose floating-point result must not depend
    on the rows' order or polars' threads: `ordered("value").mean()` in a group_by."""
    return pl.col(column).sort()


def paired(values: pl.DataFrame) -> pl.DataFrame:
    """query, then one column per model (sorted by name): each model's value of the queries
    that every model answers, joined on the query id (a query's repeated rows averaged), rows
    sorted by query id."""
    per_query = values.group_by("model", "query").agg(ordered("value").mean())
    return (per_query.pivot("model", index="query", values="value", sort_columns=True)
            .drop_nulls().sort("query"))


def randomization_p(a: np.ndarray, b: np.ndarray, permutations: int = 10_000,
                    seed: int = 0) -> float:
    """Two-sided paired randomization test of mean(a) == mean(b); a[i] and b[i] are one query's
    values, in an order fixed by the query ids (`paired`): sign i is drawn for position i."""
    diff = a - b
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for lo in range(0, permutations, 1000):  # 1,000 permutations at a time: bounded memory
        signs = rng.integers(0, 2, size=(min(1000, permutations - lo), len(diff))) * 2 - 1
        hits += int((np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12).sum())
    return (hits + 1) / (permutations + 1)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p_values[order]).clip(max=1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


def bootstrap_ci(values: np.ndarray, resamples: int = 1000, seed: int = 0
                 ) -> tuple[float, float]:
    """95% percentile interval of the mean over queries: scipy's bootstrap, `resamples`
    resamples drawn by numpy's generator seeded with `seed` (resamples are drawn by position:
    give `values` in an order fixed by the query ids, as `intervals` does). Fewer than
    MIN_QUERIES: NaN (every resample of one query is that query: a point, no interval)."""
    from scipy.stats import bootstrap

    values = np.asarray(values, dtype=np.float64)
    if len(values) < MIN_QUERIES:
        return float("nan"), float("nan")
    interval = bootstrap((values,), np.mean, n_resamples=resamples, confidence_level=0.95,
                         method="percentile", rng=np.random.default_rng(seed)
                         ).confidence_interval
    return float(interval.low), float(interval.high)


def compare(values: pl.DataFrame, test: str = "t-test", alpha: float = 0.05) -> pl.DataFrame:
    """Every pair of models on the queries all of them answer: values holds model, query,
    value; `test` one of TESTS. Returns a, b, mean_a, mean_b, queries, p, p_holm,
    significant (p_holm < alpha); p and p_holm NaN (never significant) with fewer than
    MIN_QUERIES queries, which no test can tell apart. Values checked by `measured`."""
    if test not in TESTS:
        raise InputError(f"unknown significance test {test!r}: use one of {', '.join(TESTS)}")
    from scipy.stats import ttest_rel

    wide = paired(measured(values, "significance"))
    models = [c for c in wide.columns if c != "query"]
    rows = []
    for a, b in itertools.combinations(models, 2):
        x, y = wide[a].to_numpy(), wide[b].to_numpy()
        diff = x - y
        if len(diff) < MIN_QUERIES:
            p = float("nan")
        elif test == "fisher":
            p = randomization_p(x, y)
        elif np.ptp(diff) <= 1e-12:  # no spread: the t statistic is 0 or inf
            p = 1.0 if abs(diff.mean()) <= 1e-12 else 0.0
        else:
            p = float(ttest_rel(x, y, alternative="two-sided").pvalue)
        rows.append({"a": a, "b": b, "mean_a": float(x.mean()), "mean_b": float(y.mean()),
                     "queries": len(x), "p": p})
    schema = {"a": pl.String, "b": pl.String, "mean_a": pl.Float64, "mean_b": pl.Float64,
              "queries": pl.Int64, "p": pl.Float64}
    table = pl.DataFrame(rows, schema=schema)
    return table.with_columns(p_holm=pl.Series(holm(table["p"].to_numpy()), dtype=pl.Float64)
                              ).with_columns(significant=pl.col("p_holm") < alpha)


def intervals(values: pl.DataFrame, resamples: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Each model's mean over its queries and its 95% bootstrap interval (`bootstrap_ci`), from
    values holding model, query, value (a query's repeated rows averaged; null values left
    out and counted, a NaN refused: `measured`), each model's values in query id order:
    model, queries, mean, low, high, by model."""
    per_query = (measured(values, "intervals")
                 .group_by("model", "query").agg(ordered("value").mean())
                 .sort("model", "query"))
    rows = []
    for (model,), group in per_query.group_by("model", maintain_order=True):
        low, high = bootstrap_ci(group["value"].to_numpy(), resamples, seed)
        rows.append({"model": model, "queries": group.height,
                     "mean": float(group["value"].mean()), "low": low, "high": high})
    return pl.DataFrame(rows, schema={"model": pl.String, "queries": pl.Int64,
                                      "mean": pl.Float64, "low": pl.Float64,
                                      "high": pl.Float64})
