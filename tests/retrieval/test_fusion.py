"""Fused runs (ranx fusion): named like models, made from the component runs of the same pool,
tuned on validation pools where the method has parameters, evaluated like any run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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

ROOT = Path(__file__).resolve().parents[2]

POOL = "all-900-s3-r0"


@pytest.fixture(scope="module")
def searched(corpus_dir, tmp_path_factory):
    """A test pool and one validation pool like it, searched with bm25 and random."""
    root = tmp_path_factory.mktemp("fusion")
    corpus = copy_corpus(corpus_dir, root / "small")
    build_pool(corpus, PoolSpec(size=900, queries=12, seed=3, split="validation"))
    build_pool(corpus, PoolSpec(size=900, queries=12, seed=3))
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
    # a served embedder's part always has its org (`_` for none), so the name splits back to
    # the models' own names, their runs' folders; a query prompt's tag stays on its model
    served = fused_name("rrf", ["api:text-embedding-3-small", "bm25", "api:org/emb",
                                "api--x+q1a2b3c4d"])
    assert served == ("fuse--rrf--api--_--text-embedding-3-small--bm25--api--org--emb--api--_"
                      "--x+q1a2b3c4d")
    assert fusion_parts(served) == ("rrf", ["api--text-embedding-3-small", "bm25",
                                            "api--org--emb", "api--x+q1a2b3c4d"])
    assert get_model(served).name == served
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



def fused_ties() -> dict:
    """Two runs with ties and ids of several lengths fused three ways, a ranx Run of one
    scored (pipeline.score), and how many of numba's typed Dict and List methods this process
    has compiled so far."""
    import numpy as np
    from numba.core.registry import CPUDispatcher
    from numba.typed import typeddict, typedlist

    import pipeline
    from pipeline.retrieval.fusion import _ranx, _ranx_run

    rng = np.random.default_rng(4)
    runs = [pl.DataFrame({"query": np.repeat(np.arange(30), 40),
                          "doc": rng.choice(10 ** np.arange(1, 7), 1200)
                          + rng.integers(0, 9, 1200),
                          "score": rng.integers(0, 6, 1200) / 2.0})
            .unique(["query", "doc"], keep="first", maintain_order=True) for _ in range(2)]
    ranx = _ranx()
    out: dict = {}
    for method, norm in (("sum", "min-max"), ("rrf", None), ("mnz", "min-max")):
        fused = ranx.fuse([_ranx_run(r) for r in runs], norm=norm, method=method)
        out[method] = sorted(map(list, fused.to_dataframe().itertuples(index=False)))
    qrels = ranx.Qrels({str(q): {str(d): 1 for d in runs[1].filter(pl.col("query") == q)["doc"][:3]}
                        for q in range(30)})
    out["scores"] = pipeline.score(qrels, ranx.Run(fused.to_dict()), ["map", "ndcg@10"])
    out["compiled"] = sum(sum(method.stats.cache_misses.values())
                          for module in (typeddict, typedlist) for method in vars(module).values()
                          if isinstance(method, CPUDispatcher))
    return out


# fused_ties in a fresh process; argv[1] "off": numba's typed-container methods compiled in
# the process, as before pipeline.metrics cached them
FUSED_TIES = """
import json, sys
from numba.core.caching import NullCache
from numba.core.registry import CPUDispatcher
from numba.typed import typeddict, typedlist
from pipeline.metrics import cache_typed_containers
from tests.retrieval.test_fusion import fused_ties
cache_typed_containers()  # on import of pipeline.metrics: undone below for "off"
if sys.argv[1] == "off":
    for module in (typeddict, typedlist):
        for method in vars(module).values():
            if isinstance(method, CPUDispatcher):
                method._cache = NullCache()
print(json.dumps(fused_ties()))
"""


@pytest.mark.slow
def test_ranxs_typed_containers_load_from_cache_and_fuse_the_same():
    """pipeline.metrics.cache_typed_containers: a process that fuses with ranx and scores a
    ranx Run compiles none of numba's typed Dict and List methods once an earlier process
    has (they load from numba's cache; compiling them took seconds per process), and gets
    what a process compiling them itself gets, value for value (ties, ids of several
    lengths, three methods, pipeline.score of a ranx Run)."""
    from pipeline.metrics import cache_typed_containers

    def fresh(mode: str) -> dict:
        done = subprocess.run([sys.executable, "-c", FUSED_TIES, mode], capture_output=True,
                              text=True, check=True, cwd=ROOT)
        return json.loads(done.stdout)

    assert cache_typed_containers() > 20
    here = fused_ties()  # compiled here, or loaded: numba's cache filled either way
    del here["compiled"]
    cached, compiled = fresh("on"), fresh("off")
    assert cached.pop("compiled") == 0
    assert compiled.pop("compiled") > 0  # the check above could fail: compiling counts
    assert cached == here and compiled == here
