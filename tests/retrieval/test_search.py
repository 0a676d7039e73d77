"""Index + search + eval for each model kind on the small corpus: the run contracts."""

from __future__ import annotations

import polars as pl
import pytest

import pipeline
from pipeline.core.files import read_json
from pipeline.evaluation.evaluate import collect_results, eval_is_current, eval_run
from pipeline.layout import Place, run_paths
from pipeline.models import REGISTRY, ModelEntry, get_model
from pipeline.retrieval.runs import run_is_current
from pipeline.retrieval.search import current_run, index, search_pool
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("indexes"), tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def tiny(tiny_bert):
    entry = ModelEntry("tiny-bert-search", "dense", str(tiny_bert), "cls", "l2", max_length=128)
    REGISTRY[entry.name] = entry
    yield entry
    del REGISTRY[entry.name]


@pytest.mark.parametrize("model", ["bm25", "random",
                                   pytest.param("tiny", marks=pytest.mark.slow)])  # encodes
def test_run_contract(corpus_dir, roots, tiny, model):
    entry = tiny if model == "tiny" else get_model(model)
    index_root, runs_root = roots
    place = Place(corpus_dir, index_root, runs_root)
    index(place, POOL, entry, threads=1)
    info = search_pool(place, POOL, entry, k=100, threads=1)
    paths = run_paths(runs_root, corpus_dir.name, POOL, entry.name)
    run = pl.read_parquet(paths.parquet)
    queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet")
    candidates = pl.read_parquet(corpus_dir / "pools" / POOL / "candidates.parquet")
    assert set(run["query"]) == set(queries["corpusid"])
    assert (run["query"] != run["doc"]).all()
    assert set(run["doc"]) <= set(candidates["corpusid"])
    assert run.group_by("query").len()["len"].max() <= 100
    # rank order: score descending, ties by docid descending as strings
    ordered = run.with_columns(key=pl.col("doc").cast(pl.String)).sort(
        ["query", "score", "key"], descending=[False, True, True])
    assert ordered.select("query", "doc").equals(run.select("query", "doc"))
    lines = paths.trec.read_text().splitlines()
    assert len(lines) == run.height
    q, q0, d, rank, score, tag = lines[0].split()
    assert (int(q), q0, int(d), int(rank), tag) == (run["query"][0], "Q0", run["doc"][0], 1,
                                                    entry.name)
    assert float(score) == run["score"][0]
    assert info["counts"]["rows"] == run.height
    if model == "tiny":  # an L2 model's run holds -L2 distance, as SciDocs and ASPIRE score
        import numpy as np

        from pipeline.encoding.store import load_vectors
        from pipeline.layout import store_dir

        store = store_dir(index_root, corpus_dir.name, entry.name)
        top = run.head(20)
        q = load_vectors(store, top["query"].to_numpy()).astype(np.float64)
        d = load_vectors(store, top["doc"].to_numpy()).astype(np.float64)
        np.testing.assert_allclose(top["score"], -np.linalg.norm(q - d, axis=1), atol=2e-6)
        assert info["details"]["run_score"] == "-L2 distance"
    result = eval_run(place, POOL, entry.name)
    assert result["counts"]["queries"] == queries.height
    metrics = pl.read_parquet(paths.metrics)
    assert metrics.columns == ["query", "negatives", "map", "ndcg", "recall@30"]
    assert metrics["map"].is_between(0, 1).all()


def test_results_table_gathers_runs(corpus_dir, tmp_path):
    """Its own runs and evaluations (not those other tests left in the module's roots)."""
    index_root, runs_root = tmp_path / "indexes", tmp_path / "runs"
    place = Place(corpus_dir, index_root, runs_root)
    for model in ("bm25", "random"):
        search_pool(place, POOL, get_model(model), k=100, threads=1)
        eval_run(place, POOL, model)
    results = collect_results(corpus_dir.parent, index_root, runs_root)
    assert set(results["model"]) == {"bm25", "random"}
    assert set(results["metric"]) == {"map", "ndcg", "recall@30"}
    assert (results["level"] == "dataset").all()


