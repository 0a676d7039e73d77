"""Learned sparse search (pipeline/retrieval/sparse/): runs of a tiny SPLADE folder equal to
sentence-transformers' SparseEncoder scores, and the quantised arrays engine's runs equal to
Lucene's impact search, through the API."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import OptionError
from pipeline.layout import run_paths
from pipeline.pools.build import load_pool
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])
MODEL = "splade-pp"  # the registry entry, its weights the tiny folder (MODEL_PATH)
K = 20


@pytest.fixture(scope="module")
def searched(corpus_dir, splade_folder, tmp_path_factory) -> dict:
    """The pool searched three ways, one index root (the store embedded once): float
    weights on arrays, and quantised on arrays and on Lucene (each its own runs root, the
    engine not being part of a run's identity)."""
    root = tmp_path_factory.mktemp("sparse-search")
    runs = {}
    for name, options in {"float": {}, "arrays": {"sparse_quantize": "1"},
                          "lucene": {"sparse_quantize": "1", "sparse_engine": "lucene"}
                          }.items():
        data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                             runs=root / name)
        pipeline.search(data, corpus_dir.name, POOL, MODEL, k=K, threads=1,
                        model_path=splade_folder, **options)
        runs[name] = (data, options)
    return runs


def run_of(data: pipeline.Data, corpus: str) -> pl.DataFrame:
    return pl.read_parquet(run_paths(data.runs, corpus, POOL, MODEL).parquet)


def test_runs_equal_sparse_encoder_scores(searched, corpus_dir, splade_folder):
    """Each query paper's top K, by SparseEncoder's encode_query / encode_document and its
    similarity over the pool's candidates (self and papers sharing no term left out): the
    same papers in the same order, scores to 1e-5."""
    from sentence_transformers import SparseEncoder

    run = run_of(searched["float"][0], corpus_dir.name)
    queries, candidates, _ = load_pool(corpus_dir, POOL)
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").with_columns(
        text=pl.concat_str(pl.col("title").fill_null(""), pl.lit(" "),
                           pl.col("abstract").fill_null("")).str.strip_chars())
    text = dict(zip(papers["corpusid"], papers["text"], strict=True))
    doc_ids = candidates["corpusid"].to_numpy()
    query_ids = np.sort(queries["corpusid"].to_numpy())[:8]
    model = SparseEncoder(str(splade_folder), device="cpu")
    docs = model.encode_document([text[d] for d in doc_ids], batch_size=32)
    scores = model.similarity(model.encode_query([text[q] for q in query_ids]),
                              docs).to_dense().numpy()
    for row, query in enumerate(query_ids):
        ok = (doc_ids != query) & (scores[row] > 0)
        order = np.argsort(-scores[row][ok], kind="stable")[:K]
        got = run.filter(pl.col("query") == query).sort("rank")
        assert got["doc"].to_list() == doc_ids[ok][order].tolist()
        np.testing.assert_allclose(got["score"].to_numpy(), scores[row][ok][order], atol=1e-5)
    assert run["query"].n_unique() == queries.height and run.height > K


def test_quantised_arrays_runs_equal_lucene_impact_search(searched, corpus_dir):
    """On pyserini's integer impacts the two engines write the same run, byte for byte:
    the same papers, the same integer scores, the same papers kept among ties."""
    arrays, lucene = (run_of(searched[n][0], corpus_dir.name) for n in ("arrays", "lucene"))
    assert arrays.height > K and arrays.equals(lucene)
    assert (arrays["score"] == arrays["score"].round()).all()  # integer impacts
    assert not arrays.equals(run_of(searched["float"][0], corpus_dir.name))
    paths = [run_paths(searched[n][0].runs, corpus_dir.name, POOL, MODEL).trec
             for n in ("arrays", "lucene")]
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_a_second_search_is_a_no_op(searched, corpus_dir, splade_folder):
    """Searching again with the same options leaves the run as it is (its manifest is not
    rewritten); quantising is part of the run's identity."""
    data, options = searched["lucene"]
    manifest = run_paths(data.runs, corpus_dir.name, POOL, MODEL).manifest
    before = manifest.stat().st_mtime_ns
    pipeline.search(data, corpus_dir.name, POOL, MODEL, k=K, threads=1,
                    model_path=splade_folder, **options)
    assert manifest.stat().st_mtime_ns == before
    means = pipeline.evaluate(data, corpus_dir.name, POOL, [MODEL], means=True)
    assert means.height == 1 and max(means.drop("model").row(0)) > 0  # scored like any run


def test_lucene_without_quantising_is_refused(corpus_dir, splade_folder, tmp_path):
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "i", runs=tmp_path / "r")
    with pytest.raises(OptionError, match="SPARSE_QUANTIZE=1"):
        pipeline.search(data, corpus_dir.name, POOL, MODEL, k=K, threads=1,
                        model_path=splade_folder, sparse_engine="lucene")
    assert not (tmp_path / "i").exists()  # refused before any work
