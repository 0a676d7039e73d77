"""The MDCR phenomenon on the small corpus with the real MiniLM and real Lucene BM25:
both beat a random ranking by far, and MAP falls as the pool grows (same queries)."""

from __future__ import annotations

import pytest

from pipeline.evaluation.evaluate import eval_run
from pipeline.layout import Place
from pipeline.models import get_model
from pipeline.retrieval.search import index, search_pool
from tests.conftest import POOL_SIZES, pool_of


@pytest.fixture(scope="module")
def maps(corpus_dir, tmp_path_factory) -> dict[tuple[str, int], float]:
    index_root = tmp_path_factory.mktemp("indexes")
    runs_root = tmp_path_factory.mktemp("runs")
    out = {}
    place = Place(corpus_dir, index_root, runs_root)
    for model in ("bm25", "minilm", "random"):
        entry = get_model(model)
        for size in POOL_SIZES:
            pool = pool_of(size)
            index(place, pool, entry, threads=2)
            search_pool(place, pool, entry)
            out[model, size] = eval_run(place, pool,
                                        model)["means"]["map"]
    return out


@pytest.mark.parametrize("model", ["bm25", "minilm"])
def test_models_beat_random_by_5x(maps, model):
    for size in POOL_SIZES:
        assert maps[model, size] >= 5 * maps["random", size], maps


@pytest.mark.parametrize("model", ["bm25", "minilm"])
def test_map_falls_as_the_pool_grows(maps, model):
    small, large = POOL_SIZES
    assert maps[model, large] < maps[model, small], maps