def test_stale_only_keeps_current_work_and_redoes_the_rest(corpus_dir, tmp_path):
    """What `search --stale-only` and `eval --stale-only` (make's batches) keep: an intact run
    made from the pool's current files with the same k, and its evaluation."""
    index_root, runs_root = tmp_path / "indexes", tmp_path / "runs"
    entry = get_model("random")
    place = Place(corpus_dir, index_root, runs_root)
    search_pool(place, POOL, entry, k=100, threads=1)
    eval_run(place, POOL, entry.name)
    paths = run_paths(runs_root, corpus_dir.name, POOL, entry.name)
    assert current_run(place, POOL, entry, k=100)
    assert eval_is_current(place, POOL, entry.name)
    assert not current_run(place, POOL, entry, k=500)  # another k
    assert not run_is_current(place, POOL, "bm25-unsearched", k=100)
    # a run rewritten with other bytes: the run is current, its evaluation is not
    search_pool(place, POOL, entry, k=100, threads=1, seed=7)
    assert current_run(place, POOL, entry, k=100, seed=7)
    assert not eval_is_current(place, POOL, entry.name)
    # a damaged run is not current
    paths.parquet.write_bytes(paths.parquet.read_bytes()[:-10])
    assert not current_run(place, POOL, entry, k=100, seed=7)


def test_a_run_is_made_with_the_seed_asked_for(corpus_dir, tmp_path):
    """`search(random, seed=5)` then seed=0 and seed=7 gave the seed-5 run each time (the
    seed was no part of a run's currency; issue 46). A seed is one of the parameters of the
    runs it changes (random, perturbed queries): another seed searches again, in the run's
    place, and a run no seed changes is kept whatever the seed."""
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    corpus = corpus_dir.name
    paths = run_paths(data.runs, corpus, POOL, "random")

    def ranked() -> list[tuple[int, int]]:
        return pl.read_parquet(paths.parquet).select("query", "doc").rows()

    by_seed = {}
    for seed in (5, 0, 7):
        pipeline.search(data, corpus, POOL, "random", k=20, threads=1, seed=seed)
        by_seed[seed] = ranked()
        assert read_json(paths.manifest)["parameters"]["seed"] == seed
    assert len(set(map(tuple, by_seed.values()))) == 3  # three orders, one per seed
    pipeline.search(data, corpus, POOL, "random", k=20, threads=1, seed=5)
    assert ranked() == by_seed[5]  # the same seed, the same run: made again the same
    # a perturbed query is drawn from the seed; a variant that draws nothing ignores it
    words = run_paths(data.runs, corpus, POOL, "random~deleted30").manifest
    pipeline.search(data, corpus, POOL, "random", k=20, threads=1, seed=1, variant="deleted30")
    assert read_json(words)["parameters"]["seed"] == 1
    pipeline.search(data, corpus, POOL, "bm25", k=20, threads=1, seed=1, variant="title")
    title = run_paths(data.runs, corpus, POOL, "bm25~title").manifest
    made = title.stat().st_mtime_ns
    pipeline.search(data, corpus, POOL, "bm25", k=20, threads=1, seed=2, variant="title")
    assert title.stat().st_mtime_ns == made and "seed" not in read_json(title)["parameters"]


@pytest.mark.slow  # encodes
def test_a_model_with_a_query_form_searches_with_its_query_vectors(corpus_dir, tmp_path,
                                                                   tiny_bert):
    """E5-style entries: candidates stored as `passage: ...`, query papers encoded at search
    time as `query: ...` (kept beside the store); the run's scores are those vectors'."""
    import numpy as np

    from pipeline.encoding.encoders import Encoder
    from pipeline.encoding.store import load_vectors
    from pipeline.layout import store_dir
    from pipeline.pools.queries import query_texts

    entry = ModelEntry("tiny-e5", "dense", str(tiny_bert), "mean", "cosine", normalize=True,
                       max_length=128, text_prefix="passage: ", query_prefix="query: ",
                       join="space")
    REGISTRY[entry.name] = entry
    try:
        place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
        index(place, POOL, entry, threads=1)
        info = search_pool(place, POOL, entry, k=50, threads=1)
    finally:
        del REGISTRY[entry.name]
    store = store_dir(place.index_root, corpus_dir.name, entry.name)
    assert len(list((store / "queries").glob("*.npy"))) == 1
    queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet")
    texts = query_texts(corpus_dir, queries)
    encoder = Encoder(entry, device="cpu")
    want, _ = encoder.encode([encoder.format(t, a, query=True) for _, t, a in texts.iter_rows()],
                             progress=False)
    stored, _ = encoder.encode([encoder.format(t, a) for _, t, a in texts.iter_rows()],
                               progress=False)
    assert not np.allclose(want, stored, atol=1e-3)  # the query form is another vector
    run = pl.read_parquet(run_paths(place.runs_root, corpus_dir.name, POOL, entry.name).parquet)
    first = run.filter(pl.col("rank") == 1).sort("query").head(5)
    rows = [texts["corpusid"].to_list().index(q) for q in first["query"]]
    docs = load_vectors(store, first["doc"].to_numpy())
    np.testing.assert_allclose(first["score"], (want[rows] * docs).sum(1), atol=2e-6)
    assert info["counts"]["queries"] == queries.height


