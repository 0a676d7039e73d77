"""BM25 as a retriever: k1 and b tuned on the pool's validation pools (tuning.py), searched on
the arrays engine (arrays.py: Lucene's analysis and scores in numba, the default) or on
Lucene itself (lucene.py: Anserini's SearchCollection over a Lucene index of the pool)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.corpus.files import paper_texts
from pipeline.layout import PREFILTERED, Place, bm25_index_dir, runs_dir, tuning_path
from pipeline.models import ModelEntry
from pipeline.pools.build import load_pool, pool_files
from pipeline.pools.queries import own_text
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.bm25 import jvm
from pipeline.retrieval.bm25 import lucene as bm25_lucene
from pipeline.retrieval.bm25.tuning import bm25_params


class BM25(Retriever):
    #: the engine: `arrays` (the default: the analysed-text store and numba) or `lucene`
    OPTIONS = {"bm25_engine": "arrays"}

    def check(self, options: dict) -> None:
        jvm.java_binary()  # both engines need Java (Lucene's analyzer)

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        if self.options(options or {})["bm25_engine"] == "arrays":
            # the pool's papers into the analysed-text store
            from pipeline.retrieval.bm25 import store as bm25_store

            queries, candidates, _ = load_pool(place.corpus_dir, pool)
            ids = [candidates["corpusid"].to_numpy()]
            if not own_text(queries):
                ids.append(queries["corpusid"].to_numpy())
            return {"model": entry.name, "pool": pool,
                    "note": "the arrays engine assembles the pool's index from the analysed-"
                            "text store when it searches",
                    **bm25_store.fill(place, np.concatenate(ids), threads,
                                      repair=True, part_size=part_size
                                      or bm25_store.PART_SIZE)}
        if part_size:
            raise InputError("--part-size sets the parts of the arrays engine's analysed-text "
                             "store; BM25_ENGINE=lucene builds one Lucene index per pool: "
                             "leave it out")
        return {"model": entry.name, **bm25_lucene.index_pool(place, pool, threads)}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        place, pool, engine = query.place, query.pool, query.options["bm25_engine"]
        corpus_dir = place.corpus_dir
        index_dir = bm25_index_dir(place.index_root, place.corpus, pool)
        params = bm25_params(place, pool, query.entry, query.threads,
                             engine=engine)  # tuned on the validation pools
        read = [corpus_dir / PREFILTERED,
                *(f for v in params["tuned_on"] for f in pool_files(corpus_dir, v))]
        if params["tuned_on"]:  # the k1 and b chosen: a damaged record makes the run stale
            read.append(tuning_path(place.index_root, place.corpus, pool))
        if engine == "lucene":
            read += bm25_lucene.index_files(index_dir)
        query.read(read)
        k1, b = params["k1"], params["b"]
        query_papers = (query.texts if query.texts is not None else
                        paper_texts(corpus_dir, query.queries["corpusid"]).sort("corpusid"))
        pool_papers = lambda: paper_texts(corpus_dir, query.candidates["corpusid"])  # noqa: E731
        store = {}
        if engine == "arrays":
            from pipeline.retrieval.bm25 import store as bm25_store

            runs, capped, store = bm25_store.search_grid(
                place, query_papers, query.texts is None,
                query.candidates["corpusid"], query.depth, [k1], [b], query.threads)
            hits = runs[(k1, b)]
        else:
            hits, capped = bm25_lucene.search(
                query_papers, index_dir, query.depth, k1, b, query.threads,
                pool_papers=pool_papers, work_dir=runs_dir(place.runs_root, place.corpus, pool))
        return hits, {**params, "engine": engine, "capped_queries": capped,
                      **({"analysed_text_store": store} if store else {})}


RETRIEVER = BM25()
