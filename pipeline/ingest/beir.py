"""Read a test collection in BEIR's layout into a corpus and one pool (SciDocs, NFCorpus,
TREC-COVID, ...), so embed, index, search and eval run on it unchanged.

Input folder: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`),
`qrels/<split>.tsv` (header, then query-id, corpus-id, score). Output: `corpora/<name>/`
with `prefiltered.parquet` (every document: corpusid as a string, title, abstract = text), a
manifest with a `collection` section (no ingest or prefilter: the Makefile leaves it alone),
and the pool `beir-<documents>-r0` (`-val` for the dev split), whose queries carry their own
text (title = the query, abstract empty) and whose qrels keep the graded relevance. The pool
is scored with the `beir` metric set (nDCG@10, R@100) unless METRICS says otherwise.
Ids stay strings; a query whose id is also a document's never retrieves that document (as
BEIR's evaluation ignores identical ids). Qrels naming an unknown query or document are
dropped and counted; queries without qrels in the split are not in the pool (counted).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.artifacts import (
    MANIFEST,
    fingerprint,
    fingerprints,
    manifest,
    write_json,
    write_parquet,
)
from pipeline.errors import InputError
from pipeline.naming import pool_name
from pipeline.pools import POOL_FILES

SPLIT_FILES = {"test": "test", "val": "dev", "dev": "dev"}  # SPLIT -> qrels/<file>.tsv


def _read_jsonl(path: Path, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    if not path.exists():
        raise InputError(f"{path} does not exist: give SRC=<folder> holding corpus.jsonl, "
                         "queries.jsonl and qrels/ (BEIR's layout)")
    try:
        frame = pl.read_ndjson(path, schema=columns, ignore_errors=False)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: unreadable as JSON lines with {', '.join(columns)} "
                         f"({exc.__class__.__name__}); is it a BEIR file?") from None
    if frame["_id"].null_count():
        raise InputError(f"{path}: {frame['_id'].null_count()} records have no _id; fix or "
                         "remove them")
    return frame


def _read_qrels(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise InputError(f"{path} does not exist: the split's judgments (qrels/<split>.tsv); "
                         "choose SPLIT=test or SPLIT=dev")
    try:
        return pl.read_csv(path, separator="\t", has_header=True,
                           new_columns=["query", "doc", "rel"],
                           schema_overrides=[pl.String, pl.String, pl.Int32])
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: unreadable as query-id, corpus-id, score with a header "
                         f"({exc.__class__.__name__})") from None


def import_beir(src: Path, corpus_dir: Path, split: str = "test") -> dict:
    """Write the collection at `src` as the corpus `corpus_dir` and its `split` pool."""
    from pipeline.bm25 import check_ids

    if split not in SPLIT_FILES:
        raise InputError(f"SPLIT {split!r}: use test or dev (val)")
    docs = _read_jsonl(src / "corpus.jsonl", {"_id": pl.String, "title": pl.String,
                                                "text": pl.String})
    queries = _read_jsonl(src / "queries.jsonl", {"_id": pl.String, "text": pl.String})
    check_ids(docs["_id"], "document")
    check_ids(queries["_id"], "query")
    qrels = _read_qrels(src / "qrels" / f"{SPLIT_FILES[split]}.tsv")
    counts = {"documents_read": docs.height, "duplicate_documents_dropped":
              docs.height - docs["_id"].n_unique(), "queries_read": queries.height,
              "qrels_read": qrels.height}
    docs = docs.unique("_id", keep="first").sort("_id")
    known = qrels.join(docs.select(doc="_id"), on="doc", how="semi").join(
        queries.select(query="_id"), on="query", how="semi")
    counts["qrels_dropped_unknown_document_or_query"] = qrels.height - known.height
    qrels = known.unique(["query", "doc"], keep="last").sort("query", "doc")
    queries = (queries.unique("_id", keep="first")
               .join(qrels.select(_id="query").unique(), on="_id", how="semi").sort("_id"))
    counts["queries_without_qrels_left_out"] = counts["queries_read"] - queries.height
    if queries.is_empty():
        raise InputError(f"{src}: no query of queries.jsonl has judgments in "
                         f"qrels/{SPLIT_FILES[split]}.tsv that name a document of corpus.jsonl")
    papers = docs.select(corpusid="_id", title=pl.col("title").fill_null(""),
                         abstract=pl.col("text").fill_null(""))
    corpus_dir.mkdir(parents=True, exist_ok=True)
    write_parquet(papers.to_arrow(), corpus_dir / "prefiltered.parquet")
    prefiltered_sha = fingerprint(corpus_dir / "prefiltered.parquet")["sha256"]
    name = pool_name("beir", papers.height, 0, 0, "validation" if split != "test" else "test")
    pool_dir = corpus_dir / "pools" / name
    pool_dir.mkdir(parents=True, exist_ok=True)
    (pool_dir / MANIFEST).unlink(missing_ok=True)
    tables = (queries.select(corpusid="_id", field=pl.lit(None, pl.String), title="text",
                             abstract=pl.lit("")),
              papers.select("corpusid", type=pl.lit("document")), qrels)
    for file, table in zip(POOL_FILES, tables, strict=True):
        write_parquet(table.to_arrow(), pool_dir / file)
    counts.update(queries=queries.height, candidates=papers.height, qrels=qrels.height,
                  relevant=qrels.filter(pl.col("rel") > 0).height)
    parameters = {"source": str(src), "split": split, "field": None}
    write_json(manifest("import-beir", parameters, name=name, scope="beir",
                        split="test" if split == "test" else "validation", level="collection",
                        metrics="beir", inputs={"prefiltered.parquet": prefiltered_sha},
                        outputs=fingerprints(pool_dir, POOL_FILES), counts=counts),
               pool_dir / MANIFEST)
    info = {"collection": manifest("import-beir", parameters, outputs=fingerprints(
        corpus_dir, ["prefiltered.parquet"]), counts=counts, pools=[name])}  # this split's
    write_json(info, corpus_dir / MANIFEST)
    return info
