"""The report's fixtures: the shared synthetic corpus with pools of every kind the report
draws (dataset-level pools of two sizes and two repeats, field-level pools of two fields), BM25
and random runs on each, scored and collected: a data folder as `make eval` leaves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import Place, pool_names
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.search import search_pool
from tests.conftest import copy_corpus

REPORT_CORPUS = "small"
REPORT_MODELS = ("bm25", "random")
DATASET_SIZES, REPEATS, FIELDS, FIELD_SIZE = (800, 1600), (0, 1), ("Medicine", "Biology"), 600


@pytest.fixture(scope="session")
def report_data(corpus_dir, tmp_path_factory) -> Path:
    """A data folder (corpora/, indexes/, runs/) whose pools of seed 0 are searched by BM25
    and random, scored and collected into runs/results.parquet."""
    root = tmp_path_factory.mktemp("report-data")
    corpus = copy_corpus(corpus_dir, root / "corpora" / REPORT_CORPUS)
    for size in DATASET_SIZES:
        for repeat in REPEATS:
            build_pool(corpus, PoolSpec(size=size, repeat=repeat, queries=20))
    for field in FIELDS:
        build_pool(corpus, PoolSpec(size=FIELD_SIZE, field=field, queries=8))
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in pool_names(corpus):
        for model in REPORT_MODELS:
            search_pool(place, pool, get_model(model), threads=1)
            eval_run(place, pool, model)
    collect_results(root / "corpora", root / "indexes", root / "runs")
    return root
