"""Per-query metrics of runs held as columns: ranx's numba kernels, fed in bulk (issue 8).

ranx stays the metric engine (its kernels equal trec_eval's definitions, docs/evaluation.md),
called through its public `ranx.evaluate` only, but a run never becomes the nested
{query: {doc: score}} dicts that `ranx.Run` is built from: the run's and the qrels' columns are
sorted once with polars and cut into ranx's typed list of (doc, score) arrays by one numba
function, which `ranx.evaluate` takes as they are, so 3,800 queries x 500 documents cost
milliseconds instead of seconds.

Counting rule: every query of the pool with at least one relevant candidate is evaluated; a
query absent from the run scores 0 on every metric (trec_eval's `-c`; trec_eval's default would
skip it and raise the mean). Queries without a relevant candidate are dropped and counted.

CSFCube's metrics (Mysore et al. 2021) are computed here, not by ranx, as its official
evaluation script (`ranking_eval.py`, `rank_metrics.py`) computes them from each query's ranked
list: the grades of the candidates the run ranked, in rank order (an unjudged one is grade 0).

- `ndcg%<p>` (the official NDCG%20): linear gains (the grade), the discount of `dcg_at_k`
  method 0 (ranks 1 and 2 both weigh 1, rank r >= 2 weighs 1 / log2(r)), the list cut at
  int(p / 100 x n) where n is the number of candidates the run ranks for the query, divided by
  the DCG of the ranked list's own grades sorted, cut at the same rank; 0 when that is 0
  (nothing relevant ranked, or a cut of 0).
- `map_ranked[-l<n>]` (the official MAP, `-l2`): grades >= n are relevant (1 without a
  level); AP is the mean of the precision at the rank of each relevant candidate the run
  ranked, so its denominator is the relevant candidates ranked, not all judged; 0 without one.
- `ndcg_judged%<p>` (stricter, not the official number): the same cut and discount, with the
  ideal DCG over every judged grade of the query, as trec_eval builds it; `map-l2` (ranx's,
  trec_eval's) is the stricter MAP. On a run that ranks every judged candidate (every run
  the pipeline makes of CSFCube's pools) each equals its official counterpart; on one that
  leaves judged relevant candidates out they are lower.

When a set holds one of these metrics, every judged query is evaluated (CSFCube averages every
query of its folds), also one without a relevant candidate: it scores 0 on every metric.

ranx's typed containers (`cache_typed_containers`): numba compiles the Python-side methods of
its typed Dict and List (make, append, get, iterate) for each key and value type in every
process; ranx builds every Run and Qrels, normalises and fuses through them, so each process
that touched ranx paid seconds of compiling (10 to 30 s on a busy machine) before any work.
Importing this module has numba cache those methods on disk as ranx's own kernels are, so only
the first process of an install compiles them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import numba
import numpy as np
import polars as pl
from numba.core.errors import NumbaTypeSafetyWarning
from numba.typed import List

from pipeline.glossary import DEFAULT_METRICS, METRIC_SETS, RANKED_MAP, metric_percent


@functools.cache
def cache_typed_containers() -> int:
    """Have numba cache on disk the methods its typed Dict and List compile when used from
    Python (module doc: ranx's Run, Qrels, fusion), as `njit(cache=True)` caches a kernel:
    beside numba's own source where that is writable, else in numba's user-wide cache. A
    method numba finds no writable place for compiles per process, as before. Returns how
    many methods are cached (once per process; later calls return the same)."""
    from numba.core.registry import CPUDispatcher
    from numba.typed import typeddict, typedlist

    cached = 0
    for module in (typeddict, typedlist):
        for method in vars(module).values():
            if isinstance(method, CPUDispatcher):
                try:
                    method.enable_caching()
                except RuntimeError:  # numba: "no locator available": nowhere to write
                    continue
                cached += 1
    return cached


cache_typed_containers()


@numba.njit(cache=True)
def _cut(ids, values, offsets):  # pragma: no cover
    """ranx's input: one (n, 2) float64 array [doc, value] per query."""
    out = List()
    for q in range(len(offsets) - 1):
        lo, hi = offsets[q], offsets[q + 1]
        block = np.empty((hi - lo, 2), dtype=np.float64)
        block[:, 0] = ids[lo:hi]
        block[:, 1] = values[lo:hi]
        out.append(block)
    return out


def _doc_codes(*columns: pl.Series) -> list[np.ndarray]:
    """Document ids as float64 numbers ranx can compare: integer ids as they are (S2ORC's fit
    a float64 exactly), other ids (strings) by their position among all ids."""
    if all(c.dtype.is_integer() for c in columns):
        return [c.cast(pl.Float64).to_numpy() for c in columns]
    ids = pl.concat([c.cast(pl.String) for c in columns]).unique().sort()
    return [c.cast(pl.String).replace_strict(ids, pl.int_range(len(ids), eager=True),
                                             return_dtype=pl.Float64).to_numpy()
            for c in columns]


def _offsets(positions: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(positions, minlength=n))]).astype(np.int64)


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, queries: pl.Series,
              metrics: Sequence[str] = DEFAULT_METRICS) -> tuple[pl.DataFrame, int]:
    """One row per query of `queries` with a relevant document, one column per metric; and how
    many queries had none (dropped).

    run: query, doc, rank (1 = best; ties already broken); qrels: query, doc, rel (graded)."""
    asked = qrels.filter(pl.col("query").is_in(queries.implode()))
    judged = asked.filter(pl.col("rel") > 0)
    own = [m for m in metrics if csfcube_metric(m)]  # computed here, not by ranx
    # with CSFCube's metrics every judged query counts, one without a relevant candidate too
    evaluated = (asked if own else judged)["query"].unique().sort()
    dropped = queries.n_unique() - len(evaluated)
    schema = {"query": queries.dtype, **dict.fromkeys(metrics, pl.Float64)}
    if len(evaluated) == 0:
        return pl.DataFrame(schema=schema), dropped
    position = pl.DataFrame({"query": evaluated,
                             "qpos": pl.int_range(len(evaluated), eager=True)})
    ranked = run.join(position, on="query").sort("qpos", "rank")
    relevant = judged.join(position, on="query").sort(["qpos", "rel", "doc"],
                                                      descending=[False, True, False])
    run_docs, qrel_docs = _doc_codes(ranked["doc"], relevant["doc"])
    run_list = _cut(run_docs, -ranked["rank"].cast(pl.Float64).to_numpy(),
                    _offsets(ranked["qpos"].to_numpy(), len(evaluated)))
    qrels_list = _cut(qrel_docs, relevant["rel"].cast(pl.Float64).to_numpy(),
                      _offsets(relevant["qpos"].to_numpy(), len(evaluated)))
    # a query without a relevant candidate (evaluated only beside CSFCube's metrics) scores 0
    has_relevant = np.isin(np.arange(len(evaluated)), relevant["qpos"].to_numpy())
    scores = {}
    graded = asked.join(position, on="query").select("qpos", "doc", "rel")
    ranx_scores = ranx_per_query(qrels_list, run_list,
                                 [m for m in metrics if not csfcube_metric(m)])
    for metric in metrics:
        if csfcube_metric(metric):
            scores[metric] = csfcube_values(metric, ranked.select("qpos", "doc"), graded,
                                            len(evaluated))
        else:
            scores[metric] = np.where(has_relevant, ranx_scores[metric], 0.0)
    return pl.DataFrame({"query": evaluated, **scores}, schema=schema), dropped


