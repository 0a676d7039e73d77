"""Vectors computed elsewhere, imported as an embedding store (`make import-vectors`,
`pipeline.import_vectors`; docs/encoders.md, "Vectors from elsewhere").

The source is a parquet file with a paper id column (`corpusid`) and a `vector` column (a
fixed-size list or a list of floats). Every row is checked before anything is written: one
dimension for all, no null, NaN or infinite value, no id twice (each refused, counted, with
an example id); ids that are not papers of the corpus are dropped and counted (vectors made
for a larger collection are the usual case). The store, `indexes/<corpus>/embeddings/
vectors--<name>/`, records the source's sha256 and the similarity, and each row the text
digest of its paper at import time, so a corpus made again in place makes it stale: it is
imported again (from a file computed on the new texts), never re-embedded. A search of it
reads the similarity its manifest records.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.atomic import atomic_dir
from pipeline.core.checksums import file_sha256
from pipeline.core.errors import InputError
from pipeline.core.files import is_corrupt, read_json
from pipeline.corpus.files import corpus_file
from pipeline.encoding.embed import add_part, current_digests, store_inputs
from pipeline.encoding.store import id_array, store_parts
from pipeline.layout import MANIFEST, PREFILTERED, Place, store_dir
from pipeline.models import IMPORT_VECTORS, SIMILARITIES, vectors_model

log = logging.getLogger(__name__)
PART_ROWS = 65536  # rows per store part


# A store whose manifest cannot be read is imported again over it: only this command writes a
# store of a `vectors--<name>` folder (no model or pipeline.Encoder may take such a name)


def _intact(store: Path) -> bool:
    """Whether every part of the store is as its manifest records (a damaged one is imported
    again: its repair, imported_repair, is this import)."""
    try:
        store_parts(store)
    except InputError:
        return False
    return True


def _read_source(src: Path) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(ids, float32 matrix, counts) of the source file, every row checked."""
    try:
        frame = pl.read_parquet(src)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"SRC {src}: not a readable parquet file ({exc.__class__.__name__}): "
                         "give a parquet file with columns corpusid and vector") from None
    missing = [c for c in ("corpusid", "vector") if c not in frame.columns]
    if missing:
        raise InputError(f"SRC {src}: no column {', '.join(missing)} (it has "
                         f"{', '.join(frame.columns)}): give corpusid (the paper id) and vector")
    if not isinstance(frame.schema["vector"], pl.List | pl.Array):
        raise InputError(f"SRC {src}: column vector is {frame.schema['vector']}, not a list of "
                         "floats")
    frame = frame.select("corpusid", pl.col("vector").cast(pl.List(pl.Float64)))
    nulls = frame.filter(pl.col("corpusid").is_null() | pl.col("vector").is_null())
    if nulls.height:
        raise InputError(f"SRC {src}: {nulls.height} rows have no id or no vector: remove them")
    lengths = frame["vector"].list.len()
    dim = int(lengths.mode().sort()[-1]) if frame.height else 0
    other = frame.filter(lengths != dim)
    if dim == 0:
        raise InputError(f"SRC {src}: no vectors: give at least one row")
    if other.height:
        raise InputError(f"SRC {src}: {other.height} of {frame.height} vectors do not have "
                         f"{dim} dimensions as the others (e.g. paper {other['corpusid'][0]}): "
                         "give one dimension for all")
    matrix = np.asarray(frame["vector"].list.to_array(dim).to_numpy(), dtype=np.float64)
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        raise InputError(f"SRC {src}: {int(bad.sum())} vectors hold NaN or infinite values "
                         f"(e.g. paper {frame['corpusid'][int(np.argmax(bad))]}): fix them")
    ids = id_array(frame["corpusid"].to_numpy())
    order = np.argsort(ids, kind="stable")
    ids, matrix = ids[order], matrix[order].astype(np.float32)
    twice = ids[1:][ids[1:] == ids[:-1]]
    if len(twice):
        raise InputError(f"SRC {src}: {len(np.unique(twice))} paper ids appear more than once "
                         f"(e.g. {twice[0]}): give one vector per paper")
    return ids, matrix, {"rows": frame.height, "dim": dim}


def import_vectors(place: Place, name: str, src: str | os.PathLike,
                   similarity: str = "cosine") -> dict:
    """Fill the store of model `vectors:<name>` of the corpus from `src` (see the module's
    docstring); returns what was imported and dropped. A store imported from the same bytes
    for the same corpus texts is kept as it is; another import replaces it (this command made
    it); a store this command did not make is refused."""
    if similarity not in SIMILARITIES:
        raise InputError(f"SIMILARITY={similarity!r}: use one of {', '.join(SIMILARITIES)}")
    entry = vectors_model(name)
    src = Path(src)
    if not src.is_file():
        raise InputError(f"SRC {src}: no such file: give the parquet file of the vectors")
    store = store_dir(place.index_root, place.corpus, entry.name)
    sha, inputs = file_sha256(src), store_inputs(place)
    imported = {"source": str(src), "sha256": sha, "similarity": similarity}
    if (store / MANIFEST).exists() and not is_corrupt(store / MANIFEST):
        made = read_json(store / MANIFEST)
        had = made.get("config", {}).get("imported")
        if had is None:
            raise InputError(f"{store} holds vectors that import-vectors did not write: "
                             "import under another MODEL name")
        if ({k: had.get(k) for k in ("sha256", "similarity")} == {
                "sha256": sha, "similarity": similarity} and made.get("inputs") == inputs
                and _intact(store)):
            log.info(f"[{IMPORT_VECTORS}] {store}: already imported from these bytes")
            return {"model": entry.name, "kept": True, **had.get("counts", {})}
    ids, matrix, counts = _read_source(src)
    known, digests = current_digests(place.corpus_dir, ids, ["title", "abstract"])
    keep = np.isin(ids, known)
    counts.update(imported=int(keep.sum()), unknown_ids_dropped=int((~keep).sum()))
    if not keep.any():
        raise InputError(f"SRC {src}: none of its {len(ids)} ids is a paper of "
                         f"{corpus_file(place.corpus_dir, PREFILTERED)}: give the vectors of "
                         "this corpus's papers (column corpusid)")
    ids, matrix = ids[keep], matrix[keep]
    config = {"model": entry.describe(), "dtype": "float32", "dim": counts["dim"],
              "max_length": None, "text_format": "imported",
              "imported": {**imported, "counts": counts}}
    with atomic_dir(store) as tmp:
        for lo in range(0, len(ids), PART_ROWS):
            add_part(tmp, config, ids[lo:lo + PART_ROWS], matrix[lo:lo + PART_ROWS],
                     f"imported from {src}", inputs=inputs, digests=digests[lo:lo + PART_ROWS])
    if counts["unknown_ids_dropped"]:
        log.warning(f"[{IMPORT_VECTORS}] {counts['unknown_ids_dropped']} of {counts['rows']} ids "
                    f"of {src} are not papers of {place.corpus}: dropped")
    log.info(f"[{IMPORT_VECTORS}] {entry.name}: {counts['imported']} vectors of {counts['dim']} "
             f"dimensions from {src} (sha256 {sha[:12]})")
    return {"model": entry.name, "kept": False, **counts}


def imported_similarity(store: Path) -> str:
    """The similarity an imported store records (VECTORS_KIND searches by it)."""
    return read_json(store / MANIFEST)["config"]["imported"]["similarity"]


