"""Per-query metrics of runs held as columns: ranx's numba kernels, fed in bulk (issue 8).

ranx stays the metric engine (its kernels equal trec_eval's definitions, docs/evaluation.md), but
a run
never becomes the nested {query: {doc: score}} dicts that `ranx.Run` is built from: the run's
and the qrels' columns are sorted once with polars and cut into ranx's typed list of
(doc, score) arrays by one numba function, so 3,800 queries x 500 documents cost milliseconds
instead of seconds.

Counting rule: every query of the pool with at least one relevant candidate is evaluated; a
query absent from the run scores 0 on every metric (trec_eval's `-c`; trec_eval's default would
skip it and raise the mean). Queries without a relevant candidate are dropped and counted.

`ndcg%<p>` (CSFCube's NDCG%20, Mysore et al. 2021) is computed here, not by ranx, as CSFCube's
evaluation scripts define it: linear gains (the grade), the discount of their `dcg_at_k` method
0 (ranks 1 and 2 both weigh 1, rank r >= 2 weighs 1 / log2(r)), the list cut at
int(p / 100 x n) where n is the number of documents the run ranks for the query (for CSFCube,
every run ranks the query's whole candidate list, so n is its size), and the ideal DCG from the
query's judged grades sorted, cut at the same rank; 0 when that ideal is 0 (nothing relevant, or
a cut of 0). When a set holds such a metric, every judged query is evaluated (CSFCube averages
every query of its folds), also one without a relevant candidate: it scores 0 on every metric.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numba
import numpy as np
import polars as pl
from numba.core.errors import NumbaTypeSafetyWarning
from numba.typed import List

from pipeline.layout import DEFAULT_METRICS, METRIC_SETS, metric_percent


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
    vocabulary = pl.concat([c.cast(pl.String) for c in columns]).unique().sort()
    return [c.cast(pl.String).replace_strict(vocabulary, pl.int_range(len(vocabulary), eager=True),
                                             return_dtype=pl.Float64).to_numpy()
            for c in columns]


def _offsets(positions: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(positions, minlength=n))]).astype(np.int64)


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, queries: pl.Series,
              metrics: Sequence[str] = DEFAULT_METRICS) -> tuple[pl.DataFrame, int]:
    """One row per query of `queries` with a relevant document, one column per metric; and how
    many queries had none (dropped).

    run: query, doc, rank (1 = best; ties already broken); qrels: query, doc, rel (graded)."""
    # here, not at the top: importing ranx costs seconds, paid once per process
    from ranx.meta.evaluate import extract_metric_and_params, metric_switch

    asked = qrels.filter(pl.col("query").is_in(queries.implode()))
    judged = asked.filter(pl.col("rel") > 0)
    own = [m for m in metrics if metric_percent(m) is not None]  # ndcg%<p>: computed here
    # with ndcg%<p> (CSFCube) every judged query counts, one without a relevant candidate too
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
    # a query without a relevant candidate (evaluated only beside ndcg%<p>) scores 0
    has_relevant = np.isin(np.arange(len(evaluated)), relevant["qpos"].to_numpy())
    scores = {}
    with warnings.catch_warnings():  # ranx's kernels index with prange's unsigned counter
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        for metric in metrics:  # ranx.evaluate's own loop, without its dict checks
            percent = metric_percent(metric)
            if percent is not None:
                graded = asked.join(position, on="query").select("qpos", "doc", "rel")
                scores[metric] = ndcg_percent(ranked.select("qpos", "doc"), graded,
                                              len(evaluated), percent)
                continue
            name, cutoff, rel_lvl = extract_metric_and_params(metric)
            values = np.asarray(metric_switch(name)(qrels_list, run_list, cutoff, rel_lvl),
                                dtype=np.float64)
            scores[metric] = np.where(has_relevant, values, 0.0)
    return pl.DataFrame({"query": evaluated, **scores}, schema=schema), dropped


def _discounted(gains: pl.Expr, position: pl.Expr) -> pl.Expr:
    """A gain at 1-based `position` as CSFCube's `dcg_at_k` (method 0) weighs it: ranks 1 and
    2 by 1, rank r >= 2 by 1 / log2(r)."""
    return gains / pl.when(position == 1).then(1.0).otherwise(position.cast(pl.Float64).log(2))


def ndcg_percent(ranked: pl.DataFrame, graded: pl.DataFrame, n_queries: int,
                 percent: int) -> np.ndarray:
    """NDCG%<percent> of queries 0..n_queries-1 (module doc): `ranked` (qpos, doc) is each
    query's run in rank order; `graded` (qpos, doc, rel) every judgment of the query. The cut
    is int(percent / 100 x n), n the length of the query's ranked list (Python's int() of the
    float product, as CSFCube's `int(0.20*len(ranked))`; a float64 product, the same here)."""
    fraction = percent / 100
    lists = (ranked.with_row_index("order")
             .join(graded, on=["qpos", "doc"], how="left")
             .sort("order")
             .with_columns(rel=pl.col("rel").fill_null(0).cast(pl.Float64),
                           position=pl.int_range(1, pl.len() + 1).over("qpos"),
                           n=pl.len().over("qpos")))
    cuts = lists.group_by("qpos").agg(cut=(pl.col("n").first() * fraction).floor())
    dcg = (lists.join(cuts, on="qpos").filter(pl.col("position") <= pl.col("cut"))
           .group_by("qpos").agg(dcg=_discounted(pl.col("rel"), pl.col("position")).sum()))
    ideal = (graded.join(cuts, on="qpos")
             .sort(["qpos", "rel"], descending=[False, True])
             .with_columns(position=pl.int_range(1, pl.len() + 1).over("qpos"))
             .filter(pl.col("position") <= pl.col("cut"))
             .group_by("qpos").agg(ideal=_discounted(pl.col("rel").cast(pl.Float64),
                                                     pl.col("position")).sum()))
    table = (pl.DataFrame({"qpos": pl.int_range(n_queries, eager=True)})
             .join(dcg, on="qpos", how="left").join(ideal, on="qpos", how="left")
             .sort("qpos").with_columns(pl.col("dcg", "ideal").fill_null(0.0)))
    ideal_values = table["ideal"].to_numpy()
    return np.divide(table["dcg"].to_numpy(), ideal_values,
                     out=np.zeros(n_queries, dtype=np.float64), where=ideal_values > 0)


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels of every metric set once, so that the
    first `make eval` after an install does not pay the JIT (`make setup` calls this)."""
    run = pl.DataFrame({"query": [1, 1, 2], "doc": [1, 2, 3], "rank": [1, 2, 1]})
    qrels = pl.DataFrame({"query": [1, 2], "doc": [2, 4], "rel": [1, 2]})
    names = sorted({m for metrics in METRIC_SETS.values() for m in metrics})
    per_query(run, qrels, pl.Series([1, 2]), names)
