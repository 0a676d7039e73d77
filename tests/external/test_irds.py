"""ir_datasets collections (issue 40.5): the real package reads files placed where it keeps
its downloads (IR_DATASETS_HOME/beir/scidocs/source.zip, the archive BEIR publishes), so
nothing is downloaded; the corpus equals make import-beir's of the same files, and is scored.
IR_DATASETS_HOME is read when ir_datasets is first imported: each import runs in a process of
its own."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.external.beir import import_beir
from pipeline.external.irds import import_irds, load_dataset
from pipeline.layout import POOL_FILES, PREFILTERED, pool_names
from pipeline.options.checks import corpus_name
from tests.conftest import CHILD_BOUND_S
from tests.external.test_beir import collection  # noqa: F401  the tiny BEIR collection

ROOT = Path(__file__).resolve().parents[2]
# BeirSciDoc and BeirSciQuery read these fields of a record's metadata
SCIDOCS_METADATA = {"authors": [], "year": 2020, "cited_by": [], "references": []}


def place_scidocs(src: Path, home: Path) -> None:
    """BEIR's files at `src` as ir_datasets finds SciDocs' download: the zip at its cache
    path, each record with the metadata fields SciDocs' records carry."""
    archive = home / "beir" / "scidocs" / "source.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("corpus.jsonl", "queries.jsonl"):
            lines = [json.dumps({**json.loads(line), "metadata": SCIDOCS_METADATA})
                     for line in (src / name).read_text().splitlines()]
            zipped.writestr(f"scidocs/{name}", "\n".join(lines) + "\n")
        zipped.write(src / "qrels" / "test.tsv", "scidocs/qrels/test.tsv")


def run_pipeline(home: Path, data: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(data / "corpora"), "--index-root", str(data / "indexes"),
                           "--runs-root", str(data / "runs"), *argv],
                          env=env, capture_output=True, text=True, cwd=data)


@pytest.fixture(scope="module")
def imported(collection, tmp_path_factory):  # noqa: F811
    """The tiny collection imported by make import-irds (from the zip) and by make
    import-beir (from the folder)."""
    root = tmp_path_factory.mktemp("irds")
    home, data = root / "irds-home", root / "data"
    place_scidocs(collection, home)
    data.mkdir()
    done = run_pipeline(home, data, "import-irds", "--corpus", "scidocs", "--dataset",
                        "beir/scidocs")
    assert done.returncode == 0, done.stderr[-3000:]
    import_beir(collection, data / "corpora" / "scidocs-beir")
    return data, home, done.stderr


def test_a_beir_dataset_through_ir_datasets_is_the_corpus_import_beir_makes(imported):
    data, _, log = imported
    irds, beir = data / "corpora" / "scidocs", data / "corpora" / "scidocs-beir"
    assert pool_names(irds) == pool_names(beir) and len(pool_names(irds)) == 1
    [pool] = pool_names(irds)
    for file in (PREFILTERED, *(Path("pools") / pool / f for f in POOL_FILES)):
        assert (irds / file).read_bytes() == (beir / file).read_bytes(), file
    manifest = json.loads((irds / "manifest.json").read_text())["collection"]
    assert manifest["stage"] == "import-irds"
    assert manifest["parameters"]["source"] == "ir_datasets:beir/scidocs"
    assert manifest["counts"] == json.loads((beir / "manifest.json").read_text())[
        "collection"]["counts"]
    counts = manifest["counts"]  # as test_beir's: the unknown document, the unjudged query
    assert counts["qrels_dropped_unknown_document_or_query"] == 1
    assert counts["queries_without_qrels_left_out"] == 1
    assert f"[import-irds] corpus scidocs (new), pool {pool}: 301 documents" in log


