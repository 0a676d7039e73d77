"""The floor: each query's candidates in a seeded random order (seed, query id)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.glossary import id_key
from pipeline.retrieval.base import Query, Retriever


class Random(Retriever):
    seeded = True

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        doc_ids = query.candidates["corpusid"].to_numpy()
        frames = []
        for paper in query.queries["corpusid"].to_list():
            rng = np.random.default_rng([query.seed, id_key(paper)])
            picked = rng.choice(len(doc_ids), size=min(query.depth, len(doc_ids)),
                                replace=False)
            frames.append(pl.DataFrame({
                "query": paper, "doc": doc_ids[picked],
                "score": np.arange(len(picked), 0, -1, dtype=np.float64)}))
        return pl.concat(frames), {"seed": query.seed}


RETRIEVER = Random()