def test_other_bm25_defaults_search_again(corpus_dir, tmp_path):
    """A BM25 entry's k1 and b (used where no validation pool tunes them) were no part of its
    run's currency: an entry of the same name with other defaults kept the old run (issue
    46)."""
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    manifest = run_paths(data.runs, corpus_dir.name, POOL, "bm25-mine").manifest
    for k1, b in ((0.9, 0.4), (1.2, 0.75)):
        entry = ModelEntry("bm25-mine", "bm25", params={"k1": k1, "b": b})
        pipeline.search(data, corpus_dir.name, POOL, entry, k=20, threads=1)
        details = read_json(manifest)["details"]
        assert (details["k1"], details["b"], details["tuned_on"]) == (k1, b, [])
        assert current_run(Place(corpus_dir, data.indexes, data.runs), POOL, entry, k=20)


def _stage_records(path, stage: str) -> list[dict]:
    import json

    return [r for r in map(json.loads, path.read_text().splitlines()) if r["stage"] == stage] \
        if path.exists() else []


def test_make_search_and_eval_keep_current_work_and_time_the_rest(corpus_dir, tmp_path, caplog):
    """`make search` and `make eval` as library calls (search_model, eval_pools, no command
    line): the pools not current searched (indexed first) and scored, each timed into the
    stage-times log; a second pass keeps every run and evaluation and times nothing."""
    import logging

    from pipeline.evaluation.evaluate import eval_pools
    from pipeline.retrieval.search import SearchSettings, model_to_search, search_model

    place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
    times = tmp_path / "times.jsonl"
    pools = [pool_of(size) for size in POOL_SIZES]
    entry = model_to_search(place, "bm25", {"bm25_engine": "arrays"})
    assert entry == get_model("bm25")
    settings = SearchSettings(threads=1, options={"bm25_engine": "arrays"}, times=times,
                              k=100, index=True, stale_only=True)
    search_pool(place, pools[0], entry, k=100, threads=1)  # one pool current already
    caplog.set_level(logging.INFO, logger="pipeline")
    search_model(place, entry, pools, settings)
    assert "bm25: 1 current runs kept, 1 to search" in caplog.text
    assert [r["pool"] for r in _stage_records(times, "search")] == [pools[1]]
    assert _stage_records(times, "search")[0]["queries_per_s"] > 0
    assert [r["pool"] for r in _stage_records(times, "index")] == [pools[1]]
    assert all(current_run(place, p, entry, k=100) for p in pools)
    eval_pools(place, "bm25", pools, stale_only=True, times=times)
    assert [r["pool"] for r in _stage_records(times, "eval")] == pools
    assert all(eval_is_current(place, p, "bm25") for p in pools)
    assert all(0 <= r["map"] <= 1 for r in _stage_records(times, "eval"))
    before = times.read_text()
    search_model(place, entry, pools, settings)
    eval_pools(place, "bm25", pools, stale_only=True, times=times)
    assert times.read_text() == before  # nothing searched, indexed or scored again
    assert "bm25: 2 current evaluations kept, 0 to score" in caplog.text


def test_a_retrievers_options_are_checked_before_any_work(corpus_dir, tmp_path):
    """A GPU backend asked for where there is none: refused by model_to_search, before
    anything is embedded or searched."""
    from pipeline.core.errors import InputError
    from pipeline.retrieval.search import model_to_search
    from tests.conftest import cuda_available

    if cuda_available():
        pytest.skip("a CUDA GPU is here: the backend runs")
    place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
    with pytest.raises(InputError, match="--backend torch-cuda: no CUDA GPU"):
        model_to_search(place, "minilm", {"backend": "torch-cuda", "bm25_engine": "arrays"})
    assert not (tmp_path / "indexes").exists() and not (tmp_path / "runs").exists()
