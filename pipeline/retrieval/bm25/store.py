"""BM25's analysed-text store: each paper's Lucene terms, analysed once per corpus, read by every
pool, repeat, query variant, rerun and tuning grid of the corpus (as the embedding store keeps
a paper's vector once per model).

`indexes/<corpus>/bm25-analysed/<analyzer>/` holds `part-*.arrow` files and a manifest listing
each part with its checksum; the parts are read through the same checks as the embedding
store's (`pipeline.encoding.store.store_parts`). A part's rows, sorted by corpusid:
- `corpusid`: int64 (string for collections with string ids);
- `terms`: list<dictionary<int32, string>>: the paper's distinct terms after Anserini's
  DefaultEnglishAnalyzer, sorted; the part's dictionary holds each term once;
- `tfs`: list<int32>: how often the paper holds each term (its length is their sum).
The store is filled only with the papers some searched pool needs, in parts of PART_SIZE cut
from the sorted missing ids (a kill loses at most one part; the rows of a paper never depend
on which part holds it). Its manifest records the analyzer and the Anserini jar (`config`), and
among its `inputs` the prefiltered corpus the texts came from, labelled as every artifact
records what it read (pipeline/core/inputs.py): a store made from another corpus file is stale
(verify lists it), refused by search and rebuilt by `make index MODEL=bm25`.

A pool's index is assembled from the store (`pool_index`) with the pool's own statistics, so
its scores are those of a Lucene index of that pool alone. It is rebuilt in memory at each
search rather than saved: a saved one would serve only the same pool again, at about 1.2 GiB
per million papers (docs/retrieval.md#saved-or-rebuilt, benchmarks/results/bm25_grid.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprint
from pipeline.core.current import MISSING, UNREADABLE, stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.logs import progress
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.corpus.files import corpus_file, paper_texts
from pipeline.encoding.store import (
    distinct,
    id_array,
    not_stored,
    part_name,
    repair_store,
    store_parts,
    whole,
)
from pipeline.layout import MANIFEST, PREFILTERED, Place, analysed_dir
from pipeline.pools.build import load_pool
from pipeline.pools.queries import own_text
from pipeline.retrieval.bm25 import arrays as bm25_arrays
from pipeline.retrieval.bm25 import jvm
from pipeline.retrieval.bm25.analysis import (
    MAX_CLAUSES,
    check_ids,
    paper_text,
    query_texts,
    term_counts,
)
from pipeline.retrieval.bm25.arrays import Postings, QueryTerms, Vocabulary, grid_runs, query_terms

ANALYZER = "anserini-english"  # io.anserini.analysis.DefaultEnglishAnalyzer, as Anserini indexes
PART_SIZE = 50_000  # papers per part: a checkpoint, and one dictionary of terms
log = logging.getLogger(__name__)


def store_path(index_root: Path, corpus: str) -> Path:
    return analysed_dir(index_root, corpus, ANALYZER)


def store_repair(store: Path) -> Repair:
    """The command that analyses again what a store lacks, lost or holds from an old corpus."""
    return Repair("index", store.parent.parent.name, "bm25")


def _config() -> dict:
    """How a stored paper's terms are made: a store with another config is analysed again."""
    # "text" names paper_text where it was (lucene.py): kept, so that stores stay current
    return {"analyzer": "io.anserini.analysis.DefaultEnglishAnalyzer",
            "anserini": jvm.anserini_jar().name,
            "text": "title + ' ' + abstract, whitespace normalised (bm25_lucene.paper_text)"}


def _inputs(place: Place) -> dict[str, str]:
    """What the stored terms are made from, as every artifact records it: the corpus's
    prefiltered.parquet (checked against the corpus manifest first). A store whose recorded
    inputs changed is stale (`pipeline.core.inputs.changed`, which verify asks too)."""
    return record(place.roots, [corpus_file(place.corpus_dir, PREFILTERED)])


def _check_config(store: Path, config: dict, inputs: dict[str, str], repair: bool) -> None:
    """Refuse a store analysed under another config or from other inputs (stale); with
    `repair` (the index stage, which made it), delete its parts and manifest so it is filled
    again."""
    path = store / MANIFEST
    problem = stale(path, config, key="config", inputs=inputs)
    if problem is None or problem.check in (MISSING, UNREADABLE):
        return  # a new store; a damaged manifest: repair_store starts the store again
    if not repair:
        raise InputError(f"{store} holds terms analysed from another prefiltered.parquet or "
                         f"with another analyzer ({problem.reason}; see its manifest.json)",
                         store_repair(store))
    log.warning(f"[bm25] {store}: {problem.reason}: analysed again")
    for part in read_json(path).get("parts", []):
        (store / part["file"]).unlink(missing_ok=True)
    path.unlink()


