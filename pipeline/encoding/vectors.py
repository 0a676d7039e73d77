"""Vectors computed elsewhere, imported as an embedding store (`make import-vectors`,
`pipeline.import_vectors`; docs/encoders.md, "Vectors from elsewhere").

The source is a parquet file with a paper id column (`corpusid`, of the corpus's id type) and
a `vector` column (a fixed-size list or a list of numbers). An optional boolean column `query`
marks the rows that are query vectors (`corpusid` then the query's id): a collection's queries
are texts, not papers (BEIR's, CSFCube's facet queries), and without their vectors the store
cannot search its pools. They are kept beside the papers' (`layout.imported_queries_path`),
checked as theirs are (one dimension for all rows, no id twice among the queries), and every
one is kept: a query of a pool imported later is searched too; those of no pool of the corpus
yet are counted (`queries_of_no_pool`) and named in a warning, as the papers' unknown ids are.
Every row is checked before anything is written: one dimension for all, no null, NaN or
infinite value as float32 (the store's type: 1e39 is inf there), no id twice (each refused,
counted, with an example id); ids that are not papers of the corpus are dropped and counted
(vectors made for a larger collection are the usual case). The file is read `BATCH_ROWS` rows
at a time, twice (checked, then placed in a scratch file in the store's order), so memory
holds the ids, a batch and one part, whatever its size. Another file or similarity over a
store it made needs `replace`.
The store, `indexes/<corpus>/embeddings/vectors--<name>/`, records the source's sha256 and
the similarity, and each row the text digest of its paper at import time, so a corpus made
again in place makes it stale: it is imported again (from a file computed on the new texts),
never re-embedded. A search of it reads the similarity its manifest records, and for text
queries the query vectors (`imported_query_vectors`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.atomic import atomic_dir, scratch_dir
from pipeline.core.checksums import file_problem, file_sha256, fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import is_corrupt, read_json
from pipeline.core.repair import Repair
from pipeline.corpus.files import corpus_file
from pipeline.encoding.store import id_array, imported_repair, store_parts
from pipeline.encoding.store_texts import current_digests, store_inputs
from pipeline.encoding.writer import add_part
from pipeline.layout import (
    MANIFEST,
    POOL_QUERIES,
    PREFILTERED,
    Place,
    imported_queries_path,
    pool_dir,
    pool_names,
    store_dir,
)
from pipeline.models import IMPORT_VECTORS, SIMILARITIES, vectors_model

log = logging.getLogger(__name__)
PART_ROWS = 65536  # rows per store part
BATCH_ROWS = 8192  # rows of the source read at a time
READ_BUFFER = 1 << 22  # bytes of the source's pages buffered
FLOAT32_MAX = float(np.finfo(np.float32).max)
QUERY = "query"  # the optional boolean column marking query vectors


def _intact(store: Path) -> bool:
    """Whether every part of the store, and its query vectors, are as its manifest records (a
    damaged one is imported again: its repair, imported_repair, is this import)."""
    try:
        store_parts(store)
    except InputError:
        return False
    queries = read_json(store / MANIFEST)["config"]["imported"].get("queries")
    return queries is None or file_problem(imported_queries_path(store), queries,
                                           deep=False) is None


def _open_source(src: Path, id_type: pl.DataType) -> pq.ParquetFile:
    """The source as a parquet file whose columns are what an import reads: corpusid of the
    corpus's id type (integers, or strings for collections with string ids) and vector, a
    list of numbers."""
    try:
        # read a page at a time (not a whole column chunk: a row group can be gigabytes)
        source = pq.ParquetFile(src, buffer_size=READ_BUFFER, pre_buffer=False)
        schema = source.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"SRC {src}: not a readable parquet file ({exc.__class__.__name__}): "
                         "give a parquet file with columns corpusid and vector") from None
    missing = [c for c in ("corpusid", "vector") if c not in schema.names]
    if missing:
        raise InputError(f"SRC {src}: no column {', '.join(missing)} (it has "
                         f"{', '.join(schema.names)}): give corpusid (the paper id) and vector")
    ids, vector = schema.field("corpusid").type, schema.field("vector").type
    integers = id_type.is_integer()
    if not (pa.types.is_integer(ids) if integers else
            pa.types.is_string(ids) or pa.types.is_large_string(ids)
            or pa.types.is_string_view(ids)):
        expected = ("integers: give corpusid as int64 (1000007, not '1000007' or 1000007.0)"
                    if integers else "strings: give corpusid as strings")
        raise InputError(f"SRC {src}: column corpusid is {ids}, but the paper ids of the "
                         f"corpus are {expected}")
    if not (pa.types.is_list(vector) or pa.types.is_large_list(vector)
            or pa.types.is_fixed_size_list(vector)) or not (
            pa.types.is_floating(vector.value_type) or pa.types.is_integer(vector.value_type)):
        raise InputError(f"SRC {src}: column vector is {vector}, not a list of floats: give "
                         "each vector as a list of numbers (list<float>)")
    if QUERY in schema.names and not pa.types.is_boolean(schema.field(QUERY).type):
        raise InputError(f"SRC {src}: column {QUERY} is {schema.field(QUERY).type}, not "
                         "boolean: give true for a query's vector, false for a paper's")
    return source


def _batches(source: pq.ParquetFile) -> Iterator[tuple[pa.Array, pa.Array, pa.Array]]:
    """(corpusid, vector, query: whether the row is a query's) of the source, BATCH_ROWS rows
    at a time (query all false without the column)."""
    marked = QUERY in source.schema_arrow.names
    columns = ["corpusid", "vector", *([QUERY] if marked else [])]
    for batch in source.iter_batches(BATCH_ROWS, columns=columns):
        query = batch.column(2) if marked else pa.array(np.zeros(batch.num_rows, dtype=bool))
        yield batch.column(0), batch.column(1), query


def _rows(vectors: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(each row's length, 0 for a null vector; its values as the store's float32, read as
    float64 first as polars read them)."""
    lengths = pc.fill_null(pc.list_value_length(vectors), 0).to_numpy().astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):  # 1e39 becomes inf: refused below
        values = np.asarray(pc.list_flatten(vectors).to_numpy(zero_copy_only=False),
                            dtype=np.float64).astype(np.float32)
    return lengths, values


