"""A model's runs as MTEB results (make export-mteb, pipeline.mteb_result): read back by
mteb's own loader, main score the pipeline's nDCG@10, every metric equal to MTEB's own
computation on the same run and qrels."""

from __future__ import annotations

import json

import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed
from pipeline.encoding.writer import record_model_path
from pipeline.external.mteb_results import MTEB_CUTOFFS, export_mteb, mteb_model, pool_revision
from pipeline.layout import MTEB_REVISION, Place, pool_names, store_dir
from pipeline.models import get_model
from pipeline.pools.build import load_pool
from pipeline.retrieval.search import search_pool
from tests.conftest import make_ok
from tests.encoding.test_identity_hub import FIRST, hub, publish  # noqa: F401
from tests.external.test_judged import (  # noqa: F401
    _judged,
    _run,
    bm25_means,
    imported,
    scidocs,
)


def test_mteb_results_read_back_by_mteb_equal_mtebs_own_scores(imported, tmp_path):  # noqa: F811
    import mteb  # here, not at the top: collecting the module loads no mteb
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    corpus, root, _ = imported
    runs = tmp_path / "runs"
    place, means = bm25_means(corpus, root, runs)
    ndcg10 = {pool: pool_means["ndcg@10"] for pool, pool_means in means.items()}
    out = tmp_path / "cache" / "results"  # MTEB's results tree in a cache folder of its own
    files = export_mteb(place, "bm25", out)
    assert [f.relative_to(out).as_posix() for f in files] == [
        "bm25/no_revision_available/scidocs.beir-600-r0.json",
        "bm25/no_revision_available/scidocs.judged-30-r0.json"]
    cache = mteb.ResultCache(cache_path=tmp_path / "cache")
    assert cache.get_cache_paths(include_remote=False) == files
    # MTEB's default loading skips results without model_meta.json (issue 56): found
    loaded = cache.load_results()
    assert [(m.model_name, m.model_revision, sorted(t.task_name for t in m.task_results))
            for m in loaded.model_results] == [
        ("bm25", "no_revision_available", ["scidocs.beir-600-r0", "scidocs.judged-30-r0"])]
    assert loaded.model_results[0].model_meta.name == "bm25"
    for pool, path in zip(pool_names(corpus), files, strict=True):
        result = mteb.TaskResult.from_disk(path)
        assert result.task_name == f"scidocs.{pool}"
        assert result.eval_splits == ["test"] and result.hf_subsets == ["default"]
        assert result.dataset_revision == pool_revision(corpus, pool)
        assert result.main_score == pytest.approx(ndcg10[pool], abs=1e-12)
        assert 0 < result.main_score < 1
        [scores] = result.scores["test"]
        assert scores["languages"] == ["eng-Latn"]
        # MTEB's own computation (pytrec_eval, its MRR) on the same run and qrels
        _, _, qrels = load_pool(corpus, pool)
        run = _run(runs / corpus.name / pool / "bm25.trec")
        theirs = calculate_retrieval_scores(run, _judged(qrels), list(MTEB_CUTOFFS))
        for k in MTEB_CUTOFFS:
            for name, measure in (("ndcg", "ndcg_cut"), ("map", "map_cut"),
                                  ("recall", "recall"), ("precision", "P"),
                                  ("hit_rate", "success")):
                values = [q[f"{measure}_{k}"] for q in theirs.all_scores.values()]
                assert scores[f"{name}_at_{k}"] == pytest.approx(
                    sum(values) / len(values), abs=1e-9), (pool, name, k)
            assert scores[f"mrr_at_{k}"] == pytest.approx(theirs.mrr[f"MRR@{k}"], abs=1e-9)
    # the same runs exported again: the same bytes
    again = export_mteb(place, "bm25", tmp_path / "again")
    assert [a.read_bytes() for a in again] == [f.read_bytes() for f in files]
    # the API: the same result, nothing written
    data = pipeline.Data(corpora=root / "corpora", indexes=root / "indexes", runs=runs)
    result = pipeline.mteb_result(data, "scidocs", "judged-30-r0", "bm25")
    assert result == json.loads(files[1].read_text())
    assert mteb.TaskResult.from_dict(result).main_score == pytest.approx(ndcg10["judged-30-r0"])