def _write_part(store: Path, ids: np.ndarray, counts: pl.DataFrame) -> dict:
    """One part: the papers `ids` (sorted) and their (text, term, tf) rows, text = row."""
    offsets = np.zeros(len(ids) + 1, dtype=np.int32)
    np.cumsum(np.bincount(counts["text"].to_numpy(), minlength=len(ids)), out=offsets[1:])
    terms = counts["term"].to_arrow().cast(pa.string()).dictionary_encode()
    table = pa.table({
        "corpusid": pa.array(ids, type=pa.int64() if ids.dtype.kind in "iu" else pa.string()),
        "terms": pa.ListArray.from_arrays(pa.array(offsets), terms),
        "tfs": pa.ListArray.from_arrays(pa.array(offsets), counts["tf"].to_arrow()),
    })
    name = part_name(ids)
    with atomic_path(store / name) as tmp, ipc.new_file(str(tmp), table.schema) as writer:
        writer.write_table(table)
    return {"file": name, "rows": len(ids), **fingerprint(store / name),
            "postings": counts.height}


def _add_part(store: Path, config: dict, inputs: dict[str, str], ids: np.ndarray,
              counts: pl.DataFrame) -> None:
    """Write one part and list it in the store's manifest (under the store lock)."""
    with file_lock(store):
        _check_config(store, config, inputs, repair=False)
        part = _write_part(store, ids, counts)
        parts = [p for p in store_parts(store, store_repair(store))
                 if p["file"] != part["file"]] + [part]
        write_json(manifest("bm25-analyse", {"analyzer": ANALYZER}, config=config,
                            inputs=inputs, parts=parts), store / MANIFEST)


def _analysed(corpus_dir: Path, chunk: np.ndarray, threads: int) -> pl.DataFrame:
    """(text, term, tf) of the papers `chunk` (sorted ids), text = the paper's row."""
    papers = (paper_texts(corpus_dir, pl.Series(chunk)).sort("corpusid"))
    if papers.height != len(chunk):
        raise InputError(f"{len(chunk) - papers.height} pool papers are missing from "
                         f"{corpus_dir}/prefiltered.parquet: rebuild the pools")
    texts = paper_text(papers).to_list()
    return pl.concat([pl.DataFrame(schema={"text": pl.Int32, "term": pl.String, "tf": pl.Int32}),
                      *term_counts(texts, threads)])


def fill(place: Place, ids, threads: int = 2, repair: bool = False,
         part_size: int = PART_SIZE) -> dict:
    """Analyse the papers `ids` the store lacks and add them, a part at a time. A damaged
    part or a store from another corpus file is refused, or with `repair` (`make index`)
    analysed again, orphan parts of a killed run removed. Returns the counts: papers needed,
    analysed, reused, parts repaired."""
    start = time.perf_counter()
    store = store_path(place.index_root, place.corpus)
    store.mkdir(parents=True, exist_ok=True)
    config, inputs = _config(), _inputs(place)
    with file_lock(store):
        _check_config(store, config, inputs, repair)
        repaired = (repair_store(store, "bm25") if repair
                    else {"damaged_parts": 0, "orphan_parts": 0})
        needed = distinct(ids)
        missing = not_stored(store, needed, store_repair(store))
    if len(missing):
        with progress(len(missing), "bm25-analyse", "papers") as bar:
            for lo in range(0, len(missing), part_size):
                chunk = missing[lo : lo + part_size]
                _add_part(store, config, inputs, chunk, _analysed(place.corpus_dir, chunk, threads))
                bar.update(len(chunk))
    info = {"papers": len(needed), "analysed": len(missing),
            "reused": len(needed) - len(missing),
            **repaired,
            "seconds": round(time.perf_counter() - start, 2)}
    log.info(f"[bm25] {store}: {info['analysed']} papers analysed, {info['reused']} reused "
             f"from the store")
    return info


