"""BM25 k1/b tuned on validation pools: the grid in one Java process, the best mean MAP, kept
and reused, and the defaults where there is no validation pool."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.files import read_json, write_json
from pipeline.corpus.files import paper_texts
from pipeline.layout import Place, bm25_index_dir, run_paths, tuning_path
from pipeline.metrics import per_query
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool, load_pool, validation_pools
from pipeline.retrieval.bm25 import lucene as bm25_lucene
from pipeline.retrieval.bm25.tuning import bm25_params
from pipeline.retrieval.runs import finalize_run
from pipeline.retrieval.search import index, search_pool
from tests.conftest import copy_corpus

K1S, BS = (0.5, 1.2), (0.3, 0.9)


@pytest.fixture(scope="module")
def corpus(corpus_dir, tmp_path_factory):
    """A private corpus with a test pool, two validation pools like it and one other pool."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("tune") / "small")
    for repeat in (0, 1):
        build_pool(corpus, PoolSpec(size=900, queries=12, repeat=repeat, seed=2,
                                    split="validation"))
    build_pool(corpus, PoolSpec(size=900, queries=12, seed=2))
    build_pool(corpus, PoolSpec(size=700, queries=12, seed=2))
    return corpus


def test_validation_pools_are_those_built_the_same_way(corpus):
    assert validation_pools(corpus, "all-900-s2-r0") == ["all-900-s2-r0-val", "all-900-s2-r1-val"]
    assert validation_pools(corpus, "all-700-s2-r0") == []
    assert validation_pools(corpus, "all-900-s2-r0-val") == []


def test_best_pair_on_the_validation_pools(corpus, tmp_path):
    entry = get_model("bm25")
    place = Place(corpus, tmp_path, tmp_path / "runs")
    chosen = bm25_params(place, "all-900-s2-r0", entry, 1, K1S, BS)
    kept = read_json(tuning_path(tmp_path, corpus.name, "all-900-s2-r0"))
    assert kept["chosen"] == chosen
    assert chosen["tuned_on"] == ["all-900-s2-r0-val", "all-900-s2-r1-val"]
    table = pl.DataFrame(kept["map"])
    assert table.height == 4 and table["map"].n_unique() > 1  # the grid matters here
    assert chosen["validation_map"] == round(table["map"].max(), 6)
    # tuned with the arrays engine; the chosen pair searched alone with Lucene itself gives
    # the same validation MAP
    maps = []
    for pool in chosen["tuned_on"]:
        index(place, pool, entry, 1, bm25_engine="lucene")
        queries, candidates, qrels = load_pool(corpus, pool)
        hits, _ = bm25_lucene.search(paper_texts(corpus, queries["corpusid"]).sort("corpusid"),
                              bm25_index_dir(tmp_path, corpus.name, pool), 501,
                              chosen["k1"], chosen["b"], 1)
        run, _ = finalize_run(hits, 500)
        in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
        maps.append(per_query(run, in_pool, queries["corpusid"])[0]["map"].mean())
    assert abs(sum(maps) / len(maps) - chosen["validation_map"]) < 1e-6
    # kept: a second call does not search again; another grid does
    stamp = tuning_path(tmp_path, corpus.name, "all-900-s2-r0").stat().st_mtime_ns
    assert bm25_params(place, "all-900-s2-r0", entry, 1, K1S, BS) == chosen
    assert tuning_path(tmp_path, corpus.name, "all-900-s2-r0").stat().st_mtime_ns == stamp
    other = bm25_params(place, "all-900-s2-r0", entry, 1, (0.9,), (0.4,))
    assert (other["k1"], other["b"]) == (0.9, 0.4)
    # a kept choice made on a grid that scored nothing (what tuning on a BEIR dev split once
    # wrote) is never reused, and a run searched with it is stale
    path = tuning_path(tmp_path, corpus.name, "all-900-s2-r0")
    kept = read_json(path)
    kept["chosen"]["validation_map"] = 0.0
    write_json(kept, path)
    assert bm25_params(place, "all-900-s2-r0", entry, 1, (0.9,), (0.4,)) == other
    assert read_json(path)["chosen"]["validation_map"] > 0


def test_search_uses_tuned_or_default_parameters(corpus, tmp_path, monkeypatch):
    import pipeline.retrieval.bm25.tuning

    monkeypatch.setattr(pipeline.retrieval.bm25.tuning, "K1_GRID", K1S)
    monkeypatch.setattr(pipeline.retrieval.bm25.tuning, "B_GRID", BS)
    entry = get_model("bm25")
    runs = tmp_path / "runs"
    for pool in ("all-900-s2-r0", "all-700-s2-r0"):
        index(Place(corpus, tmp_path, tmp_path / "runs"), pool, entry, 1)
        search_pool(Place(corpus, tmp_path, runs), pool, entry, threads=1)
    tuned = read_json(run_paths(runs, corpus.name, "all-900-s2-r0", "bm25").manifest)
    plain = read_json(run_paths(runs, corpus.name, "all-700-s2-r0", "bm25").manifest)
    assert tuned["details"]["tuned_on"] == ["all-900-s2-r0-val", "all-900-s2-r1-val"]
    assert (tuned["details"]["k1"], tuned["details"]["b"]) in [(k, b) for k in K1S for b in BS]
    assert plain["details"]["tuned_on"] == []
    assert (plain["details"]["k1"], plain["details"]["b"]) == (0.9, 0.4)
    assert "no validation pool" in plain["details"]["note"]
    # a run whose pair was chosen on a grid that scored nothing is stale
    from pipeline.retrieval.runs import run_problem

    assert run_problem(Place(corpus, tmp_path, runs), "all-900-s2-r0", "bm25") is None
    path = run_paths(runs, corpus.name, "all-900-s2-r0", "bm25").manifest
    tuned["details"]["validation_map"] = 0.0
    write_json(tuned, path)
    assert "scored MAP 0 everywhere" in run_problem(Place(corpus, tmp_path, runs), "all-900-s2-r0",
                                                    "bm25")


def _grid(maps: list[float]) -> pl.DataFrame:
    pairs = [(k1, b) for k1 in (0.6, 1.2) for b in (0.3, 0.75)]
    return pl.DataFrame({"k1": [p[0] for p in pairs], "b": [p[1] for p in pairs],
                         "map": maps})


def test_a_grid_that_scored_nothing_is_an_error_and_a_flat_one_keeps_the_defaults():
    from pipeline.core.errors import InputError
    from pipeline.retrieval.bm25.tuning import choose

    entry = get_model("bm25")
    with pytest.raises(InputError, match="MAP is 0 for every"):
        choose(_grid([0.0] * 4), entry, ["v-r0-val"])
    with pytest.raises(InputError, match="MAP is not a number"):
        choose(_grid([0.2, float("nan"), 0.3, 0.1]), entry, ["v-r0-val"])
    flat = choose(_grid([0.25] * 4), entry, ["v-r0-val"])
    assert (flat["k1"], flat["b"]) == (0.9, 0.4)  # the defaults, not the grid's first pair
    assert "pyserini defaults kept" in flat["note"] and flat["tuned_on"] == ["v-r0-val"]
    best = choose(_grid([0.1, 0.3, 0.3, 0.2]), entry, ["v-r0-val"])
    assert (best["k1"], best["b"], best["validation_map"]) == (0.6, 0.75, 0.3)  # first tie
    one = choose(_grid([0.2] * 4).head(1), entry, ["v-r0-val"])
    assert (one["k1"], one["b"]) == (0.6, 0.3)  # a grid of one pair: that pair
