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
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numba
import numpy as np
import polars as pl
from numba.core.errors import NumbaTypeSafetyWarning
from numba.typed import List

from pipeline.layout import DEFAULT_METRICS, METRIC_SETS


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

    judged = qrels.filter(pl.col("rel") > 0, pl.col("query").is_in(queries.implode()))
    evaluated = judged["query"].unique().sort()
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
    scores = {}
    with warnings.catch_warnings():  # ranx's kernels index with prange's unsigned counter
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        for metric in metrics:  # ranx.evaluate's own loop, without its dict checks
            name, cutoff, rel_lvl = extract_metric_and_params(metric)
            scores[metric] = np.asarray(metric_switch(name)(qrels_list, run_list, cutoff,
                                                            rel_lvl), dtype=np.float64)
    return pl.DataFrame({"query": evaluated, **scores}, schema=schema), dropped


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels of every metric set once, so that the
    first `make eval` after an install does not pay the JIT (`make setup` calls this)."""
    run = pl.DataFrame({"query": [1, 1, 2], "doc": [1, 2, 3], "rank": [1, 2, 1]})
    qrels = pl.DataFrame({"query": [1, 2], "doc": [2, 4], "rel": [1, 2]})
    names = sorted({m for metrics in METRIC_SETS.values() for m in metrics})
    per_query(run, qrels, pl.Series([1, 2]), names)
