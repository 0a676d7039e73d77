"""BM25 with every text analysed afresh, without the analysed-text store: the reference that the
engine's real entry (`store.search_grid`) is compared with, and the one that indexes papers
the corpus does not hold (the copies that make exact ties against Lucene)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from pipeline.retrieval.bm25.analysis import MAX_CLAUSES, check_ids, paper_text, query_texts
from pipeline.retrieval.bm25.arrays import build, grid_runs, query_terms


def search_papers(queries: pl.DataFrame, papers: pl.DataFrame, k: int, k1s: Sequence[float],
                  bs: Sequence[float], threads: int = 2, max_clauses: int = MAX_CLAUSES
                  ) -> tuple[dict[tuple[float, float], pl.DataFrame], list]:
    """Every (k1, b) on the given papers (corpusid, title, abstract): the hits (query, doc,
    score) of each pair, and the ids of the queries cut to `max_clauses` terms."""
    check_ids(papers["corpusid"], "document")
    texts, capped = query_texts(queries, max_clauses, lambda: papers)
    index = build(papers["corpusid"].to_numpy(), paper_text(papers).to_list(), threads)
    runs = grid_runs(index, query_terms(texts, threads), queries["corpusid"],
                     papers["corpusid"].dtype, k, k1s, bs, threads)
    return runs, capped