def ranx_per_query(qrels_list: List, run_list: List, metrics: list[str]
                   ) -> dict[str, np.ndarray]:
    """Each metric's per-query values from `ranx.evaluate`, given ranx's typed lists (which it
    passes to its kernels as they are). A lone metric is asked twice: ranx 0.3's evaluate with
    return_mean=False returns one metric's array by its name less the cutoff (a KeyError for
    `recall@30`), two or more as a dict. ranx sets numba's threads to 1 below 10 queries, for
    the whole process: they are set back."""
    # here, not at the top: importing ranx costs seconds, paid once per process
    from ranx import evaluate

    if not metrics:
        return {}
    threads = numba.get_num_threads()
    try:
        with warnings.catch_warnings():  # ranx's kernels index with prange's unsigned counter
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            values = evaluate(qrels_list, run_list, metrics * 2 if len(metrics) == 1 else metrics,
                              return_mean=False)
    finally:
        numba.set_num_threads(threads)
    return {m: np.asarray(values[m], dtype=np.float64) for m in metrics}


def csfcube_metric(name: str) -> bool:
    """Whether `name` is one of CSFCube's metrics, computed here (module doc): `ndcg%<p>`,
    `ndcg_judged%<p>`, `map_ranked[-l<n>]`."""
    return metric_percent(name) is not None or name.partition("-l")[0] == RANKED_MAP


def csfcube_values(metric: str, ranked: pl.DataFrame, graded: pl.DataFrame,
                   n_queries: int) -> np.ndarray:
    """One of CSFCube's metrics (module doc) for queries 0..n_queries-1: `ranked` (qpos, doc)
    is each query's run in rank order, `graded` (qpos, doc, rel) every judgment of the query."""
    lists = ranked_grades(ranked, graded)
    percent = metric_percent(metric)
    if percent is None:
        level = metric.partition("-l")[2]
        return ranked_ap(lists, n_queries, int(level) if level else 1)
    return ndcg_percent(lists, graded, n_queries, percent,
                        judged_ideal=metric.startswith("ndcg_judged%"))


