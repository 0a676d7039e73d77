"""The embedding store written: a part of vectors added and listed in the store's manifest
(under the store's lock, refused when the store was made with other settings), and the
MODEL_PATH the manifest records."""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprint
from pipeline.core.current import MISSING, UNREADABLE, stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.corpus.files import TEXT_DIGEST
from pipeline.encoding.store import DIGEST, part_name, store_parts, store_repair
from pipeline.layout import MANIFEST


def check_config(store: Path, config: dict) -> None:
    """Refuse to add vectors to a store made with another config (a new store takes any)."""
    problem = stale(store / MANIFEST, config, key="config")
    if problem is None or problem.check == MISSING:
        return
    if problem.check == UNREADABLE:
        raise InputError(problem.reason, store_repair(store))
    raise InputError(f"{store} holds vectors made with other settings ({problem.reason}; see "
                     "its manifest.json): delete it or embed into another --index-root")


def _write_part(store: Path, ids: np.ndarray, vectors: np.ndarray, dtype: str,
                digests: np.ndarray | None) -> dict:
    """One part: the papers `ids` (sorted, distinct), their vectors and text digests (each
    row keeps the digest of the text it was made from)."""
    columns, counts = {}, {}
    papers = ids
    if not isinstance(vectors, np.ndarray):  # a row per sentence, or a paper's sparse terms
        ids, columns, vectors, counts = vectors.part(ids, dtype)
    if vectors is not None:  # a fixed-size vector per row (a sparse part's are its columns)
        stored = as_stored(vectors, dtype, ids)
        columns = {**columns, "vector": pa.FixedSizeListArray.from_arrays(
            pa.array(stored.ravel()), vectors.shape[1])}
    order = np.argsort(ids, kind="stable")  # stable: a paper's sentences stay in order
    ids = ids[order]
    name = part_name(ids)
    table = pa.table({
        "corpusid": pa.array(ids, type=pa.int64() if ids.dtype.kind in "iu" else pa.string()),
        **{column: _ordered(values, order) for column, values in columns.items()},
        **({} if digests is None else
           {DIGEST: pa.array(digests[np.searchsorted(papers, ids)], type=pa.uint64())}),
    })
    with atomic_path(store / name) as tmp, ipc.new_file(str(tmp), table.schema) as writer:
        writer.write_table(table)
    return {"file": name, "rows": len(ids), **fingerprint(store / name),
            "min_id": ids[0].item() if ids.dtype.kind in "iu" else ids[0],
            "max_id": ids[-1].item() if ids.dtype.kind in "iu" else ids[-1], **counts}


def _ordered(values: np.ndarray | pa.Array, order: np.ndarray) -> pa.Array:
    """A column's values (numpy, or Arrow: a vector or list per row) in the part's row order."""
    if isinstance(values, pa.Array):
        return values.take(pa.array(order))
    return pa.array(values[order])


def as_stored(vectors: np.ndarray, dtype: str, ids: np.ndarray) -> np.ndarray:
    """The vectors in the store's dtype, each finite there: a value beyond float16's 65504 (or
    float32's 3.4e38) would be stored as infinite and its paper would drop out of every search
    unseen, so the part is refused instead, naming a paper."""
    kind = np.float16 if dtype == "float16" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        stored = vectors.astype(kind, copy=False)
    bad = ~np.isfinite(stored).all(axis=1)
    if bad.any():
        raise InputError(f"{int(bad.sum())} of {len(stored)} vectors are NaN or infinite as "
                         f"{dtype}, the store's type (beyond ±{float(np.finfo(kind).max):.6g}; "
                         f"e.g. paper {ids[int(np.argmax(bad))]}): nothing of them was stored; "
                         "embed with --dtype float32 or fix the model")
    return stored


def add_part(store: Path, config: dict, ids: np.ndarray, vectors: np.ndarray, device: str,
              *, inputs: dict[str, str] | None = None, digests: np.ndarray | None = None
              ) -> None:
    """Write one part and list it in the store manifest (under the store lock). Without
    `inputs` and `digests` (a store assembled by hand): rows with no text digest, a store that
    a search refuses until `embed` checks it."""
    with file_lock(store):
        check_config(store, config)
        if (inputs is not None and (store / MANIFEST).exists()
                and read_json(store / MANIFEST).get("inputs") != inputs):
            raise InputError(f"{store}: its corpus's prefiltered.parquet changed while this "
                             "embed ran", store_repair(store))
        part = _write_part(store, ids, vectors, config["dtype"], digests)
        parts = [p for p in store_parts(store) if p["file"] != part["file"]] + [part]
        write_manifest(store, config, inputs, parts, device)


def write_manifest(store: Path, config: dict, inputs: dict[str, str] | None, parts: list[dict],
                    device: str) -> None:
    """The store's manifest: its settings, what its rows were checked against, its parts, the
    libraries and device that made them, and the MODEL_PATH it recorded (kept)."""
    versions = {lib: version(lib) for lib in ("torch", "transformers", "pyarrow")}
    source = model_path_of(store)  # kept: where the model identity is checked from
    write_json(manifest("embed", {"model": config["model"]["name"]}, config=config,
                        **({} if inputs is None else {"inputs": inputs}),
                        text_digest=TEXT_DIGEST, parts=parts,
                        versions=versions, device=device,
                        **({} if source is None else {MODEL_PATH_KEY: source})),
               store / MANIFEST)


MODEL_PATH_KEY = "model_path"  # a store manifest's MODEL_PATH, as given: verify's folder


def model_path_of(store: Path) -> str | None:
    """The MODEL_PATH a store's manifest records (None: none, or no manifest)."""
    try:
        return read_json(store / MANIFEST).get(MODEL_PATH_KEY)
    except InputError:
        return None


def record_model_path(store: Path, model_path: str | Path | None) -> None:
    """Record in the store's manifest the MODEL_PATH it was last embedded or checked with,
    as given (a symlink stays one), so that `make verify` computes the model's identity from
    the same folder; its vectors are unchanged, its manifest rewritten only when it differs."""
    if not (store / MANIFEST).exists():
        return
    info = read_json(store / MANIFEST, store_repair(store))
    given = None if model_path is None else os.path.abspath(model_path)
    if info.get(MODEL_PATH_KEY) != given and "imported" not in info.get("config", {}):
        info = {k: v for k, v in info.items() if k != MODEL_PATH_KEY}
        write_json({**info, **({} if given is None else {MODEL_PATH_KEY: given})},
                   store / MANIFEST)
