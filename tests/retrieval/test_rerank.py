"""Reranked runs (pipeline/retrieval/rerank.py) through the API, on a tiny CrossEncoder folder
saved by sentence-transformers: scores equal CrossEncoder.predict's; a reranked run is the first
stage's top RERANK_DEPTH in the cross-encoder's order, then the first stage's own order below;
searched again it is kept; it is stale once the first stage's run or the reranker's weights
change; what cannot be reranked is refused in one line."""

from __future__ import annotations

import shutil

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError, OptionError
from pipeline.core.files import read_json
from pipeline.encoding.cross import CrossScorer
from pipeline.encoding.families import routed
from pipeline.layout import Place, run_paths
from pipeline.models import get_model, rerank_parts, reranked_name
from pipeline.pools.build import load_pool
from pipeline.retrieval.runs import recorded_run_problem
from tests.conftest import CROSS_ENCODER, POOL_SIZES, cross_reranked, pool_of

POOL = pool_of(POOL_SIZES[0])
RERANKER = CROSS_ENCODER
K, DEPTH = 20, 8
RERANKED = reranked_name(RERANKER, "bm25")


def predict(folder, pairs: list[tuple[str, str]]) -> np.ndarray:
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(folder), device="cpu").predict(pairs, batch_size=3)


@pytest.fixture(scope="module")
def papers(corpus_dir) -> dict[int, tuple[str, str]]:
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    return {i: (t or "", a or "") for i, t, a in rows.select("corpusid", "title",
                                                             "abstract").iter_rows()}


@pytest.fixture(scope="module")
def reranked(corpus_dir, cross_folder, tmp_path_factory) -> tuple[pipeline.Data, Place]:
    """BM25 searched, then its top DEPTH reranked by the cross-encoder (RERANKED)."""
    return cross_reranked(corpus_dir, cross_folder, tmp_path_factory.mktemp("rerank"), POOL, K,
                          DEPTH)


def run_of(data: pipeline.Data, corpus: str, model: str) -> pl.DataFrame:
    return pl.read_parquet(run_paths(data.runs, corpus, POOL, model).parquet)


def test_scores_equal_cross_encoder_predict(cross_folder, papers):
    """Pairs of corpus papers (a whole abstract cut at max_length among them): each score
    equals CrossEncoder.predict's for the same texts, to 1e-5, whatever the order."""
    scorer = CrossScorer(routed(get_model(RERANKER), cross_folder), model_path=cross_folder,
                         device="cpu")
    ids = sorted(papers)[:6]
    texts = {i: scorer.text(*papers[i]) for i in ids}
    pairs = [(q, d) for q in ids[:2] for d in ids[2:]]
    mine = scorer.score(texts, texts, pairs)
    theirs = predict(cross_folder, [(texts[q], texts[d]) for q, d in pairs])
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert np.ptp(theirs) > 5e-3  # the pairs are told apart
    assert max(len(t.split()) for t in texts.values()) > 30


def test_the_top_depth_is_reordered_by_the_cross_encoder_and_the_rest_kept(
        reranked, corpus_dir, cross_folder, papers):
    """Each query: the first DEPTH rows are BM25's top DEPTH, ordered as predict's scores
    order them; below, BM25's rows in BM25's order; as many rows as BM25's."""
    data = reranked[0]
    first = run_of(data, corpus_dir.name, "bm25")
    run = run_of(data, corpus_dir.name, RERANKED)
    text = {i: f"{t} {a}".strip() for i, (t, a) in papers.items()}
    queries = np.sort(first["query"].unique().to_numpy())
    for query in queries[:4]:
        theirs = first.filter(pl.col("query") == query).sort("rank")
        mine = run.filter(pl.col("query") == query).sort("rank")
        assert mine.height == theirs.height
        top = mine.head(DEPTH)
        assert sorted(top["doc"]) == sorted(theirs["doc"].head(DEPTH))
        expected = predict(cross_folder, [(text[query], text[d]) for d in top["doc"]])
        np.testing.assert_allclose(top["score"].to_numpy(), expected, atol=1e-5)
        assert (np.diff(top["score"].to_numpy()) <= 0).all()
        assert mine["doc"].to_list()[DEPTH:] == theirs["doc"].to_list()[DEPTH:]
    details = read_json(run_paths(data.runs, corpus_dir.name, POOL, RERANKED).manifest)
    assert details["details"]["first_stage"] == "bm25"
    assert details["parameters"]["options"]["RERANK_DEPTH"] == DEPTH
    assert run_paths(data.runs, corpus_dir.name, POOL, "bm25").parquet.name in \
        " ".join(details["inputs"])


