"""Index a pool and retrieve the top 500 for its queries with any registered model.

`index` builds what a model searches: a Lucene index for BM25 on the Lucene engine (the
default arrays engine, `pipeline/bm25_fast.py`, indexes in memory as it searches), the
embedding store for a dense or multi-vector (ASPIRE: one vector per sentence,
`pipeline/multivector.py`) encoder. `search`
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

from pipeline import bm25
from pipeline.artifacts import (
    atomic_path,
    check_outputs,
    file_lock,
    file_problem,
    fingerprints,
    manifest,
    read_json,
    read_parquet,
    write_json,
    write_parquet,
)
from pipeline.embed import embed, encode_texts, load_vectors, store_dir, store_parts
from pipeline.errors import InputError
from pipeline.ingest.corpus import corpus_file
from pipeline.inputs import Roots, changed, record
from pipeline.models import ModelEntry, fusion_parts
from pipeline.naming import VARIANT_SEP, id_key, run_name
from pipeline.pools import load_pool, pool_files
from pipeline.queries import own_text, query_texts
from pipeline.tuning import validation_pools

TOP_K = 500
SCORE_DECIMALS = 6  # scores are rounded as written, so the TREC file and the parquet agree


def bm25_index_dir(index_root: Path, corpus: str, pool: str) -> Path:
    return index_root / corpus / pool / "bm25"


def run_paths(runs_root: Path, corpus: str, pool: str, model: str) -> dict[str, Path]:
    folder = runs_root / corpus / pool
    return {suffix: folder / f"{model}.{suffix}"
            for suffix in ("trec", "parquet", "manifest.json", "metrics.parquet", "eval.json")}


def run_repair(corpus: str, run: str) -> str:
    """The command that searches (and scores) a run of a corpus again: `<model>~<variant>`
    runs are made with QUERY_VARIANT."""
    model, _, variant = run.partition(VARIANT_SEP)
    return f"make eval CORPUS={corpus} MODEL={model}" + (
        f" QUERY_VARIANT={variant}" if variant else "")


def run_problem(corpus_dir: Path, index_root: Path, runs_root: Path, pool: str, model: str,
                k: int = TOP_K) -> str | None:
    """Why `search` would write this run again (None when it is current): no complete run, a
    damaged file, other parameters, or an input that changed since (the pool's files, the
    texts, embedding parts or index it read, component runs, validation pools)."""
    paths = run_paths(runs_root, corpus_dir.name, pool, model)
    if not paths["manifest.json"].exists():
        return "no complete run"
    try:
        info = read_json(paths["manifest.json"])
    except InputError as exc:
        return str(exc)
    if info.get("parameters") != {"pool": pool, "model": model, "k": k}:
        return "made with other parameters"
    for name, expected in info.get("outputs", {}).items():
        problem = file_problem(paths["trec"].parent / name, expected, deep=False)
        if problem:
            return f"{paths['trec'].parent / name}: {problem}"
    details = info.get("details", {})
    if "k1" in details and details.get("tuned_on") != validation_pools(corpus_dir, pool):
        return "its pool's validation pools changed since (BM25 is tuned on them)"
    stale = changed(Roots.of(corpus_dir, index_root, runs_root), info.get("inputs", {}))
    return stale[0] if stale else None


def run_is_current(corpus_dir: Path, index_root: Path, runs_root: Path, pool: str, model: str,
                   k: int = TOP_K) -> bool:
    """True when `search` would write this run again from the same inputs."""
    return run_problem(corpus_dir, index_root, runs_root, pool, model, k) is None


def run_shas(runs_root: Path, corpus: str, pool: str, models: list[str]) -> dict[str, str]:
    """`<model>.parquet` -> sha256 of each model's run of the pool, as its manifest records
    (None for a model without a complete run)."""
    shas = {}
    for model in models:
        paths = run_paths(runs_root, corpus, pool, model)
        outputs = (read_json(paths["manifest.json"]).get("outputs", {})
                   if paths["manifest.json"].exists() else {})
        shas[paths["parquet"].name] = outputs.get(paths["parquet"].name, {}).get("sha256")
    return shas


def paper_texts(corpus_dir: Path, ids: pl.Series) -> pl.DataFrame:
    """corpusid, title, abstract of the papers `ids`, from the checked prefiltered.parquet."""
    return (pl.scan_parquet(corpus_file(corpus_dir, "prefiltered.parquet"))
            .filter(pl.col("corpusid").is_in(ids.implode()))
            .select("corpusid", "title", "abstract").collect())


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
            if bm25.index_is_current(target, params, inputs):
                return {"model": entry.name, "pool": pool, "up_to_date": True}
            return bm25.build_index(paper_texts(corpus_dir, candidates["corpusid"]), target,
                                    threads, params, inputs)
    if entry.embedded:
        return embed(corpus_dir, index_root, entry, pools=[pool], **embed_options)
    if entry.kind in ("random", "fusion"):
        return {"model": entry.name, "pool": pool, "note": "nothing to index"}
    raise InputError(f"MODEL {entry.name} ({entry.kind}) is registered but its retrieval is "
                     "not implemented yet: use bm25, random or a dense encoder")


def finalize_run(hits: pl.DataFrame, k: int = TOP_K) -> tuple[pl.DataFrame, int]:
    """Drop self hits, round scores, order as trec_eval does, keep the top k per query.

    Returns (run with columns query, doc, rank, score) and the number of self hits dropped.
    """
    not_self = hits.filter(pl.col("query") != pl.col("doc"))
    run = (
        not_self.with_columns(pl.col("score").round(SCORE_DECIMALS), key=pl.col("doc")
                              .cast(pl.String))
        .sort(["query", "score", "key"], descending=[False, True, True])
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("query").cast(pl.Int32))
        .filter(pl.col("rank") <= k)
        .select("query", "doc", "rank", "score")
    )
    return run, hits.height - not_self.height


def write_run(run: pl.DataFrame, paths: dict[str, Path], tag: str) -> None:
    """The run as TREC text (qid Q0 docid rank score tag) and as parquet, both atomic; the
    run's manifest is removed first (and written last by the caller), so a run killed between
    the two files is never taken for complete."""
    paths["manifest.json"].unlink(missing_ok=True)
    with atomic_path(paths["trec"]) as tmp:
        text = run.select(pl.format("{} Q0 {} {} {} " + tag, "query", "doc", "rank",
                                    pl.col("score").map_elements(
                                        lambda s: f"{s:.{SCORE_DECIMALS}f}",
                                        return_dtype=pl.String)))
        tmp.write_text("".join(line + "\n" for line in text.to_series()))
    write_parquet(run.to_arrow(), paths["parquet"])


def _dense_hits(corpus_dir: Path, index_root: Path, entry: ModelEntry, queries: pl.DataFrame,
                candidates: pl.DataFrame, k: int, backend: str, texts: pl.DataFrame | None,
                model_path: str | None) -> tuple[pl.DataFrame, dict]:
    """Exact top k by the model's similarity. Queries are the store's vectors of the query
    papers, or (`texts`: a collection's queries, or perturbed ones) their texts encoded now."""
    store = store_dir(index_root, corpus_dir.name, entry.name)
    doc_ids = candidates["corpusid"].to_numpy()
    from pipeline.dense import exact_search

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
        from pipeline import bm25_fast

        runs, capped = bm25_fast.search_grid(
            query_papers, paper_texts(corpus_dir, candidates["corpusid"]), depth, [k1], [b],
            threads)
        return runs[(k1, b)], capped
    return bm25.search(query_papers, index_dir, depth, k1, b, threads,
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
    scores, the same lists). `variant` perturbs the queries (`pipeline/queries.py`); its run is
    named `<model>~<variant>`."""
    start = time.perf_counter()
    name = run_name(entry.name, variant)
    if variant != "full" and entry.kind in ("fusion", "multi-vector"):
        raise InputError(f"QUERY_VARIANT={variant} is not available for {entry.kind} models "
                         f"({entry.name}) yet: use bm25, random or a dense encoder")
    if entry.kind == "bm25":
        bm25.java_binary()  # before any work: both engines need Java (Lucene's analyzer)
    elif entry.kind == "dense":
        from pipeline.dense import check_backend

        check_backend(backend)  # before any work: a GPU backend forced where there is none
    elif entry.kind == "multi-vector":
        from pipeline.dense import maxsim_device

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
        from pipeline.tuning import bm25_params

        index_dir = bm25_index_dir(index_root, corpus_dir.name, pool)
        params = bm25_params(corpus_dir, index_root, pool, entry, threads,  # validation pools
                             engine=bm25_engine)
        read += [corpus_dir / "prefiltered.parquet",
                 *(f for v in params["tuned_on"] for f in pool_files(corpus_dir, v))]
        if bm25_engine == "lucene":
            read += bm25.index_files(index_dir)
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
        from pipeline.multivector import maxsim_hits

        read += _store_files(index_root, corpus_dir, entry)
        inputs = record(roots, read)
        hits, found = maxsim_hits(store_dir(index_root, corpus_dir.name, entry.name),
                                  queries["corpusid"].to_numpy(),
                                  candidates["corpusid"].to_numpy(), depth + 1,
                                  entry.similarity, backend)
        details.update(found)
    elif entry.kind == "fusion":  # the component runs of this pool, fused (ranx)
        from pipeline.fusion import fused_hits

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
        info = _run_manifest(corpus_dir, pool, name, k, details, paths, seconds,
                             counts={"queries": queries.height, "candidates": candidates.height,
                                     "rows": run.height, "self_hits_removed": self_hits,
                                     **counts},
                             inputs=inputs)
        write_json(info, paths["manifest.json"])
    return info


def _run_manifest(corpus_dir: Path, pool: str, name: str, k: int, details: dict,
                  paths: dict[str, Path], seconds: float, counts: dict,
                  inputs: dict[str, str]) -> dict:
    folder = paths["trec"].parent
    return manifest("search", {"pool": pool, "model": name, "k": k}, details=details,
                    inputs=inputs,
                    outputs=fingerprints(folder, [paths["trec"].name, paths["parquet"].name]),
                    counts=counts, seconds=round(seconds, 2),
                    queries_per_s=round(counts["queries"] / max(seconds, 1e-9), 2))



def load_run(corpus_dir: Path, index_root: Path, runs_root: Path, pool: str, model: str
             ) -> pl.DataFrame:
    """A complete, intact run made from its inputs as they are now (else a one-line error
    naming the command that searches it again)."""
    paths = run_paths(runs_root, corpus_dir.name, pool, model)
    repair = run_repair(corpus_dir.name, model)
    if not paths["manifest.json"].exists():
        raise InputError(f"no complete run {paths['parquet']}: search it first: {repair}")
    info = read_json(paths["manifest.json"], repair)
    check_outputs(paths["trec"].parent, info, repair=repair)
    stale = changed(Roots.of(corpus_dir, index_root, runs_root), info.get("inputs", {}))
    if stale:
        raise InputError(f"run {paths['parquet']} is stale: {stale[0]}; repair: {repair}")
    return read_parquet(paths["parquet"])
