"""One door (issue 59): the imports and exports of outside formats, and verify, are API
functions that their commands are (pipeline/cli/registry.py, command_of). Called from Python
on the fixtures the commands' tests use, each writes byte for byte what its command writes,
and returns what it wrote."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.main import CONSOLE_SCRIPT, main
from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import pool_names
from tests.external.test_csfcube import release  # noqa: F401
from tests.external.test_judged import bm25_means, imported, scidocs  # noqa: F401

TIMES = ("created", "seconds", "self_sha256")  # a manifest's own time, and its digest of it


@pytest.fixture(autouse=True)
def every_manifest_a_new_time(monkeypatch) -> None:
    """Each manifest written gets a time of its own, as two doors a second apart do: the
    comparisons below must hold whatever the clock."""
    from pipeline.core import manifests

    counter = itertools.count()
    monkeypatch.setattr(manifests.time, "strftime", lambda form, when: f"time {next(counter)}")


def _timeless(value: object) -> object:
    """`value` (a manifest's JSON) without its times, at any depth."""
    if isinstance(value, dict):
        return {key: _timeless(item) for key, item in value.items() if key not in TIMES}
    return [_timeless(item) for item in value] if isinstance(value, list) else value


def _content(path: Path) -> bytes | object:
    """A file's bytes; a manifest's fields but its times (two doors a second apart differ in
    `created` alone)."""
    if path.name != "manifest.json":
        return path.read_bytes()
    return _timeless(json.loads(path.read_text()))


def files(folder: Path) -> dict[str, bytes | object]:
    """Every file under `folder` (its path relative to it) -> its content (`_content`); not the
    hidden ones (checksum caches: inodes and times; locks)."""
    return {p.relative_to(folder).as_posix(): _content(p)
            for p in sorted(folder.rglob("*")) if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def command(root: Path, *argv: str) -> None:
    """The command line on the data root `root`, in this process: exit status 0."""
    assert main(["--corpora-root", str(root / "corpora"), "--index-root", str(root / "indexes"),
                 "--runs-root", str(root / "runs"), *argv]) == 0


def data_of(root: Path) -> pipeline.Data:
    return pipeline.Data(root)


def test_import_beir_and_export_mteb_from_python_are_their_commands(scidocs, tmp_path):  # noqa: F811
    """import_beir writes the corpus and pools import-beir writes, returning the pool's name;
    export_mteb the TaskResult files export-mteb writes, returning them."""
    api, cli = tmp_path / "api", tmp_path / "cli"
    pool = pipeline.import_beir(data_of(api), scidocs, corpus="s", judged=True)
    command(cli, "import-beir", "--corpus", "s", "--src", str(scidocs), "--judged")
    assert files(api / "corpora") == files(cli / "corpora")
    assert [pool, "judged-30-r0"] == pool_names(api / "corpora" / "s")
    assert pipeline.import_beir(api, str(scidocs), corpus="s", judged=True) == pool  # no change
    with pytest.raises(InputError, match="split='train'"):
        pipeline.import_beir(api, scidocs, corpus="s", split="train")

    for root in (api, cli):
        bm25_means(root / "corpora" / "s", root, root / "runs")
    written = pipeline.export_mteb(data_of(api), "s", "bm25", tmp_path / "mteb-api")
    command(cli, "export-mteb", "--corpus", "s", "--model", "bm25", "--out",
            str(tmp_path / "mteb-cli"))
    assert files(tmp_path / "mteb-api") == files(tmp_path / "mteb-cli")
    assert [p.relative_to(tmp_path / "mteb-api").as_posix() for p in written] == [
        f"bm25/no_revision_available/s.{pool}.json" for pool in pool_names(api / "corpora" / "s")]
    assert json.loads(written[0].read_text()) == pipeline.mteb_result(
        api, "s", pool_names(api / "corpora" / "s")[0], "bm25")
    with pytest.raises(InputError, match="has no run of minilm"):
        pipeline.export_mteb(api, "s", "minilm", tmp_path / "none")
    with pytest.raises(InputError, match="export_mteb: model='../bm25'"):
        pipeline.export_mteb(api, "s", "../bm25", tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_import_csfcube_from_python_is_the_command(release, tmp_path):  # noqa: F811
    """import_csfcube writes what import-csfcube writes, returning the facet pools' names."""
    src, _ = release
    api, cli = tmp_path / "api", tmp_path / "cli"
    pools = pipeline.import_csfcube(api, src, corpus="csf")
    command(cli, "import-csfcube", "--corpus", "csf", "--src", str(src))
    assert files(api / "corpora") == files(cli / "corpora")
    assert sorted(pools) == pool_names(api / "corpora" / "csf") and len(pools) == 3
    with pytest.raises(InputError, match="replace=1"):
        pipeline.import_csfcube(api, src, corpus="csf", replace=1)


def test_export_and_import_mdcr_from_python_are_their_commands(mdcr_benchmark, tmp_path):
    """export_mdcr writes the official files export-mdcr writes (returning their counts);
    import_mdcr reads them back as import-mdcr does, returning the fields' pools."""
    corpus, _ = mdcr_benchmark
    source = tmp_path / "source"  # the benchmark corpus in a data root of this test's own
    (source / "corpora").mkdir(parents=True)
    (source / "corpora" / "b").symlink_to(corpus)
    info = pipeline.export_mdcr(source, "b", tmp_path / "api-out")
    command(source, "export-mdcr", "--corpus", "b", "--out", str(tmp_path / "cli-out"))
    assert files(tmp_path / "api-out") == files(tmp_path / "cli-out")
    assert sorted(files(tmp_path / "api-out")) == ["mdcr_test.json", "mdcr_test_data.jsonl"]
    official = json.loads((tmp_path / "api-out" / "mdcr_test.json").read_text())
    assert info["fields"] == len(official) and info["queries"] == sum(map(len, official.values()))

    api, cli = tmp_path / "api", tmp_path / "cli"
    pools = pipeline.import_mdcr(api, tmp_path / "api-out", corpus="m")
    command(cli, "import-mdcr", "--corpus", "m", "--src", str(tmp_path / "api-out"))
    assert files(api / "corpora") == files(cli / "corpora")
    assert pools == pool_names(api / "corpora" / "m") and len(pools) == len(official)
    assert pipeline.import_mdcr(api, tmp_path / "api-out", corpus="m") == pools  # no change
    with pytest.raises(InputError, match="split='train'"):
        pipeline.export_mdcr(api, "m", tmp_path / "x", split="train")


def test_verify_names_the_program_that_repairs_as_the_user_ran_it(mdcr_source, tmp_path,
                                                                  monkeypatch, capsys):
    """A stale results.parquet is repaired by the pipeline's collect: verify_data names it
    `python -m pipeline` (or `program`), the verify command as the user called it."""
    root = tmp_path / "data"
    shutil.copytree(mdcr_source[1], root)  # times kept: staleness compares them
    data = pipeline.Data(root)
    pool = pool_names(root / "corpora" / "small")[0]
    place = data.place("small")
    eval_run(place, pool, "bm25")
    collect_results(data.corpora, data.indexes, data.runs)
    eval_run(place, pool, "bm25", metrics=["precision@7"])  # results.parquet: stale
    [line] = [p for p in pipeline.verify_data(data, deep=False) if p.startswith("STALE")]
    assert line.endswith(f"--runs-root {data.runs} collect")
    assert line.split("; repair: ")[1].startswith("python -m pipeline --corpora-root")
    named = pipeline.verify_data(data, data.runs, program=CONSOLE_SCRIPT)
    assert named == [line.replace("python -m pipeline", CONSOLE_SCRIPT)]
    monkeypatch.setattr(sys, "argv", [str(Path(sys.executable).parent / CONSOLE_SCRIPT)])
    with pytest.raises(SystemExit) as stopped:
        main(["--corpora-root", str(data.corpora), "--index-root", str(data.indexes),
              "--runs-root", str(data.runs), "verify", "--quick", str(data.runs)])
    assert stopped.value.code == 1
    assert capsys.readouterr().out == named[0] + "\n"
    with pytest.raises(InputError, match="verify_data: program=''"):
        pipeline.verify_data(data, program="")


@pytest.mark.parametrize("roots", ["data", "runs apart"])
def test_a_repair_from_python_names_the_data_it_was_called_with(tmp_path, roots):
    """A refusal's repair from the API is the command for the data of the call: make's DATA,
    or each root where they are not one folder's (it used to name the checkout's data)."""
    (tmp_path / "d" / "corpora" / "c").mkdir(parents=True)
    data = pipeline.Data(tmp_path / "d") if roots == "data" else pipeline.Data(
        tmp_path / "d", runs=tmp_path / "elsewhere")
    where = (f"DATA={tmp_path / 'd'}" if roots == "data" else
             f"CORPORA_DIR={tmp_path / 'd' / 'corpora'} INDEX_DIR={tmp_path / 'd' / 'indexes'} "
             f"RUNS_DIR={tmp_path / 'elsewhere'}")
    for call in (lambda: pipeline.search(data, "c", None, "bm25"),
                 lambda: pipeline.embed(str(tmp_path / "d") if roots == "data" else data, "c",
                                        None, "minilm")):
        with pytest.raises(InputError) as caught:
            call()
        assert str(caught.value).endswith(f"; repair: make pool CORPUS=c {where}")
