"""collect gathers results from what changed (issue 78): an evaluation whose files are as they
were when it was last gathered keeps its rows unchecked and unread, every other one is checked
and read whole, and the table written is the one a collect of everything writes, byte for byte,
after each kind of change (a changed, removed, new, damaged or stale evaluation)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.evaluation import evaluate
from pipeline.evaluation.evaluate import NOT_SCORED, collect_results, eval_run
from pipeline.layout import RESULTS_COLLECTED as COLLECTED
from pipeline.layout import RESULTS_FILE, RESULTS_MANIFEST, Place, pool_names, run_paths
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.search import search_pool
from tests.conftest import copy_corpus

CORPUS = "small"
MODELS = ("random", "random-b", "random-c")  # the random floor under three names: 3 runs a pool


def entry(model: str):
    """The random model under `model`'s name (a cheap run of its own)."""
    return dataclasses.replace(get_model("random"), name=model)


@pytest.fixture(scope="module")
def evaluated(corpus_dir, tmp_path_factory) -> Path:
    """A data folder of two pools, each searched and scored by three models (6 evaluations)."""
    root = tmp_path_factory.mktemp("collect")
    corpus = copy_corpus(corpus_dir, root / "corpora" / CORPUS)
    for size in (600, 900):
        build_pool(corpus, PoolSpec(size=size, queries=10))
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in pool_names(corpus):
        for model in MODELS:
            search_pool(place, pool, entry(model), k=100, threads=1)
            eval_run(place, pool, model)
    return root


@pytest.fixture
def data(evaluated, tmp_path) -> Path:
    """A private copy of the evaluated data folder, collected once."""
    root = tmp_path / "data"
    shutil.copytree(evaluated, root)
    collect(root)
    return root


def collect(root: Path):
    return collect_results(root / "corpora", root / "indexes", root / "runs")


def place(root: Path) -> Place:
    return Place(root / "corpora" / CORPUS, root / "indexes", root / "runs")


def pools(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "runs" / CORPUS).iterdir() if p.is_dir())


def checked(monkeypatch) -> list[str]:
    """The evaluations collect checks (not_current), appended to as it asks."""
    asked: list[str] = []
    real = evaluate.not_current

    def counting(where: Place, pool: str, model: str):
        asked.append(f"{pool}/{model}")
        return real(where, pool, model)

    monkeypatch.setattr(evaluate, "not_current", counting)
    return asked


def full_collect(root: Path, into: Path) -> tuple[bytes, dict]:
    """What a collect of everything writes for the data folder `root` as it is now: its table's
    bytes and its manifest, from a copy of the folder without collect's files."""
    shutil.copytree(root, into)
    for name in (RESULTS_FILE, RESULTS_MANIFEST, COLLECTED):
        (into / "runs" / name).unlink(missing_ok=True)
    collect(into)
    return (into / "runs" / RESULTS_FILE).read_bytes(), read_json(into / "runs" / RESULTS_MANIFEST)


def same_as_full(root: Path, tmp_path: Path) -> None:
    """The table and manifest collect wrote in `root` are those of a full collect."""
    table, info = full_collect(root, tmp_path / "full")
    written = read_json(root / "runs" / RESULTS_MANIFEST)
    assert (root / "runs" / RESULTS_FILE).read_bytes() == table
    for key in ("inputs", "left_out", "counts", "outputs", "parameters"):  # repairs name DATA
        assert json.dumps(written[key]) == json.dumps(info[key]).replace(
            str(tmp_path / "full"), str(root)), key


def test_a_collect_with_nothing_changed_checks_and_reads_no_evaluation(data, monkeypatch):
    """A no-op `make eval` collected every evaluation of every model again, about 10 ms each
    (0.56 s of 1.17 s on the full demo's 54; some 20 s at the paper's grid). Now none is
    checked, and nothing is written."""
    results = data / "runs" / RESULTS_FILE
    before = collect(data)
    stats = results.stat(), (data / "runs" / RESULTS_MANIFEST).stat()
    asked = checked(monkeypatch)
    reads: list[Path] = []
    real_read = evaluate.read_parquet
    monkeypatch.setattr(evaluate, "read_parquet",
                        lambda path, *a, **k: reads.append(path) or real_read(path, *a, **k))
    again = collect(data)
    assert asked == []
    assert reads == [results]  # the table written last, no evaluation's metrics
    assert again.equals(before) and again.height == 2 * len(MODELS) * 10 * 3
    assert (results.stat(), (data / "runs" / RESULTS_MANIFEST).stat()) == stats


def change_metrics(root: Path) -> list[str]:
    """One evaluation scored with a metric more (METRICS adds rows)."""
    pool = pools(root)[0]
    eval_run(place(root), pool, "random-b", ("map", "ndcg", "recall@30", "mrr"))
    return [f"{pool}/random-b"]


def remove(root: Path) -> list[str]:
    """One evaluation deleted (its eval.json and metrics)."""
    paths = run_paths(root / "runs", CORPUS, pools(root)[1], "random")
    paths.evaluation.unlink()
    paths.metrics.unlink()
    return []


