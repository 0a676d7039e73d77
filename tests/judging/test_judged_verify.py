"""The judging artifacts under verify and the report (issue 60): a pool's sample and judgments
and the corpus's judging page are checked against their manifests, each damaged one named with
the make judge (judge-page) command its manifest records, which repairs it; an assessor's log
is checked for its form; a sample is one per sampling setting, so judging with other MODELS
(even a run that fails) leaves the judgments of the first counted; the report's text names
the judgment files it leaves out, and why; the layout before (one sample per pool) is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.inputs import Roots
from pipeline.judging.assessor import Pair, StandinAssessor
from pipeline.judging.judgments import judge_pool
from pipeline.judging.sample import pairs_to_judge
from pipeline.judging.stage import (
    judge_corpus,
    judged_pools,
    mixed_depths,
    sample_pool,
    sampling,
)
from pipeline.layout import (
    Place,
    judging_folder,
    judging_page_path,
    judgments_manifest,
    judgments_path,
    report_manifest,
    reports_dir,
    run_paths,
    sample_path,
)
from pipeline.report.judged import judged_tables
from pipeline.verify import verify
from tests.conftest import POOL_SEED, POOL_SIZES, pool_of

MODELS = ("bm25", "random")
STANDIN = StandinAssessor(1)
N = 4  # pairs per query, as the hand trial's SAMPLE=4
POOL = pool_of(POOL_SIZES[0])
SETTINGS = sampling(list(MODELS), N)
REPAIR = "make judge CORPUS=small MODELS=bm25,random SAMPLE=4 SAMPLE_SEED=0 JUDGE_DEPTH=100"


@pytest.fixture(scope="module")
def judged_root(corpus_dir, tmp_path_factory) -> Path:
    """A DATA folder: the fixture corpus with its pools, searched and scored with BM25 and the
    random floor, judged by the stand-in (SAMPLE=4), and its judging page; tests get copies."""
    root = tmp_path_factory.mktemp("judged-verify")
    shutil.copytree(corpus_dir, root / "corpora" / "small")
    data = pipeline.Data(root)
    for size in POOL_SIZES:
        for model in MODELS:
            pipeline.search(data, "small", pool_of(size), model, threads=1)
            pipeline.evaluate(data, "small", pool_of(size), model)
    pipeline.judge(data, "small", list(MODELS), STANDIN.name, sample=N)
    pipeline.judge_page(data, "small", list(MODELS), sample=N)
    return root


@pytest.fixture()
def root(judged_root, tmp_path) -> Path:
    shutil.copytree(judged_root, tmp_path, dirs_exist_ok=True)
    return tmp_path


def roots(root: Path) -> Roots:
    return Roots(root / "corpora", root / "indexes", root / "runs")


def place(root: Path) -> Place:
    return Place(root / "corpora" / "small", root / "indexes", root / "runs")


def damage(path: Path) -> None:
    """One byte changed, the size kept (as the hand trial did)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def line_of(lines: list[str], path: Path) -> str:
    [found] = [line for line in lines if line.split(": ")[0].endswith(f" {path}")]
    return found


def test_a_judged_root_verifies_clean_and_names_damaged_judging_files(root):
    assert verify(roots(root)) == []
    sample = sample_path(root / "runs", "small", POOL, SETTINGS.name)
    judged = judgments_path(root / "runs", "small", POOL, STANDIN.file_name, SETTINGS.name)
    page = judging_page_path(root / "runs", "small")
    made = judgments_manifest(page).read_bytes()
    pipeline.judge_page(pipeline.Data(root), "small", list(MODELS), sample=N)
    assert judgments_manifest(page).read_bytes() == made  # a rerun keeps the page's manifest
    assert json.loads(made)["parameters"] == SETTINGS.parameters()
    for path in (sample, judged, page):
        damage(path)
    lines = verify(roots(root))
    data = f"DATA={root}"
    assert line_of(lines, sample).startswith("CORRUPT ")
    assert line_of(lines, sample).endswith(f"repair: {REPAIR} JUDGE=standin:1 {data}")
    assert line_of(lines, judged).startswith("CORRUPT ")
    assert line_of(lines, judged).endswith(f"repair: {REPAIR} JUDGE=standin:1 {data}")
    assert line_of(lines, page).endswith(
        f"repair: {REPAIR.replace('judge', 'judge-page', 1)} {data}")
    # the repairs, run (through the API, as make runs them), leave nothing to repair
    pipeline.judge(pipeline.Data(root), "small", list(MODELS), STANDIN.name, sample=N)
    pipeline.judge_page(pipeline.Data(root), "small", list(MODELS), sample=N)
    assert verify(roots(root)) == []


