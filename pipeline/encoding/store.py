"""The embedding store: sharded Arrow parts of vectors per (corpus, model), each part checked
against the store's manifest before it is read; one row per paper, or per sentence for
multi-vector models (a `sentence` column, 0 = the title), or per token for late-interaction
models (a `token` column: its position in the model's input)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.core.checksums import file_problem
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.repair import Placeholder, Repair
from pipeline.encoding.objects import known_model, object_repair
from pipeline.glossary import id_key
from pipeline.layout import MANIFEST, PART_DIGEST, STORE_PART, store_parts_glob
from pipeline.models import IMPORT_VECTORS, VECTORS_FILE_PREFIX

DTYPES = {"float32": pa.float32(), "float16": pa.float16()}
# Each row's text digest (pipeline.corpus.files.text_digests): the text the row was made from
DIGEST = "digest"
log = logging.getLogger(__name__)


def id_array(ids) -> np.ndarray:
    """Paper ids as numpy: int64 for S2ORC/S2AG CorpusIDs, an object array of str for
    collections with string ids (the official MDCR files); both sort and search alike."""
    ids = np.asarray(ids)
    return ids.astype(np.int64) if ids.dtype.kind in "iu" or len(ids) == 0 else ids.astype(
        object)


def shard_of(ids: np.ndarray, num_shards: int) -> np.ndarray:
    """The embed shard of each id: id % n for integer ids, crc32(id) % n for string ids."""
    if ids.dtype.kind in "iu":
        return ids % num_shards
    return np.fromiter((id_key(str(i)) % num_shards for i in ids), dtype=np.int64,
                       count=len(ids))


def part_name(ids: np.ndarray) -> str:
    """A part's file name: a digest of its sorted ids, so the same papers make the same part."""
    key = ids.tobytes() if ids.dtype.kind in "iu" else "\n".join(ids).encode()
    return STORE_PART.format(hashlib.sha1(key).hexdigest()[:PART_DIGEST])


def part_digests(store: Path, part: dict) -> tuple[np.ndarray, np.ndarray | None]:
    """A part's row ids and text digests (None: a part written before stores kept them, whose
    rows' texts are unknown), memory-mapped."""
    table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
    digests = table.column(DIGEST).to_numpy() if DIGEST in table.column_names else None
    return id_array(table.column("corpusid").to_numpy()), digests


def store_repair(store: Path) -> Repair:
    """The command that re-embeds what a store lacks or lost (`<index root>/<corpus>/
    embeddings/<model>`); for vectors imported from elsewhere, the import (imported_repair);
    for a pipeline.Encoder's, the Python call with its object (object_repair)."""
    if store.name.startswith(VECTORS_FILE_PREFIX):
        return imported_repair(store)
    if not known_model(store.name):  # a pipeline.Encoder's: only its object embeds it
        return object_repair(store.parent.parent.name, store.name)
    return Repair("embed", store.parent.parent.name, store.name)


def imported_repair(store: Path, note: str = "") -> Repair:
    """make import-vectors with the source file and similarity the store's manifest records
    (a placeholder for a manifest that cannot say): imported vectors are never re-embedded."""
    try:
        imported = json.loads((store / MANIFEST).read_text())["config"]["imported"]
        given = [("SRC", str(imported["source"])), ("SIMILARITY", str(imported["similarity"]))]
    except (OSError, ValueError, KeyError, TypeError):
        given = [("SRC", Placeholder("the parquet file of the vectors"))]
    return Repair(IMPORT_VECTORS, store.parent.parent.name,
                  store.name.removeprefix(VECTORS_FILE_PREFIX), tuple(given), note)


def store_parts(store: Path, repair: Repair | None = None) -> list[dict]:
    """The store's parts, each checked against the manifest (size and sha256, hashed again
    only when the part's stat changed): a damaged part is refused by name with the command
    that makes its papers' rows again (`repair`; by default the embedding store's), never
    read. Every store of parts (embeddings, BM25's analysed texts) is read through here."""
    repair = repair or store_repair(store)
    path = store / MANIFEST
    parts = read_json(path, repair)["parts"] if path.exists() else []
    for part in parts:
        problem = file_problem(store / part["file"], part, deep=False)
        if problem:
            raise InputError(f"{store / part['file']}: {problem}", repair)
    return parts


