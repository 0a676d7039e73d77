"""Fused runs (ranx fusion): named like models, made from the component runs of the same pool,
tuned on validation pools where the method has parameters, evaluated like any run."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import eval_run
from pipeline.layout import Place
from pipeline.models import fused_name, fusion_parts, get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.runs import load_run, run_is_current
from pipeline.retrieval.search import search_pool
from tests.conftest import copy_corpus

POOL = "all-900-s3-r0"


@pytest.fixture(scope="module")
def searched(corpus_dir, tmp_path_factory):
    """A test pool and one validation pool like it, searched with bm25 and random."""
    root = tmp_path_factory.mktemp("fusion")
    corpus = copy_corpus(corpus_dir, root / "small")
    build_pool(corpus, PoolSpec(size=900, n_queries=12, seed=3, split="validation"))
    build_pool(corpus, PoolSpec(size=900, n_queries=12, seed=3))
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in (POOL, f"{POOL}-val"):
        for model in ("bm25", "random"):
            search_pool(place, pool, get_model(model), threads=1)
    return corpus, root


def test_names():
    assert fused_name("rrf", ["bm25", "minilm"]) == "fuse--rrf--bm25--minilm"
    assert fusion_parts("fuse--wsum--bm25--hf--org--enc--cls") == ("wsum",
                                                                   ["bm25", "hf--org--enc--cls"])
    # imported vectors' files keep their own `--` too (make fuse MODELS=bm25,vectors:x)
    name = fused_name("rrf", ["vectors:x-1.b", "bm25", "hf:org/enc@mean", "vectors:y"])
    assert name == "fuse--rrf--vectors--x-1.b--bm25--hf--org--enc--mean--vectors--y"
    assert fusion_parts(name) == ("rrf", ["vectors--x-1.b", "bm25", "hf--org--enc--mean",
                                          "vectors--y"])
    assert get_model(name).name == name
    with pytest.raises(InputError, match="single '-'"):  # would not split back
        get_model("vectors:x--bm25")
    assert get_model("fuse--rrf--bm25--random").kind == "fusion"
    for method, models in (("nope", ["bm25", "random"]), ("rrf", ["bm25"]),
                           ("rrf", ["bm25", "bm25"]), ("rrf", ["bm25", "nomodel"])):
        with pytest.raises(InputError):
            fused_name(method, models)


@pytest.mark.slow
def test_rrf_is_the_sum_of_reciprocal_ranks(searched):
    corpus, root = searched
    runs = root / "runs"
    place = Place(corpus, root / "indexes", runs)
    info = search_pool(place, POOL, get_model("fuse--sum--bm25--random"),
                  threads=1)
    assert info["details"]["method"] == "sum" and info["details"]["tuned_on"] == []
    rrf = search_pool(place, POOL, get_model("fuse--rrf--bm25--random"),
                 threads=1)
    # rrf has a parameter (k): tuned on the validation pool
    assert rrf["details"]["tuned_on"] == [f"{POOL}-val"] and "k" in rrf["details"]["params"]
    k = rrf["details"]["params"]["k"]
    fused = load_run(place, POOL, "fuse--rrf--bm25--random")
    parts = [load_run(place, POOL, m).select("query", "doc",
                                                                      pl.col("rank").alias(m))
             for m in ("bm25", "random")]
    expected = (parts[0].join(parts[1], on=["query", "doc"], how="full", coalesce=True)
                .with_columns(want=(1 / (k + pl.col("bm25"))).fill_null(0)
                              + (1 / (k + pl.col("random"))).fill_null(0)))
    joined = fused.join(expected, on=["query", "doc"])
    assert joined.height == fused.height
    assert (joined["score"] - joined["want"]).abs().max() < 1e-6
    out = eval_run(place, POOL, "fuse--rrf--bm25--random")
    assert out["counts"]["queries"] > 0


@pytest.mark.slow
def test_a_missing_component_run_is_a_clear_error(searched):
    corpus, root = searched
    with pytest.raises(InputError, match="MODEL=minilm"):
        search_pool(Place(corpus, root / "indexes", root / "runs"), POOL,
               get_model("fuse--rrf--bm25--minilm"), threads=1)


@pytest.mark.slow
def test_a_fused_run_is_stale_when_a_component_run_changes(searched):
    corpus, root = searched
    runs, entry = root / "runs", get_model("fuse--mnz--bm25--random")
    place = Place(corpus, root / "indexes", runs)
    search_pool(place, POOL, entry, threads=1)
    assert run_is_current(place, POOL, entry.name)
    search_pool(place, POOL, get_model("random"), threads=1, seed=9)
    assert not run_is_current(place, POOL,
                              entry.name)  # made from the old random run
    search_pool(place, POOL, entry, threads=1)
    assert run_is_current(place, POOL, entry.name)


@pytest.mark.slow
def test_a_group_is_tuned_once_per_process(searched):
    """Test pools sharing validation pools reuse one tuning; a changed validation run is tuned
    again."""
    from pipeline.retrieval.fusion import _tune, tuned_params

    corpus, root = searched
    place = Place(corpus, root / "indexes", root / "runs")
    args = (place, POOL, "rrf", ["bm25", "random"])
    first = tuned_params(*args)
    misses = _tune.cache_info().misses
    assert tuned_params(*args) == first and _tune.cache_info().misses == misses
    search_pool(place, f"{POOL}-val", get_model("random"),
           threads=1, seed=9)  # another seed: another validation run
    tuned_params(*args)
    assert _tune.cache_info().misses == misses + 1
