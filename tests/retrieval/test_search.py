"""Index + search + eval for each model kind on the small corpus: the run contracts."""

from __future__ import annotations

import polars as pl
import pytest

import pipeline
from pipeline.core.files import read_json
from pipeline.evaluation.evaluate import collect_results, eval_is_current, eval_run
from pipeline.layout import Place, run_paths
from pipeline.models import REGISTRY, ModelEntry, get_model
from pipeline.options.declared import kind_run_options
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
    pipeline.search(data, corpus, POOL, "random", k=20, threads=1, seed=1,
                    query_variant="deleted30")
    assert read_json(words)["parameters"]["seed"] == 1
    pipeline.search(data, corpus, POOL, "bm25", k=20, threads=1, seed=1, query_variant="title")
    title = run_paths(data.runs, corpus, POOL, "bm25~title").manifest
    made = title.stat().st_mtime_ns
    pipeline.search(data, corpus, POOL, "bm25", k=20, threads=1, seed=2, query_variant="title")
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
        # at BM25's options' defaults, as pipeline.search searched it
        assert current_run(Place(corpus_dir, data.indexes, data.runs), POOL, entry, k=20,
                           run_options=kind_run_options(entry, {}))


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


# ---- a run's identity: every declared option that changes a run (issue 57)
# How each declared option that changes a run by its value (changes_run=True) reaches a
# search, for two of its values: the search's arguments, and the identity's key recording it.
# A retriever's own option (Retriever.OPTIONS) needs no line: it is given by its kind.
IDENTITY = {
    "K": ("k", (20, 30), lambda v: {"entry": get_model("random"), "k": v}),
    "SEED": ("seed", (0, 3), lambda v: {"entry": get_model("random"), "seed": v}),
    "QUERY_VARIANT": ("variant", ("full", "title"),
                      lambda v: {"entry": get_model("bm25"), "variant": v}),
    "PRECISION": ("precision", ("fp32", "bf16"),
                  lambda v: {"entry": _chosen("minilm", precision=v)}),
    "QUERY_PROMPT": ("prompt", ("", "Instruct: find the papers it cites\\nQuery: "),
                     lambda v: {"entry": _chosen("minilm", query_prompt=v)}),
    "BACKEND": ("options", ("faiss-cpu", "torch-cpu"), lambda v: {
        "entry": get_model("minilm"), "run_options": _run_options("minilm", backend=v)}),
}
# The options that change the model itself (changes_run=MODEL_ID): its name is the run's, or
# (weights, endpoint, similarity) its store records them and the run records its store's files
MODEL_NAMES = {"MODEL": lambda v: _chosen(v or "minilm"),
               "POOLING": lambda v: _chosen("hf:org/name", pooling=v)}
MODEL_VALUES = {"MODEL": ("minilm", "bm25"), "POOLING": ("mean", "cls")}
# The options that change no run (changes_run=False), each run with two values on the small
# pool: (model, the search's options or arguments of each value)
SAME = {
    "THREADS": ("bm25", ({"threads": 1}, {"threads": 2})),
    "BM25_ENGINE": ("bm25", ({"bm25_engine": "arrays"}, {"bm25_engine": "lucene"})),
    "SHARDS": ("tiny", ({"num_shards": 1}, {"num_shards": 2})),
}
# Options that change no run and are shown so elsewhere: served models' request settings (the
# same vectors however many are asked at once: tests/encoding/test_served.py), and REPLACE=1,
# which lets a command replace what it made (what the new one is: its store's identity), and
# SHARD, one shard of SHARDS embedded alone (together they cover the pool:
# tests/encoding/test_embed.py; and SHARDS=1 and 2 give the same run: SAME above)
# SPARSE_ENGINE: the arrays and Lucene engines write the same runs, byte for byte, on the same
# impacts (tests/retrieval/test_sparse.py)
ELSEWHERE = ("EMBEDDINGS_BATCH", "EMBEDDINGS_CONCURRENCY", "REPLACE", "SHARD", "SPARSE_ENGINE")
# The model's files, endpoint and similarity, and the device that embedded each part: its
# store records them (changes_run=MODEL_ID); a served reranker's endpoint, its reranked run
# (tests/encoding/test_served_rerank.py: another RERANK_URL makes the run stale)
IN_STORE = ("MODEL_PATH", "EMBEDDINGS_URL", "SIMILARITY", "DEVICE", "RERANK_URL")


