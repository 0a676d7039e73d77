"""Perturbed queries (pipeline/pools/queries.py, QUERY_VARIANT): each variant does what it says,
seeded; a variant's run sits beside the full-query run and the report shows the change."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import Place, run_name, split_run_name
from pipeline.models import get_model
from pipeline.pools.queries import perturb, query_texts
from pipeline.report.build import report
from pipeline.retrieval.search import search_pool
from tests.conftest import copy_corpus, pool_of

TITLE = "Graph neural networks for protein folding"
ABSTRACT = ("We study folding. Proteins fold fast! Our model predicts contacts well. "
            "Results hold across twenty datasets and many random seeds.")


def test_variants_do_what_they_say():
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    assert perturb(TITLE, ABSTRACT, "title", rng()) == (TITLE, "")
    assert perturb(TITLE, ABSTRACT, "abstract", rng()) == ("", ABSTRACT)
    title, shuffled = perturb(TITLE, ABSTRACT, "shuffled", rng())
    assert title == TITLE and shuffled != ABSTRACT
    assert sorted(shuffled.split(" ")) == sorted(ABSTRACT.split(" "))
    title, deleted = perturb(TITLE, ABSTRACT, "deleted30", rng())
    words = ABSTRACT.split()
    assert title == TITLE and len(deleted.split()) == len(words) - round(0.3 * len(words))
    kept = iter(deleted.split())  # the words left keep their order
    current = next(kept)
    for word in words:
        if word == current:
            current = next(kept, None)
    assert current is None
    title, typos = perturb(TITLE, ABSTRACT, "typos", rng())
    changed = [a != b for a, b in zip(ABSTRACT.split(" "), typos.split(" "), strict=True)]
    assert 0 < sum(changed) < len(changed)
    assert perturb(TITLE, ABSTRACT, "typos", rng()) == (title, typos)  # seeded


def test_run_names():
    assert run_name("bm25", "title") == "bm25~title" and run_name("bm25") == "bm25"
    assert split_run_name("minilm~typos") == ("minilm", "typos")
    with pytest.raises(InputError, match="QUERY_VARIANT 'nope'"):
        run_name("bm25", "nope")


def test_variant_runs_beside_the_full_ones(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    import shutil

    shutil.copytree(corpus_dir / "pools" / pool_of(800), corpus / "pools" / pool_of(800))
    queries = pl.read_parquet(corpus / "pools" / pool_of(800) / "queries.parquet")
    texts = query_texts(corpus, queries, "title", seed=0)
    assert (texts["abstract"] == "").all() and texts.height == queries.height
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    for variant in ("full", "title"):
        info = search_pool(place, pool_of(800),
                      get_model("bm25"), variant=variant)
        assert info["details"]["query_variant"] == variant
        eval_run(place, pool_of(800),
                 run_name("bm25", variant))
    assert (tmp_path / "runs" / "small" / pool_of(800) / "bm25~title.trec").exists()
    collect_results(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs")
    text = report(tmp_path / "runs", "small", seed=1)
    assert "query robustness" in text and "| bm25 |" in text
    assert "bm25~title" not in text.split("query robustness")[1].split("\n## ")[1]
    with pytest.raises(InputError, match="not available for fusion"):
        search_pool(place, pool_of(800),
               get_model("fuse--rrf--bm25--random"), variant="title")