class Selection(NamedTuple):
    """The papers a part holds of those asked for: their rows (positions among the ids asked
    for), where their terms start in the part's lists and how many they are, and the part's
    whole lists (dictionary indices of the terms, tfs: memory-mapped, never copied) and
    dictionary."""

    rows: np.ndarray
    starts: np.ndarray
    lens: np.ndarray
    indices: np.ndarray
    tfs: np.ndarray
    dictionary: pa.Array

    def positions(self) -> np.ndarray:
        """The positions of these papers' terms in the part's lists, paper after paper."""
        return np.repeat(self.starts - np.cumsum(self.lens) + self.lens, self.lens) + \
            np.arange(self.lens.sum())


def _selections(store: Path, ids: np.ndarray) -> Iterator[Selection]:
    """Per part holding some of `ids` (unique), what it holds of them (`Selection`). A paper
    stored twice (two processes) is read once."""
    sorter = np.argsort(ids, kind="stable")
    sorted_ids = ids[sorter]
    found = np.zeros(len(ids), dtype=bool)
    for part in store_parts(store, store_repair(store)):
        if not len(ids):
            break
        table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
        part_ids = id_array(table.column("corpusid").to_numpy())
        at = np.minimum(np.searchsorted(sorted_ids, part_ids), len(ids) - 1)
        hit = np.flatnonzero(sorted_ids[at] == part_ids)
        rows = sorter[at[hit]]
        fresh = ~found[rows]
        hit, rows = hit[fresh], rows[fresh]
        if not len(rows):
            continue
        found[rows] = True
        terms = whole(table.column("terms"))
        offsets = terms.offsets.to_numpy()
        yield Selection(rows, offsets[hit], offsets[hit + 1] - offsets[hit],
                        terms.values.indices.to_numpy(),
                        whole(table.column("tfs")).values.to_numpy(),
                        terms.values.dictionary)
    if not found.all():
        raise InputError(f"{int((~found).sum())} papers (e.g. {ids[~found][0]}) are not in "
                         f"{store}", store_repair(store))


@numba.njit(cache=True)
def _used_terms(starts, lens, indices, n_dictionary):  # pragma: no cover
    """Which entries of a part's dictionary the selected papers' terms use."""
    used = np.zeros(n_dictionary, dtype=np.bool_)
    for i in range(len(starts)):
        for x in range(starts[i], starts[i] + lens[i]):
            used[indices[x]] = True
    return used


@numba.njit(cache=True)
def _copy_terms(fptr, fterms, ftfs, rows, starts, lens, indices, tfs, lookup
                ):  # pragma: no cover
    """Each selected paper's terms (as pool term ids, `lookup`) and tfs, copied from the
    part's lists to the paper's place in the pool's lists by document. One thread: copying
    papers in parallel was slower (benchmarks/results/bm25_threads.md, 2026-11-25: 0.41 s on
    one thread, 0.50 s on two, for a 200k pool; the copy is bound by memory)."""
    for i in range(len(rows)):
        at, start = fptr[rows[i]], starts[i]
        for j in range(lens[i]):
            fterms[at + j] = lookup[indices[start + j]]
            ftfs[at + j] = np.float32(tfs[start + j])


def pool_index(store: Path, ids) -> Postings:
    """The BM25 index of the papers `ids` (unique; document row i is ids[i]) from their stored
    terms, with the pool's own statistics (`Postings.from_forward`). The pool's lists by
    document are filled straight from the memory-mapped parts (each paper's terms in its
    stored order), then turned into lists by term: no (term, document, tf) triples are made."""
    ids = id_array(ids)
    selections = list(_selections(store, ids))
    fptr = np.zeros(len(ids) + 1, dtype=np.int64)
    for selection in selections:
        fptr[selection.rows + 1] = selection.lens
    np.cumsum(fptr, out=fptr)
    fterms = np.empty(fptr[-1], dtype=np.int32)
    ftfs = np.empty(fptr[-1], dtype=np.float32)
    vocab = Vocabulary()
    for selection in selections:
        used = np.flatnonzero(_used_terms(selection.starts, selection.lens, selection.indices,
                                          len(selection.dictionary)))
        lookup = np.full(len(selection.dictionary), -1, dtype=np.int32)
        lookup[used] = vocab.ids(pl.from_arrow(selection.dictionary.take(pa.array(used))))
        _copy_terms(fptr, fterms, ftfs, selection.rows, selection.starts, selection.lens,
                    selection.indices, selection.tfs, lookup)
    return Postings.from_forward(ids, vocab.frame, fptr, fterms, ftfs)