def repair_store(store: Path, stage: str = "embed") -> dict[str, int]:
    """Before writing into a store (under its lock): drop from the manifest the parts that
    are missing or damaged, delete the damaged ones and the orphans (parts no manifest lists:
    a kill between a part's rename and the manifest's update), so their papers are made
    again. Returns what was repaired; every repair is logged under `stage`."""
    path = store / MANIFEST
    if not path.exists():
        return {"damaged_parts": 0, "orphan_parts": 0}
    try:
        info = read_json(path)
    except InputError:  # the manifest itself is damaged: every part is re-checked by name
        info = {"parts": []}
        log.warning(f"[{stage}] {path} is damaged: the store is rebuilt from scratch")
    kept, damaged = [], []
    for part in info.get("parts", []):
        problem = file_problem(store / part["file"], part, deep=False)
        (damaged if problem else kept).append((part, problem))
    for part, problem in damaged:
        log.warning(f"[{stage}] {store / part['file']}: {problem}: its {part.get('rows')} rows "
                    "are made again")
        (store / part["file"]).unlink(missing_ok=True)
    listed = {part["file"] for part, _ in kept}
    orphans = [p for p in store.glob(store_parts_glob()) if p.name not in listed]
    for orphan in orphans:
        log.warning(f"[{stage}] {orphan}: listed by no manifest (a stopped run): removed")
        orphan.unlink()
    if damaged or "config" not in info:
        if "config" in info:
            write_json({**info, "parts": [part for part, _ in kept]}, path)
        else:
            path.unlink()
    return {"damaged_parts": len(damaged), "orphan_parts": len(orphans)}


def stored_ids(store: Path, repair: Repair | None = None) -> np.ndarray:
    """Sorted unique ids of every paper in the store (reads only the id column,
    memory-mapped; a multi-vector store has one row per sentence)."""
    ids = [ipc.open_file(pa.memory_map(str(store / p["file"]))).read_all()
           .column("corpusid").to_numpy() for p in store_parts(store, repair)]
    return np.unique(np.concatenate(ids)) if ids else np.empty(0, dtype=np.int64)


def whole(column: pa.ChunkedArray) -> pa.Array:
    """A column of a part as one array: its single chunk as it lies in the memory-mapped file
    (combining chunks would copy the whole part), several chunks combined. Every store of
    parts (embeddings, BM25's analysed texts) reads its columns through here."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def distinct(ids) -> np.ndarray:
    """The distinct ids, sorted (`id_array`'s types): a sort, which for a million integer ids
    is several times faster than numpy's hashing `np.unique`."""
    ids = np.sort(id_array(ids))
    return ids[np.concatenate([[True], ids[1:] != ids[:-1]])] if len(ids) else ids


def not_stored(store: Path, ids, repair: Repair | None = None) -> np.ndarray:
    """The sorted distinct `ids` that no part of the store holds. Each part's ids (sorted as
    written) are looked up by binary search among the ids asked for: the store's ids are
    never gathered and sorted again, whatever its size, for each pool that asks."""
    needed = distinct(ids)
    found = np.zeros(len(needed), dtype=bool)
    for part in store_parts(store, repair) if len(needed) else []:
        part_ids = id_array(ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
                            .column("corpusid").to_numpy())
        at = np.minimum(np.searchsorted(needed, part_ids), len(needed) - 1)
        found[at[needed[at] == part_ids]] = True
    return needed[~found]


def load_vectors(store: Path, ids: np.ndarray, dtype: type | None = np.float32) -> np.ndarray:
    """Matrix with one row per id of `ids`, in that order (an id may repeat); error if any is
    missing. `dtype`: float32 by default, None keeps the store's (float16 halves the memory).
    Rows are copied from the memory-mapped parts straight into the result (no part is copied
    first, `whole`): peak memory is the result plus a part's rows asked for."""
    ids = id_array(ids)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    found = np.zeros(len(ids), dtype=bool)
    out: np.ndarray | None = None
    for part in store_parts(store):
        table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
        if unit_column(table) is not None:
            raise InputError(f"{store} holds one vector per sentence or token: read it with "
                             "pipeline.encoding.store.load_sentence_vectors")
        part_ids = table.column("corpusid").to_numpy()
        lo = np.searchsorted(sorted_ids, part_ids, side="left")
        hi = np.searchsorted(sorted_ids, part_ids, side="right")
        hit = hi > lo
        if not hit.any():
            continue
        vectors = whole(table.column("vector"))
        matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(
            len(part_ids), vectors.type.list_size)
        if out is None:
            out = np.empty((len(ids), matrix.shape[1]), dtype=dtype or matrix.dtype)
        counts = (hi - lo)[hit]  # rows of the result that want each stored paper
        rows = order[np.repeat(lo[hit] - np.cumsum(counts) + counts, counts)
                     + np.arange(counts.sum())]
        out[rows] = np.repeat(matrix[hit], counts, axis=0)
        found[rows] = True
    if not found.all():
        missing = np.unique(ids[~found])
        raise InputError(f"{len(missing)} papers (e.g. {missing[0]}) have no vector in {store}: "
                         "run the embed stage for this pool first")
    return out if out is not None else np.empty((0, 0), dtype=dtype or np.float32)


def vectors_of_texts(store: Path, wanted: np.ndarray, taken: np.ndarray
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The vectors a single-vector store holds for the text digests `wanted` (sorted,
    distinct) not yet `taken` (a mask over `wanted`, set here for what is yielded), read part
    by part: each part's hits as (positions in `wanted`, vectors in the store's dtype). A
    vector depends only on the text and the model, so rows are matched by digest alone,
    whatever their ids (a collection imported again with other ids). Memory-mapped: only the
    rows copied are read into memory. Rows without a digest (an older store) are never taken;
    a store damaged or changed while read (another process) lends no more, with a line."""
    try:
        parts = store_parts(store) if len(wanted) else []
    except InputError as exc:
        log.warning(f"[embed] {store} lends no vectors: {exc}")
        return
    for part in parts:
        try:
            found = _part_texts(store / part["file"], wanted, taken)
        except (InputError, OSError, pa.ArrowException) as exc:
            log.warning(f"[embed] {store / part['file']} lends no vectors: {exc}")
            return
        if found is not None:
            taken[found[0]] = True
            yield found


def _part_texts(path: Path, wanted: np.ndarray, taken: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """A part's rows whose digest is among `wanted` and not `taken` (a text stored twice:
    its first row), as (positions in `wanted`, vectors); None when it has none."""
    table = ipc.open_file(pa.memory_map(str(path))).read_all()
    if DIGEST not in table.column_names or unit_column(table) is not None:
        return None
    digests = table.column(DIGEST).to_numpy()
    at = np.minimum(np.searchsorted(wanted, digests), len(wanted) - 1)
    hit = np.flatnonzero((wanted[at] == digests) & ~taken[at])
    positions, first = np.unique(at[hit], return_index=True)
    if not len(positions):
        return None
    vectors = whole(table.column("vector"))
    matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(
        len(digests), vectors.type.list_size)
    return positions, matrix[hit[first]]


# The column numbering a multi-vector store's rows within their paper: ASPIRE's sentence
# (pipeline/encoding/multivector.py), a late-interaction model's token (late.py)
UNIT_COLUMNS = ("sentence", "token")


def unit_column(table: pa.Table) -> str | None:
    """The column that numbers a part's rows within their paper; None: a vector per paper."""
    return next((name for name in UNIT_COLUMNS if name in table.column_names), None)


