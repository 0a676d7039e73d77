"""One door finished (issue 72): eval, collect, report, index, submit-embed, after-embed and
the MDCR commands are API functions that their commands are (pipeline/cli/registry.py,
command_of). Called from Python on copies of the data the commands' tests use, each writes
what its command writes, and returns what it did."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.cli.main import main
from pipeline.core.errors import InputError
from pipeline.layout import pool_names, report_file, reports_dir, run_paths
from pipeline.mdcr.official import official_table

TIMES = ("created", "seconds", "self_sha256")  # a manifest's own time, and its digest of it


def _timeless(value: object) -> object:
    """A manifest's JSON without its times, at any depth, nor the digests of evaluations (as
    collect's inputs), whose bytes hold theirs."""
    if isinstance(value, dict):
        return {key: _timeless(item) for key, item in value.items()
                if key not in TIMES and not key.endswith(".eval.json")}
    return [_timeless(item) for item in value] if isinstance(value, list) else value


def files(folder: Path, data: Path | None = None) -> dict[str, object]:
    """Every file under `folder` -> its bytes (a JSON file's fields but its times, and the
    data folder `data` a repair command names, as "<data>"); not the hidden ones (checksum
    caches, locks), nor the stage-times log (seconds)."""
    def fields(path: Path) -> object:
        text = path.read_text()
        return _timeless(json.loads(text.replace(str(data), "<data>") if data else text))

    return {p.relative_to(folder).as_posix(): fields(p)
            if p.suffix == ".json" else p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "stage-times.jsonl"
            and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def command(root: Path, *argv: str) -> None:
    """The command line on the data root `root`, in this process: exit status 0."""
    assert main(["--corpora-root", str(root / "corpora"), "--index-root", str(root / "indexes"),
                 "--runs-root", str(root / "runs"), *argv]) == 0


@pytest.fixture
def doors(mdcr_source, tmp_path) -> dict[str, Path]:
    """Two copies of the MDCR source's data root (field-level pools searched by BM25): one for
    the API's calls, one for the commands."""
    _, root = mdcr_source
    copies = {door: tmp_path / door for door in ("api", "cli")}
    for copy in copies.values():
        shutil.copytree(root, copy)  # times kept: staleness compares them
    return copies


def test_eval_collect_and_report_from_python_are_their_commands(doors, capsys):
    """evaluate (every pool, make eval's --stale-only --collect) saves what eval saves and
    returns it, a pool column beside the model; collect gathers what collect gathers;
    build_report(...).save() writes what report writes, which it prints; save=False writes
    nothing."""
    api, cli = doors["api"], doors["cli"]
    pools = pool_names(api / "corpora" / "small")
    unsaved = pipeline.evaluate(api, "small", None, "bm25", save=False)
    assert not any(run_paths(api / "runs", "small", pool, "bm25").metrics.exists()
                   for pool in pools)
    frame = pipeline.evaluate(api, "small", None, "bm25", collect=True)
    command(cli, "eval", "--corpus", "small", "--model", "bm25", "--stale-only", "--collect")
    assert files(api / "runs", api) == files(cli / "runs", cli)
    assert frame.equals(unsaved) and frame.columns[:4] == ["model", "pool", "query", "negatives"]
    assert sorted(frame["pool"].unique()) == pools
    for pool in pools:  # the frame is what was saved
        saved = pl.read_parquet(run_paths(api / "runs", "small", pool, "bm25").metrics)
        assert frame.filter(pl.col("pool") == pool).drop("model", "pool").equals(
            saved.select(frame.columns[2:]))
    means = pipeline.evaluate(api, "small", pools[:1], ["bm25"], means=True)
    assert means.columns == ["model", "pool", "map", "ndcg", "recall@30"]

    capsys.readouterr()
    results = pipeline.collect(pipeline.Data(api))
    command(cli, "collect")
    assert results.equals(pl.read_parquet(cli / "runs" / "results.parquet"))
    assert files(api / "runs", api) == files(cli / "runs", cli)
    said = [line for line in capsys.readouterr().err.splitlines() if "[collect] " in line]
    assert sum(" rows in " in line for line in said) == 2  # one summary each, as the command
    assert said[: len(said) // 2] == [line.replace(str(cli), str(api))  # the same words
                                      for line in said[len(said) // 2:]]

    built = pipeline.build_report(api, "small")
    built.save()
    written = files(reports_dir(api / "runs"))
    command(api, "report", "--corpus", "small")
    assert files(reports_dir(api / "runs")) == written
    assert capsys.readouterr().out == (f"{built.markdown}\nWritten to {api / 'runs'}/reports/ "
                                       "(small.md, .html, .tex, .png)\n")
    with pytest.raises(InputError, match="no evaluated runs for CORPUS=nothing and SEED=0"):
        pipeline.build_report(api, "nothing")


def test_index_from_python_is_the_command(mdcr_source, tmp_path):
    """index builds what the index command builds (BM25's analysed-text store), returning the
    pools; a bad engine is refused by BM25_ENGINE's check, in the API's words."""
    corpus, _ = mdcr_source
    roots = {door: tmp_path / door for door in ("api", "cli")}
    for root in roots.values():
        shutil.copytree(corpus, root / "corpora" / "small")  # its pools with it
    pool = next(p for p in pool_names(corpus) if p.startswith("medicine"))
    assert pipeline.index(roots["api"], "small", pool, "bm25", threads=1) == [pool]
    command(roots["cli"], "index", "--corpus", "small", "--model", "bm25", "--pool", pool,
            "--threads", "1")
    assert files(roots["api"] / "indexes") == files(roots["cli"] / "indexes") != {}
    with pytest.raises(InputError, match="index: bm25_engine='solr'"):
        pipeline.index(roots["api"], "small", pool, "bm25", bm25_engine="solr")


def test_the_mdcr_stages_from_python_are_their_commands(doors, tmp_path, capsys):
    """build_mdcr writes the benchmark mdcr writes, returning its manifest; mdcr_jaccard the
    table mdcr-jaccard prints; mdcr_scores the scores file of mdcr-scores; mdcr_evaluate the
    numbers mdcr-evaluate prints."""
    api, cli = doors["api"], doors["cli"]
    built = pipeline.build_mdcr(api, "small", "bm25", "bench")
    command(cli, "mdcr", "--corpus", "small", "--models", "bm25", "--out", "bench")
    assert files(api / "corpora" / "bench") == files(cli / "corpora" / "bench")
    assert built["benchmark"]["pools"] == pool_names(api / "corpora" / "bench")

    capsys.readouterr()
    table = pipeline.mdcr_jaccard(api, "small", ["bm25", "bm25"], depth=5)
    command(cli, "mdcr-jaccard", "--corpus", "small", "--models", "bm25,bm25", "--depth", "5")
    text = report_file(reports_dir(cli / "runs"), "small", "mdcr-jaccard").read_text()
    assert capsys.readouterr().out == text + "\n"
    assert text == report_file(reports_dir(api / "runs"), "small", "mdcr-jaccard").read_text()
    assert table.columns == ["a", "b", "jaccard", "fields", "queries"]
    assert table["jaccard"][0] == pytest.approx(1.0)

    for root in (api, cli):
        pipeline.search(root, "bench", None, "bm25", threads=1)
    scores = {door: tmp_path / f"{door}.json" for door in ("api", "cli")}
    n = pipeline.mdcr_scores(api, "bench", "bm25", scores["api"])
    command(cli, "mdcr-scores", "--corpus", "bench", "--model", "bm25", "--out",
            str(scores["cli"]))
    assert scores["api"].read_bytes() == scores["cli"].read_bytes()
    assert n == len(json.loads(scores["api"].read_text()))
    pipeline.export_mdcr(api, "bench", tmp_path / "export")
    official = tmp_path / "export" / "mdcr_test.json"
    fields, averages = pipeline.mdcr_evaluate(official, scores["api"])
    capsys.readouterr()
    command(cli, "mdcr-evaluate", "--benchmark", str(official), "--scores", str(scores["cli"]))
    assert capsys.readouterr().out == official_table(fields, averages) + "\n"
    assert fields.height == len(built["benchmark"]["pools"]) and averages["map"] > 0


def test_the_slurm_stages_from_python_are_their_commands(mdcr_source, tmp_path, monkeypatch,
                                                        capsys):
    """submit_embed writes and submits the job array submit-embed does, returning its id;
    after_embed submits the job after it, or runs its command here when every shard is in
    (its exit status the command's), as after-embed does. sbatch and squeue: stand-ins."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sbatch", "squeue"):
        (tools / tool).write_text("#!/bin/sh\necho 4242\n")
        (tools / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    corpus, _ = mdcr_source
    root = tmp_path / "data"
    shutil.copytree(corpus, root / "corpora" / "small")
    slurm = root / "runs" / "slurm"
    resources = ("--shards", "2", "--partition", "gpu", "--slurm-time", "1:00:00",
                 "--cpus-per-task", "2")
    assert pipeline.submit_embed(root, "small", None, "minilm", shards=2, partition="gpu",
                                 slurm_time="1:00:00", cpus_per_task=2) == "4242"
    script = (slurm / "embed-small-minilm.sbatch").read_text()
    assert "#SBATCH --array=0-1" in script and "#SBATCH --partition=gpu" in script
    capsys.readouterr()
    command(root, "submit-embed", "--corpus", "small", "--model", "minilm", *resources)
    assert capsys.readouterr().out == "4242\n"
    assert (slurm / "embed-small-minilm.sbatch").read_text() == script

    after = ["sh", "-c", "exit 3"]
    assert pipeline.api.after_embed(root, "small", None, "minilm", after, shards=2) == "4242"
    script = (slurm / "eval-small-minilm.sbatch").read_text()
    capsys.readouterr()
    command(root, "after-embed", "--corpus", "small", "--model", "minilm", "--shards", "2",
            "--", *after)
    assert capsys.readouterr().out == "4242\n"
    assert (slurm / "eval-small-minilm.sbatch").read_text() == script
    assert pipeline.api.after_embed(root, "small", None, "bm25", after) == 3  # nothing to embed
    with pytest.raises(SystemExit) as ran:
        main(["--corpora-root", str(root / "corpora"), "--index-root", str(root / "indexes"),
              "--runs-root", str(root / "runs"), "after-embed", "--corpus", "small", "--model",
              "bm25", "--", *after])
    assert ran.value.code == 3
    with pytest.raises(InputError, match="submit_embed: gpus_per_task='1': give a whole number"):
        pipeline.submit_embed(root, "small", None, "minilm", gpus_per_task="1")