@dataclass
class _Survey:
    """What one pass over the source found (every row checked, nothing kept but the ids)."""

    rows: int = 0
    nulls: int = 0
    lengths: dict[int, list] = field(default_factory=dict)  # length -> [rows, first row, id]
    not_finite: int = 0
    first_not_finite: object = None
    ids: list[np.ndarray] = field(default_factory=list)
    queries: list[np.ndarray] = field(default_factory=list)  # whether each row is a query's

    def add(self, ids: pa.Array, vectors: pa.Array, query: pa.Array) -> None:
        null = pc.or_(pc.or_(pc.is_null(ids), pc.is_null(vectors)), pc.is_null(query)
                      ).to_numpy(zero_copy_only=False)
        self.nulls += int(null.sum())
        found = id_array(pc.fill_null(ids, 0 if pa.types.is_integer(ids.type) else "")
                         .to_numpy(zero_copy_only=False))
        lengths, values = _rows(vectors)
        for length, first, count in zip(*np.unique(lengths, return_index=True,
                                                   return_counts=True), strict=True):
            seen = self.lengths.setdefault(int(length), [0, self.rows + first, found[first]])
            seen[0] += int(count)
        ends = np.cumsum(lengths)
        seen = np.r_[0, np.cumsum(~np.isfinite(values))]  # values not finite up to each
        bad = seen[ends] > seen[ends - lengths]
        if bad.any():
            if self.first_not_finite is None:
                self.first_not_finite = found[np.argmax(bad)]
            self.not_finite += int(bad.sum())
        self.ids.append(found)
        self.queries.append(pc.fill_null(query, False).to_numpy(zero_copy_only=False))
        self.rows += len(found)

    def check(self, src: Path) -> tuple[np.ndarray, np.ndarray, int]:
        """The ids (in the source's order), whether each is a query's, and the dimension;
        every refusal (module doc)."""
        if self.nulls:
            raise InputError(f"SRC {src}: {self.nulls} rows have no id or no vector (or no "
                             f"{QUERY} mark): remove or complete them")
        # the most common length (the largest of equals), as polars' mode().sort()[-1]
        dim = max(self.lengths, key=lambda n: (self.lengths[n][0], n)) if self.rows else 0
        if dim == 0:
            raise InputError(f"SRC {src}: no vectors: give at least one row")
        other = [seen for length, seen in self.lengths.items() if length != dim]
        if other:
            example = min(other, key=lambda seen: seen[1])[2]
            raise InputError(f"SRC {src}: {sum(seen[0] for seen in other)} of {self.rows} "
                             f"vectors do not have {dim} dimensions as the others (e.g. paper "
                             f"{example}): give one dimension for all")
        if self.not_finite:
            raise InputError(f"SRC {src}: {self.not_finite} vectors hold NaN or infinite values"
                             f" as float32, the store's type (beyond ±{FLOAT32_MAX:.3g}; e.g. "
                             f"paper {self.first_not_finite}): fix them")
        ids, queries = np.concatenate(self.ids), np.concatenate(self.queries).astype(bool)
        for marked, what in ((False, "paper"), (True, "query")):
            ordered = np.sort(ids[queries == marked], kind="stable")
            twice = ordered[1:][ordered[1:] == ordered[:-1]]
            if len(twice):
                raise InputError(f"SRC {src}: {len(np.unique(twice))} {what} ids appear more "
                                 f"than once (e.g. {twice[0]}): give one vector per {what}")
        return ids, queries, dim