def load_sentence_vectors(store: Path, ids: np.ndarray, numbers: bool = False
                          ) -> tuple[np.ndarray, ...]:
    """float32 sentence vectors of the papers `ids` (in that order; int64 or string ids) and
    their offsets: paper i's sentences are rows offsets[i]:offsets[i + 1], in sentence order;
    with `numbers`, also each row's sentence number (0 = the title). An error if a paper has no
    row or the store is a single-vector one."""
    from pipeline.encoding.store import store_parts

    ids = id_array(ids)
    wanted = np.unique(ids)
    found_ids, found_sentences, found_vectors = [], [], []
    for part in store_parts(store):
        table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
        unit = unit_column(table)
        if unit is None:
            raise InputError(f"{store} holds one vector per paper, not per sentence or token: "
                             "delete it or embed into another --index-root")
        part_ids = table.column("corpusid").to_numpy()
        hit = np.isin(part_ids, wanted)
        if hit.any():
            vectors = whole(table.column("vector"))
            flat = vectors.flatten().to_numpy(zero_copy_only=False)
            found_ids.append(part_ids[hit])
            found_sentences.append(table.column(unit).to_numpy()[hit])
            found_vectors.append(flat.reshape(len(part_ids), vectors.type.list_size)[hit]
                                 .astype(np.float32))
    all_ids = np.concatenate(found_ids) if found_ids else np.empty(0, dtype=ids.dtype)
    missing = np.setdiff1d(wanted, all_ids)
    if len(missing):
        raise InputError(f"{len(missing)} papers (e.g. {missing[0]}) have no vector in {store}: "
                         "run the embed stage for this pool first")
    sentences = np.concatenate(found_sentences) if found_sentences else np.empty(0, np.int16)
    order = np.lexsort((sentences, all_ids))
    sorted_ids, sorted_sentences = all_ids[order], sentences[order]
    # a (paper, sentence) stored twice (two processes embedding one paper) counts once
    first = np.r_[True, (sorted_ids[1:] != sorted_ids[:-1])
                  | (sorted_sentences[1:] != sorted_sentences[:-1])]
    order, sorted_ids = order[first], sorted_ids[first]
    starts = np.searchsorted(sorted_ids, ids, side="left")
    counts = np.searchsorted(sorted_ids, ids, side="right") - starts
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    take = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])
    matrix = (np.concatenate(found_vectors) if found_vectors
              else np.empty((0, 0), dtype=np.float32))
    if numbers:
        return matrix[order[take]], offsets, sentences[order[take]]
    return matrix[order[take]], offsets


