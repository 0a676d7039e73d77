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
  1,000 resamples, seeded), inside the metric's range [0, 1] as every resample's mean is;
  where every query's value is the same (all 1, say) the bootstrap is a point, and the
  interval is instead what `agreeing_interval` bounds (issue 71).

The report's metrics all lie in [0, 1]. Its intervals of a mean stay there by construction: a
percentile bootstrap does; a t interval (the judged means' queries-and-draws interval,
pipeline/judging/inferred.py) is taken to the logit scale and back (`logit_interval`); and no
interval from a sample is a point: where every sampled value agrees, the share of the
population that differs is bounded by Clopper-Pearson's one-sided bound for 0 of n
(`agreeing_interval`). The levels of all three under the pipeline's design, 10 to 1,000
queries and 1 or 3 draws with means from 0.013 to 0.99: benchmarks/bounded_intervals.py. The
bootstrap's depends on the queries, the mean and the shape of the values (lowest for skewed
values near a bound) and the number of draws a query's value averages; the report states it
per row at the row's own number of draws (`bootstrap_level`, from the grid
benchmarks/bootstrap_level.py writes).

Seeded is not enough for a reproducible number: a sign flip or a resample is drawn per
position, so the values must reach the generator in one order. Here they always come sorted by
query id, and two models' values are paired by joining on the query id (`paired`), never by
their positions, so the rows' order in `runs/results.parquet` and polars' number of threads
change no p-value and no interval. Means are summed over sorted values (`ordered`): a plain
group_by mean adds per-thread partial sums, whose last bits vary with the number of threads.
"""

from __future__ import annotations

import functools
import itertools
import logging

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.core.logs import counted

log = logging.getLogger(__name__)

MIN_QUERIES = 2  # a paired test or an interval over queries needs two: one has no spread
LEVEL = 0.95  # the intervals' confidence level (evaluation/variance.py's LEVEL too)
BOUNDS = (0.0, 1.0)  # the range of every metric the report shows (x100: 0 to 100)
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
        log.warning(f"[{where}] {counted(nulls, 'row')} with a null {column} "
                    f"left out of {rows.height:,}")
    return kept


def ordered(column: str = "value") -> pl.Expr:
    """`column`'s values sorted, for an aggregation whose floating-point result must not depend
    on the rows' order or polars' threads: `ordered("value").mean()` in a group_by."""
    return pl.col(column).sort()


def paired(values: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame]:
    """The queries that every model answers, sorted by id, and one column per model (sorted
    by name; any name, "query" too): each model's value of those queries, in that order (a
    query's repeated rows averaged)."""
    models = sorted(values["model"].unique().to_list())
    code = {model: f"m{i}" for i, model in enumerate(models)}  # no model name meets "query"
    per_query = (values.with_columns(pl.col("model").replace_strict(code))
                 .group_by("model", "query").agg(ordered("value").mean()))
    wide = (per_query.pivot("model", index="query", values="value").drop_nulls().sort("query"))
    return wide["query"], wide.select(pl.col(code[m]).alias(m) for m in models)


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


def agreeing_share(n: int | np.ndarray, level: float = LEVEL) -> float | np.ndarray:
    """The one-sided `level` upper confidence bound on the share of a population that differs
    from a value, where all of `n` independent draws equal it: Clopper-Pearson's bound for 0
    successes in n, 1 - (1 - level)^(1/n) (Clopper & Pearson 1934; 3/n is its rule-of-three
    approximation, Hanley & Lippman-Hand 1983): 0.113 for 25 queries, 0.058 for 50."""
    return 1 - (1 - level) ** (1 / np.asarray(n, dtype=np.float64))


def agreeing_interval(value: float | np.ndarray, n: int | np.ndarray, level: float = LEVEL,
                      bounds: tuple[float, float] = BOUNDS) -> tuple:
    """The `level` interval of a mean where every one of `n` sampled values (queries) equals
    `value` (a percentile bootstrap or a t interval would be that point): at most the share
    `agreeing_share` of the population differs, by at most the distance to the metric's
    bound (`bounds`), so the mean lies in [value - p (value - low), value + p (high - value)];
    all 1: [0.05^(1/n), 1], a one-sided bound (88.7 of 100 for 25 queries); all 0: [0, 1 -
    0.05^(1/n)]. Arrays broadcast; NaN where `value` lies outside `bounds` or n < 1."""
    value = np.asarray(value, dtype=np.float64)
    low, high = bounds
    share = agreeing_share(np.maximum(n, 1), level)
    inside = (value >= low) & (value <= high) & (np.asarray(n) >= 1)
    out = (np.where(inside, value - share * (value - low), np.nan),
           np.where(inside, value + share * (high - value), np.nan))
    return tuple(map(float, out)) if not out[0].ndim else out