def test_a_judging_file_without_its_manifest_is_partial(root):
    sample = sample_path(root / "runs", "small", POOL, SETTINGS.name)
    judgments_manifest(sample).unlink()
    judgments_manifest(judging_page_path(root / "runs", "small")).unlink()
    lines = verify(roots(root))
    # the settings come from the judgments of the same sample, which record them
    assert line_of(lines, sample).startswith(f"PARTIAL {sample}: no sample.manifest.json")
    assert f"repair: {REPAIR} JUDGE=standin:1" in line_of(lines, sample)
    page = line_of(lines, judging_page_path(root / "runs", "small"))
    assert page.startswith("PARTIAL ") and "make judge-page CORPUS=small" in page


def test_a_stale_sample_is_named_when_its_run_changed(root):
    run = root / "runs" / "small" / POOL / "random.parquet"
    pl.read_parquet(run).head(5).write_parquet(run)
    lines = verify(roots(root))
    sample = judgments_manifest(sample_path(root / "runs", "small", POOL, SETTINGS.name))
    assert line_of(lines, sample).startswith(f"STALE {sample}: the run of random")


def log_head(model: str = "m") -> dict:
    return {"judging_log": 1, "assessor": {
        "kind": "api", "model": model, "endpoint": "http://127.0.0.1:9/v1/chat/completions"}}


def test_an_assessors_log_is_checked_for_its_form(root):
    log_path = root / "runs" / "small" / "judgments" / "api--m-0123abcd.jsonl"
    record = {"query": "1", "doc": "2", "grade": 2, "replies": ["2"], "asked": 1,
              "not_grades": 0, "time": "2026-01-01T10:00:00Z", "assessor": "api:m"}
    log_path.write_text(json.dumps(log_head()) + "\n" + json.dumps(record) + "\n")
    assert verify(roots(root)) == []
    with log_path.open("a") as out:
        out.write('{"query": "1", "doc": "3", "gr')  # a kill while writing
    partial = line_of(verify(roots(root)), log_path)
    assert partial.startswith(f"PARTIAL {log_path}: its last line was cut short")
    assert "JUDGE=api:m JUDGE_URL=http://127.0.0.1:9/v1/chat/completions" in partial
    log_path.write_text(json.dumps(log_head()) + "\nnot a judgment\n")
    corrupt = line_of(verify(roots(root)), log_path)
    assert corrupt.startswith(f"CORRUPT {log_path}: line 2 is not a judgment")
    assert "move it away" in corrupt


class FailingAssessor(StandinAssessor):
    """The stand-in whose every request fails, as an api assessor's unreachable endpoint."""

    def judge(self, pair: Pair) -> dict:
        raise InputError("JUDGE_URL=http://127.0.0.1:9: the connection failed")


