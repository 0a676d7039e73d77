"""A pool written as a BEIR folder (`make export-beir`, `pipeline.export_beir`), so that any
tool that reads BEIR's layout (BEIR's GenericDataLoader, MTEB's retrieval tasks, pyserini,
this project's import-beir) scores the same pool.

- `corpus.jsonl`: the pool's candidates, `{"_id", "title", "text"}` (text: the abstract);
- `queries.jsonl`: the pool's queries, `{"_id", "text"}`, the text BM25 searches for a query
  paper: its title and abstract joined by a space, whitespace normalised
  (`pipeline.retrieval.bm25.analysis.paper_text`); a collection's query, its own text as
  imported, byte for byte (its spaces, tabs and line breaks kept);
- `qrels/test.tsv` (`dev.tsv` for a validation pool): BEIR's header, then query-id,
  corpus-id, score;
- `datasheet.json`: what the folder holds and was drawn from (`datasheet`).

Ids are strings, records sorted by id, JSON written with fixed key order and no spaces: the
same pool gives the same bytes. The folder is written beside OUT and renamed into place, so
OUT holds a whole export or what it held before. OUT must be new, empty or an earlier
export (its datasheet says so); a folder holding other files, or one inside the data roots,
is refused before any work. An MDCR-style or CSFCube pool (each query ranks its own list of
candidates) is refused: BEIR's layout has one corpus that every query ranks, so a tool
reading the export would score another task under the pool's name. A collection's judged-only
pool (JUDGED=1) is written as SciDocs is distributed: its judged documents as the corpus, every
judgment in the qrels (the judged negatives as score 0 lines), and `"judged_only": true` in
the datasheet; `make import-beir JUDGED=1` reads it back into the same judged-only pool.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import polars as pl

from pipeline.core.atomic import atomic_dir
from pipeline.core.checksums import sha256_file
from pipeline.core.errors import InputError
from pipeline.core.files import write_json
from pipeline.core.manifests import code_version
from pipeline.corpus.files import paper_texts
from pipeline.corpus.manifest import corpus_sections
from pipeline.external.beir import JUDGED_SCOPE
from pipeline.layout import (
    BEIR_CORPUS,
    BEIR_DATASHEET,
    BEIR_QRELS,
    BEIR_QRELS_HEADER,
    BEIR_QUERIES,
    BEIR_SPLITS,
    Place,
    beir_qrels_file,
)
from pipeline.pools.build import load_pool, pool_manifest
from pipeline.pools.queries import own_text, query_texts
from pipeline.retrieval.bm25.analysis import paper_text

log = logging.getLogger(__name__)
STAGE = "export-beir"  # what a datasheet names as its writer: an OUT that may be replaced
QUERY_TEXT = ("title and abstract joined by a space, whitespace normalised: the text BM25 "
              "searches for a query paper")
OWN_QUERY_TEXT = "the query's own text, as the collection was imported"


def export_beir(place: Place, pool: str, out: Path) -> dict:
    """Write pool `pool` of the corpus at `place` as a BEIR folder `out` (module docstring);
    return its datasheet (`pool` checked at its door: POOL). Nothing is written when anything
    is refused."""
    check_out(out, place)
    docs, queries, judged, info, query_text = beir_records(place, pool)
    qrels_file = beir_qrels_file(info["split"])
    sizes = {"documents": docs.height, "queries": queries.height, "qrels": judged.height,
             "relevant": judged.filter(pl.col("rel") > 0).height}
    with atomic_dir(out) as tmp:
        _write_jsonl(docs, tmp / BEIR_CORPUS)
        _write_jsonl(queries, tmp / BEIR_QUERIES)
        (tmp / BEIR_QRELS).mkdir()
        (tmp / qrels_file).write_text(f"{BEIR_QRELS_HEADER}\n" + "".join(
            f"{q}\t{d}\t{r}\n" for q, d, r in judged.iter_rows()), encoding="utf-8")
        sheet = datasheet(place, pool, info, sizes, {
            name: {"bytes": (tmp / name).stat().st_size, "sha256": sha256_file(tmp / name)}
            for name in (BEIR_CORPUS, BEIR_QUERIES, qrels_file)}, query_text)
        write_json(sheet, tmp / BEIR_DATASHEET)
    log.info(f"[{STAGE}] pool {pool} of corpus {place.corpus} -> {out}: {sizes['documents']} "
             f"documents, {sizes['queries']} queries, {sizes['qrels']} judgments ({qrels_file})")
    return sheet


def beir_records(place: Place, pool: str
                 ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict, str]:
    """The checked pool as BEIR's records, each sorted by its ids (as strings): documents
    (`_id`, `title`, `text`), queries (`_id`, `text`: as BM25 searches a query paper, a
    collection's own text), judgments (`query`, `doc`, `rel`); the pool's manifest, and what
    the queries' text is (the datasheet's `query_text`). An MDCR-style pool is refused."""
    queries, candidates, qrels = load_pool(place.corpus_dir, pool)
    info = pool_manifest(place.corpus_dir, pool)
    if "query" in candidates.columns and not judged_only(info):
        raise InputError(f"pool {pool}: each query ranks its own list of candidates (an "
                         "MDCR-style or CSFCube pool): BEIR's layout has one corpus "
                         "that every query ranks, so its numbers would be another task's; an "
                         "MDCR-style benchmark corpus goes out with make export-mdcr")
    if "query" in candidates.columns:  # each list its judged documents: the corpus, all lists'
        candidates = candidates.select("corpusid").unique()
    texts = query_texts(place.corpus_dir, queries)
    # a collection's query is exported as its own text, byte for byte (its title, as imported:
    # spaces, tabs and all); a query paper as the text BM25 searches
    own = own_text(queries)
    text = texts["title"] if own else paper_text(texts)
    docs = paper_texts(place.corpus_dir, candidates["corpusid"]).select(
        _id=pl.col("corpusid").cast(pl.String), title=pl.col("title").fill_null(""),
        text=pl.col("abstract").fill_null(""))
    return (docs.sort("_id"),
            texts.select(_id=pl.col("corpusid").cast(pl.String), text=text).sort("_id"),
            qrels.select(pl.col("query", "doc").cast(pl.String), "rel").sort("query", "doc"),
            info, OWN_QUERY_TEXT if own else QUERY_TEXT)


def judged_only(info: dict) -> bool:
    """Whether the pool of manifest `info` is a collection's judged-only pool (JUDGED=1): each
    query ranks exactly the documents judged for it, so BEIR's files (a corpus of the judged
    documents, qrels with the judged negatives' score 0 lines) hold the same task, as SciDocs
    is distributed."""
    return info.get("scope") == JUDGED_SCOPE


def _write_jsonl(records: pl.DataFrame, path: Path) -> None:
    """One JSON object per line, keys in the frame's column order, UTF-8 as is, no spaces."""
    with path.open("wb") as handle:
        for row in records.iter_rows(named=True):
            handle.write(orjson.dumps(row) + b"\n")