def warm_up() -> None:
    """Compile the engine's numba kernels (`bm25_arrays.warm_up`) and the store's, for the
    types a store's parts give (make setup)."""
    bm25_arrays.warm_up()
    small, one = np.zeros(1, dtype=np.int32), np.ones(1, dtype=np.int32)
    mapped = np.zeros(1, dtype=np.int32)
    mapped.flags.writeable = False  # as a memory-mapped part's lists are
    _copy_terms(np.zeros(2, dtype=np.int64), small.copy(), np.zeros(1, dtype=np.float32),
                np.zeros(1, dtype=np.int64), small, one, mapped, mapped,
                _used_terms(small, one, mapped, 1).astype(np.int32))


def stored_query_terms(store: Path, ids) -> QueryTerms:
    """The stored terms of query papers `ids` (unique; query row i is ids[i])."""
    ids = id_array(ids)
    frames = [pl.DataFrame(schema={"text": pl.Int32, "term": pl.String, "tf": pl.Int32})]
    for selection in _selections(store, ids):
        at = selection.positions()
        frames.append(pl.DataFrame({
            "text": pl.Series(np.repeat(selection.rows, selection.lens), dtype=pl.Int32),
            "term": pl.from_arrow(selection.dictionary.take(pa.array(selection.indices[at])))
            .cast(pl.String),
            "tf": pl.Series(selection.tfs[at], dtype=pl.Int32)}))
    return QueryTerms(pl.concat(frames), len(ids))


# The engine interface (engines.py) for the arrays engine, as lucene.py gives it for Lucene


def index_pool(place: Place, pool: str, threads: int = 2, part_size: int | None = None) -> dict:
    """The pool's papers (and its queries, when they are papers of the corpus) into the
    analysed-text store; the pool's index is assembled from it when it is searched."""
    queries, candidates, _ = load_pool(place.corpus_dir, pool)
    ids = [candidates["corpusid"].to_numpy()]
    if not own_text(queries):
        ids.append(queries["corpusid"].to_numpy())
    return {"pool": pool,
            "note": "the arrays engine assembles the pool's index from the analysed-"
                    "text store when it searches",
            **fill(place, np.concatenate(ids), threads, repair=True,
                   part_size=part_size or PART_SIZE)}


def ready_pool(place: Place, pool: str, threads: int = 2) -> None:
    """Nothing: `search_grid` fills the store with what it lacks itself."""


def searched_files(place: Place, pool: str) -> list[Path]:
    """None beyond the corpus and the pool: the store's parts are checked as they are read."""
    return []


def search_grid(place: Place, pool: str, queries: pl.DataFrame, papers_as_queries: bool,
                candidates: pl.Series, k: int, k1s: Sequence[float], bs: Sequence[float],
                threads: int = 2, max_clauses: int = MAX_CLAUSES, work_dir: Path | None = None
                ) -> tuple[dict[tuple[float, float], pl.DataFrame], list, dict]:
    """`bm25_arrays.grid_runs` through the store: the pool's index assembled from it, and
    the queries' terms read from it when they are the corpus's papers (`papers_as_queries`);
    queries with their own text (a collection's, a QUERY_VARIANT) and queries cut to
    `max_clauses` terms are analysed here (no files are written: `work_dir` is Lucene's).
    Returns the runs per (k1, b), the ids of the queries cut, and the store's counts (papers
    analysed, reused)."""
    check_ids(candidates, "document")
    store = store_path(place.index_root, place.corpus)
    needed = [candidates.to_numpy()] + ([queries["corpusid"].to_numpy()] if papers_as_queries
                                        else [])
    info = fill(place, np.concatenate(needed), threads)
    index = pool_index(store, candidates.to_numpy())
    texts, capped = query_texts(queries, max_clauses,
                                lambda: paper_texts(place.corpus_dir, candidates))
    if papers_as_queries:
        terms = stored_query_terms(store, queries["corpusid"].to_numpy())
        was_cut = pl.Series(capped, dtype=queries["corpusid"].dtype).implode()
        cut = np.flatnonzero(queries["corpusid"].is_in(was_cut).to_numpy())
        if len(cut):  # their capped texts instead of the papers' whole terms
            fresh = query_terms([texts[i] for i in cut], threads).counts
            fresh = fresh.with_columns(text=pl.Series(cut[fresh["text"].to_numpy()],
                                                      dtype=pl.Int32))
            terms = QueryTerms(pl.concat([terms.counts.filter(~pl.col("text").is_in(cut)),
                                          fresh]), terms.n)
    else:
        terms = query_terms(texts, threads)
    runs = grid_runs(index, terms, queries["corpusid"], candidates.dtype, k, k1s, bs, threads)
    return runs, capped, info