def test_judging_with_other_models_leaves_the_first_samples_judgments_counted(root):
    """make judge MODELS=bm25 JUDGE=api:x, whose connection fails, once replaced the pool's
    sample drawn for MODELS=bm25,random: the stand-in's judgments made on it were then left
    out of the report. Each sampling has a sample of its own now."""
    where = place(root)
    first = sample_path(root / "runs", "small", POOL, SETTINGS.name)
    before = first.read_bytes()
    with pytest.raises(InputError, match="connection failed"):
        judge_corpus(where, sampling(["bm25"], N), FailingAssessor(2), progress=False)
    assert first.read_bytes() == before
    assert any(sample_path(root / "runs", "small", pool_of(s), sampling(["bm25"], N).name)
               .exists() for s in POOL_SIZES)  # drawn in its own folder before the failure
    pools = [pool_of(s) for s in POOL_SIZES]
    left: list = []
    counted = judged_pools(where, pools, left)
    assert left == [] and sorted(p.pool for p in counted) == sorted(pools)
    assert {p.models for p in counted} == {MODELS}
    # the same assessor judging the second sampling too: both are counted, each its tables
    judge_corpus(where, sampling(["bm25"], N), STANDIN, progress=False)
    tables = judged_tables(where, pools)
    names = sorted(t.tables[0][0] for t in tables)
    assert names == sorted(f"judged-{STANDIN.file_name}-{s.name}-means"
                           for s in (SETTINGS, sampling(["bm25"], N)))
    assert verify(roots(root)) == []


def test_the_reports_text_names_the_judgments_it_leaves_out(root):
    judged = judgments_path(root / "runs", "small", POOL, STANDIN.file_name, SETTINGS.name)
    damage(judged)
    report = pipeline.build_report(pipeline.Data(root), "small", seed=POOL_SEED)
    table = report.tables["judged-left-out"]
    assert table.caption in report.section("judged").markdown
    [row] = table.frame().iter_rows(named=True)
    assert row["file"] == str(judged.relative_to(root))
    assert "differ from its manifest" in row["why"]
    assert row["repair"] == f"{REPAIR} JUDGE=standin:1 DATA={root}"  # the data it read
    assert row["file"] in report.markdown
    # a damaged sample leaves out its judgments with it, each said
    damage(sample_path(root / "runs", "small", POOL, SETTINGS.name))
    left: list = []
    judged_pools(place(root), [POOL], left)
    assert [(item.path.name, item.why.split(" (")[0]) for item in left] == [
        ("sample.parquet", "its bytes differ from its manifest's"),
        (judged.name, "its sample is left out")]


def test_the_layout_before_one_sample_per_setting_is_read(root):
    """A pool judged before (its sample and judgments in judgments/ itself) still counts in
    the report, and verify checks it, naming the repair its manifests record."""
    for pool in (pool_of(s) for s in POOL_SIZES):
        folder = judging_folder(root / "runs", "small", pool, SETTINGS.name)
        for path in sorted(folder.iterdir()):
            path.rename(folder.parent / path.name)
        folder.rmdir()
    old = judging_folder(root / "runs", "small", POOL)
    counted = judged_pools(place(root), [POOL])
    assert [(p.pool, p.sampling, p.file_name) for p in counted] == [
        (POOL, "", STANDIN.file_name)]
    assert verify(roots(root)) == []
    damage(old / "sample.parquet")
    line = line_of(verify(roots(root)), old / "sample.parquet")
    assert line.startswith("CORRUPT ") and f"repair: {REPAIR} JUDGE=standin:1" in line
    # the repair moves the old files into their sampling's folder and draws the sample again
    judge_corpus(place(root), SETTINGS, STANDIN, progress=False)
    assert not [*old.glob("*.parquet"), *old.glob("*.manifest.json")]
    counted = judged_pools(place(root), [POOL])
    assert [(p.sampling, p.file_name) for p in counted] == [(SETTINGS.name, STANDIN.file_name)]
    assert verify(roots(root)) == []