def datasheet(place: Place, pool: str, info: dict, sizes: dict, files: dict,
              query_text: str) -> dict:
    """What an export holds and was drawn from: the corpus and its source (as its manifest
    records it; the licence too, where it records one), the pool and its parameters (seed,
    the EXCLUDE list's digest and count: never its ids or its path), the prefilter's
    settings, the sizes, the files' sha256, the project's version. Nothing that changes from
    one run to the next (no time), so the same pool gives the same bytes."""
    sections = corpus_sections(place.corpus_dir)
    whole = next((sections[k] for k in ("benchmark", "collection") if k in sections), None)
    ingest = sections.get("ingest", {})
    source = ({"stage": whole.get("stage"), **whole.get("parameters", {})} if whole else
              {"reader": ingest.get("parameters", {}).get("source"),
               "raw_origin": ingest.get("raw_origin")})
    exclusion = info.get("exclusion")
    parameters = info.get("parameters", {})
    return {
        "written_by": STAGE, "project_version": code_version(),
        "corpus": place.corpus, "pool": pool, "split": info.get("split"),
        "level": info.get("level"), "seed": parameters.get("seed"),
        "pool_parameters": {k: v for k, v in parameters.items() if k != "exclude"},
        "prefilter": sections.get("prefilter", {}).get("parameters"),
        "exclusion": None if exclusion is None else {
            "ids": exclusion.get("ids"), "ids_sha256": exclusion.get("ids_sha256")},
        "source": source,
        "license": (whole or ingest).get("license"),
        "sizes": sizes, "files": files,
        "query_text": query_text,
        "judged_only": judged_only(info),
    }


def _previous_export(out: Path) -> bool:
    """Whether `out` holds an earlier export only: its datasheet names this stage and every
    file is one an export writes."""
    sheet = out / BEIR_DATASHEET
    try:
        ours = orjson.loads(sheet.read_bytes()).get("written_by") == STAGE
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return False
    allowed = {BEIR_CORPUS, BEIR_QUERIES, BEIR_DATASHEET, BEIR_QRELS,
               *map(beir_qrels_file, BEIR_SPLITS)}
    return ours and all(p.relative_to(out).as_posix() in allowed for p in out.rglob("*"))


def check_outside_data(out: Path, place: Place) -> None:
    """Refuse an OUT inside the data roots: it would be taken for a corpus, an index or runs."""
    where = out.resolve()
    for root in (place.corpus_dir.parent, place.index_root, place.runs_root):
        if where == root.resolve() or root.resolve() in where.parents:
            raise InputError(f"OUT {out} is inside the data folder's {root.name}/ ({root}): "
                             "give OUT a folder outside DATA's corpora, indexes and runs")


def check_out(out: Path, place: Place) -> None:
    """Refuse, before any work, an OUT the export cannot own: inside the data roots, a file,
    a folder holding files an export did not write (they would be lost), or one in a missing
    or read-only folder."""
    check_outside_data(out, place)
    where = out.resolve()
    if out.exists() and not out.is_dir():
        raise InputError(f"OUT {out} is an existing file, not a folder: give OUT a new or "
                         "empty folder (or move the file away)")
    if out.is_dir() and any(out.iterdir()) and not _previous_export(out):
        names = sorted(p.name for p in out.iterdir())
        raise InputError(f"OUT {out} holds files that export-beir did not write "
                         f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): give "
                         "a new or empty folder, or move them away first")
    parent = where.parent
    if not parent.is_dir():
        raise InputError(f"OUT {out}: the folder {parent} does not exist: create it first, or "
                         "give OUT in an existing folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"OUT {out}: the folder {parent} is read-only: make it writable or "
                         "give OUT in a folder you can write")