def test_searched_again_it_is_kept_and_stale_once_a_stage_changes(
        reranked, corpus_dir, cross_folder, tmp_path):
    """The same search again writes nothing; another BM25 run (K changed) makes it stale,
    and so do the reranker's weights changed at the same path."""
    data, place = reranked
    paths = run_paths(data.runs, corpus_dir.name, POOL, RERANKED)
    before = paths.manifest.read_bytes()
    pipeline.search(data, corpus_dir.name, POOL, RERANKED, k=K, threads=1,
                    model_path=cross_folder, rerank_depth=DEPTH)
    assert paths.manifest.read_bytes() == before
    assert recorded_run_problem(place, POOL, RERANKED) is None
    # the reranker's weights changed: a copy of the folder with one weight moved
    import torch
    from sentence_transformers import CrossEncoder

    changed = tmp_path / "ce"
    shutil.copytree(cross_folder, changed)
    model = CrossEncoder(str(changed), device="cpu")
    with torch.no_grad():
        model.model.classifier.bias.add_(1.0)
    model.save(str(changed))
    copy = pipeline.Data(corpora=data.corpora, indexes=data.indexes, runs=tmp_path / "runs")
    shutil.copytree(data.runs, copy.runs)
    moved = read_json(run_paths(copy.runs, corpus_dir.name, POOL, RERANKED).manifest)
    moved["details"]["reranker_path"] = str(changed)
    from pipeline.core.files import write_json

    manifest = run_paths(copy.runs, corpus_dir.name, POOL, RERANKED).manifest
    shutil.copytree(cross_folder, tmp_path / "same", dirs_exist_ok=True)
    # first: the same weights at the path the run records: current
    moved["details"]["reranker_path"] = str(tmp_path / "same")
    write_json(moved, manifest)
    copy_place = Place(corpus_dir, data.indexes, copy.runs)
    assert recorded_run_problem(copy_place, POOL, RERANKED) is None
    moved["details"]["reranker_path"] = str(changed)
    write_json(moved, manifest)
    problem = recorded_run_problem(copy_place, POOL, RERANKED)
    assert problem is not None and "its reranker st--local--ce changed since" in problem[0]
    # the first stage searched again with another K: the reranked run is stale
    pipeline.search(data, corpus_dir.name, POOL, "bm25", k=K - 1, threads=1)
    problem = recorded_run_problem(place, POOL, RERANKED)
    assert problem is not None and "bm25" in problem[0]
    pipeline.search(data, corpus_dir.name, POOL, "bm25", k=K, threads=1)


def test_what_cannot_be_reranked_is_refused_in_one_line(reranked, corpus_dir, cross_folder):
    data = reranked[0]
    with pytest.raises(OptionError, match=f"rerank_depth={K + 1} is above the first stage's K"
                                          f".* at most {K}"):
        pipeline.search(data, corpus_dir.name, POOL, RERANKED, k=K, threads=1,
                        model_path=cross_folder, rerank_depth=K + 1)
    with pytest.raises(InputError, match="ranks no pool alone; run make rerank "
                                         "MODEL=st:local/ce FIRST_STAGE=bm25"):
        pipeline.search(data, corpus_dir.name, POOL, RERANKER, k=K, threads=1,
                        model_path=cross_folder)
    with pytest.raises(InputError, match="MODEL 'minilm' is a dense model, which reranks"):
        reranked_name("minilm", "bm25")
    with pytest.raises(InputError, match="FIRST_STAGE=ms-marco-minilm: a cross-encoder has no"):
        reranked_name("ms-marco-minilm", "ms-marco-minilm")
    assert rerank_parts("rerank--st--org--x--fuse--rrf--bm25--minilm") == \
        ("st--org--x", "fuse--rrf--bm25--minilm")
    queries, _, _ = load_pool(corpus_dir, POOL)
    assert queries.height > 4


def test_a_run_imported_under_its_own_name_is_reranked_as_a_searched_one(
        reranked, corpus_dir, cross_folder, tmp_path):
    """BM25's run written as TREC and imported as `mine` (make import-run): its rerank holds
    the same rows as BM25's rerank, and a depth beyond its lists is refused."""
    data = reranked[0]
    first = run_of(data, corpus_dir.name, "bm25")
    trec = tmp_path / "mine.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s} x\n" for q, d, r, s in
                            first.select("query", "doc", "rank", "score").iter_rows()))
    pipeline.import_run(data, corpus_dir.name, POOL, trec, "mine")
    name = reranked_name(RERANKER, "mine")
    assert name == "rerank--st--local--ce--mine"
    pipeline.search(data, corpus_dir.name, POOL, name, k=K, threads=1,
                    model_path=cross_folder, rerank_depth=DEPTH)
    mine, theirs = (run_of(data, corpus_dir.name, n).sort("query", "rank")
                    for n in (name, RERANKED))
    assert mine.select("query", "doc").equals(theirs.select("query", "doc"))
    np.testing.assert_allclose(mine["score"].to_numpy(), theirs["score"].to_numpy(), atol=1e-5)
    with pytest.raises(InputError, match="unknown MODEL 'no/such'"):
        reranked_name(RERANKER, "no/such")
