"""Encoders as retrievers: exact search over the model's embedding store (encoding/store.py).

Dense models rank by their similarity between one vector per paper (dense.py: Faiss or torch,
exact); multi-vector models (ASPIRE) by the best (query sentence, candidate sentence) pair,
ts-ASPIRE's score, streamed from the store. A query that is a text (a collection's query, a
QUERY_VARIANT) is encoded now by a dense model, or read as imported (vectors imported with their
queries'); multi-vector models search stored papers only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed
from pipeline.encoding.query_vectors import encode_texts, query_cache
from pipeline.encoding.store import (
    candidate_chunks,
    load_sentence_vectors,
    load_vectors,
    store_parts,
)
from pipeline.encoding.store_texts import check_current
from pipeline.glossary import BACKEND, GPU_BACKENDS
from pipeline.layout import MANIFEST, PREFILTERED, Place, imported_queries_path, store_dir
from pipeline.models import ModelEntry
from pipeline.pools.queries import query_texts
from pipeline.retrieval.base import Query, Retriever

# What a run's score column holds, per similarity (recorded in the run's details)
SCORE_NAMES = {"l2": "-L2 distance", "cosine": "cosine similarity", "ip": "inner product"}


def store_files(place: Place, entry: ModelEntry, model_path: str | None = None) -> list[Path]:
    """The (checked) parts of the model's embedding store: what a search reads. A store not
    checked against the corpus's current texts is refused (`check_current`): it might serve
    a paper the vector of a text it no longer has; so is one embedded by another model than
    the one loaded from `model_path` (its model identity)."""
    store = store_dir(place.index_root, place.corpus, entry.name)
    check_current(place, store, entry, model_path)
    return [store / part["file"] for part in store_parts(store)]


def encoded_query_texts(query: Query) -> pl.DataFrame:
    """The texts of `query`'s queries that a model encoding queries in their own form reads:
    a collection's or a variant's as given, else the query papers' own (the corpus's
    prefiltered file, recorded as read)."""
    if query.texts is not None:
        return query.texts
    texts = query_texts(query.place.corpus_dir, query.queries)
    query.read([query.place.corpus_dir / PREFILTERED])
    return texts


def facet_vectors(store: Path, papers: np.ndarray, sentences: list[list[int]]
                  ) -> tuple[np.ndarray, np.ndarray, int]:
    """Query vectors that are some sentences of stored papers (CSFCube's facet queries, as
    ASPIRE searches them): paper i's stored rows whose sentence number is in sentences[i].
    A query none of whose sentences is stored (all cut by max_length) keeps every sentence of
    its paper; returns (vectors, offsets, such queries)."""
    vectors, offsets, numbers = load_sentence_vectors(store, papers, numbers=True)
    keep = np.zeros(len(numbers), dtype=bool)
    fallback = 0
    for i, wanted in enumerate(sentences):
        lo, hi = offsets[i], offsets[i + 1]
        chosen = np.isin(numbers[lo:hi], np.asarray(wanted, dtype=np.int64))
        if not chosen.any():
            chosen[:] = True
            fallback += 1
        keep[lo:hi] = chosen
    counts = np.add.reduceat(keep.astype(np.int64), offsets[:-1]) if len(papers) else []
    return vectors[keep], np.r_[0, np.cumsum(counts)].astype(np.int64), fallback


def maxsim_hits(store: Path, query_ids: np.ndarray, doc_ids: np.ndarray, k: int,
                similarity: str, backend: str = "auto", chunk_rows: int | None = None,
                papers: np.ndarray | None = None, sentences: list[list[int]] | None = None,
                query_vectors: tuple[np.ndarray, np.ndarray] | None = None,
                reduce: str = "max") -> tuple[pl.DataFrame, dict]:
    """Top-k candidate papers per query paper by the best sentence pair (ts-ASPIRE), exact;
    hits (query, doc, score) and the run details. Candidates are streamed from the store
    (candidate_chunks) and positioned in trec_eval's tie order (docid descending as a
    string); the search keeps the lower position among tied scores, so an exact tie at the
    k-th place keeps the papers trec_eval ranks first. `chunk_rows`: sentence rows per
    candidate chunk (memory: chunk_rows x dim x 4 bytes, plus the pair scores). Ids are int64
    or strings. With `papers` and `sentences`, query i is the sentences[i] of stored paper
    papers[i] (facet_vectors), not a stored paper of its own; with `query_vectors` (vectors,
    offsets), query i is those rows (a late-interaction model's query form). `reduce`:
    maxsim_stream's (max: ASPIRE's best pair; sum: ColBERT's MaxSim)."""
    from pipeline.encoding.store import id_array, not_stored
    from pipeline.retrieval.dense.exact import REDUCES, maxsim_device, maxsim_stream, run_scores

    device = maxsim_device(backend)
    query_ids = id_array(query_ids)
    doc_ids = id_array(doc_ids)
    doc_ids = doc_ids[np.argsort([str(d) for d in doc_ids], kind="stable")[::-1]]
    missing = not_stored(store, doc_ids)
    if len(missing):  # before any work, as load_sentence_vectors says for the queries
        raise InputError(f"{len(missing)} papers (e.g. {missing[0]}) have no vector in {store}: "
                         "run the embed stage for this pool first")
    details: dict = {}
    if query_vectors is not None:
        queries, offsets = query_vectors
    elif papers is None:
        queries, offsets = load_sentence_vectors(store, query_ids)
    else:
        queries, offsets, fallback = facet_vectors(store, papers, sentences or [])
        details = {"query": "the listed sentences of the query paper (facet query)",
                   "facet_queries_with_no_stored_sentence_whole_paper": fallback}
    unit = "sentences" if reduce == "max" else "tokens"  # what a row is (ASPIRE, ColBERT)
    counted = {f"candidate_{unit}": 0}

    def counting(chunks):
        for chunk in chunks:
            counted[f"candidate_{unit}"] += len(chunk[0])
            yield chunk

    chunk_rows = chunk_rows or (1 << 18 if device.startswith("cuda") else 1 << 14)
    scores, positions = maxsim_stream(queries, offsets, counting(candidate_chunks(
        store, doc_ids, chunk_rows)), k, similarity, device,  # type: ignore[arg-type]
        total=len(doc_ids), reduce=reduce)
    valid = positions >= 0
    hits = pl.DataFrame({
        "query": np.repeat(query_ids, positions.shape[1])[valid.ravel()],
        "doc": doc_ids[positions[valid]],
        "score": run_scores(scores[valid], similarity),
    })
    return hits, {"backend": f"torch-{device}", "similarity": similarity,
                  "run_score": SCORE_NAMES.get(similarity, similarity),
                  "score": REDUCES[reduce], f"query_{unit}": len(queries), **counted,
                  **details}


class Dense(Retriever):
    #: the search backend (auto, faiss-cpu, faiss-gpu, torch-cpu, torch-cuda: exact.py) and a
    #: local copy of the model's weights, for queries encoded at search time
    OPTIONS = {"backend": BACKEND, "model_path": None}

    def check(self, options: dict) -> None:
        """A GPU backend forced where there is none is refused (exact.check_backend); other
        backends need no check, nor Faiss imported (a quarter second of a no-op goal)."""
        if options["backend"] in GPU_BACKENDS:
            from pipeline.retrieval.dense.exact import check_backend

            check_backend(options["backend"])

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        model_path = self.options(options or {})["model_path"]
        return embed(place, entry, pools=[pool], model_path=model_path,
                     **({"part_size": part_size} if part_size else {}))

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """Exact top k by the model's similarity. Queries are the store's vectors of the query
        papers, or their texts encoded now: a collection's queries, perturbed ones, and query
        papers of a model with a query form of its own (E5)."""
        from pipeline.retrieval.dense.exact import exact_search, run_scores

        entry = query.entry
        query.read(store_files(query.place, entry, query.options["model_path"]))
        store = store_dir(query.place.index_root, query.place.corpus, entry.name)
        doc_ids = query.candidates["corpusid"].to_numpy()
        texts = query.texts
        if texts is None and entry.query_form is not None:  # E5, a prompt: queries' own form
            texts = encoded_query_texts(query)
        if texts is None:
            query_ids = query.queries["corpusid"].to_numpy()
            # one pass over the parts; a float16 store stays float16 (chunks are made float32)
            vectors = load_vectors(store, np.concatenate([query_ids, doc_ids]), dtype=None)
            query_vectors, doc_vectors = vectors[: len(query_ids)], vectors[len(query_ids):]
        else:
            query_ids = texts["corpusid"].to_numpy()
            query_vectors = self.text_vectors(query, store, texts)
            doc_vectors = load_vectors(store, doc_ids, dtype=None)
        scores, positions, used = exact_search(query_vectors, doc_vectors, query.depth,
                                               entry.similarity, query.options["backend"])
        valid = positions >= 0
        hits = pl.DataFrame({
            "query": np.repeat(query_ids, positions.shape[1])[valid.ravel()],
            "doc": doc_ids[positions[valid]],
            "score": run_scores(scores[valid], entry.similarity),
        })
        fingerprint = getattr(entry, "fingerprint", None)  # an object's (pipeline.Encoder)
        return hits, {"backend": used, "similarity": entry.similarity,
                      "run_score": SCORE_NAMES.get(entry.similarity, entry.similarity),
                      **({"fingerprint": fingerprint} if fingerprint else {})}

    def text_vectors(self, query: Query, store: Path, texts: pl.DataFrame) -> np.ndarray:
        """The vectors of query texts (texts' order): encoded now, or read from the cache of
        an earlier search; recorded as what the run is made from."""
        vectors = encode_texts(store, query.entry, texts, query.options["model_path"])
        query.read([query_cache(store, query.entry, texts)])
        return vectors


class Imported(Dense):
    """Vectors imported from elsewhere (make import-vectors): searched as a dense store, by
    the similarity the store records; nothing is embedded. Queries are stored papers, or
    texts (a collection's) whose vectors were imported with the papers' (rows marked query);
    perturbed queries cannot be encoded."""

    searches_variants = False

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        """Check that the store holds every paper of the pool: what is missing is imported,
        never embedded."""
        from pipeline.encoding.coverage import pool_ids
        from pipeline.encoding.store import not_stored
        from pipeline.encoding.vectors import imported_query_vectors
        from pipeline.pools.build import load_pool
        from pipeline.pools.queries import own_text

        store = store_dir(place.index_root, place.corpus, entry.name)
        if not (store / MANIFEST).exists():
            raise InputError(f"MODEL {entry.name}: no imported vectors in {store}: import them "
                             "first (make import-vectors MODEL=<name> SRC=<file>)")
        check_current(place, store, entry)
        missing = not_stored(store, pool_ids(place.corpus_dir, pool))
        if len(missing):
            raise InputError(f"{len(missing)} papers of pool {pool} (e.g. {missing[0]}) have no "
                             f"vector in {store}: import a file that holds them")
        queries = load_pool(place.corpus_dir, pool)[0]
        if own_text(queries):  # a collection's text queries: their imported vectors
            imported_query_vectors(store, queries["corpusid"].to_numpy())
        return {"model": entry.name, "pool": pool, "note": "imported vectors: all present"}

    def text_vectors(self, query: Query, store: Path, texts: pl.DataFrame) -> np.ndarray:
        """The query vectors imported with the papers' (encoding queries needs the model the
        vectors came from, which the pipeline does not have)."""
        from pipeline.encoding.vectors import imported_query_vectors

        vectors = imported_query_vectors(store, texts["corpusid"].to_numpy())
        query.read([imported_queries_path(store)])  # the vectors the run is made from
        return vectors

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        from dataclasses import replace

        from pipeline.encoding.vectors import imported_similarity

        store = store_dir(query.place.index_root, query.place.corpus, query.entry.name)
        query.entry = replace(query.entry, similarity=imported_similarity(store))
        return super().hits(query)


FACET_COLUMNS = ("paper", "sentences")  # queries that are sentences of a stored paper


class MultiVector(Dense):
    searches_texts = False
    searches_variants = False

    def searches(self, queries: pl.DataFrame) -> bool:
        """Text queries only when they name sentences of stored papers (CSFCube's facet
        queries: columns `paper` and `sentences`, pipeline/external/csfcube.py)."""
        return set(FACET_COLUMNS) <= set(queries.columns)

    def check(self, options: dict) -> None:
        from pipeline.retrieval.dense.exact import maxsim_device

        maxsim_device(options["backend"])  # a Faiss backend, or a GPU that is not there

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """Best sentence pair (ts-ASPIRE), exact. Facet queries (their own text, naming a
        stored paper and its facet's sentence numbers): those sentences' stored vectors only,
        as ASPIRE searches CSFCube."""
        entry = query.entry
        query.read(store_files(query.place, entry, query.options["model_path"]))
        store = store_dir(query.place.index_root, query.place.corpus, entry.name)
        doc_ids = query.candidates["corpusid"].to_numpy()
        if query.texts is None:
            return maxsim_hits(store, query.queries["corpusid"].to_numpy(), doc_ids,
                               query.depth, entry.similarity, query.options["backend"])
        _check_numbering(query, store)
        facets = query.queries.sort("corpusid")
        return maxsim_hits(store, facets["corpusid"].to_numpy(), doc_ids, query.depth,
                           entry.similarity, query.options["backend"],
                           papers=facets["paper"].to_numpy(),
                           sentences=facets["sentences"].to_list())


def _check_numbering(query: Query, store: Path) -> None:
    """Facet queries number sentences as the store's splitter did when the pool was written;
    a store split otherwise would select other sentences: refused."""
    from pipeline.core.files import read_json
    from pipeline.pools.build import pool_manifest

    made = pool_manifest(query.place.corpus_dir, query.pool).get("sentence_numbering")
    stored = read_json(store / MANIFEST).get("config", {}).get("multi_vector", {}).get(
        "splitter")
    if made != stored:
        raise InputError(f"pool {query.pool} numbers its facet sentences with the splitter "
                         f"{made!r}, the store {store} splits with {stored!r}: import the "
                         "collection again (REPLACE=1)")


RETRIEVER = Dense()
MULTI_VECTOR = MultiVector()
IMPORTED = Imported()
