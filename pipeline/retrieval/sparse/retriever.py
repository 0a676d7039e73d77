"""Learned sparse models (SPLADE) as retrievers: exact top-k by impact score over an inverted
index of the pool, built from the embedding store (never by encoding again).

Candidates are the store's sparse vectors (pipeline/encoding/sparse.py); query papers, a
collection's queries and perturbed ones are encoded now by the query path
(`SparseEncoder.encode_query`'s prompt), cached beside the store (query_vectors.py). Two
engines, as SPARSE_ENGINE chooses: `arrays` (impact.py: scipy's sparse products, float
weights or, with SPARSE_QUANTIZE=1, pyserini's integer impacts) and `lucene` (lucene.py:
Anserini's impact index and search, integer impacts only); on the same impacts their runs are
equal (tested). Candidates are ordered by id as a string, so both keep the same papers among
those tied at the k-th score.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.errors import OptionError
from pipeline.core.files import read_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.repair import Repair
from pipeline.encoding.embed import embed
from pipeline.encoding.query_vectors import encode_texts, query_cache
from pipeline.encoding.sparse import SparseVectors
from pipeline.encoding.store import id_array, load_sparse_vectors
from pipeline.glossary import SPARSE_ENGINE, SPARSE_ENGINES
from pipeline.layout import (
    MANIFEST,
    POOL_CANDIDATES,
    Place,
    impact_index_dir,
    pool_dir,
    runs_dir,
    store_dir,
)
from pipeline.models import ModelEntry
from pipeline.pools.build import load_pool
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.dense.retriever import encoded_query_texts, store_files


def quantise(options: dict) -> bool:
    """Whether SPARSE_QUANTIZE asks for pyserini's integer impacts (1)."""
    return str(options.get("sparse_quantize") or "") in ("1", "True")


def candidate_order(doc_ids: np.ndarray) -> np.ndarray:
    """The candidates ordered by id as a string, ascending: the order both engines index
    them in, so the papers kept among ties at the k-th score are the same."""
    doc_ids = id_array(doc_ids)
    return doc_ids[np.argsort(np.array([str(d) for d in doc_ids]), kind="stable")]


def store_dim(store) -> int:
    """The vocabulary size the store's vectors span (its config's `dim`)."""
    return int(read_json(store / MANIFEST)["config"]["dim"])


def impact_repair(place: Place, entry: ModelEntry) -> Repair:
    """What builds a pool's impact index again and searches the runs made from it."""
    return Repair("eval", place.corpus, entry.name,
                  variables=(("SPARSE_ENGINE", "lucene"), ("SPARSE_QUANTIZE", "1")))


class Sparse(Retriever):
    #: the engine (arrays or lucene), pyserini's integer impacts (SPARSE_QUANTIZE=1), and a
    #: local copy of the model's weights, for queries encoded at search time
    OPTIONS = {"sparse_engine": SPARSE_ENGINE, "sparse_quantize": "0", "model_path": None}

    def check(self, options: dict) -> None:
        """Lucene's impact index holds integer impacts only: SPARSE_ENGINE=lucene without
        SPARSE_QUANTIZE=1 is refused before any work, and so is a missing Java."""
        engine = options["sparse_engine"]
        if engine not in SPARSE_ENGINES:
            raise OptionError("{SPARSE_ENGINE=}: use " + " or ".join(SPARSE_ENGINES),
                              {"SPARSE_ENGINE": engine})
        if engine == "lucene":
            if not quantise(options):
                raise OptionError("{SPARSE_ENGINE=} searches pyserini's integer impacts "
                                  "(weights x 100, rounded): give SPARSE_QUANTIZE=1 too, or "
                                  "SPARSE_ENGINE=arrays", {"SPARSE_ENGINE": engine})
            from pipeline.retrieval.bm25.jvm import java_binary

            java_binary()

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        """The pool's papers embedded (the store), and with SPARSE_ENGINE=lucene the pool's
        impact index built from the store (a no-op when current; a search builds it too,
        where the index stage only embedded: search.index_pools)."""
        options = self.options(options or {})
        info = embed(place, entry, pools=[pool], model_path=options["model_path"],
                     **({"part_size": part_size} if part_size else {}))
        if options["sparse_engine"] == "lucene":
            info["impact_index"] = self._lucene_index(place, pool, entry, options)
        return info

    def _lucene_index(self, place: Place, pool: str, entry: ModelEntry, options: dict) -> dict:
        from pipeline.retrieval.sparse import lucene

        store = store_dir(place.index_root, place.corpus, entry.name)
        store_files(place, entry, options["model_path"])  # checked current
        target = impact_index_dir(place.index_root, place.corpus, pool, entry.name)
        params = {"pool": pool, "corpus": place.corpus, "model": entry.name,
                  "quantisation": "weight x 100, rounded half to even"}
        inputs = record(place.roots, [pool_dir(place.corpus_dir, pool) / POOL_CANDIDATES,
                                      store / MANIFEST])
        with file_lock(target):
            if lucene.index_is_current(target, params, inputs):
                return {"up_to_date": True}
            doc_ids = candidate_order(load_pool(place.corpus_dir, pool)[1]["corpusid"]
                                      .to_numpy())
            info = lucene.build_index(doc_ids, load_sparse_vectors(store, doc_ids), target,
                                      params, inputs)
            return {"documents": info["documents"]}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """Exact top k by impact score; queries encoded by the query path (cached)."""
        place, entry, options = query.place, query.entry, query.options
        query.read(store_files(place, entry, options["model_path"]))
        store = store_dir(place.index_root, place.corpus, entry.name)
        texts = encoded_query_texts(query)
        dim = store_dim(store)
        array = encode_texts(store, entry, texts, options["model_path"])
        query.read([query_cache(store, entry, texts)])
        queries = SparseVectors.from_array(array, texts.height, dim).csr()
        query_ids = texts["corpusid"].to_numpy()
        doc_ids = candidate_order(query.candidates["corpusid"].to_numpy())
        quantised = quantise(options)
        details = {"engine": options["sparse_engine"], "similarity": "dot product",
                   "run_score": "impact: integer weights x 100, summed" if quantised
                   else "dot product of the sparse weights"}
        if options["sparse_engine"] == "lucene":
            from pipeline.retrieval.sparse import lucene

            self._lucene_index(place, query.pool, entry, options)  # a no-op when current
            target = impact_index_dir(place.index_root, place.corpus, query.pool, entry.name)
            query.read(lucene.index_files(target, impact_repair(place, entry)))
            hits = lucene.search(query_ids, queries, target, query.depth, query.threads,
                                 runs_dir(place.runs_root, place.corpus, query.pool),
                                 query.candidates["corpusid"].dtype)
            return hits, details
        from pipeline.retrieval.sparse.impact import impact_search, inverted_index

        docs = load_sparse_vectors(store, doc_ids)
        index = inverted_index(docs, dim, quantised)
        rows, positions, scores = impact_search(queries, index, query.depth, quantised)
        hits = pl.DataFrame({"query": query_ids[rows], "doc": doc_ids[positions],
                             "score": scores.astype(np.float64)})
        return hits, {**details, "terms_indexed": int(index.nnz)}


RETRIEVER = Sparse()