def test_an_imported_collection_is_searched_and_scored(imported):
    """Searched and scored like any corpus (the API, as make eval): every judged query scored
    with the BEIR metric set, equal to the BEIR import's corpus searched the same way."""
    import pipeline

    data, _, _ = imported
    means = {}
    for corpus in ("scidocs", "scidocs-beir"):
        [pool] = pool_names(data / "corpora" / corpus)
        pipeline.search(data, corpus, pool, "bm25")
        means[corpus] = pipeline.evaluate(data, corpus, pool, "bm25", means=True)
        values = pl.read_parquet(data / "runs" / corpus / pool / "bm25.metrics.parquet")
        assert values.filter(pl.col("negatives") == "all").height == 8  # every judged query
    assert means["scidocs"].columns == ["model", "ndcg@10", "recall@100"]
    assert means["scidocs"]["ndcg@10"][0] > 0 and means["scidocs"]["recall@100"][0] > 0
    assert means["scidocs"].equals(means["scidocs-beir"])


def test_a_damaged_collection_names_the_import_that_repairs_it(imported, tmp_path):
    """The repair of an ir_datasets collection's files imports the dataset again (DATASET=,
    not the SRC= of a BEIR folder)."""
    from pipeline.corpus.manifest import corpus_repair

    data, _, _ = imported
    command = corpus_repair(data / "corpora" / "scidocs").command()
    assert command.startswith("make import-irds CORPUS=scidocs DATASET=beir/scidocs "
                              "SPLIT=test REPLACE=1"), command


def test_the_api_imports_the_same_collection(imported, tmp_path):
    """pipeline.import_collection returns the pool's name; the same dataset again changes
    nothing."""
    data, home, _ = imported
    script = ("import pipeline, sys; print(pipeline.import_collection(sys.argv[1], "
              "'beir/scidocs', corpus='api'))")
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == pool_names(data / "corpora" / "scidocs")[0]
    assert (tmp_path / "corpora" / "api" / PREFILTERED).read_bytes() == (
        data / "corpora" / "scidocs" / PREFILTERED).read_bytes()


def test_judged_the_judged_only_pool_is_import_beirs(imported, collection, tmp_path):  # noqa: F811
    """JUDGED=1 through ir_datasets: the judged-only pool beside the whole corpus's, each of
    its files the bytes import-beir writes from the same collection."""
    data, home, _ = imported
    done = run_pipeline(home, data, "import-irds", "--corpus", "judged", "--dataset",
                        "beir/scidocs", "--judged")
    assert done.returncode == 0, done.stderr[-3000:]
    import_beir(collection, tmp_path / "beir", judged=True)
    pools = pool_names(data / "corpora" / "judged")
    assert pools == pool_names(tmp_path / "beir") and any(p.startswith("judged-") for p in pools)
    for pool in pools:
        for name in POOL_FILES:
            assert (data / "corpora" / "judged" / "pools" / pool / name).read_bytes() == (
                tmp_path / "beir" / "pools" / pool / name).read_bytes()


@pytest.mark.parametrize("dataset, match", [
    ("beir/scidoc", r"DATASET 'beir/scidoc' is not an ir_datasets id: the nearest known: "
                    r"beir/scidocs"),
    ("beir", r"DATASET 'beir' has no documents and no queries and no qrels"),
    ("beir/nfcorpus", r"DATASET 'beir/nfcorpus' has no qrels: .* its subsets has them, e\.g\. "
                      r"beir/nfcorpus/dev"),
])
def test_unknown_and_incomplete_datasets_are_one_line(dataset, match, tmp_path):
    with pytest.raises(InputError, match=match) as error:
        import_irds(dataset, tmp_path / "corpora" / "x")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "corpora").exists()


