"""The vectors of query texts that are not the papers' stored ones (a collection's queries,
perturbed queries, a model's own query form), encoded with the store's model and kept beside
the store."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import file_problem, fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.manifests import manifest
from pipeline.encoding.encoder_kinds import encoder_class, loaded_settings
from pipeline.encoding.store import store_repair
from pipeline.encoding.store_identity import probe_change, replace_repair
from pipeline.glossary import split_prompt_tag
from pipeline.layout import MANIFEST, query_vectors_path, query_vectors_record
from pipeline.models import ModelEntry

log = logging.getLogger(__name__)


def query_cache(store: Path, entry: ModelEntry, texts: pl.DataFrame) -> Path:
    """Where the vectors of query texts are kept beside the store: `queries/<sha>.npy`, keyed
    by the texts, the store's settings and the user's query prompt (a run made from them
    records it among its inputs)."""
    config = read_json(store / MANIFEST)["config"] if (store / MANIFEST).exists() \
        else {"model": entry.describe()}
    if entry.query_prompt is not None or split_prompt_tag(entry.name)[1]:  # QUERY_PROMPT's
        config = {**config, "query_prompt": entry.query_form}  # refused: a tag, no prompt
    key = hashlib.sha256(repr((config, texts.select("title", "abstract").rows())).encode())
    return query_vectors_path(store, key.hexdigest()[:24])


def encode_texts(store: Path, entry: ModelEntry, texts: pl.DataFrame,
                 model_path: str | None = None) -> np.ndarray:
    """Vectors of query texts (corpusid, title, abstract; in that order) that are not the
    papers' stored ones: a collection's queries, perturbed queries, and the query papers of a
    model that encodes queries in their own form (E5's "query: "). Kept beside the store
    (`query_cache`), so a second search encodes nothing; a damaged one is encoded again.
    Sparse vectors come as their array (sparse.SparseVectors.as_array), read or encoded."""
    cache = query_cache(store, entry, texts)
    record = query_vectors_record(cache)  # its checksum: a damaged cache is encoded again
    if cache.exists() and record.exists():
        try:
            if file_problem(cache, read_json(record)["outputs"][cache.name], deep=False) is None:
                return np.load(cache)
        except (InputError, KeyError):
            pass
        log.warning(f"[embed] {cache} is damaged: the queries are encoded again")
    encoder = encoder_class(entry.kind)(entry, model_path=model_path)
    _check_loaded(store, encoder, model_path)
    # an encoder told queries apart (an MTEB object: the query prompt type) has its own call
    encode = getattr(encoder, "encode_queries", encoder.encode)
    vectors, _ = encode([encoder.format(t, a, query=True) for t, a in
                         texts.select("title", "abstract").iter_rows()])
    if not isinstance(vectors, np.ndarray):  # sparse.SparseVectors: kept as one array
        vectors = vectors.as_array()
    cache.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(cache) as tmp, tmp.open("wb") as handle:
        np.save(handle, vectors)
    prompt = {} if entry.query_prompt is None else {"query_prompt": entry.query_prompt}
    write_json(manifest("query-vectors", {"model": entry.name, **prompt}, queries=texts.height,
                        outputs={cache.name: fingerprint(cache)}), record)
    return vectors


def _check_loaded(store: Path, encoder, model_path: str | Path | None = None) -> None:
    """Refuse to encode queries with a model whose settings known once loaded (an st:
    folder's configuration and prompts: Encoder.settings) differ from those the store's
    papers were embedded with: the queries would be another model's vectors."""
    if not (store / MANIFEST).exists():
        return
    if change := probe_change(store, encoder):  # another model behind an endpoint
        raise InputError(f"{store} was embedded by another model named {encoder.entry.name} "
                         f"({change}): the queries would be its vectors; give this model "
                         "another name, or embed again with REPLACE=1 (removes that store "
                         "and the runs made from it)",
                         replace_repair(store.parent.parent.name, encoder.entry, model_path))
    made = read_json(store / MANIFEST, store_repair(store)).get("config", {})
    changed = sorted(key for key, value in loaded_settings(encoder).items()
                     if made.get(key) != value)
    if changed:
        raise InputError(f"{store} holds vectors made with other settings ({', '.join(changed)} "
                         "differ from the model's now; see its manifest.json): delete it or "
                         "embed into another --index-root")
