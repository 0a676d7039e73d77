"""Late-interaction models (ColBERT) as retrievers: exact MaxSim over every candidate of the
pool. As rerankers of a first stage's top RERANK_DEPTH (PyLate's rerank), they are scorers of
pipeline/retrieval/rerank.py (make rerank; pipeline/encoding/late.py LateScorer).

Candidates are the store's token vectors (pipeline/encoding/late.py), a row per kept token;
query papers, a collection's queries and perturbed ones are encoded now in the query form
(marker, [MASK] expansion to query_length), cached beside the store (query_vectors.py).
A candidate's score is MaxSim: the sum over the query's vectors of the best dot product with
any of the candidate's (pylate.scores.colbert_scores), streamed from the store in chunks of
bounded memory (dense/exact.py maxsim_stream, reduce "sum"), on the GPU where one is seen.

The index stage prints the store's size and what the pool adds to it at most, and refuses in
one line, before embedding, where the disk lacks that space.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import polars as pl

from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed
from pipeline.encoding.query_vectors import encode_texts, query_cache
from pipeline.encoding.store import not_stored, store_parts
from pipeline.glossary import BACKEND
from pipeline.layout import MANIFEST, Place, store_dir
from pipeline.models import ModelEntry
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.dense.retriever import encoded_query_texts, maxsim_hits, store_files

log = logging.getLogger(__name__)

# bytes a stored token takes besides its vector: its paper's id (int64) and position (int16)
ROW_BYTES = 8 + 2


def token_bytes(dim: int, dtype: str = "float32") -> int:
    """Bytes a stored token vector takes in the store (its Arrow row)."""
    return dim * (2 if dtype == "float16" else 4) + ROW_BYTES


def store_bytes(store: Path) -> int:
    """The size of a store's parts on disk."""
    if not (store / MANIFEST).exists():
        return 0
    return sum((store / part["file"]).stat().st_size for part in store_parts(store))


def check_space(place: Place, pool: str, entry: ModelEntry, model_path: str | None) -> dict:
    """The store's size and the most the pool's missing papers add to it (document_length
    tokens each, in float32), printed; refused in one line where the disk holding the store
    has less free space than that."""
    from pipeline.encoding.coverage import pool_ids
    from pipeline.encoding.identity import weights_folder
    from pipeline.encoding.late import LateSettings, projection_dim

    store = store_dir(place.index_root, place.corpus, entry.name)
    folder, _ = weights_folder(entry, model_path)
    if folder is None:  # a hub model not downloaded yet: its loader fetches and checks it
        return {}
    settings = LateSettings.of_folder(Path(folder))
    ids = pool_ids(place.corpus_dir, pool)
    missing = len(not_stored(store, ids)) if (store / MANIFEST).exists() else len(ids)
    adds = missing * settings.document_length * token_bytes(projection_dim(Path(folder),
                                                                           settings))
    existing = store.parent
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    size = store_bytes(store)
    log.info(f"[late] store {store}: {size / 1e9:.3f} GB; pool {pool} adds at most "
             f"{adds / 1e9:.3f} GB ({missing} papers x {settings.document_length} tokens); "
             f"{free / 1e9:.1f} GB free")
    if adds > free:
        raise InputError(f"MODEL {entry.name}: pool {pool}'s token vectors take up to "
                         f"{adds / 1e9:.1f} GB and {existing} has {free / 1e9:.1f} GB free: "
                         "free space there or give another --index-root")
    return {"store_bytes": size, "adds_at_most_bytes": adds}


class LateInteraction(Retriever):
    #: the torch device of MaxSim (auto, torch-cpu, torch-cuda), a local copy of the weights
    OPTIONS = {"backend": BACKEND, "model_path": None}

    def check(self, options: dict) -> None:
        from pipeline.retrieval.dense.exact import maxsim_device

        maxsim_device(options["backend"])  # a Faiss backend, or a GPU that is not there

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        """The pool's papers embedded (token vectors), after the disk's space is checked."""
        model_path = self.options(options or {})["model_path"]
        space = check_space(place, pool, entry, model_path)
        info = embed(place, entry, pools=[pool], model_path=model_path,
                     **({"part_size": part_size} if part_size else {}))
        store = store_dir(place.index_root, place.corpus, entry.name)
        return {**info, **space, "store_bytes": store_bytes(store)}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """Exact MaxSim over every candidate of the pool."""
        place, entry, options = query.place, query.entry, query.options
        query.read(store_files(place, entry, options["model_path"]))
        store = store_dir(place.index_root, place.corpus, entry.name)
        texts = encoded_query_texts(query)
        from pipeline.encoding.late import TokenVectors

        array = encode_texts(store, entry, texts, options["model_path"])
        query.read([query_cache(store, entry, texts)])
        vectors = TokenVectors.from_array(array, texts.height)
        query_ids = texts["corpusid"].to_numpy()
        hits, details = maxsim_hits(store, query_ids, query.candidates["corpusid"].to_numpy(),
                                    query.depth, "ip", options["backend"],
                                    query_vectors=vectors, reduce="sum")
        return hits, {**details, "mode": "exact MaxSim over every candidate"}


RETRIEVER = LateInteraction()
