"""The report checks what verify checks (issue 69): an evaluation made from weights, inputs or
options other than those now is left out of every table, said first with the command that
makes it current, in the report and its log; runs of another depth than the report's are
labelled with theirs and tested against no other model."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import NOT_SCORED
from pipeline.layout import pool_names, report_manifest, reports_dir
from tests.report.conftest import REPORT_CORPUS
from tests.test_api_replace import nudge
from tests.test_damage import damage


def data_copy(report_data: Path, tmp_path: Path) -> pipeline.Data:
    root = Path(shutil.copytree(report_data, tmp_path / "data", symlinks=True))
    return pipeline.Data(root)


def dataset_pools(data: pipeline.Data) -> list[str]:
    return [p for p in pool_names(data.corpora / REPORT_CORPUS) if p.startswith("all-")]


def stale_evaluations(data: pipeline.Data) -> set[str]:
    """corpus/pool/model of each evaluation verify calls STALE."""
    found = set()
    for line in pipeline.verify_data(data, deep=False):
        kind, path = line.split(" ", 1)[0], Path(line.split(" ", 1)[1].split(":", 1)[0])
        if kind == "STALE" and path.name.endswith(".eval.json"):
            found.add(f"{path.parts[-3]}/{path.parts[-2]}/{path.name.split('.')[0]}")
    return found


def models_shown(report: pipeline.Report) -> set[str]:
    """Every model named in a row of the report's tables of numbers."""
    return {row[0] for name, table in report.tables.items()
            if name not in ("left-out", "other-depths") for row in table.rows}


@pytest.mark.slow  # embeds the dataset pools with the tiny BERT
def test_swapped_weights_are_left_out_with_verify_s_stale_runs(report_data, tiny_bert,
                                                               tmp_path, caplog):
    data = data_copy(report_data, tmp_path)
    folder = Path(shutil.copytree(tiny_bert, tmp_path / "model"))
    for pool in dataset_pools(data):
        pipeline.search(data, REPORT_CORPUS, pool, "minilm", threads=1, model_path=folder)
        pipeline.evaluate(data, REPORT_CORPUS, pool, "minilm")
    before = pipeline.build_report(data, REPORT_CORPUS)
    assert "minilm" in models_shown(before) and "left-out" not in before.tables
    nudge(folder)  # other weights under the same names: verify calls minilm's runs STALE
    with pytest.raises(InputError, match="collected from an evaluation not current now"):
        pipeline.build_report(data, REPORT_CORPUS, collect=False)  # as collected last: refused
    stale = stale_evaluations(data)
    assert stale == {f"{REPORT_CORPUS}/{pool}/minilm" for pool in dataset_pools(data)}
    with caplog.at_level(logging.WARNING):
        after = pipeline.build_report(data, REPORT_CORPUS)
    assert "minilm" not in models_shown(after)
    assert "minilm" not in after.section("significance").markdown
    left = after.tables["left-out"]
    assert {row[0] for row in left.rows} == stale  # what verify says, no more, no less
    for run, why, command in left.rows:
        assert "changed since it was embedded" in why
        assert command.startswith(f"make eval CORPUS={REPORT_CORPUS} MODEL=minilm ")
        assert f"MODEL_PATH={folder}" in command and "REPLACE=1" in command
        assert f"DATA={data.runs.parent}" in command  # the data the report read, not the checkout's
        assert f"{run}: left out" in caplog.text
    tables = "\n".join(s.markdown for s in after.sections if s.name != "summary")
    assert tables.index("evaluations left out") < tables.index("dataset-level")
    path = after.save()
    assert "REPLACE=1" in path.read_text()


def test_a_report_that_left_out_a_run_repaired_to_the_same_bytes_is_stale(report_data,
                                                                            tmp_path):
    """A damaged run is left out of the report; searched again the same way it has its old
    bytes, so no input the report recorded changed: verify still names the report STALE (it
    left out what is current now), and the report made then counts the run."""
    data = data_copy(report_data, tmp_path)
    pool = dataset_pools(data)[0]
    run = data.runs / REPORT_CORPUS / pool / "bm25.parquet"
    damage(run)
    left = pipeline.build_report(data, REPORT_CORPUS)
    left.save()
    assert {row[0] for row in left.tables["left-out"].rows} == {f"{REPORT_CORPUS}/{pool}/bm25"}
    pipeline.search(data, REPORT_CORPUS, pool, "bm25", threads=1)  # verify's repair: make eval
    pipeline.evaluate(data, REPORT_CORPUS, pool, "bm25")
    lines = pipeline.verify_data(data, deep=False)
    assert [line.split(":")[0] for line in lines] == [
        f"STALE {report_manifest(reports_dir(data.runs), REPORT_CORPUS)}"]
    assert f"left out the evaluation of bm25 on {pool} as not current" in lines[0]
    assert f"repair: make report CORPUS={REPORT_CORPUS} " in lines[0]
    made = pipeline.build_report(data, REPORT_CORPUS)
    made.save()
    assert "left-out" not in made.tables
    assert pipeline.verify_data(data, deep=False) == []