def test_samples_of_runs_changed_since_are_left_out_as_verify_calls_them_stale(root):
    """Issue 69: bm25 searched again at another depth (K=100) after judging: verify calls
    every sample drawn from its runs STALE; the report counted them all, with no word. It
    leaves out each sample verify names, and the judgments of it, each with the command that
    draws and judges again; what verify does not name stays counted."""
    data = pipeline.Data(root)
    pipeline.search(data, "small", POOL, "bm25", k=100, threads=1)
    pipeline.evaluate(data, "small", POOL, "bm25")
    stale = {line.split(" ")[1].split(":")[0] for line in verify(roots(root))
             if line.startswith("STALE")}
    sample = sample_path(root / "runs", "small", POOL, SETTINGS.name)
    assert stale == {str(judgments_manifest(sample))}
    report = pipeline.build_report(data, "small", seed=POOL_SEED)
    rows = report.tables["judged-left-out"].frame().rows(named=True)
    assert [(Path(r["file"]).name, r["why"]) for r in rows] == [
        ("sample.parquet", "stale: the run of bm25 it was drawn from is gone or changed since "
         "(its runs are of different depths now: bm25 100, random 500)"),
        (f"{STANDIN.file_name}.parquet", "its sample is left out")]
    # issue 78: the repair was make judge, which refuses runs of two depths; it is the search
    # of bm25 at the depth the sample was drawn at, and it works when run
    repair = f"make eval CORPUS=small MODEL=bm25 K=500 DATA={root}"
    assert all(r["repair"] == repair for r in rows)
    counted = {p.pool for p in judged_pools(place(root), [pool_of(s) for s in POOL_SIZES])}
    assert counted == {pool_of(s) for s in POOL_SIZES} - {POOL}
    pipeline.search(data, "small", None, "bm25", k=500, threads=1)  # make eval, as printed
    pipeline.evaluate(data, "small", None, "bm25", collect=True)
    assert verify(roots(root)) == []  # the sample counts again: bm25 ranks as it did


def test_a_report_that_leaves_a_sample_out_is_current_and_the_repairs_clear(root):
    """Issue 88: make eval MODEL=bm25 K=100 after judging, then make report: the report left
    the samples out and said so, yet verify called it STALE by them, and its repair (make
    report) left it so. It records what it left out, whose problems are not its own: only
    the samples are named, with the search at their depth; run as printed, the report is
    STALE by the runs it read (named with the corpus, not `@`), and make report, last,
    leaves nothing. A report that counted a file is still STALE by its problem."""
    data = pipeline.Data(root)
    pipeline.search(data, "small", None, "bm25", k=100, threads=1)
    pipeline.evaluate(data, "small", None, "bm25", collect=True)
    pipeline.build_report(data, "small", seed=POOL_SEED).save()
    record = report_manifest(reports_dir(root / "runs"), "small")
    folders = [judging_folder(root / "runs", "small", pool_of(s), SETTINGS.name)
               for s in POOL_SIZES]
    assert read_json(record)["left_out"] == sorted(
        f"runs/@/{folder.parent.parent.name}/judgments/{folder.name}/{name}"
        for folder in folders for name in ("sample.manifest.json", "sample.parquet",
                                           f"{STANDIN.file_name}.manifest.json",
                                           f"{STANDIN.file_name}.parquet"))
    lines = verify(roots(root))
    assert sorted(line.split(": ")[0] for line in lines) == sorted(
        f"STALE {folder / 'sample.manifest.json'}" for folder in folders)
    repair = f"make eval CORPUS=small MODEL=bm25 K=500 DATA={root}"
    assert {line.split("; repair: ")[1] for line in lines} == {repair}
    pipeline.search(data, "small", None, "bm25", k=500, threads=1)  # the repair, as printed
    pipeline.evaluate(data, "small", None, "bm25", collect=True)
    [line] = verify(roots(root))
    assert line.startswith(f"STALE {record}: its input runs/small/")
    assert line.endswith(f"; repair: make report CORPUS=small SEED={POOL_SEED} DATA={root}")
    pipeline.build_report(data, "small", seed=POOL_SEED).save()
    assert verify(roots(root)) == []
    # judgments the report counted, damaged: it is STALE by them
    judged = judgments_path(root / "runs", "small", POOL, STANDIN.file_name, SETTINGS.name)
    damage(judged)
    lines = verify(roots(root))
    assert line_of(lines, judged).startswith("CORRUPT ")
    assert line_of(lines, record) == (
        f"STALE {record}: its input runs/small/{POOL}/judgments/{SETTINGS.name}/"
        f"{STANDIN.file_name}.parquet changed since; repair: make report CORPUS=small "
        f"SEED={POOL_SEED} DATA={root}")
    pipeline.build_report(data, "small", seed=POOL_SEED).save()  # now leaves them out
    assert [line.split(" ")[:2] for line in verify(roots(root))] == [["CORRUPT", f"{judged}:"]]


