"""The array BM25 engine against Lucene itself: same scores, same lists (issue 7)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.layout import Place
from pipeline.retrieval.bm25 import analysis as bm25_analysis
from pipeline.retrieval.bm25 import arrays as bm25_arrays
from pipeline.retrieval.bm25 import lucene as bm25_lucene
from pipeline.retrieval.bm25 import store as bm25_store
from pipeline.retrieval.runs import finalize_run
from tests.conftest import pool_of
from tests.retrieval.bm25_fresh import search_papers


def test_lengths_are_encoded_as_lucene_smallfloat():
    # SmallFloat.intToByte4 / byte4ToInt: exact below 24, then 4 significant bits (floor)
    lengths = np.array([0, 1, 23, 24, 25, 31, 40, 100, 1000, 2**31 - 1])
    assert bm25_arrays.encode_length(lengths).tolist() == [0, 1, 23, 24, 25, 31, 40, 57, 87, 255]
    decoded = bm25_arrays.decode_length(bm25_arrays.encode_length(lengths))
    assert decoded.tolist()[:8] == [0, 1, 23, 24, 25, 31, 40, 96]
    assert (decoded <= lengths).all()
    table = bm25_arrays.decode_length(np.arange(256))
    assert (np.diff(table) > 0).all()  # one byte, 256 increasing lengths
    assert (bm25_arrays.encode_length(table) == np.arange(256)).all()


def test_the_engines_give_the_same_functions():
    """Every BM25_ENGINE value names an engine module, and both give the same four functions
    with the same signatures (the retriever and tuning call them without asking which)."""
    import inspect

    from pipeline.glossary import BM25_ENGINES
    from pipeline.retrieval.bm25.engines import ENGINES, engine

    assert set(ENGINES) == set(BM25_ENGINES)
    functions = ("index_pool", "ready_pool", "searched_files", "search_grid")
    arrays, lucene = ([inspect.signature(getattr(engine(name), f)) for f in functions]
                      for name in ("arrays", "lucene"))
    assert arrays == lucene


def test_tokens_are_lucenes():
    tokens = bm25_analysis.analyze(["The Running dogs of 1,000 cats", "", "e-mail the U.S.A.",
                                f"a {bm25_analysis.SEPARATOR.upper()} in the text"])
    assert tokens.rows() == [(0, "run"), (0, "dog"), (0, "1,000"), (0, "cat"),
                             (2, "e"), (2, "mail"), (2, "u.s.a"), (3, "text")]


@pytest.fixture(scope="module")
def pool(corpus_dir) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The 1,600 candidates of a fixture pool with every 7th indexed twice (exact ties), and
    its queries."""
    from pipeline.corpus.files import paper_texts
    from pipeline.pools.build import load_pool

    queries, candidates, _ = load_pool(corpus_dir, pool_of(1600))
    papers = paper_texts(corpus_dir, candidates["corpusid"])
    papers = pl.concat([papers, papers.gather_every(7).with_columns(pl.col("corpusid") + 10**9)])
    return papers, paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid")


@pytest.mark.slow
@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.2, 0.75)])
def test_same_lists_and_scores_as_lucene(pool, tmp_path, k1, b):
    """Whole title+abstract queries, k=100: Anserini's run and the engine's, list for list
    (ties and the cut at k included) and score for score (as Anserini writes them)."""
    papers, queries = pool
    bm25_lucene.build_index(papers, tmp_path / "bm25", threads=2)
    lucene, _ = bm25_lucene.search(queries, tmp_path / "bm25", 100, k1, b, threads=2)
    runs, capped = search_papers(queries, papers, 100, [k1], [b], threads=2)
    ours = runs[(k1, b)]
    assert capped == [] and ours.height == lucene.height
    assert ours["query"].to_list() == lucene["query"].to_list()
    assert ours["doc"].to_list() == lucene["doc"].to_list()
    assert np.abs(ours["score"].to_numpy() - lucene["score"].to_numpy()).max() < 1.5e-6
    # the runs the search stage writes from either engine are the same, value for value
    assert finalize_run(ours, 99)[0].equals(finalize_run(lucene, 99)[0])
    tied = lucene.filter(pl.col("doc").is_in((papers["corpusid"] + 10**9).implode()))
    assert tied.height > 100  # copies were retrieved: exact ties were broken the same way