def test_export_mteb_refuses_a_model_without_runs_and_an_out_that_is_a_file(
        imported, tmp_path):  # noqa: F811
    corpus, root, _ = imported
    place = Place(corpus, root / "indexes", tmp_path / "runs")
    with pytest.raises(InputError, match="has no run of minilm: run make eval CORPUS=scidocs"):
        export_mteb(place, "minilm", tmp_path / "out")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="is a file, not a folder"):
        export_mteb(place, "minilm", tmp_path / "file")
    with pytest.raises(InputError, match="is inside the data folder's runs/"):
        export_mteb(place, "bm25", tmp_path / "runs" / "mteb")
    with pytest.raises(InputError, match="model"):
        export_mteb(place, "../bm25", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs" / "mteb").exists()


def test_export_mteb_replaces_only_its_own_results_of_the_same_pool(
        imported, tmp_path):  # noqa: F811
    """Issue 56: another data folder's `scidocs.beir-600-r0.json` (a pool of that name with
    other contents) was replaced without a word; export-beir refuses the same case."""
    corpus, root, _ = imported
    place = Place(corpus, root / "indexes", tmp_path / "runs")
    search_pool(place, "beir-600-r0", get_model("bm25"))
    out = tmp_path / "results"
    [path] = export_mteb(place, "bm25", out)
    another = json.loads(path.read_text())
    another["dataset_revision"] = "0" * 64  # the same task name, another pool's contents
    for contents, why in ((json.dumps(another), "the results of another pool of that name"),
                          ("my notes", "not a result export-mteb wrote")):
        path.write_text(contents)
        with pytest.raises(InputError, match=(
                rf"^OUT {out} holds files that export-mteb did not write for pool beir-600-r0 "
                rf"of corpus scidocs \(bm25/no_revision_available/scidocs.beir-600-r0.json: "
                rf"{why}.*\): give a new or empty folder, or move them away first$")):
            export_mteb(place, "bm25", out)
        assert path.read_text() == contents
    path.unlink()
    meta = path.with_name("model_meta.json")
    meta.write_text('{"name": "org/other", "revision": "abc"}')
    with pytest.raises(InputError, match=r"\(bm25/no_revision_available/model_meta.json: "
                                         r"another model's metadata\)"):
        export_mteb(place, "bm25", out)
    assert not path.exists() and "org/other" in meta.read_text()
    meta.unlink()
    assert export_mteb(place, "bm25", out) == [path]  # its own file, the same pool: replaced
    assert export_mteb(place, "bm25", out) == [path]


def test_a_hub_models_results_go_where_mtebs_cache_keeps_that_models(
        imported, tiny_bert, hub, tmp_path):  # noqa: F811
    """Issue 88: `minilm/no_revision_available/` where MTEB keeps
    `sentence-transformers__all-MiniLM-L6-v2/<revision>/`. A hub model (the tiny BERT in a hub
    cache as org/tiny, at revision FIRST) goes by its hub id and the revision its store
    recorded, read back by MTEB's ResultCache as that model at that revision; another of the
    pipeline's models of the same hub id is refused in that folder, naming the first; the
    user's weights (MODEL_PATH) and a variant go by the pipeline's name."""
    import mteb

    corpus, root, _ = imported
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    publish(hub, "org/tiny", FIRST, tiny_bert)
    cls, mean = get_model("hf:org/tiny@cls"), get_model("hf:org/tiny@mean")
    for entry in (cls, mean):
        embed(place, entry, ["judged-30-r0"])
        search_pool(place, "judged-30-r0", entry)
    out = tmp_path / "cache" / "results"
    [path] = export_mteb(place, cls.name, out)
    assert path.relative_to(out).as_posix() == f"org__tiny/{FIRST}/scidocs.judged-30-r0.json"
    [loaded] = mteb.ResultCache(cache_path=tmp_path / "cache").load_results(
        models=["org/tiny"], include_remote=False).model_results
    assert (loaded.model_name, loaded.model_revision) == ("org/tiny", FIRST)
    assert [t.task_name for t in loaded.task_results] == ["scidocs.judged-30-r0"]
    assert loaded.model_meta.loader_kwargs == {"pipeline_model": cls.name}
    with pytest.raises(InputError, match=(
            rf"for {mean.name} \(org__tiny/{FIRST}/model_meta.json: the metadata of the "
            rf"pipeline's model {cls.name}\)")):
        export_mteb(place, mean.name, out)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model_meta.json", path.name]
    assert mteb_model(place, mean.name) == ("org/tiny", FIRST, mean.name)
    assert mteb_model(place, f"{cls.name}+bf16") == (f"{cls.name}+bf16", MTEB_REVISION, None)
    record_model_path(store_dir(place.index_root, corpus.name, cls.name), tiny_bert)
    assert mteb_model(place, cls.name) == (cls.name, MTEB_REVISION, None)  # the user's


@pytest.mark.slow  # the make chain: import, search, eval, export
def test_make_export_mteb(scidocs, tmp_path):  # noqa: F811
    """make export-mteb CORPUS= MODEL= OUT=: searches and scores first (make eval), then
    writes a TaskResult per pool."""
    import mteb

    stamp = tmp_path / "stamp"
    stamp.touch()
    data = tmp_path / "data"
    make_ok(data, stamp, "import-beir", "CORPUS=s", f"SRC={scidocs}", "JUDGED=1")
    out = make_ok(data, stamp, "export-mteb", "CORPUS=s", "MODEL=bm25", f"OUT={tmp_path}/m")
    assert "s.judged-30-r0, main score (ndcg_at_10) test 0." in out
    for pool in ("beir-600-r0", "judged-30-r0"):
        path = tmp_path / "m" / "bm25" / "no_revision_available" / f"s.{pool}.json"
        assert mteb.TaskResult.from_disk(path).main_score > 0


# ---- MTEB's own names for its tasks (issue 78) ---------------------------------------------------

def _pool_info(split: str = "test", candidates: int = 5_183, scope: str = "beir",
               **parameters: str) -> dict:
    return {"scope": scope, "split": split, "counts": {"candidates": candidates},
            "parameters": parameters}


@pytest.mark.parametrize("corpus, info, name", [
    # a BEIR folder named scifact, SciFact's 5,183 documents: MTEB's SciFact (issue 78 gave
    # scifact.beir-5183-r0)
    ("scifact", _pool_info(source="/data/beir/scifact"), "SciFact"),
    ("mine", _pool_info(source="/data/beir/scifact"), "SciFact"),
    ("mine", _pool_info(source="ir_datasets:beir/scifact/test", dataset="beir/scifact/test"),
     "SciFact"),
    ("ms", _pool_info("validation", 8_841_823, dataset="beir/msmarco/dev",
                      source="ir_datasets:beir/msmarco/dev"), "MSMARCO"),
    # what MTEB does not know keeps a name of its own
    ("scifact", _pool_info(candidates=600, source="/x/scifact"), "scifact.beir-600-r0"),
    ("scifact", _pool_info("validation", source="/x/scifact"), "scifact.beir-5183-r0"),
    ("scifact", _pool_info(scope="judged", source="/x/scifact"), "scifact.beir-5183-r0"),
    ("mine", _pool_info(source="/data/my-collection"), "mine.beir-5183-r0"),
])
def test_a_pool_mteb_knows_is_named_as_mteb_names_it(corpus, info, name):
    from pipeline.external.mteb_results import task_name

    pool = "beir-600-r0" if info["counts"]["candidates"] == 600 else "beir-5183-r0"
    assert task_name(corpus, pool, info) == name


def test_the_table_of_mteb_tasks_is_mtebs():
    """Each task of MTEB_TASKS is MTEB's: its name, the split it scores, its documents."""
    import mteb

    from pipeline.external.mteb_results import MTEB_TASKS

    for name, split, documents in MTEB_TASKS.values():
        task = mteb.get_task(name)
        assert task.metadata.eval_splits == [split], name
        stats = task.metadata.descriptive_stats[split]
        if "num_documents" in stats:
            assert stats["num_documents"] == documents, name
        else:  # Touche2020's statistics count documents and its 49 queries together
            assert 0 < stats["num_samples"] - documents < 100, name


def test_an_export_of_a_task_mteb_knows_is_its_file(imported, tmp_path, monkeypatch):  # noqa: F811
    """The export of a pool MTEB knows is `<Task>.json` with MTEB's task name, which MTEB's
    loader reads as that task; the judged-only pool keeps `<corpus>.<pool>`. (The synthetic
    collection stands for SCIDOCS: MTEB_TASKS is given its 600 documents.)"""
    import mteb

    from pipeline.external import mteb_results

    monkeypatch.setitem(mteb_results.MTEB_TASKS, "scidocs", ("SCIDOCS", "test", 600))
    corpus, root, _ = imported
    place, _ = bm25_means(corpus, root, tmp_path / "runs")
    out = tmp_path / "cache" / "results"
    files = export_mteb(place, "bm25", out)
    assert [f.relative_to(out).as_posix() for f in files] == [
        "bm25/no_revision_available/SCIDOCS.json",
        "bm25/no_revision_available/scidocs.judged-30-r0.json"]
    assert mteb.TaskResult.from_disk(files[0]).task_name == "SCIDOCS"
    loaded = mteb.ResultCache(cache_path=tmp_path / "cache").load_results()
    assert sorted(t.task_name for t in loaded.model_results[0].task_results) == [
        "SCIDOCS", "scidocs.judged-30-r0"]
