"""A report is an artifact like every other (issue 78): its manifest records the sha256 of each
file it was made from, by the one staleness rule (core/inputs.py), so `make verify` calls it
STALE once a run, an evaluation or a judged sample behind it changes, with the `make report`
command it was made with, which makes verify clean again; and what it records is what it
read and shows: a file changed while it is built (a `make eval` beside it) makes it build
again, never save a mix of two states of the data."""

from __future__ import annotations

import json
import logging
import shlex
import shutil
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.checksums import fingerprint
from pipeline.core.files import read_json, write_json
from pipeline.judging.assessor import StandinAssessor
from pipeline.layout import (
    judgments_manifest,
    judgments_path,
    pool_names,
    report_manifest,
    reports_dir,
    run_paths,
)
from pipeline.report import build
from pipeline.report.provenance import ReportInputsChanged, report_inputs, state
from tests.conftest import make_ok
from tests.report.conftest import REPORT_CORPUS

CORPUS = REPORT_CORPUS


def data_copy(report_data: Path, tmp_path: Path) -> pipeline.Data:
    root = Path(shutil.copytree(report_data, tmp_path / "data", symlinks=True))
    return pipeline.Data(root)


def report_lines(data: pipeline.Data, program: str = "make") -> list[str]:
    """verify's lines about the corpus's report (its files and its manifest)."""
    reports = reports_dir(data.runs)
    return [line for line in pipeline.verify_data(data, deep=False, program=program)
            if line.split(" ", 2)[1].startswith(str(reports))]


def stale_report(data: pipeline.Data) -> str:
    """verify's one line about the report, which must call it STALE; its repair's words."""
    lines = report_lines(data)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"STALE {report_manifest(reports_dir(data.runs), CORPUS)}: ")
    return lines[0]


def repair_words(line: str) -> list[str]:
    return shlex.split(line.split("; repair: ", 1)[1])


def saved(data: pipeline.Data, **options) -> pipeline.Report:
    report = pipeline.build_report(data, CORPUS, **options)
    report.save()
    return report


def first_pool(data: pipeline.Data) -> str:
    return [p for p in pool_names(data.corpora / CORPUS) if p.startswith("all-")][0]


@pytest.mark.slow
def test_verify_calls_a_report_stale_when_an_evaluation_behind_it_changes(report_data,
                                                                           tmp_path):
    data = data_copy(report_data, tmp_path)
    report = saved(data)
    assert report_lines(data) == []
    pool = first_pool(data)
    recorded = read_json(report_manifest(reports_dir(data.runs), CORPUS))["inputs"]
    label = f"runs/@/{pool}/bm25.eval.json"
    assert label in recorded and f"runs/@/{pool}/bm25.manifest.json" in recorded
    assert recorded == report.inputs
    # a metric added to bm25's evaluation of one pool (make eval METRICS=...)
    pipeline.evaluate(data, CORPUS, pool, "bm25", metrics=["map", "precision@7"],
                      collect=True)
    line = stale_report(data)
    assert f"its input runs/{CORPUS}/{pool}/bm25." in line  # the metrics' file or the manifest
    assert repair_words(line) == ["make", "report", f"CORPUS={CORPUS}", "SEED=0",
                                  f"DATA={data.runs.parent}"]
    saved(data)  # the repair, through the API
    assert report_lines(data) == []


def test_a_report_goes_stale_when_a_run_behind_it_is_searched_at_another_depth(report_data,
                                                                               tmp_path):
    """The issue's case: make report, then make eval MODEL=bm25 K=100 (one pool here):
    verify said no problems while the report showed the old runs' numbers."""
    data = data_copy(report_data, tmp_path)
    saved(data)
    pool = first_pool(data)
    pipeline.search(data, CORPUS, pool, "bm25", k=100, threads=1)
    assert f"its input runs/{CORPUS}/{pool}/bm25.manifest.json changed since" in \
        stale_report(data)
    # made now, it leaves out the evaluation collect left out (scored before the search), and
    # says so: current, whatever verify says of that evaluation (issue 88)
    left = saved(data).tables["left-out"]
    assert [row[0] for row in left.rows] == [f"{CORPUS}/{pool}/bm25"]
    assert any(line.startswith("STALE ") and line.split(":")[0].endswith("bm25.eval.json")
               for line in pipeline.verify_data(data, deep=False))
    assert report_lines(data) == []
    pipeline.evaluate(data, CORPUS, pool, "bm25", collect=True)  # that evaluation's repair
    stale_report(data)
    saved(data)
    assert report_lines(data) == []