def test_a_dataset_id_as_a_corpus_name_names_the_import():
    """Issue 40: build_pool(data, 'beir/scidocs') read the id as the folder
    corpora/beir/scidocs; a corpus name with a slash is refused, and one that is an
    ir_datasets id names the command that imports it, by the API and the command line."""
    import pipeline

    with pytest.raises(InputError, match=r"^build_pool: corpus='beir/scidocs': .*'beir/scidocs' "
                                         r"is an ir_datasets id: import it as a corpus with make "
                                         r"import-irds DATASET=beir/scidocs CORPUS=scidocs$"):
        pipeline.build_pool("data", "beir/scidocs", size=100)
    with pytest.raises(argparse.ArgumentTypeError, match="a corpus name is") as error:
        corpus_name("not/a-dataset")
    assert "ir_datasets" not in str(error.value)
    done = subprocess.run([sys.executable, "-m", "pipeline", "pool", "--corpus",
                           "beir/scidocs"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "make import-irds DATASET=beir/scidocs CORPUS=scidocs" in done.stderr
    assert load_dataset("beir/scidocs").has_qrels()


@pytest.mark.slow
def test_make_passes_ir_datasets_home_to_the_import(collection, tmp_path):  # noqa: F811
    """IR_DATASETS_HOME on make's command line (issue 50: refused as an unknown variable) is
    where ir_datasets finds the placed files: the import reads them, downloading nothing."""
    home = tmp_path / "irds home"
    place_scidocs(collection, home)
    (tmp_path / "installed").touch()  # the install stamp: make installs nothing
    done = subprocess.run(
        ["make", "--no-print-directory", f"DATA={tmp_path / 'data'}", f"PY={sys.executable}",
         f"STAMP={tmp_path / 'installed'}", "import-irds", "CORPUS=viamake",
         "DATASET=beir/scidocs", f"IR_DATASETS_HOME={home}"], cwd=ROOT, capture_output=True,
        text=True, env={k: v for k, v in os.environ.items() if k != "IR_DATASETS_HOME"}
        | {"MAKEFLAGS": ""}, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(pool_names(tmp_path / "data" / "corpora" / "viamake")) == 1


def test_a_missing_download_names_the_file_to_place(tmp_path):
    """Offline, with nothing under IR_DATASETS_HOME: the error names the file ir_datasets
    wanted, relative to that folder (issue 50: it named the folder only). The download is
    made to fail as it fails without network, so nothing is fetched."""
    script = ("import sys\nfrom pathlib import Path\n"
              "from ir_datasets.util.download import RequestsDownload\n"
              "def offline(self):\n    raise ConnectionError('no network')\n"
              "RequestsDownload.__iter__ = offline\n"
              "from pipeline.core.errors import InputError\n"
              "from pipeline.external.irds import import_irds\n"
              "try:\n    import_irds('beir/scifact/test', Path(sys.argv[1]))\n"
              "except InputError as exc:\n    print(exc)\n")
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "corpora" / "sf")],
                          env=env, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"its files live under IR_DATASETS_HOME ({tmp_path / 'home'}), where "
            "beir/scifact/source.zip is missing: place it there") in done.stdout, done.stdout
    assert not (tmp_path / "corpora").exists()


def test_a_missing_download_is_the_one_line_said(tmp_path):
    """Issue 56: with an empty IR_DATASETS_HOME and no network, ir_datasets' own lines (each
    download try and retry, its progress bars) came first and buried the useful one. Now the
    command says one line, naming the missing file and where to put it. The network fails as
    it fails offline (requests' ConnectionError, which ir_datasets retries), nothing fetched."""
    script = ("import sys, requests\n"
              "def offline(*args, **kwargs):\n"
              "    raise requests.exceptions.ConnectionError('no network')\n"
              "requests.get = offline\n"
              "from pipeline.cli.main import main\n"
              "raise SystemExit(main(sys.argv[1:]))\n")
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, "--corpora-root",
                           str(tmp_path / "corpora"), "import-irds", "--corpus", "sf",
                           "--dataset", "beir/scifact/test"],
                          env=env, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ir_datasets could not read beir/scifact/test")
    assert lines[0].endswith(f"its files live under IR_DATASETS_HOME ({tmp_path / 'home'}), "
                             "where beir/scifact/source.zip is missing: place it there (a "
                             "node without network) or download it again"), lines[0]
    assert not (tmp_path / "corpora" / "sf").exists()