@pytest.fixture(scope="module")
def stored(corpus_dir, tmp_path_factory) -> tuple[Place, pl.DataFrame, pl.Series]:
    """The engine's real entry on the fixture pool of 1,600 (`store.search_grid`, as the
    search stage calls it): a place with an empty store of its own, the pool's queries (with
    their text) and its candidates."""
    from pipeline.corpus.files import paper_texts
    from pipeline.pools.build import load_pool

    root = tmp_path_factory.mktemp("bm25-store")
    queries, candidates, _ = load_pool(corpus_dir, pool_of(1600))
    texts = paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid")
    return Place(corpus_dir, root / "indexes", root / "runs"), texts, candidates["corpusid"]


def test_a_grid_scores_every_pair_once_analysed(stored):
    place, queries, candidates = stored
    runs, _, _ = bm25_store.search_grid(place, pool_of(1600), queries.head(3), True, candidates,
                                        10, [0.9, 1.2], [0.4, 0.75])
    assert sorted(runs) == [(0.9, 0.4), (0.9, 0.75), (1.2, 0.4), (1.2, 0.75)]
    assert runs[(0.9, 0.4)]["score"].to_list() != runs[(1.2, 0.75)]["score"].to_list()
    assert all(run.group_by("query").len()["len"].max() == 10 for run in runs.values())


def test_queries_without_text_have_no_hits(stored):
    place, queries, candidates = stored
    queries = queries.head(2).with_columns(title=pl.Series(["", "Cardiac"]),
                                           abstract=pl.Series([None, "troponin"]))
    runs, _, _ = bm25_store.search_grid(place, pool_of(1600), queries, False, candidates, 10,
                                        [0.9], [0.4])
    run = runs[(0.9, 0.4)]
    assert set(run["query"]) == {queries["corpusid"][1]} and run.height == 10  # only the second


@pytest.mark.parametrize("k", [1, 10, 100])
def test_pruning_changes_no_list_and_no_score(pool, k):
    """Pruned queries (blocks of documents, MaxScore's bound, candidates finished from their
    own term lists, a guessed bound checked afterwards) return exactly what scoring every
    posting returns: documents, ties with the k-th, and float32 scores. Small blocks make the
    fixture's pool take every path: several blocks, the guess, and a guess that fails."""
    papers, queries = pool
    index = bm25_arrays.build(papers["corpusid"].to_numpy(),
                              bm25_analysis.paper_text(papers).to_list())
    texts = bm25_analysis.paper_text(queries).to_list()
    full = bm25_arrays.search(index, texts, k, prune=False)
    settings = {"default": {}, "blocks": {"first": 400, "block": 200},
                "bad guess": {"first": 400, "block": 200, "guess": 0.01}}
    for name, options in settings.items():
        stats: dict = {}
        pruned = bm25_arrays.search(index, texts, k, stats=stats, **options)
        for ours, theirs in zip(pruned, full, strict=True):
            assert np.array_equal(ours, theirs), name
        if name != "default" and k <= 10:  # the blocks leave postings unscored
            assert stats["postings_scored"] < (0.5 if k == 1 else 0.9) * stats["postings"]
        # a guess is made for k = 100 only (the first block's share of the top k: 22); the
        # best of the first block is above the 100th of the pool
        assert (stats["ranked_again"] > 0) == (name == "bad guess" and k == 100)


def test_every_document_tied_with_the_kth_is_returned():
    """200 identical documents tie with the k-th: all of them come back (more than the room
    first given to a query's hits), and the other documents do not."""
    texts = ["myocardial infarction troponin"] * 200 + ["volcanic magma"] * 50
    index = bm25_arrays.build(np.arange(250), texts)
    rows, docs, scores = bm25_arrays.search(index, ["troponin infarction"], 1, first=32,
                                            block=64)
    assert sorted(docs.tolist()) == list(range(200)) and len(set(scores.tolist())) == 1


