"""Index a pool and retrieve the top 500 for its queries with any registered model.

`index` builds what a model searches: a Lucene index for BM25 on the Lucene engine (the
default arrays engine, `pipeline/bm25_arrays.py`, indexes in memory as it searches), the
embedding store for a dense or multi-vector (ASPIRE: one vector per sentence,
`pipeline/encoding/multivector.py`) encoder. `search`
writes `runs/<corpus>/<pool>/<model>.trec` and `.parquet` in rank order with trec_eval's
tie-break (score descending, then docid descending as a string), after removing
each query paper from its own results (MDCR §3: queries never retrieve themselves).
In an MDCR-style pool (MDCR §4) each query ranks its own candidate list, all of it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.artifacts import (
    file_lock,
    write_json,
)
from pipeline.core.errors import InputError
from pipeline.core.inputs import Roots, record
from pipeline.encoding.embed import embed, encode_texts
from pipeline.encoding.models import ModelEntry, fusion_parts
from pipeline.encoding.store import load_vectors, store_dir, store_parts
from pipeline.ingest.corpus import paper_texts
from pipeline.layout import id_key, run_name
from pipeline.pools.build import load_pool, pool_files
from pipeline.pools.queries import own_text, query_texts
from pipeline.retrieval import bm25_lucene, jvm
from pipeline.retrieval.runs import TOP_K, finalize_run, run_manifest, run_paths, write_run


def bm25_index_dir(index_root: Path, corpus: str, pool: str) -> Path:
    return index_root / corpus / pool / "bm25"


def index(corpus_dir: Path, index_root: Path, pool: str, entry: ModelEntry, threads: int = 2,
          bm25_engine: str = "arrays", **embed_options) -> dict:
    """Build what `entry` needs to search `pool` (a no-op when it is already there)."""
    _, candidates, _ = load_pool(corpus_dir, pool)
    if entry.kind == "bm25" and bm25_engine == "arrays":
        return {"model": entry.name, "pool": pool, "note": "nothing to index: the arrays "
                "engine indexes the pool in memory when it searches"}
    if entry.kind == "bm25":
        target = bm25_index_dir(index_root, corpus_dir.name, pool)
        params = {"pool": pool, "corpus": corpus_dir.name}
        inputs = record(Roots.of(corpus_dir, index_root, index_root), [
            corpus_dir / "pools" / pool / "candidates.parquet",
            corpus_dir / "prefiltered.parquet"])
        with file_lock(target.parent / ".bm25.lock"):
            if bm25_lucene.index_is_current(target, params, inputs):
                return {"model": entry.name, "pool": pool, "up_to_date": True}
            return bm25_lucene.build_index(paper_texts(corpus_dir, candidates["corpusid"]), target,
                                    threads, params, inputs)
    if entry.embedded:
        return embed(corpus_dir, index_root, entry, pools=[pool], **embed_options)
    if entry.kind in ("random", "fusion"):
        return {"model": entry.name, "pool": pool, "note": "nothing to index"}
    raise InputError(f"MODEL {entry.name} ({entry.kind}) is registered but its retrieval is "
                     "not implemented yet: use bm25, random or a dense encoder")


def _dense_hits(corpus_dir: Path, index_root: Path, entry: ModelEntry, queries: pl.DataFrame,
                candidates: pl.DataFrame, k: int, backend: str, texts: pl.DataFrame | None,
                model_path: str | None) -> tuple[pl.DataFrame, dict]:
    """Exact top k by the model's similarity. Queries are the store's vectors of the query
    papers, or (`texts`: a collection's queries, or perturbed ones) their texts encoded now."""
    store = store_dir(index_root, corpus_dir.name, entry.name)
    doc_ids = candidates["corpusid"].to_numpy()
    from pipeline.retrieval.dense import exact_search

    if texts is None:
        query_ids = queries["corpusid"].to_numpy()
        # one pass over the parts; a float16 store stays float16 (chunks are made float32)
        vectors = load_vectors(store, np.concatenate([query_ids, doc_ids]), dtype=None)
        query_vectors, doc_vectors = vectors[: len(query_ids)], vectors[len(query_ids):]
    else:
        query_ids = texts["corpusid"].to_numpy()
        query_vectors = encode_texts(store, entry, texts, model_path)
        doc_vectors = load_vectors(store, doc_ids, dtype=None)
    scores, positions, used = exact_search(query_vectors, doc_vectors, k, entry.similarity,
                                           backend)
    valid = positions >= 0
    hits = pl.DataFrame({
        "query": np.repeat(query_ids, positions.shape[1])[valid.ravel()],
        "doc": doc_ids[positions[valid]],
        "score": scores[valid].astype(np.float64),
    })
    return hits, {"backend": used, "similarity": entry.similarity}


def _random_hits(queries: pl.DataFrame, candidates: pl.DataFrame, k: int, seed: int
                 ) -> pl.DataFrame:
    doc_ids = candidates["corpusid"].to_numpy()
    frames = []
    for query in queries["corpusid"].to_list():
        rng = np.random.default_rng([seed, id_key(query)])
        picked = rng.choice(len(doc_ids), size=min(k, len(doc_ids)), replace=False)
        frames.append(pl.DataFrame({"query": query, "doc": doc_ids[picked],
                                    "score": np.arange(len(picked), 0, -1, dtype=np.float64)}))
    return pl.concat(frames)


def _store_files(index_root: Path, corpus_dir: Path, entry: ModelEntry) -> list[Path]:
    """The (checked) parts of the model's embedding store: what a dense search reads."""
    store = store_dir(index_root, corpus_dir.name, entry.name)
    return [store / part["file"] for part in store_parts(store)]


def _bm25_hits(corpus_dir: Path, queries: pl.DataFrame, candidates: pl.DataFrame,
               texts: pl.DataFrame | None, index_dir: Path, params: dict, depth: int,
               threads: int, engine: str, work_dir: Path) -> tuple[pl.DataFrame, list]:
    """BM25 hits with the chosen (k1, b), on the arrays engine or on Lucene's index."""
    k1, b = params["k1"], params["b"]
    query_papers = (texts if texts is not None
                    else paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid"))
    if engine == "arrays":
        from pipeline.retrieval import bm25_arrays

        runs, capped = bm25_arrays.search_grid(
            query_papers, paper_texts(corpus_dir, candidates["corpusid"]), depth, [k1], [b],
            threads)
        return runs[(k1, b)], capped
    return bm25_lucene.search(query_papers, index_dir, depth, k1, b, threads,
                       pool_papers=lambda: paper_texts(corpus_dir, candidates["corpusid"]),
                       work_dir=work_dir)


def search(corpus_dir: Path, index_root: Path, runs_root: Path, pool: str, entry: ModelEntry,
           k: int = TOP_K, threads: int = 2, seed: int = 0, backend: str = "auto",
           bm25_engine: str = "arrays", variant: str = "full", model_path: str | None = None
           ) -> dict:
    """Retrieve the top k candidates of `pool` for each of its queries; write the run.
    A pool whose candidates name their query (MDCR-style, `pipeline/mdcr/`) has each query rank
    its own list, whole: the engines score the union of the lists, each query keeps its own.
    BM25 runs on Lucene (Anserini) or on the arrays engine (`bm25_fast`: Lucene's analysis and
    scores, the same lists). `variant` perturbs the queries (`pipeline/pools/queries.py`); its run is
    named `<model>~<variant>`."""
    start = time.perf_counter()
    name = run_name(entry.name, variant)
    if variant != "full" and entry.kind in ("fusion", "multi-vector"):
        raise InputError(f"QUERY_VARIANT={variant} is not available for {entry.kind} models "
                         f"({entry.name}) yet: use bm25, random or a dense encoder")
    if entry.kind == "bm25":
        jvm.java_binary()  # before any work: both engines need Java (Lucene's analyzer)
    elif entry.kind == "dense":
        from pipeline.retrieval.dense import check_backend

        check_backend(backend)  # before any work: a GPU backend forced where there is none
    elif entry.kind == "multi-vector":
        from pipeline.retrieval.dense import maxsim_device

        maxsim_device(backend)  # before any work: a Faiss backend, or a GPU that is not there
    queries, candidates, _ = load_pool(corpus_dir, pool)
    pairs = None
    if "query" in candidates.columns:  # an MDCR-style pool: each query ranks its own list
        pairs = candidates.select("query", doc="corpusid").unique()
        candidates = candidates.select("corpusid").unique().sort("corpusid")
    depth = k if pairs is None else candidates.height  # a query's list: all it may rank
    texts = (query_texts(corpus_dir, queries, variant, seed)
             if variant != "full" or own_text(queries) else None)  # not the papers' own text
    if texts is not None and entry.kind == "multi-vector":
        raise InputError(f"pool {pool}: its queries are texts, not papers of the corpus; "
                         f"{entry.name} ({entry.kind}) searches papers' stored vectors only")
    details: dict = {"query_variant": variant}
    roots = Roots.of(corpus_dir, index_root, runs_root)
    read = pool_files(corpus_dir, pool)  # every file the run is made from, recorded first
    if texts is not None and not own_text(queries):
        read.append(corpus_dir / "prefiltered.parquet")
    if entry.kind == "bm25":
        from pipeline.retrieval.tuning import bm25_params

        index_dir = bm25_index_dir(index_root, corpus_dir.name, pool)
        params = bm25_params(corpus_dir, index_root, pool, entry, threads,  # validation pools
                             engine=bm25_engine)
        read += [corpus_dir / "prefiltered.parquet",
                 *(f for v in params["tuned_on"] for f in pool_files(corpus_dir, v))]
        if bm25_engine == "lucene":
            read += bm25_lucene.index_files(index_dir)
        inputs = record(roots, read)
        hits, capped = _bm25_hits(corpus_dir, queries, candidates, texts, index_dir, params,
                                  depth + 1, threads, bm25_engine,
                                  runs_root / corpus_dir.name / pool)
        details.update(**params, engine=bm25_engine, capped_queries=capped)
    elif entry.kind == "dense":
        read += _store_files(index_root, corpus_dir, entry)
        inputs = record(roots, read)
        hits, found = _dense_hits(corpus_dir, index_root, entry, queries, candidates,
                                  depth + 1, backend, texts, model_path)
        details.update(found)
    elif entry.kind == "multi-vector":  # best sentence pair (ts-ASPIRE), exact
        from pipeline.retrieval.maxsim import maxsim_hits

        read += _store_files(index_root, corpus_dir, entry)
        inputs = record(roots, read)
        hits, found = maxsim_hits(store_dir(index_root, corpus_dir.name, entry.name),
                                  queries["corpusid"].to_numpy(),
                                  candidates["corpusid"].to_numpy(), depth + 1,
                                  entry.similarity, backend)
        details.update(found)
    elif entry.kind == "fusion":  # the component runs of this pool, fused (ranx)
        from pipeline.retrieval.fusion import fused_hits

        read += [run_paths(runs_root, corpus_dir.name, pool, m)["parquet"]
                 for m in fusion_parts(entry.name)[1]]
        hits, found = fused_hits(corpus_dir, index_root, runs_root, pool, entry.name, depth + 1)
        details.update(found)  # the component runs (and validation runs) it checked and read:
        read += [run_paths(runs_root, corpus_dir.name, v, m)["parquet"]
                 for v in found["tuned_on"] for m in found["models"]]
        inputs = record(roots, read)
    elif entry.kind == "random":
        inputs = record(roots, read)
        hits = _random_hits(queries, candidates, depth + 1, seed)
        details["seed"] = seed
    else:
        raise InputError(f"MODEL {entry.name} ({entry.kind}) has no search implementation yet")
    counts, keep = {}, k
    if pairs is not None:  # each query keeps its own list; a pair no term matched scores 0
        hits = pairs.join(hits, on=["query", "doc"], how="left")
        counts["pairs_unmatched_scored_0"] = hits["score"].null_count()
        hits = hits.with_columns(pl.col("score").fill_null(0.0))
        keep = max(k, pairs.group_by("query").len()["len"].max() or 0)
    run, self_hits = finalize_run(hits, keep)
    paths = run_paths(runs_root, corpus_dir.name, pool, name)
    with file_lock(paths["trec"].parent / f".{name}.lock"):
        write_run(run, paths, tag=name)
        seconds = time.perf_counter() - start
        info = run_manifest(corpus_dir, pool, name, k, details, paths, seconds,
                             counts={"queries": queries.height, "candidates": candidates.height,
                                     "rows": run.height, "self_hits_removed": self_hits,
                                     **counts},
                             inputs=inputs)
        write_json(info, paths["manifest.json"])
    return info