def _place(source: pq.ParquetFile, at: np.ndarray, dim: int, out: Path) -> np.ndarray:
    """Write each paper row's float32 vector at row `at` of `out` (-1: not kept), a batch
    at a time: `out` holds the kept vectors in the store's order. Returns the query rows'
    vectors, in the source's order (a collection's queries: few)."""
    width = dim * np.dtype(np.float32).itemsize
    queries = []
    with out.open("r+b") as handle:
        done = 0
        for _, vectors, query in _batches(source):
            rows = at[done:done + len(vectors)]
            done += len(vectors)
            values = _rows(vectors)[1].reshape(-1, dim)
            queries.append(values[pc.fill_null(query, False).to_numpy(zero_copy_only=False)])
            for row in np.flatnonzero(rows >= 0):
                handle.seek(int(rows[row]) * width)
                handle.write(values[row].tobytes())
    return np.concatenate(queries)


def _corpus_digests(place: Place, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """current_digests of the sorted `ids`, PART_ROWS ids at a time (the texts of one part's
    papers in memory, not those of the whole file's)."""
    found = [current_digests(place.corpus_dir, ids[lo:lo + PART_ROWS], ["title", "abstract"])
             for lo in range(0, len(ids), PART_ROWS)]
    return (np.concatenate([known for known, _ in found]),
            np.concatenate([digests for _, digests in found]))


def _read_source(src: Path, place: Place
                 ) -> tuple[pq.ParquetFile, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                            dict[str, int]]:
    """Check every row of the source (one streamed pass, writing nothing): the source, the ids
    of the corpus's papers it holds (sorted) with their text digests, where each paper row
    goes among them (-1: a query's row, or not a paper of the corpus, dropped), the query
    rows' ids (the source's order) and the counts. Memory holds the ids and a batch,
    whatever the file's size."""
    prefiltered = corpus_file(place.corpus_dir, PREFILTERED)
    source = _open_source(src, pl.scan_parquet(prefiltered).collect_schema()["corpusid"])
    survey = _Survey()
    for ids, vectors, query in _batches(source):
        survey.add(ids, vectors, query)
    ids, queries, dim = survey.check(src)
    known, digests = _corpus_digests(place, np.sort(ids[~queries]))
    keep = ~queries & np.isin(ids, known)
    counts = {"rows": len(ids), "dim": dim, "imported": int(keep.sum()),
              "unknown_ids_dropped": int((~keep & ~queries).sum()),
              "query_vectors": int(queries.sum())}
    if queries.any():  # a paper-only file's counts as they were
        counts["queries_of_no_pool"] = int((~np.isin(ids[queries].astype(str),
                                                      list(_pool_queries(place)))).sum())
    if not keep.any():
        raise InputError(f"SRC {src}: none of its {len(ids)} ids is a paper of "
                         f"{prefiltered}: give the vectors of this corpus's papers (column "
                         "corpusid)")
    at = np.full(len(ids), -1, dtype=np.int64)
    at[keep] = np.searchsorted(known, ids[keep])
    return source, known, digests, at, ids[queries], counts


def _write_queries(store: Path, ids: np.ndarray, vectors: np.ndarray) -> dict:
    """The query vectors as the store keeps them (imported_queries_path: sorted by id, ids as
    strings, as a pool's query ids are compared) and their fingerprint for the manifest."""
    path = imported_queries_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    order = np.argsort(ids.astype(str), kind="stable")
    table = pa.table({"query": pa.array(ids[order].astype(str)),
                      "vector": pa.FixedSizeListArray.from_arrays(
                          pa.array(vectors[order].ravel(), pa.float32()), vectors.shape[1])})
    pq.write_table(table, path, compression="zstd")
    return {"file": str(path.relative_to(store)), "rows": len(ids), **fingerprint(path)}


def imported_query_vectors(store: Path, ids: np.ndarray) -> np.ndarray:
    """The imported vectors of the queries `ids` (a pool's text queries), checked against the
    store's manifest; a query without one is refused with the import that gives it."""
    recorded = read_json(store / MANIFEST)["config"]["imported"].get("queries")
    path = imported_queries_path(store)
    if recorded is None:
        raise InputError(f"{store} holds no query vectors, and these queries are texts, not "
                         f"papers: import the vectors again with the queries' rows (a boolean "
                         f"column {QUERY}, true for a query's vector)", imported_repair(store))
    problem = file_problem(path, recorded, deep=False)
    if problem:
        raise InputError(f"{path}: {problem}", imported_repair(store))
    table = pl.read_parquet(path)
    wanted = pl.DataFrame({"query": ids.astype(str)}).with_row_index("at")
    found = wanted.join(table, on="query", how="left", maintain_order="left")
    missing = found.filter(pl.col("vector").is_null())["query"]
    if missing.len():
        raise InputError(f"{len(missing)} queries (e.g. {missing[0]}) have no vector in {path}: "
                         f"import a file that holds them (rows with {QUERY} true)",
                         imported_repair(store))
    return np.stack(found["vector"].to_numpy()).astype(np.float32)


def import_vectors(place: Place, name: str, src: str | os.PathLike,
                   similarity: str = "cosine", replace: bool = False) -> dict:
    """Fill the store of model `vectors:<name>` of the corpus from `src` (see the module's
    docstring); returns what was imported and dropped. A store imported from the same bytes
    with the same similarity is kept as it is (imported again when the corpus changed or the
    store is damaged: its repair); another source or similarity replaces it only with
    `replace` (import-vectors made it); a store this command did not make is refused."""
    if similarity not in SIMILARITIES:
        raise InputError(f"SIMILARITY={similarity!r}: use one of {', '.join(SIMILARITIES)}")
    if not isinstance(replace, bool):
        raise InputError("import_vectors: replace is True or False")
    entry = vectors_model(name)
    src = Path(src)
    if not src.is_file():
        raise InputError(f"SRC {src}: no such file: give the parquet file of the vectors")
    store = store_dir(place.index_root, place.corpus, entry.name)
    sha, inputs = file_sha256(src), store_inputs(place)
    imported = {"source": str(src), "sha256": sha, "similarity": similarity}
    # A store whose manifest cannot be read is imported again over it: only this command
    # writes a `vectors--<name>` folder (no model or pipeline.Encoder may take such a name).
    if (store / MANIFEST).exists() and not is_corrupt(store / MANIFEST):
        made = read_json(store / MANIFEST)
        had = made.get("config", {}).get("imported")
        if had is None:
            raise InputError(f"{store} holds vectors that import-vectors did not write: "
                             "import under another MODEL name")
        same = {k: had.get(k) for k in ("sha256", "similarity")} == {
            "sha256": sha, "similarity": similarity}
        if same and made.get("inputs") == inputs and _intact(store):
            log.info(f"[{IMPORT_VECTORS}] {store}: already imported from these bytes")
            return {"model": entry.name, "kept": True, **had.get("counts", {})}
        if not same and not replace:
            raise InputError(
                f"{store} holds vectors imported from {had.get('source')!r} (sha256 "
                f"{str(had.get('sha256'))[:12]}, similarity {had.get('similarity')}), other "
                f"than {str(src)!r} with similarity {similarity}: give another MODEL name, or "
                "REPLACE=1 (replace=True) to import these in their place",
                Repair(IMPORT_VECTORS, place.corpus, name, (
                    ("SRC", str(src)), ("SIMILARITY", similarity), ("REPLACE", "1"))))
    source, ids, digests, at, query_ids, counts = _read_source(src, place)
    config = {"model": entry.describe(), "dtype": "float32", "dim": counts["dim"],
              "max_length": None, "text_format": "imported",
              "imported": {**imported, "counts": counts}}
    dim = counts["dim"]
    with scratch_dir(store.parent, entry.name) as scratch, atomic_dir(store) as tmp:
        vectors = scratch / "vectors.f32"  # the kept vectors in the store's order
        with vectors.open("wb") as handle:
            handle.truncate(len(ids) * dim * 4)
        queries = _place(source, at, dim, vectors)
        if len(query_ids):
            config["imported"]["queries"] = _write_queries(tmp, query_ids, queries)
        for lo in range(0, len(ids), PART_ROWS):
            rows = len(ids[lo:lo + PART_ROWS])
            part = np.fromfile(vectors, dtype=np.float32, count=rows * dim,
                               offset=lo * dim * 4).reshape(rows, dim)
            add_part(tmp, config, ids[lo:lo + PART_ROWS], part, f"imported from {src}",
                     inputs=inputs, digests=digests[lo:lo + PART_ROWS])
    if counts["unknown_ids_dropped"]:
        log.warning(f"[{IMPORT_VECTORS}] {counts['unknown_ids_dropped']} of {counts['rows']} ids "
                    f"of {src} are not papers of {place.corpus}: dropped")
    if counts.get("queries_of_no_pool"):
        log.warning(f"[{IMPORT_VECTORS}] {counts['queries_of_no_pool']} of "
                    f"{counts['query_vectors']} query vectors of {src} are of no query of a "
                    f"pool of {place.corpus} (of those whose queries are texts): kept, for a "
                    "pool imported later (SPLIT=dev); were they made for this corpus?")
    if not len(query_ids) and (texts := _text_query_pools(place)):
        log.warning(f"[{IMPORT_VECTORS}] {src} has no query vectors (column {QUERY}), and the "
                    f"queries of {len(texts)} pools of {place.corpus} are texts ({texts[0]}, "
                    f"...): {entry.name} cannot search them")
    log.info(f"[{IMPORT_VECTORS}] {entry.name}: {counts['imported']} vectors of {counts['dim']} "
             f"dimensions and {counts['query_vectors']} query vectors from {src} (sha256 "
             f"{sha[:12]})")
    return {"model": entry.name, "kept": False, **counts}


def _text_query_pools(place: Place) -> list[str]:
    """The corpus's pools whose queries are texts (a collection's), which need query
    vectors."""
    from pipeline.pools.queries import own_text

    return [pool for pool in pool_names(place.corpus_dir) if own_text(pl.read_parquet(
        pool_dir(place.corpus_dir, pool) / POOL_QUERIES, n_rows=0))]


def _pool_queries(place: Place) -> set[str]:
    """The ids, as strings (as the store keeps them: _write_queries), of the queries of the
    corpus's pools whose queries are texts: those query vectors serve."""
    return {str(query) for pool in _text_query_pools(place) for query in pl.read_parquet(
        pool_dir(place.corpus_dir, pool) / POOL_QUERIES, columns=["corpusid"])["corpusid"]}


def imported_similarity(store: Path) -> str:
    """The similarity an imported store records (VECTORS_KIND searches by it)."""
    return read_json(store / MANIFEST)["config"]["imported"]["similarity"]