def test_a_k_beyond_the_documents_is_every_document_without_its_memory():
    """Issue 46 (a sibling of shards=10**6): `search --k 2147483647` allocated 32 GiB of work
    space per thread for k and failed with a MemoryError traceback; a query ranks at most
    every document, so any larger k is the same run."""
    texts = ["myocardial infarction troponin"] * 20 + ["troponin levels"] * 20 + ["magma"] * 10
    index = bm25_arrays.build(np.arange(50), texts)
    every = bm25_arrays.search(index, ["troponin infarction", "magma"], 50)
    huge = bm25_arrays.search(index, ["troponin infarction", "magma"], 2**31 - 1)
    assert all(np.array_equal(a, b) for a, b in zip(every, huge, strict=True))
    assert len(every[1]) == 50  # every matching document of both queries


def test_term_bounds_from_the_frontier_are_the_postings_maxima(pool):
    """The bound of a term's score for any (k1, b), read from the few (length, tf) pairs of its
    frontier, equals the largest 1 + tf x cache[norm] over all its postings."""
    papers, _ = pool
    index = bm25_arrays.build(papers["corpusid"].to_numpy(),
                              bm25_analysis.paper_text(papers).to_list())
    assert len(index.frontier[1]) < len(index.docs) // 10
    for k1, b in [(0.9, 0.4), (1.2, 0.75), (2.0, 0.0), (0.6, 1.0)]:
        table = bm25_arrays._norm_table(index, k1, b)
        den = np.float32(1) + index.tfs * table[index.norms][index.docs]
        direct = np.maximum.reduceat(den, index.ptr[:-1])
        assert np.array_equal(bm25_arrays._maxima(*index.frontier, table), direct)


def test_analysis_in_parallel_builds_the_same_index(corpus_dir):
    """More texts than one JVM call takes: batches analysed on 2 threads give the index that
    one thread gives (term ids aside, which follow the order terms are met)."""
    papers = pl.read_parquet(corpus_dir / "papers.parquet").head(2 * bm25_analysis.BATCH + 500)
    texts, ids = bm25_analysis.paper_text(papers).to_list(), papers["corpusid"].to_numpy()

    def triples(index: bm25_arrays.Postings) -> pl.DataFrame:
        terms = index.vocab.sort("term_id")["term"].to_numpy()
        term_of = np.repeat(np.arange(len(index.ptr) - 1), np.diff(index.ptr))
        return pl.DataFrame({"term": terms[term_of], "doc": index.docs, "tf": index.tfs}) \
            .sort("term", "doc")

    one, two = bm25_arrays.build(ids, texts, threads=1), bm25_arrays.build(ids, texts, threads=2)
    assert triples(one).height > 100_000 and triples(one).equals(triples(two))
    assert np.array_equal(one.norms, two.norms) and one.sum_length == two.sum_length


def test_query_batches_change_nothing_and_count_each_query_once(pool, monkeypatch):
    """Queries go to the kernel QUERY_BATCH at a time (progress between batches): the same
    lists and scores as in one batch, ties ranked again with more room included, and each
    query counted once by the progress."""
    from pipeline.core.logs import Progress

    papers, queries = pool
    pooled = (bm25_arrays.build(papers["corpusid"].to_numpy(),
                                bm25_analysis.paper_text(papers).to_list()),
              bm25_analysis.paper_text(queries).to_list(), 10)
    ties = (bm25_arrays.build(np.arange(250), ["myocardial infarction troponin"] * 200
                              + ["volcanic magma"] * 50),
            ["troponin infarction", "volcanic magma", "magma", "myocardial"] * 3, 1)
    for index, texts, k in (pooled, ties):
        whole = bm25_arrays.search(index, texts, k)
        monkeypatch.setattr(bm25_arrays, "QUERY_BATCH", 5)
        bar = Progress(len(texts), "bm25", "queries", show=False)
        batched = bm25_arrays.search(index, texts, k, bar=bar)
        monkeypatch.undo()
        assert bar.done == len(texts)
        for ours, theirs in zip(batched, whole, strict=True):
            assert np.array_equal(ours, theirs)