def ranked_grades(ranked: pl.DataFrame, graded: pl.DataFrame) -> pl.DataFrame:
    """Each query's ranked list as the official script reads it: qpos, rel (the candidate's
    grade, 0 when unjudged), position (1-based rank), n (the list's length)."""
    return (ranked.with_row_index("order")
            .join(graded, on=["qpos", "doc"], how="left")
            .sort("order")
            .select("qpos", rel=pl.col("rel").fill_null(0).cast(pl.Float64),
                    position=pl.int_range(1, pl.len() + 1).over("qpos"),
                    n=pl.len().over("qpos")))


def _discounted(gains: pl.Expr, position: pl.Expr) -> pl.Expr:
    """A gain at 1-based `position` as CSFCube's `dcg_at_k` (method 0) weighs it: ranks 1 and
    2 by 1, rank r >= 2 by 1 / log2(r)."""
    return gains / pl.when(position == 1).then(1.0).otherwise(position.cast(pl.Float64).log(2))


def _dcg(grades: pl.DataFrame, cuts: pl.DataFrame, name: str) -> pl.DataFrame:
    """qpos, `name`: the DCG of each query's grades (qpos, rel, position) up to its cut."""
    return (grades.join(cuts, on="qpos").filter(pl.col("position") <= pl.col("cut"))
            .group_by("qpos").agg(_discounted(pl.col("rel"), pl.col("position")).sum()
                                  .alias(name)))


def _per_query(table: pl.DataFrame, n_queries: int) -> pl.DataFrame:
    """`table` (qpos, ...) with a row for every query 0..n_queries-1, in order, nulls 0."""
    return (pl.DataFrame({"qpos": pl.int_range(n_queries, eager=True)})
            .join(table, on="qpos", how="left").sort("qpos").fill_null(0.0))


def ndcg_percent(lists: pl.DataFrame, graded: pl.DataFrame, n_queries: int, percent: int,
                 judged_ideal: bool = False) -> np.ndarray:
    """NDCG%<percent> of queries 0..n_queries-1 from their ranked lists (`ranked_grades`). The
    cut is int(percent / 100 x n), n the length of the query's ranked list (Python's int() of
    the float product, as CSFCube's `int(0.20*len(ranked))`; a float64 product, the same here).
    The ideal is the ranked list's grades sorted (the official script's), or with
    `judged_ideal` every judged grade of the query (`graded`: qpos, doc, rel) sorted."""
    cuts = lists.group_by("qpos").agg(cut=(pl.col("n").first() * (percent / 100)).floor())
    pool = (graded.select("qpos", rel=pl.col("rel").cast(pl.Float64)) if judged_ideal
            else lists.select("qpos", "rel"))
    best = (pool.sort(["qpos", "rel"], descending=[False, True])
            .with_columns(position=pl.int_range(1, pl.len() + 1).over("qpos")))
    table = _per_query(_dcg(lists, cuts, "dcg").join(_dcg(best, cuts, "ideal"), on="qpos",
                                                     how="full", coalesce=True), n_queries)
    ideal = table["ideal"].to_numpy()
    return np.divide(table["dcg"].to_numpy(), ideal, out=np.zeros(n_queries, dtype=np.float64),
                     where=ideal > 0)


def ranked_ap(lists: pl.DataFrame, n_queries: int, level: int) -> np.ndarray:
    """CSFCube's AP (`rank_metrics.average_precision` of the list made binary at grade >=
    `level`) of queries 0..n_queries-1 from their ranked lists (`ranked_grades`): the mean of
    the precision at each relevant rank; 0 for a list without a relevant candidate."""
    hits = lists.with_columns(hit=(pl.col("rel") >= level).cast(pl.Float64))
    ap = (hits.with_columns(precision=pl.col("hit").cum_sum().over("qpos") / pl.col("position"))
          .filter(pl.col("hit") > 0).group_by("qpos").agg(ap=pl.col("precision").mean()))
    return _per_query(ap, n_queries)["ap"].to_numpy()


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels of every metric set once, so that the
    first `make eval` after an install does not pay the JIT (`make setup` calls this)."""
    run = pl.DataFrame({"query": [1, 1, 2], "doc": [1, 2, 3], "rank": [1, 2, 1]})
    qrels = pl.DataFrame({"query": [1, 2], "doc": [2, 4], "rel": [1, 2]})
    names = sorted({m for metrics in METRIC_SETS.values() for m in metrics})
    per_query(run, qrels, pl.Series([1, 2]), names)