def _run_options(model: str, **given) -> dict:
    from pipeline.options.declared import kind_run_options

    return kind_run_options(get_model(model), given)


def _chosen(model: str, **given):
    from pipeline.models import chosen_model

    return chosen_model(model, **given)


def _reaching(changes: bool | str) -> list:
    """The declared options that reach a search or an encoder with this `changes_run`."""
    from pipeline.options.declared import VARIABLES

    return [v for v in VARIABLES if v.reaches_run and v.changes_run is not None
            and v.changes_run == changes and type(v.changes_run) is type(changes)]


def test_every_option_that_reaches_a_search_or_an_encoder_says_whether_it_changes_a_run():
    """Derived from the declarations: an option taken by index, embed or search, or one of the
    model's, without changes_run is refused where it is declared; every one is walked by the
    tests below (a new one without a case here fails, naming it)."""
    from pipeline.options.declared import MODEL_ID, RUN_STAGES, VARIABLES, Variable

    with pytest.raises(ValueError, match="NEW_ONE reaches a search or an encoder"):
        Variable("NEW_ONE", "1", None, "a new option", "search", stages=RUN_STAGES[-1:])
    kinds = _retriever_options()
    cases = {True: {*IDENTITY} | {v.name for v in _reaching(True)
                                  if v.keyword in kinds},
             MODEL_ID: {*MODEL_NAMES, *IN_STORE}, False: {*SAME, *ELSEWHERE}}
    for var in (v for v in VARIABLES if v.reaches_run):
        assert var.name in cases[var.changes_run], (var.name, var.changes_run)


def _retriever_options() -> dict[str, str]:
    """Every retriever kind's own options -> a kind that takes it."""
    from pipeline.retrieval.registry import RETRIEVERS, retriever

    return {name: kind for kind in RETRIEVERS for name in retriever(kind).OPTIONS}


def test_an_option_that_changes_a_run_is_in_its_identity_and_its_old_run_is_stale(
        corpus_dir, tmp_path):
    """Each declared option that changes a run (as its declaration says): two values give two
    identities that differ in the key recording it, and a run made with one is not current for
    the other (`identity_problem` names what differs). The model's options: another model's
    name; the model's own files and endpoint: its store's identity, not a value here."""
    from pipeline.options.declared import MODEL_ID, kind_run_options
    from pipeline.retrieval.runs import identity_problem
    from pipeline.retrieval.search import run_identity

    place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
    made = search_pool(place, POOL, get_model("random"), k=20, threads=1)["parameters"]
    assert identity_problem(place, POOL, made) is None
    kinds = _retriever_options()
    for var in _reaching(True):
        if var.name in IDENTITY:
            key, values, given = IDENTITY[var.name]
            old, new = (run_identity(**{"pool": POOL, "k": 20, **given(v)}) for v in values)
        else:  # a retriever's own option: its kind's, with its default and another value
            option = var.keyword
            entry = next(e for e in (*REGISTRY.values(), get_model("rerank--ms-marco-minilm--bm25"))
                         if e.kind == kinds[option])
            key, values = "options", ({}, {option: "another"})
            old, new = (run_identity(entry, POOL, 20, run_options=kind_run_options(entry, v))
                        for v in values)
        assert old[key] != new[key], var.name
        differs = key if key != "options" else f"options: {var.name}"
        assert identity_problem(place, POOL, {**made, key: new[key]}) == \
            f"made with other parameters ({differs})", var.name
    for var in _reaching(MODEL_ID):
        if var.name in MODEL_NAMES:
            old, new = (MODEL_NAMES[var.name](v).name for v in MODEL_VALUES[var.name])
            assert old != new, var.name
        else:  # never a value of the run's identity: the model's store records it
            assert var.keyword not in kind_run_options(get_model("minilm"), {var.keyword: "x"})
            assert var.name not in kind_run_options(get_model("minilm"), {var.keyword: "x"})


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if m == "tiny"
                                  else n for n, (m, _) in SAME.items()])