def candidate_chunks(store: Path, doc_ids: np.ndarray, max_rows: int
                     ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The sentence vectors of candidate papers `doc_ids`, read part by part from the store
    (memory-mapped: only the chunk in hand is in memory, whatever the pool size), as chunks
    of about `max_rows` rows for maxsim_stream: (float32 rows, paper offsets, positions in
    `doc_ids`, ascending). A paper stored twice (two processes embedding it) is taken from
    its first part only."""
    from pipeline.encoding.store import store_parts

    sorter = np.argsort(doc_ids, kind="stable")
    sorted_ids = doc_ids[sorter]
    pending = sorted_ids
    buffer: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def flush() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids, sentences, vectors = (np.concatenate(c) for c in zip(*buffer, strict=True))
        buffer.clear()
        position = sorter[np.searchsorted(sorted_ids, ids)]
        order = np.lexsort((sentences, position))
        position = position[order]
        starts = np.flatnonzero(np.r_[True, np.diff(position) != 0])
        return vectors[order], np.r_[starts, len(position)], position[starts]

    rows = 0
    for part in store_parts(store):
        table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
        part_ids = table.column("corpusid").to_numpy()
        hit = np.isin(part_ids, pending)
        if not hit.any():
            continue
        pending = np.setdiff1d(pending, part_ids[hit], assume_unique=True)
        vectors = whole(table.column("vector"))
        flat = vectors.flatten().to_numpy(zero_copy_only=False)
        buffer.append((part_ids[hit], table.column(unit_column(table)).to_numpy()[hit],
                       flat.reshape(len(part_ids), vectors.type.list_size)[hit]
                       .astype(np.float32)))
        rows += int(hit.sum())
        if rows >= max_rows:
            yield flush()
            rows = 0
    if buffer:
        yield flush()


def load_sparse_vectors(store: Path, ids: np.ndarray) -> tuple[np.ndarray, ...]:
    """The sparse vectors of the distinct papers `ids` (a sparse store's `terms` and `weights`
    columns, pipeline/encoding/sparse.py) in that order, as CSR arrays (offsets, int32 terms,
    float32 weights): paper i's terms are terms[offsets[i]:offsets[i + 1]]. Read part by part
    from the memory-mapped store: only the rows asked for are copied. A paper stored twice (two
    processes embedding it) is taken from its first part; one missing is an error."""
    ids = id_array(ids)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    lengths = np.full(len(ids), -1, dtype=np.int64)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # positions, terms, weights
    for part in store_parts(store) if len(ids) else []:
        table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all()
        if "terms" not in table.column_names:
            raise InputError(f"{store} holds dense vectors, not sparse ones: delete it or "
                             "embed into another --index-root")
        part_ids = id_array(table.column("corpusid").to_numpy())
        at = np.minimum(np.searchsorted(sorted_ids, part_ids), len(ids) - 1)
        hit = np.flatnonzero(sorted_ids[at] == part_ids)
        hit = hit[lengths[order[at[hit]]] < 0]  # not taken from an earlier part
        if not len(hit):
            continue
        terms, weights = whole(table.column("terms")), whole(table.column("weights"))
        offsets = terms.offsets.to_numpy().astype(np.int64)
        starts, counts = offsets[hit], offsets[hit + 1] - offsets[hit]
        take = np.repeat(starts - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(
            counts.sum())
        positions = order[at[hit]]
        lengths[positions] = counts
        found.append((np.repeat(positions, counts), terms.values.to_numpy()[take],
                      weights.values.to_numpy(zero_copy_only=False)[take]))
    if (lengths < 0).any():
        missing = ids[lengths < 0]
        raise InputError(f"{len(missing)} papers (e.g. {missing[0]}) have no vector in {store}: "
                         "run the embed stage for this pool first")
    rows = np.concatenate([f[0] for f in found]) if found else np.empty(0, np.int64)
    by_row = np.argsort(rows, kind="stable")  # each paper's terms stay in their order
    terms = np.concatenate([f[1] for f in found]) if found else np.empty(0, np.int32)
    weights = np.concatenate([f[2] for f in found]) if found else np.empty(0, np.float32)
    return (np.r_[0, np.cumsum(lengths)].astype(np.int64), terms[by_row].astype(np.int32),
            weights[by_row].astype(np.float32))
