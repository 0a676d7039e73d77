"""Late-interaction search (pipeline/retrieval/late.py) through the API, on the tiny ColBERT
folder PyLate saves: exact runs equal MaxSim of the encoder's own vectors over the whole pool;
as a reranker (make rerank: rerank--<model>--bm25), the first stage's top RERANK_DEPTH ordered
by MaxSim, the rest in the first stage's order; a RERANK_DEPTH above the first stage's K
refused in one line."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import OptionError
from pipeline.encoding.late import LateEncoder
from pipeline.layout import run_paths
from pipeline.models import get_model
from pipeline.pools.build import load_pool
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])
MODEL = "answerai-colbert-small"  # the registry entry, its weights the tiny folder
K, DEPTH = 20, 10
RERANKED = f"rerank--{MODEL}--bm25"


@pytest.fixture(scope="module")
def searched(corpus_dir, pylate_folder, tmp_path_factory) -> tuple[pipeline.Data, dict]:
    """The pool searched exact (one runs root), and BM25 then the rerank of its top DEPTH."""
    root = tmp_path_factory.mktemp("late-search")
    exact = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                          runs=root / "exact")
    pipeline.search(exact, corpus_dir.name, POOL, MODEL, k=K, threads=1,
                    model_path=pylate_folder)
    rerank = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                           runs=root / "rerank")
    pipeline.search(rerank, corpus_dir.name, POOL, "bm25", k=K, threads=1)
    pipeline.search(rerank, corpus_dir.name, POOL, RERANKED, k=K, threads=1,
                    model_path=pylate_folder, rerank_depth=DEPTH)
    return exact, rerank


def run_of(data: pipeline.Data, corpus: str, model: str = MODEL) -> pl.DataFrame:
    return pl.read_parquet(run_paths(data.runs, corpus, POOL, model).parquet)


@pytest.fixture(scope="module")
def maxsim(corpus_dir, pylate_folder):
    """MaxSim of query papers with candidates, from the encoder's vectors held in memory."""
    encoder = LateEncoder(get_model(MODEL), model_path=pylate_folder, device="cpu")
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    text = {c: encoder.format(t, a) for c, t, a in papers.select(
        "corpusid", "title", "abstract").iter_rows()}

    def scores(query_ids: np.ndarray, doc_ids: np.ndarray) -> np.ndarray:
        docs, _ = encoder.encode_ids(encoder.tokenize([text[d] for d in doc_ids]),
                                     progress=False)
        queries, _ = encoder.encode_queries([text[q] for q in query_ids])
        out = np.zeros((len(query_ids), len(doc_ids)))
        for i in range(len(query_ids)):
            q = queries.paper(i)
            out[i] = [(q @ docs.paper(j).T).max(axis=1).sum() for j in range(len(doc_ids))]
        return out

    return scores


def test_exact_runs_equal_maxsim_over_the_pool(searched, corpus_dir, maxsim):
    """Each query paper's top K by MaxSim over every candidate (itself left out): the same
    papers, scores to 1e-5."""
    run = run_of(searched[0], corpus_dir.name)
    queries, candidates, _ = load_pool(corpus_dir, POOL)
    query_ids = np.sort(queries["corpusid"].to_numpy())[:4]
    doc_ids = candidates["corpusid"].to_numpy()
    scores = maxsim(query_ids, doc_ids)
    for i, query in enumerate(query_ids):
        mine = run.filter(pl.col("query") == query).sort("rank")
        keep = doc_ids != query
        order = np.argsort(-scores[i][keep], kind="stable")[:K]
        np.testing.assert_allclose(mine["score"].to_numpy(), scores[i][keep][order], atol=1e-5)
        assert set(mine["doc"]) == set(doc_ids[keep][order])


def test_rerank_is_the_first_stages_top_depth_by_maxsim(searched, corpus_dir, maxsim):
    """The rerank's run of each query: BM25's top DEPTH in MaxSim's order, scores to 1e-5,
    then BM25's other rows in BM25's order."""
    rerank = searched[1]
    first = run_of(rerank, corpus_dir.name, "bm25")
    run = run_of(rerank, corpus_dir.name, RERANKED)
    for query in np.sort(first["query"].unique().to_numpy())[:4]:
        theirs = first.filter(pl.col("query") == query).sort("rank")
        mine = run.filter(pl.col("query") == query).sort("rank")
        top = mine.head(DEPTH)
        assert sorted(top["doc"]) == sorted(theirs["doc"].head(DEPTH))
        expected = maxsim(np.array([query]), top["doc"].to_numpy())[0]
        np.testing.assert_allclose(top["score"].to_numpy(), expected, atol=1e-5)
        assert (np.diff(top["score"].to_numpy()) <= 0).all()
        assert mine["doc"].to_list()[DEPTH:] == theirs["doc"].to_list()[DEPTH:]


def test_depth_above_the_first_stages_k_is_refused(searched, corpus_dir, pylate_folder):
    """RERANK_DEPTH deeper than the first stage's run: one line naming both and what to give."""
    refusal = f"rerank_depth={K + 1} is above the first stage's K.* at most {K}"
    with pytest.raises(OptionError, match=refusal):
        pipeline.search(searched[1], corpus_dir.name, POOL, RERANKED, k=K, threads=1,
                        model_path=pylate_folder, rerank_depth=K + 1)