@pytest.mark.slow
def test_a_report_goes_stale_when_a_judged_sample_behind_it_changes(report_data, tmp_path):
    data = data_copy(report_data, tmp_path)
    pools = [p for p in pool_names(data.corpora / CORPUS) if p.startswith("all-")]
    pipeline.judge(data, CORPUS, ["bm25", "random"], StandinAssessor(1).name, sample=4)
    report = saved(data)
    assert any(name.startswith("judged-") for name in report.tables)
    judged = judgments_path(data.runs, CORPUS, pools[0], StandinAssessor(1).file_name,
                            next(p.parent.name for p in (data.runs / CORPUS / pools[0])
                                 .rglob("sample.parquet")))
    assert any(label.endswith(judged.name) for label in report.inputs)
    # the judgments of the sample graded again (one grade changed, the manifest made anew,
    # as make judge writes it): whole and current, but not what the report counted
    frame = pl.read_parquet(judged)
    frame = frame.with_columns(grade=pl.when(pl.int_range(pl.len()) == 0)
                               .then(3 - pl.col("grade").fill_null(0))
                               .otherwise(pl.col("grade")))
    frame.write_parquet(judged)
    record = judgments_manifest(judged)
    info = read_json(record)
    info["outputs"][judged.name] = fingerprint(judged)
    write_json(info, record)
    line = stale_report(data)
    assert f"{judged.parent.name}/{judged.stem}." in line and "changed since" in line
    saved(data)
    assert report_lines(data) == []


@pytest.mark.slow
def test_a_report_that_records_no_inputs_is_stale(report_data, tmp_path):
    """A report saved before reports recorded their inputs cannot be known current."""
    data = data_copy(report_data, tmp_path)
    saved(data)
    record = report_manifest(reports_dir(data.runs), CORPUS)
    info = read_json(record)
    del info["inputs"]
    write_json(info, record)
    assert "made before reports recorded what they were made from" in stale_report(data)


def test_a_report_never_records_digests_other_than_what_it_shows(report_data, tmp_path,
                                                                 monkeypatch, caplog):
    """An evaluation written while the report is being built (after its results are read,
    before it is saved): built again from the start, so the numbers it shows and the digests
    it records are of one state of the data; without collecting again, refused in one line,
    nothing written."""
    data = data_copy(report_data, tmp_path)
    pool = first_pool(data)
    calls = []

    def meanwhile(results):
        """The dataset section, with bm25's evaluation of one pool changed under it the first
        time (a `make eval METRICS=...` beside the report)."""
        if not calls:
            pipeline.evaluate(data, CORPUS, pool, "bm25", metrics=["map", "precision@7"])
        calls.append(results.rows["metric"].unique().sort().to_list())
        return build.dataset_section(results)

    monkeypatch.setattr(build, "SECTIONS", tuple(meanwhile if s is build.dataset_section
                                                 else s for s in build.SECTIONS))
    with caplog.at_level(logging.WARNING):
        report = pipeline.build_report(data, CORPUS)
    assert len(calls) == 2 and "built again" in caplog.text
    assert "P@7" not in " ".join(calls[0]) and "precision@7" not in calls[0]
    assert any("7" in metric for metric in calls[1])  # the second build read the new rows
    runs = build.reported_runs(build.load_results(data.runs, CORPUS))
    place = data.place(CORPUS)
    assert report.inputs == report_inputs(place, runs, [p for p, _ in runs])
    report.save()
    assert report_lines(data) == []
    # collect=False: nothing collects the change, so the report refuses, writing nothing
    calls.clear()
    monkeypatch.setattr(build, "REPORT_ATTEMPTS", 1)
    before = {p.name: p.read_bytes() for p in reports_dir(data.runs).iterdir()}
    pipeline.evaluate(data, CORPUS, pool, "bm25", metrics=["map", "precision@7", "ndcg@5"],
                      collect=True)
    calls.clear()
    assert state(place)  # the data's files are there to compare

    def rewrite(results):
        if not calls:
            info = read_json(run_paths(data.runs, CORPUS, pool, "bm25").evaluation)
            write_json(info, run_paths(data.runs, CORPUS, pool, "bm25").evaluation)
        calls.append(1)
        return build.dataset_section(results)

    monkeypatch.setattr(build, "SECTIONS", tuple(rewrite if s is meanwhile else s
                                                 for s in build.SECTIONS))
    with pytest.raises(ReportInputsChanged, match=r"bm25\.eval\.json changed while it was "
                                                  "being built"):
        pipeline.build_report(data, CORPUS, collect=False)
    assert {p.name: p.read_bytes() for p in reports_dir(data.runs).iterdir()} == before