def add(root: Path) -> list[str]:
    """A new model's run of one pool, scored."""
    pool = pools(root)[1]
    search_pool(place(root), pool, entry("random-d"), k=100, threads=1)
    eval_run(place(root), pool, "random-d")
    return [f"{pool}/random-d"]


def rerun(root: Path) -> list[str]:
    """A run searched again at another depth, its evaluation not: stale, left out."""
    pool = pools(root)[0]
    search_pool(place(root), pool, entry("random-c"), k=50, threads=1)
    return [f"{pool}/random-c"]


def damage_in_place(path: Path) -> None:
    """Bytes of `path` changed in place, its size and mtime as they were (`touch -r`)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns


def damage_run(root: Path) -> list[str]:
    """A run's table damaged, size and mtime restored: its evaluation is stale, left out."""
    pool = pools(root)[1]
    damage_in_place(run_paths(root / "runs", CORPUS, pool, "random-c").parquet)
    return [f"{pool}/random-c"]


@pytest.mark.parametrize("change", [change_metrics, remove, add, rerun, damage_run],
                         ids=lambda change: change.__name__)
def test_after_each_kind_of_change_the_table_is_the_full_collects(
        data, tmp_path, monkeypatch, change: Callable[[Path], list[str]]):
    """Only the evaluations a change touched are checked again; the rows of the others come
    from the table written last; what is written equals a collect of everything, byte for
    byte (the report reads it), a left-out evaluation included."""
    touched = change(data)
    asked = checked(monkeypatch)
    collect(data)
    assert sorted(asked) == sorted(touched)
    monkeypatch.undo()
    same_as_full(data, tmp_path)
    asked = checked(monkeypatch)
    collect(data)  # and the next collect, nothing changed, keeps it all
    left_out = read_json(data / "runs" / RESULTS_MANIFEST)["left_out"]
    stale = {item["run"].split("/", 1)[1] for item in left_out if item["why"] != NOT_SCORED}
    assert sorted(asked) == sorted(stale)  # a stale evaluation is checked every time
    unscored = {item["run"].split("/", 1)[1] for item in left_out if item["why"] == NOT_SCORED}
    assert unscored == ({f"{pools(data)[1]}/random"} if change is remove else set())


def test_a_damaged_evaluation_with_its_size_and_mtime_restored_is_refused(data, tmp_path):
    """Bytes of an evaluation's metrics changed in place, size and mtime put back: the stat key
    (its ctime) differs, so it is checked, and refused as a full collect refuses it."""
    pool = pools(data)[0]
    damage_in_place(run_paths(data / "runs", CORPUS, pool, "random").metrics)
    with pytest.raises(InputError) as full:
        full_collect(data, tmp_path / "full")
    with pytest.raises(InputError) as incremental:
        collect(data)
    assert "metrics.parquet" in incremental.value.message
    assert incremental.value.message == full.value.message.replace(
        str(tmp_path / "full"), str(data))


def test_a_record_that_is_not_the_tables_is_not_trusted(data, tmp_path, monkeypatch):
    """The record of what was gathered holds only beside the table it was written with: a
    table written by another collect, or a record damaged, and every evaluation is checked."""
    record = data / "runs" / COLLECTED
    text = record.read_text()
    at = text.index('"stats":[[') + len('"stats":[[')  # a file's size, other than recorded
    record.write_text(text[:at] + ("8" if text[at] == "9" else "9") + text[at + 1:])
    asked = checked(monkeypatch)
    collect(data)
    assert len(asked) == 2 * len(MODELS)
    asked.clear()
    collect(data)
    assert asked == []  # written again whole
    (data / "runs" / RESULTS_MANIFEST).unlink()  # the table's manifest gone: the record too
    collect(data)
    assert len(asked) == 2 * len(MODELS)
    same_as_full(data, tmp_path)


def test_a_bm25_evaluation_is_checked_again_when_its_validation_pools_change(
        data, tmp_path, monkeypatch):
    """BM25's k1 and b come from its pool's validation pools: a validation pool built after a
    collect makes its evaluation stale though none of its files changed; collect sees it (the
    validation pools are compared each time) and leaves it out as a full collect does."""
    pool = pools(data)[0]
    search_pool(place(data), pool, get_model("bm25"), k=100, threads=1)
    eval_run(place(data), pool, "bm25")
    collect(data)
    build_pool(data / "corpora" / CORPUS, PoolSpec(size=600, queries=5, split="validation"))
    asked = checked(monkeypatch)
    collect(data)
    assert asked == [f"{pool}/bm25"]
    left_out = read_json(data / "runs" / RESULTS_MANIFEST)["left_out"]
    assert [item["run"] for item in left_out] == [f"{CORPUS}/{pool}/bm25"]
    assert "validation pools" in left_out[0]["why"]
    monkeypatch.undo()
    same_as_full(data, tmp_path)