def test_a_sample_of_runs_of_two_depths_is_compared_nowhere(root):
    """The hostile trial's R12 and N11: bm25 searched at K=100, judged again, then reported:
    the judged tables compared bm25 at depth 100 with random at 500 under their plain names.
    make judge now refuses such a sample before any pair is asked (its grades would be paid
    for and compared nowhere); one drawn and judged so (as before) is left out of the
    report, said why."""
    data = pipeline.Data(root)
    pipeline.search(data, "small", POOL, "bm25", k=100, threads=1)
    pipeline.evaluate(data, "small", POOL, "bm25")
    with pytest.raises(InputError, match=r"small/.*: the runs of MODELS are of different "
                                         r"depths \(bm25 100, random 500\)"):
        judge_corpus(place(root), SETTINGS, FailingAssessor(2), progress=False)
    sample = sample_pool(place(root), POOL, SETTINGS)  # as make judge drew it before
    judge_pool(root / "runs", root / "corpora" / "small", "small", POOL, pairs_to_judge(sample),
               STANDIN, progress=False, sampling=SETTINGS.name,
               parameters=SETTINGS.parameters())
    assert verify(roots(root)) == []  # current: nothing for verify to say
    left: list = []
    counted = {p.pool for p in judged_pools(place(root), [pool_of(s) for s in POOL_SIZES], left)}
    assert POOL not in counted and counted
    assert [(item.path.name, item.why) for item in left][0] == (
        "sample.parquet", "its runs are of different depths (bm25 100, random 500): no model "
        "is compared with one of another depth")
    report = pipeline.build_report(data, "small", seed=POOL_SEED)
    assert POOL in report.tables["judged-left-out"].frame()["file"][0]
    # a run whose manifest is gone has no depth to tell (verify names it): not "different"
    # (the trial's N9: "bm25 100, random None", and a repair that repaired nothing)
    run_paths(root / "runs", "small", POOL, "random").manifest.unlink()
    assert mixed_depths(place(root), POOL, MODELS) is None


def test_complete_runs_compare_whatever_their_k(root):
    """Issue 78, depth is what a run cut: two runs that each rank every candidate of the pool
    (K at or above its size, here two different K) are one cut, so make judge samples them
    (it refused them as "different depths" by K alone); a run cut short beside a complete
    one is still refused, named by its cut."""
    data = pipeline.Data(root)
    size = POOL_SIZES[0]
    pipeline.search(data, "small", POOL, "bm25", k=size, threads=1)
    pipeline.search(data, "small", POOL, "random", k=size + 7, threads=1)
    assert mixed_depths(place(root), POOL, MODELS) is None
    judge_corpus(place(root), SETTINGS, STANDIN, pools=[POOL], progress=False)
    pipeline.search(data, "small", POOL, "random", k=size - 1, threads=1)
    assert mixed_depths(place(root), POOL, MODELS) == f"bm25 every candidate, random {size - 1}"
    # issue 88: its repair was make judge, refused; it is the search at a K that ranks every
    # candidate, as the run the sample was drawn from did, after which the sample counts
    for model in MODELS:
        pipeline.evaluate(data, "small", POOL, model)
    sample = judgments_manifest(sample_path(root / "runs", "small", POOL, SETTINGS.name))
    assert line_of(verify(roots(root)), sample).endswith(
        f"; repair: make eval CORPUS=small MODEL=random K={size} DATA={root}")
    pipeline.search(data, "small", POOL, "random", k=size, threads=1)
    pipeline.evaluate(data, "small", POOL, "random")
    assert mixed_depths(place(root), POOL, MODELS) is None
    assert verify(roots(root)) == []
