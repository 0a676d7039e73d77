"""BM25's (k1, b) grid in one pass over each query's postings (issue 32): the same hits, runs,
MAP per grid point and chosen pair as one search per pair."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import polars as pl
import pytest

from pipeline.retrieval.bm25 import analysis as bm25_analysis
from pipeline.retrieval.bm25 import arrays as bm25_arrays
from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID, choose
from tests.conftest import pool_of

PAIRS = list(itertools.product(K1_GRID, B_GRID))


def same_hits(ours: tuple, theirs: tuple) -> bool:
    """(row, doc, score) hits equal as sets of rows (the kernels return them in other orders)."""
    a, b = np.lexsort((ours[1], ours[0])), np.lexsort((theirs[1], theirs[0]))
    return all(np.array_equal(x[a], y[b]) for x, y in zip(ours, theirs, strict=True))


def check_grid(index: bm25_arrays.Postings, queries: bm25_arrays.QueryTerms, k: int,
               block: int | None = None, ids: pl.Series | None = None
               ) -> tuple[dict, dict]:
    """The one pass against one `search` per pair: hits per pair, then the `grid_runs`
    frames, byte for byte (on 1 and 2 threads). Returns the runs of both."""
    passed = bm25_arrays.search_pass(index, queries, k, PAIRS, block=block)
    for (k1, b), hits in zip(PAIRS, passed, strict=True):
        assert same_hits(hits, bm25_arrays.search(index, queries, k, k1, b)), (k1, b)
    if ids is None:
        ids = pl.Series("query", np.arange(queries.n) + 10**6, dtype=pl.Int64)
    one = bm25_arrays.grid_runs(index, queries, ids, pl.Int64, k, K1_GRID, B_GRID)
    alone = bm25_arrays.grid_runs(index, queries, ids, pl.Int64, k, K1_GRID, B_GRID,
                                  one_pass=False)
    single = bm25_arrays.grid_runs(index, queries, ids, pl.Int64, k, K1_GRID, B_GRID, threads=1)
    assert list(one) == list(alone) == PAIRS
    for pair in PAIRS:
        assert one[pair].equals(alone[pair]) and one[pair].equals(single[pair]), pair
        assert one[pair].write_ipc(None).getvalue() == alone[pair].write_ipc(None).getvalue()
    return one, alone


def index_of(docs: list[dict[str, int]], n_docs: int | None = None) -> bm25_arrays.Postings:
    """An index of documents given as {term: tf}; rows past len(docs) are empty (length 0)."""
    vocab = sorted({t for d in docs for t in d})
    term_id = {t: i for i, t in enumerate(vocab)}
    triples = [(term_id[t], row, tf) for row, d in enumerate(docs) for t, tf in d.items()]
    terms, rows, tfs = (np.array(c) for c in zip(*triples, strict=True))
    return bm25_arrays.Postings.from_pairs(
        np.arange(n_docs or len(docs)) * 3 + 5,
        pl.DataFrame({"term": vocab, "term_id": pl.Series(range(len(vocab)), dtype=pl.Int32)}),
        terms, rows, tfs)


def query_of(queries: list[dict[str, int]]) -> bm25_arrays.QueryTerms:
    rows = [(q, t, tf) for q, d in enumerate(queries) for t, tf in d.items()]
    return bm25_arrays.QueryTerms(pl.DataFrame(rows, schema={"text": pl.Int32, "term": pl.String,
                                                             "tf": pl.Int32}, orient="row"),
                                  len(queries))


@pytest.fixture(scope="module")
def ties() -> tuple[bm25_arrays.Postings, bm25_arrays.QueryTerms]:
    """Hand-made: 200 copies of one document and 40 of another (exact ties at any k below
    them), 30 empty documents (length 0), a term in every non-empty document, documents of
    random terms and lengths, and queries over all of them (one with no term in the pool)."""
    rng = np.random.default_rng(4)
    docs = [{"infarct": 2, "troponin": 1, "common": 1}] * 200
    docs += [{"magma": 3, "common": 2, "troponin": 1}] * 40
    for _ in range(400):
        words = rng.choice(40, size=rng.integers(1, 25), replace=False)
        docs.append({f"w{w}": int(rng.integers(1, 5)) for w in words} | {"common": 1})
    order = rng.permutation(len(docs))  # the copies spread over the blocks
    docs = [docs[i] for i in order]
    index = index_of(docs, len(docs) + 30)
    queries = query_of([{"troponin": 1, "infarct": 1}, {"common": 1}, {"magma": 2, "w3": 1},
                        {"absent": 1}, {"troponin": 1, "w1": 1, "w2": 1, "common": 1},
                        {f"w{w}": 1 for w in range(0, 40, 3)}, {"infarct": 1}])
    return index, queries


@pytest.mark.parametrize("k", [1, 7, 150, 5000])
@pytest.mark.parametrize("block", [16, None])
def test_one_pass_equals_separate_searches_with_ties(ties, k, block):
    """On the hand-made index, k below and above the number of matching documents and blocks
    of 16 documents (many blocks; lists of tied candidates grown past their first room) or
    one: the same hits per pair, the same runs."""
    index, queries = ties
    runs, _ = check_grid(index, queries, k, block)
    hits = bm25_arrays.search(index, queries, k, 0.9, 0.4)
    per_query = np.bincount(hits[0], minlength=queries.n)
    assert per_query[3] == 0  # no term in the pool, no hit
    if k < 200:  # ties at the k-th place: more hits than k for the copied documents' queries
        assert per_query[0] >= 200 > k and per_query[6] >= 200
        assert len(np.unique(hits[2][hits[0] == 6])) == 1  # "infarct": all 200 tied
    else:  # more room than matches: every matching document comes back
        assert per_query[1] == 640 and per_query[6] == 200
    assert all(run.group_by("query").len()["len"].max() <= k for run in runs.values())
    scores = {pair: run["score"].to_list() for pair, run in runs.items()}
    assert len({tuple(s) for s in scores.values()}) > 20  # the grid's points differ


@pytest.fixture(scope="module")
def pool(corpus_dir) -> tuple[bm25_arrays.Postings, bm25_arrays.QueryTerms, pl.DataFrame,
                              pl.DataFrame]:
    """The 1,600 candidates of a fixture pool with every 7th indexed twice (exact ties), its
    whole title+abstract queries, their ids and qrels."""
    from pipeline.corpus.files import paper_texts
    from pipeline.pools.build import load_pool

    queries, candidates, qrels = load_pool(corpus_dir, pool_of(1600))
    papers = paper_texts(corpus_dir, candidates["corpusid"])
    papers = pl.concat([papers, papers.gather_every(7).with_columns(pl.col("corpusid") + 10**9)])
    texts = paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid")
    index = bm25_arrays.build(papers["corpusid"].to_numpy(),
                              bm25_analysis.paper_text(papers).to_list())
    terms = bm25_arrays.query_terms(bm25_analysis.paper_text(texts).to_list())
    return index, terms, texts, qrels


@pytest.mark.parametrize("k", [10, 101, pytest.param(5000, marks=pytest.mark.slow)])
def test_one_pass_equals_separate_searches_on_a_pool(pool, k):
    """Whole-abstract queries on a fixture pool (k = 5,000: more than the pool's 1,829
    documents): the same hits per pair and runs byte for byte; then the same MAP per grid
    point (as tuning scores it) and the same chosen pair."""
    from pipeline.metrics import per_query
    from pipeline.models import get_model
    from pipeline.retrieval.runs import finalize_run

    index, terms, texts, qrels = pool
    ids = texts["corpusid"]
    one, alone = check_grid(index, terms, k, block=300, ids=ids)
    hits = bm25_arrays.search(index, terms, k, 2.0, 0.9)
    if k < index.doc_count:  # the copies tie at the k-th place for some queries
        assert (np.bincount(hits[0]) > k).any()
    tables = []
    for runs in (one, alone):
        rows = []
        for (k1, b), run in runs.items():
            ranked, _ = finalize_run(run, k - 1)
            maps, _ = per_query(ranked, qrels, ids, ("map",))
            rows.append({"k1": k1, "b": b, "map": float(maps["map"].mean())})
        tables.append(pl.DataFrame(rows))
    assert tables[0].equals(tables[1]) and tables[0]["map"].n_unique() > 5
    chosen = [choose(t, get_model("bm25"), ["val"]) for t in tables]
    assert chosen[0] == chosen[1]


@pytest.mark.slow
def test_tuning_chooses_the_same_with_one_pass(corpus_dir, tmp_path_factory, monkeypatch):
    """`bm25_params` over the whole default grid on two validation pools: the kept MAP of
    every grid point and the chosen pair are the same with the one pass as with 30 searches."""
    from pipeline.core.files import read_json
    from pipeline.layout import Place, tuning_path
    from pipeline.models import get_model
    from pipeline.pools.build import PoolSpec, build_pool
    from pipeline.retrieval.bm25 import store as bm25_store
    from pipeline.retrieval.bm25.tuning import bm25_params
    from tests.conftest import copy_corpus

    root = tmp_path_factory.mktemp("grid")
    corpus = copy_corpus(corpus_dir, root / "small")
    for repeat in (0, 1):
        build_pool(corpus, PoolSpec(size=900, queries=15, repeat=repeat, seed=5,
                                    split="validation"))
    build_pool(corpus, PoolSpec(size=900, queries=15, seed=5))
    entry, kept = get_model("bm25"), []
    for name, one_pass in (("one", True), ("alone", False)):
        monkeypatch.setattr(bm25_store, "grid_runs",
                            functools.partial(bm25_arrays.grid_runs, one_pass=one_pass))
        place = Place(corpus, root / name, root / name / "runs")
        chosen = bm25_params(place, "all-900-s5-r0", entry, 2)
        kept.append(read_json(tuning_path(place.index_root, corpus.name, "all-900-s5-r0")))
        assert kept[-1]["chosen"] == chosen
    assert kept[0]["map"] == kept[1]["map"] and len(kept[0]["map"]) == 30
    assert len({row["map"] for row in kept[0]["map"]}) > 5
    assert kept[0]["chosen"] == kept[1]["chosen"]