def test_a_run_of_no_evaluation_is_said_left_out_until_it_is_scored(report_data, tmp_path):
    """An eval killed before it wrote the evaluation leaves a complete run of no number: the
    report says it left it out, with the command that scores it, and once scored verify names
    that report STALE (it never read the new evaluation)."""
    data = data_copy(report_data, tmp_path)
    pool = dataset_pools(data)[0]
    for name in ("bm25.eval.json", "bm25.metrics.parquet"):  # what a kill -9 of make eval left
        (data.runs / REPORT_CORPUS / pool / name).unlink()
    left = pipeline.build_report(data, REPORT_CORPUS)
    left.save()
    (run, why, command), = left.tables["left-out"].rows
    assert (run, why) == (f"{REPORT_CORPUS}/{pool}/bm25", NOT_SCORED)
    assert command.startswith(f"make eval CORPUS={REPORT_CORPUS} MODEL=bm25 ")
    assert "1 run left out, not scored" in left.tables["left-out"].caption
    assert f"1 run left out as not scored (no evaluation was written): {run}" in \
        left.section("summary").markdown
    assert pipeline.verify_data(data, deep=False) == []  # a run only searched is no problem
    pipeline.evaluate(data, REPORT_CORPUS, pool, "bm25")
    lines = pipeline.verify_data(data, deep=False)
    assert [line.split(":")[0] for line in lines] == [
        f"STALE {report_manifest(reports_dir(data.runs), REPORT_CORPUS)}"]
    made = pipeline.build_report(data, REPORT_CORPUS)
    assert "left-out" not in made.tables


def test_runs_of_another_depth_are_labelled_and_never_tested(report_data, tmp_path):
    data = data_copy(report_data, tmp_path)
    for pool in dataset_pools(data):  # bm25 at depth 100 where random ranks 500
        pipeline.search(data, REPORT_CORPUS, pool, "bm25", k=100, threads=1)
        pipeline.evaluate(data, REPORT_CORPUS, pool, "bm25")
    report = pipeline.build_report(data, REPORT_CORPUS)
    dataset = report.tables["dataset"]
    assert {row[0] for row in dataset.rows} == {"bm25 (top 100)", "random"}
    assert "(top 500)" in dataset.caption
    assert not any("**" in cell or "†" in cell for row in dataset.rows for cell in row)
    other = report.tables["other-depths"].frame()
    assert other.rows() == [("bm25 (top 100)", "100", str(len(dataset_pools(data))))]
    tests = report.section("significance").markdown
    assert "bm25 (top 100)" not in tests  # no test across depths
    assert "Runs of another depth than the report's top 500 are in no comparison" in tests
    fields = report.tables[next(n for n in report.tables if n.startswith("field-"))]
    assert {row[0] for row in fields.rows} == {"bm25", "random"}  # at 500 there: compared
    assert any("**" in cell for row in fields.rows for cell in row)
    results = data.results(collect=False)
    assert set(results.filter(pl.col("model") == "bm25")["depth"].unique()) == {100, 500}


def test_a_served_models_rows_say_what_a_rerun_cannot_see(report_data, tmp_path, monkeypatch):
    """Issue 69: a model swapped behind the same URL is not seen by a run that sends no
    request (every paper stored); the report said nothing of it. It names each served
    model, its endpoint (no secret) and when its store was written, and what embeds again."""
    from tests.encoding.test_served_replace import KEY, MODEL, NAME, SERVED, vectors
    from tests.servers import EMBEDDINGS, LocalServer, running

    data = data_copy(report_data, tmp_path)
    assert "served" not in pipeline.build_report(data, REPORT_CORPUS).tables
    with running(LocalServer(SERVED, encode=vectors, path=EMBEDDINGS)) as server:
        monkeypatch.setenv("EMBEDDINGS_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        for pool in dataset_pools(data):
            pipeline.search(data, REPORT_CORPUS, pool, MODEL, threads=1)
            pipeline.evaluate(data, REPORT_CORPUS, pool, NAME)
        report = pipeline.build_report(data, REPORT_CORPUS)
    [(model, endpoint, written)] = report.tables["served"].rows
    assert (model, endpoint) == (NAME, server.url) and written.startswith("20")
    assert "REPLACE=1" in report.tables["served"].prose
    assert NAME in models_shown(report) and KEY not in report.markdown


def test_verify_checks_an_analysed_text_store_as_itself(report_data, caplog):
    """The hostile trial's R13: verify looked for a model's store under the analysed-text
    store's name (`embeddings/anserini-english`, which does not exist) and logged it as
    "cannot be checked now", naming make verify as its own repair."""
    with caplog.at_level(logging.INFO):
        assert pipeline.verify_data(pipeline.Data(report_data), deep=False) == []
    assert "cannot be checked now" not in caplog.text
    assert list((report_data / "indexes").glob("*/bm25-analysed/*/manifest.json"))  # checked