@pytest.mark.slow  # make report, make eval and the repair by make (about a minute)
def test_make_verify_names_a_stale_report_and_its_repair_makes_it_clean(report_data,
                                                                        tmp_path):
    """The issue's trial, by make: make report, make eval MODEL=bm25 K=100, make verify: the
    report is STALE, and the command verify prints, run as printed, makes verify clean."""
    data = data_copy(report_data, tmp_path)
    stamp = tmp_path / "installed"
    stamp.touch()
    make_ok(data.runs.parent, stamp, "report")
    assert report_lines(data) == []
    make_ok(data.runs.parent, stamp, "eval", "MODEL=bm25", "K=100")
    line = stale_report(data)
    words = repair_words(line)
    assert words[:3] == ["make", "report", f"CORPUS={CORPUS}"], words
    make_ok(data.runs.parent, stamp, *words[1:])
    assert pipeline.verify_data(data, deep=False) == []  # nothing else left to repair
    shown = (reports_dir(data.runs) / f"{CORPUS}.md").read_text()
    assert "top 100" in shown  # the report shows the runs searched now
    assert json.loads(report_manifest(reports_dir(data.runs), CORPUS).read_text())["inputs"]


@pytest.mark.slow  # make eval twice (all pools of the fixture), make report twice: a minute
def test_the_judged_left_out_tables_repair_works_when_typed(report_data, tmp_path):
    """Issue 78's poor case: after make eval MODEL=bm25 K=100, the report's table of left-out
    judging files printed `make judge ...`, which make refuses (the sampled runs are of two
    depths now) without saying so. The why says the depths; the repair, typed as printed,
    brings the runs back to one depth. Issue 88's: the report make report writes then is
    current for verify (it said no problem of the samples it left out is its own), and the
    repairs verify prints, run as printed round by round, leave nothing to repair."""
    data = data_copy(report_data, tmp_path)
    stamp = tmp_path / "installed"
    stamp.touch()
    pipeline.judge(data, CORPUS, ["bm25", "random"], StandinAssessor(1).name, sample=4)
    make_ok(data.runs.parent, stamp, "eval", "MODEL=bm25", "K=100")
    make_ok(data.runs.parent, stamp, "report")
    assert report_lines(data) == []
    table = pipeline.build_report(data, CORPUS).tables["judged-left-out"]
    rows = table.frame().rows(named=True)
    assert rows and all("different depths now: bm25 100, random 500" in row["why"]
                        for row in rows if "stale" in row["why"])
    [repair] = {row["repair"] for row in rows}
    words = shlex.split(repair)
    assert words[:2] == ["make", "eval"] and "K=500" in words, words
    lines = pipeline.verify_data(data, deep=False)
    assert {" ".join(repair_words(line)) for line in lines} == {repair}
    done = []
    for _ in range(3):  # the samples' repair, then the report's (its runs changed by it)
        for command in sorted({tuple(repair_words(line)) for line in lines}):
            make_ok(data.runs.parent, stamp, *command[1:])
            done.append(command[1])
        if not (lines := pipeline.verify_data(data, deep=False)):
            break
    assert lines == [] and done == ["eval", "report"]
    assert "judged-left-out" not in pipeline.build_report(data, CORPUS).tables


@pytest.mark.slow
def test_a_table_the_data_no_longer_has_leaves_the_reports_folder(report_data, tmp_path):
    """The report's files are the report's only: a table of left-out judging files written
    while a judgments file was damaged is removed by the report after the repair (it was left
    behind, vouched for by no manifest, with the old numbers)."""
    data = data_copy(report_data, tmp_path)
    pool = first_pool(data)
    pipeline.judge(data, CORPUS, ["bm25", "random"], StandinAssessor(1).name, sample=4)
    [judged] = (data.runs / CORPUS / pool).rglob(f"{StandinAssessor(1).file_name}.parquet")
    kept = judged.read_bytes()
    judged.write_bytes(kept[:-1] + bytes([kept[-1] ^ 0xFF]))
    assert "judged-left-out" in saved(data).tables
    table = reports_dir(data.runs) / f"{CORPUS}-judged-left-out.tex"
    assert table.is_file()
    judged.write_bytes(kept)
    assert "judged-left-out" not in saved(data).tables
    assert not table.exists()
    assert report_lines(data) == []


def test_a_report_goes_stale_when_its_training_list_changes(report_data, tmp_path):
    """TRAINING_SETS (a file outside the data roots) makes the leakage table: its bytes
    changed since, the report is STALE with the command that made it, list included."""
    data = data_copy(report_data, tmp_path)
    queries = pl.read_parquet(data.corpora / CORPUS / "pools" / first_pool(data)
                              / "queries.parquet")["corpusid"].to_list()
    listed = tmp_path / "trained.txt"
    listed.write_text("".join(f"{i}\n" for i in queries[:3]))
    saved(data, training_sets={"random": str(listed)})
    assert report_lines(data) == []
    listed.write_text("".join(f"{i}\n" for i in queries[:4]))
    line = stale_report(data)
    assert f"its TRAINING_SETS file of random ({listed}) changed since" in line
    assert f"TRAINING_SETS=random={listed}" in repair_words(line)
    saved(data, training_sets={"random": str(listed)})
    assert report_lines(data) == []