def logit_interval(mean: float | np.ndarray, half: float | np.ndarray,
                   bounds: tuple[float, float] = BOUNDS) -> tuple:
    """A symmetric interval mean ± half of a mean inside `bounds`, taken to the logit scale
    and back (the delta method: logit(mean) ± half / ((mean - low)(high - mean)) x (high -
    low), then the inverse logit), so that it stays strictly inside the metric's range while
    its level is the symmetric one's to first order (Agresti, Categorical Data Analysis, 3rd
    ed. 2013, §1.4 and §16.1 on intervals on the logit scale); near a bound it is skewed
    away from it, where a mean of skewed values is itself skewed. Where `mean` is not
    strictly inside `bounds` (a mean of 0 or 1: every value is at the bound, see
    `agreeing_interval`; an estimator whose mean leaves the range) it is mean ± half
    clipped to `bounds`. Arrays broadcast."""
    low, high = bounds
    mean = np.asarray(mean, dtype=np.float64)
    half = np.asarray(half, dtype=np.float64)
    width = high - low
    inside = (mean > low) & (mean < high)
    share = np.where(inside, (mean - low) / width, 0.5)
    centre = np.log(share) - np.log1p(-share)
    spread = np.where(inside, half / (width * share * (1 - share)), 0.0)
    lower = low + width * _expit(centre - spread)
    upper = low + width * _expit(centre + spread)
    out = (np.where(inside, lower, np.clip(mean - half, low, high)),
           np.where(inside, upper, np.clip(mean + half, low, high)))
    return tuple(map(float, out)) if not out[0].ndim else out


def _expit(x: np.ndarray) -> np.ndarray:
    """The inverse logit without overflow for large |x|."""
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x))
                    / (1 + np.exp(-np.abs(x))))


def bootstrap_ci(values: np.ndarray, resamples: int = 1000, seed: int = 0,
                 bounds: tuple[float, float] = BOUNDS) -> tuple[float, float]:
    """95% percentile interval of the mean over queries: scipy's bootstrap, `resamples`
    resamples drawn by numpy's generator seeded with `seed` (resamples are drawn by position:
    give `values` in an order fixed by the query ids, as `intervals` does); inside the
    values' range, as every resample's mean is. Fewer than MIN_QUERIES: NaN (every resample
    of one query is that query: a point, no interval). Every value the same: the bootstrap
    would be that point; the interval is `agreeing_interval`'s instead (a one-sided bound at
    0 or 1; NaN for a value outside `bounds`)."""
    from scipy.stats import bootstrap

    values = np.asarray(values, dtype=np.float64)
    if len(values) < MIN_QUERIES:
        return float("nan"), float("nan")
    if np.ptp(values) == 0:
        return agreeing_interval(float(values[0]), len(values), bounds=bounds)
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

    _, wide = paired(measured(values, "significance"))
    models = wide.columns
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


@functools.cache
def level_grid() -> dict:
    """The percentile bootstrap's simulated coverage (`bootstrap_ci`'s interval,
    `agreeing_interval` where every value agrees) of the mean over the query population given
    the drawn pools, by queries x mean x shape of values x draws (layout.BOOTSTRAP_LEVEL_GRID,
    written by benchmarks/bootstrap_level.py), read once (not to be changed: every caller
    shares it)."""
    import json
    from importlib.resources import files

    from pipeline.layout import BOOTSTRAP_LEVEL_GRID

    return json.loads(files("pipeline").joinpath(BOOTSTRAP_LEVEL_GRID).read_text())


def _around(axis: list[float], value: float) -> list[int] | None:
    """The indices of `axis` (ascending) that bracket `value`: one where it is a grid point,
    its two neighbours otherwise, None outside the axis."""
    if not axis[0] <= value <= axis[-1]:
        return None
    if value in axis:
        return [axis.index(value)]
    above = int(np.searchsorted(axis, value))
    return [above - 1, above]


def bootstrap_level(queries: int, mean: float, draws: int, grid: dict | None = None
                    ) -> tuple[float, float] | None:
    """The lowest and highest simulated coverage of the 95% percentile bootstrap at `queries`
    queries, a mean of `mean` (in [0, 1]) and `draws` pool draws averaged per query: over
    every shape of values the grid simulated with that many draws, in the grid cells around
    (queries, mean) (the cell itself where both lie on the grid). Never a cell of another
    number of draws: averaging draws changes the values' shape. None where the queries or the
    mean lie outside the grid, or the grid simulated no `draws`."""
    grid = grid or level_grid()
    rows, columns = _around(grid["queries"], queries), _around(grid["means"], mean)
    if rows is None or columns is None or draws not in grid["draws"]:
        return None
    shapes = [by_draws[str(draws)] for by_draws in grid["coverage"].values()]
    found = [cells[i][j] for cells in shapes for i in rows for j in columns
             if cells[i][j] is not None]
    return (min(found), max(found)) if found else None
