"""Lucene impact search of learned sparse vectors, as pyserini runs SPLADE (the second engine).

A pool's candidates are written as Anserini's JsonVectorCollection (`{"id", "contents": "",
"vector": {term: impact}}`, a term named by its vocabulary id, its impact the integer
quantised weight: impact.quantised) and indexed by IndexCollection with `-impact
-pretokenized`, in the order of their ids as strings on one thread (so Lucene's tie order is
the arrays engine's). Queries are written as pyserini writes encoded queries (its
`encode/query.py`): each term repeated as many times as its impact, searched by
SearchCollection `-impact -pretokenized`, which scores a candidate by the sum over shared
terms of the query term's count times its impact: the dot product of the integer impacts.
Run in this process's JVM on the Anserini jar that pyserini ships (retrieval/bm25/jvm.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from pipeline.core.atomic import DIR_MODE, atomic_dir, scratch_dir
from pipeline.core.checksums import check_outputs, fingerprints
from pipeline.core.current import stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.layout import IMPACT_DOCS, LUCENE, MANIFEST
from pipeline.retrieval.bm25.jvm import anserini_jar, java_binary, run_anserini
from pipeline.retrieval.bm25.lucene import read_run
from pipeline.retrieval.sparse.impact import quantised

Sparse = tuple[np.ndarray, np.ndarray, np.ndarray]  # CSR arrays: offsets, terms, weights


def impacts(csr: Sparse, row: int) -> dict[str, int]:
    """Row `row`'s non-zero integer impacts by term name (its vocabulary id)."""
    offsets, terms, weights = csr
    at = slice(offsets[row], offsets[row + 1])
    values = quantised(weights[at])
    return {str(t): int(v) for t, v in zip(terms[at], values, strict=True) if v > 0}


def build_index(doc_ids: np.ndarray, docs: Sparse, index_dir: Path, parameters: dict,
                inputs: dict[str, str]) -> dict:
    """Index the candidates `doc_ids` (ordered by id as a string) with their vectors `docs`
    into a Lucene impact index at `index_dir`, built beside it and renamed into place."""
    java_binary()  # a missing Java is reported before anything is written
    with atomic_dir(index_dir) as tmp:
        work = tmp / ".work"
        (work / "docs").mkdir(parents=True)
        with (work / "docs" / IMPACT_DOCS).open("wb") as handle:
            for row, doc in enumerate(doc_ids):
                handle.write(orjson.dumps({"id": str(doc), "contents": "",
                                           "vector": impacts(docs, row)}) + b"\n")
        run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonVectorCollection", "-input", str(work / "docs"),
            "-index", str(tmp / LUCENE), "-generator", "DefaultLuceneDocumentGenerator",
            "-impact", "-pretokenized", "-threads", "1", "-quiet",
        ], tmp / LUCENE)
        shutil.rmtree(work)
        os.chmod(tmp / LUCENE, DIR_MODE)
        files = sorted(f"{LUCENE}/{f.name}" for f in (tmp / LUCENE).iterdir())
        info = manifest("index", parameters, kind="lucene-impact", documents=len(doc_ids),
                        anserini_jar=anserini_jar().name, inputs=inputs,
                        outputs=fingerprints(tmp, files))
        write_json(info, tmp / MANIFEST)
    return info


def index_is_current(index_dir: Path, parameters: dict, inputs: dict[str, str]) -> bool:
    """Built from the same pool and store (`inputs`), its files matching its manifest."""
    return stale(index_dir / MANIFEST, parameters, files=index_dir, inputs=inputs) is None


def index_files(index_dir: Path, repair: Repair) -> list[Path]:
    """The files of a pool's impact index, checked against its manifest (a damaged or
    missing index is refused by name, with the command that builds it: `repair`)."""
    if not (index_dir / MANIFEST).exists():
        raise InputError(f"no Lucene impact index at {index_dir}: build it", repair)
    info = read_json(index_dir / MANIFEST, repair)
    check_outputs(index_dir, info, repair=repair)
    return [index_dir / name for name in info.get("outputs", {})]


def search(query_ids: np.ndarray, queries: Sparse, index_dir: Path, k: int, threads: int,
           work_dir: Path, id_type: pl.DataType) -> pl.DataFrame:
    """Top-k of each query on the impact index: (query, doc, score) as Anserini ranks them.
    A query with no impact (every weight rounds to 0) has no hits."""
    lines = []
    for row, query in enumerate(query_ids):
        words = " ".join(" ".join([term] * n) for term, n in impacts(queries, row).items())
        if words:
            lines.append(f"{query}\t{words}\n")
    if not lines:
        return read_run(None, id_type)
    with scratch_dir(work_dir, "impact-search") as tmp:
        (tmp / "topics.tsv").write_text("".join(lines))
        run_file = tmp / "run.txt"
        run_anserini("io.anserini.search.SearchCollection", [
            "-index", str(index_dir / LUCENE), "-topics", str(tmp / "topics.tsv"),
            "-topicReader", "TsvString", "-output", str(run_file), "-impact",
            "-pretokenized", "-hits", str(k), "-threads", str(threads),
        ], run_file)
        return read_run(run_file, id_type)
