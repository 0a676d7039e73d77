"""BM25 as a retriever: k1 and b tuned on the pool's validation pools (tuning.py), searched on
the arrays engine (arrays.py: Lucene's analysis and scores in numba, the default) or on
Lucene itself (lucene.py: Anserini's SearchCollection over a Lucene index of the pool), as
BM25_ENGINE chooses through the engine registry (engines.py)."""

from __future__ import annotations

import polars as pl

from pipeline.corpus.files import paper_texts
from pipeline.glossary import BM25_ENGINE
from pipeline.layout import PREFILTERED, Place, runs_dir, tuning_path
from pipeline.models import ModelEntry
from pipeline.pools.build import pool_files
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.bm25 import jvm
from pipeline.retrieval.bm25.engines import engine
from pipeline.retrieval.bm25.tuning import bm25_params


class BM25(Retriever):
    #: the engine: `arrays` (the default: the analysed-text store and numba) or `lucene`
    OPTIONS = {"bm25_engine": BM25_ENGINE}

    def check(self, options: dict) -> None:
        jvm.java_binary()  # both engines need Java (Lucene's analyzer)

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        name = self.options(options or {})["bm25_engine"]
        return {"model": entry.name, **engine(name).index_pool(place, pool, threads, part_size)}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        place, pool, name = query.place, query.pool, query.options["bm25_engine"]
        corpus_dir, bm25 = place.corpus_dir, engine(name)
        params = bm25_params(place, pool, query.entry, query.threads,
                             engine=name)  # tuned on the validation pools
        read = [corpus_dir / PREFILTERED,
                *(f for v in params["tuned_on"] for f in pool_files(corpus_dir, v))]
        if params["tuned_on"]:  # the k1 and b chosen: a damaged record makes the run stale
            read.append(tuning_path(place.index_root, place.corpus, pool))
        query.read(read + bm25.searched_files(place, pool))
        k1, b = params["k1"], params["b"]
        query_papers = (query.texts if query.texts is not None else
                        paper_texts(corpus_dir, query.queries["corpusid"]).sort("corpusid"))
        runs, capped, store = bm25.search_grid(
            place, pool, query_papers, query.texts is None, query.candidates["corpusid"],
            query.depth, [k1], [b], query.threads,
            work_dir=runs_dir(place.runs_root, place.corpus, pool))
        details = {**params, "engine": name, "capped_queries": capped,
                   **({"analysed_text_store": store} if store else {})}
        return runs[(k1, b)], details


RETRIEVER = BM25()
