"""Fused runs: several models' runs of a pool combined with ranx's fusion (issue 8).

A fused model is named `fuse--<method>--<model>--<model>[...]` (`make fuse MODELS=bm25,scincl
METHOD=rrf` builds it); it is searched like any model, from the component runs of the same
pool, and evaluated like any other run. Any ranx fusion method works (rrf, wsum, sum, mnz,
isr, ...; min-max normalisation for score-based methods). A method with parameters (rrf's k,
wsum's weights, ...) is tuned with ranx's `optimize_fusion` on the pool's validation pools
(MAP, their queries taken together), as BM25's k1 and b are; without validation pools, ranx's
defaults are used. The chosen parameters are in the run manifest.
"""

from __future__ import annotations

import functools

import polars as pl

from pipeline.layout import Place, run_paths
from pipeline.models import FUSION_RANK_BASED, FUSION_TUNABLE, fusion_parts
from pipeline.pools.build import load_pool, validation_pools
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.runs import load_run, run_shas


def _ranx():
    """ranx, its typed containers' methods cached (pipeline.metrics.cache_typed_containers:
    without it every process compiles them, seconds before any fusing)."""
    from pipeline.metrics import cache_typed_containers

    cache_typed_containers()
    import ranx

    return ranx


def _ranx_run(run: pl.DataFrame):
    Run = _ranx().Run

    frame = run.select(q_id=pl.col("query").cast(pl.String),
                       doc_id=pl.col("doc").cast(pl.String), score=pl.col("score"))
    return Run.from_df(_pandas(frame), q_id_col="q_id", doc_id_col="doc_id", score_col="score")


def _pandas(frame: pl.DataFrame):
    """ranx's from_df wants ids as Python objects (pandas may default to its string dtype)."""
    return frame.to_pandas().astype({"q_id": object, "doc_id": object})


def _norm(method: str) -> str | None:
    """ranx's score normalisation: min-max for score-based methods, none for rank-based."""
    return "min-max" if method not in FUSION_RANK_BASED else None


def tuned_params(place: Place, pool: str, method: str, models: list[str]) -> dict:
    """ranx's optimize_fusion over the validation pools of `pool` (MAP), or {} (defaults).
    The test pools of one group share their validation pools: a process tunes each group once
    (keyed by the validation runs' checksums, so a changed run is tuned again)."""
    pools = validation_pools(place.corpus_dir, pool)
    if method not in FUSION_TUNABLE or not pools:
        return {"params": {}, "tuned_on": [],
                "note": "ranx defaults" + ("" if method not in FUSION_TUNABLE else
                                           " (no validation pool)")}
    shas = tuple(tuple(sorted(run_shas(place.runs_root, place.corpus, val, models).items()))
                 for val in pools)
    return _tune(place, method, tuple(models), tuple(pools), shas)


@functools.lru_cache(maxsize=64)
def _tune(place: Place, method: str, models: tuple[str, ...], pools: tuple[str, ...],
          shas: tuple) -> dict:
    ranx = _ranx()
    runs: list[list[pl.DataFrame]] = [[] for _ in models]
    qrels = []
    for val in pools:
        _, candidates, pool_qrels = load_pool(place.corpus_dir, val)
        qrels.append(pool_qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()),
                                       pl.col("rel") > 0)
                     .with_columns(query=pl.lit(f"{val}:") + pl.col("query").cast(pl.String)))
        for i, model in enumerate(models):
            runs[i].append(load_run(place, val, model).with_columns(
                query=pl.lit(f"{val}:") + pl.col("query").cast(pl.String)))
    judged = pl.concat(qrels).select(q_id="query", doc_id=pl.col("doc").cast(pl.String),
                                     score=pl.col("rel").cast(pl.Int64))
    best = ranx.optimize_fusion(
        ranx.Qrels.from_df(_pandas(judged), q_id_col="q_id", doc_id_col="doc_id",
                           score_col="score"),
        [_ranx_run(pl.concat(parts)) for parts in runs], norm=_norm(method), method=method,
        metric="map")
    return {"params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in best.items()},
            "tuned_on": list(pools), "metric": "map"}


def fused_hits(place: Place, pool: str, name: str, k: int) -> tuple[pl.DataFrame, dict]:
    """(query, doc, score) of the fused run, its top k per query; and what was used."""
    fuse = _ranx().fuse
    method, models = fusion_parts(name)
    runs = [load_run(place, pool, m) for m in models]
    chosen = tuned_params(place, pool, method, models)
    fused = fuse([_ranx_run(r) for r in runs], norm=_norm(method), method=method,
                 params=chosen["params"] or None)
    frame = pl.from_pandas(fused.to_dataframe()).rename(
        {"q_id": "query", "doc_id": "doc", "score": "score"})
    hits = (frame.with_columns(query=pl.col("query").cast(runs[0]["query"].dtype),
                               doc=pl.col("doc").cast(runs[0]["doc"].dtype))
            .sort(["query", "score", pl.col("doc").cast(pl.String)],
                  descending=[False, True, True])
            .filter(pl.int_range(pl.len()).over("query") < k))
    return hits, {"method": method, "models": models, "norm": _norm(method), **chosen}


class Fusion(Retriever):
    """A fused model: the component runs of the same pool, fused (ranx)."""

    searches_variants = False

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        place, pool = query.place, query.pool
        hits, found = fused_hits(place, pool, query.entry.name, query.depth)
        runs_root, corpus = place.runs_root, place.corpus
        # recorded once read: load_run refuses a missing, damaged or stale component first
        query.read([run_paths(runs_root, corpus, pool, m).parquet for m in found["models"]]
                   + [run_paths(runs_root, corpus, v, m).parquet  # the validation runs
                      for v in found["tuned_on"] for m in found["models"]])
        return hits, found


RETRIEVER = Fusion()