def test_an_option_that_changes_no_run_leaves_it_byte_identical(corpus_dir, tmp_path, tiny,
                                                                   name):
    """Each declared option that changes no run (changes_run=False), run with two values on
    the small pool: the same run files, byte for byte, and the same identity."""
    from pipeline.encoding.embed import embed

    assert name in {v.name for v in _reaching(False)}
    model, values = SAME[name]
    entry = tiny if model == "tiny" else get_model(model)
    made = []
    for i, given in enumerate(values):
        place = Place(corpus_dir, tmp_path / f"indexes{i}", tmp_path / f"runs{i}")
        options = {k: v for k, v in given.items() if k not in ("threads", "num_shards")}
        if "num_shards" in given:
            for shard in range(given["num_shards"]):
                embed(place, entry, [POOL], shard=shard, num_shards=given["num_shards"])
        index(place, POOL, entry, given.get("threads", 1), **options)
        info = search_pool(place, POOL, entry, k=50, threads=given.get("threads", 1),
                           **options)
        paths = run_paths(place.runs_root, corpus_dir.name, POOL, entry.name)
        made.append((paths.trec.read_bytes(), paths.parquet.read_bytes(), info["parameters"]))
    assert made[0] == made[1]


def test_metrics_adds_rows_and_keeps_those_of_other_metrics(corpus_dir, tmp_path, caplog):
    """`make eval METRICS=<another set>` replaced the run's earlier metric rows in
    results.parquet and eval.json (issue 57). It adds the rows of the metrics asked and keeps
    the others: an evaluation is current for the metrics it has, and asking for more scores
    only the missing ones; the run changed, every metric it had is scored again."""
    import logging

    from pipeline.evaluation.evaluate import eval_pools

    place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
    search_pool(place, POOL, get_model("bm25"), k=100, threads=1)
    paths = run_paths(place.runs_root, corpus_dir.name, POOL, "bm25")
    eval_pools(place, "bm25", [POOL], stale_only=True)
    first = pl.read_parquet(paths.metrics)
    eval_pools(place, "bm25", [POOL], "ndcg@10 map", stale_only=True)
    both = pl.read_parquet(paths.metrics)
    assert both.columns == ["query", "negatives", "map", "ndcg", "recall@30", "ndcg@10"]
    assert both.select(first.columns).equals(first)  # the earlier rows kept, not scored again
    info = read_json(paths.evaluation)
    assert info["parameters"]["metrics"] == ["map", "ndcg", "recall@30", "ndcg@10"]
    assert set(info["means"]) == {"map", "ndcg", "recall@30", "ndcg@10"}
    assert 0 < info["means"]["ndcg@10"] <= 1
    results = collect_results(corpus_dir.parent, place.index_root, place.runs_root)
    assert set(results["metric"]) == {"map", "ndcg", "recall@30", "ndcg@10"}
    caplog.set_level(logging.INFO, logger="pipeline")
    for metrics in ("auto", "ndcg@10", "map ndcg@10"):  # each current for what it asks
        eval_pools(place, "bm25", [POOL], metrics, stale_only=True)
    assert caplog.text.count("bm25: 1 current evaluations kept, 0 to score") == 3
    search_pool(place, POOL, get_model("bm25"), k=50, threads=1)  # another run
    eval_pools(place, "bm25", [POOL], stale_only=True)
    again = pl.read_parquet(paths.metrics)
    assert again.columns == both.columns and not again.equals(both)
