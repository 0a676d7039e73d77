"""One door (issue 72): the corpus and pool stages and make download are API functions that
their commands are (pipeline/cli/registry.py, command_of): synth, ingest, prefilter, corpus,
pool (make pool and make pools), pools-paper, retire-pool, training-ids and download. Called
from Python, each writes what its command writes, times it into the same stage-times log, and
returns what it made."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.main import main
from pipeline.core.errors import InputError
from pipeline.layout import DOWNLOAD_MANIFEST, pool_names
from tests.conftest import copy_corpus
from tests.test_api_doors import command, every_manifest_a_new_time, files  # noqa: F401


def stages(root: Path, corpus: str) -> list[str]:
    """The stages timed into the corpus's stage-times log under `root`, in order."""
    log = root / "runs" / corpus / "stage-times.jsonl"
    return [json.loads(line)["stage"] for line in log.read_text().splitlines()]


def corpus_files(root: Path) -> dict[str, bytes | object]:
    """The files under root's corpora/ (files: a manifest's fields but its times), a corpus
    manifest's sections without what differs between two data folders and two runs: the raw
    folder's path, the shards' stat and the seconds of each phase."""
    found = files(root / "corpora")
    for name, content in found.items():
        if name.count("/") == 1 and name.endswith("/manifest.json"):
            assert isinstance(content, dict)
            for section in content.values():
                if isinstance(section, dict):
                    section.get("parameters", {}).pop("raw_dir", None)
                    section.pop("phase_seconds", None)
                    section["inputs"] = sorted(section.get("inputs", {}))
    return found


def mtimes(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_corpus_stages_from_python_are_their_commands(tmp_path):
    """generate_corpus, ingest_corpus and prefilter_corpus write what synth, ingest and
    prefilter write, each returning its record; build_corpus is make corpus's command, its
    synthetic shards as made with synthetic='' (a bare --synth): nothing written again."""
    api, cli = tmp_path / "api", tmp_path / "cli"
    made = pipeline.generate_corpus(api, "c", papers="1500", shards=1, seed=3)
    command(cli, "synth", "--corpus", "c", "--papers", "1500", "--shards", "1", "--seed", "3")
    assert made["parameters"]["n_papers"] == 1500 and made["counts"]["papers"] == 1500
    ingested = pipeline.ingest_corpus(api, "c", threads=1)
    command(cli, "ingest", "--corpus", "c", "--threads", "1")
    prefiltered = pipeline.prefilter_corpus(api, "c", citations="outbound", min_citations=2)
    command(cli, "prefilter", "--corpus", "c", "--citations", "outbound", "--min-citations",
            "2")
    assert ingested["parameters"]["source"] == "s2orc" and ingested["counts"]["papers"] > 0
    assert prefiltered["parameters"]["citations"] == "outbound"
    assert corpus_files(api) == corpus_files(cli)
    assert stages(api, "c") == stages(cli, "c") == ["synth", "ingest", "prefilter"]

    corpus = pipeline.build_corpus(api, "d", synthetic="1500", seed=3)
    command(cli, "corpus", "--corpus", "d", "--synth", "1500", "--synth-seed", "3")
    assert corpus == pipeline.Data(api).corpus("d")
    assert corpus_files(api) == corpus_files(cli)
    assert stages(api, "d") == stages(cli, "d") == ["synth", "ingest", "prefilter"]
    before = {root: mtimes(root / "corpora" / "d") for root in (api, cli)}
    assert pipeline.build_corpus(api, "d", synthetic="") == corpus
    command(cli, "corpus", "--corpus", "d", "--synth")
    assert {root: mtimes(root / "corpora" / "d") for root in (api, cli)} == before
    with pytest.raises(InputError, match="build_corpus: synthetic='big'"):
        pipeline.build_corpus(api, "d", synthetic="big")


def test_the_pool_commands_from_python_are_their_commands(corpus_dir, tmp_path):
    """build_pools is the pool command: a grid of sizes, fields and repeats, --rebuild and
    --repair (make pools), returning the pools' names; retire_pool is retire-pool."""
    api, cli = tmp_path / "api", tmp_path / "cli"
    for root in (api, cli):
        copy_corpus(corpus_dir, root / "corpora" / "c")
    grid = pipeline.build_pools(api, "c", size="800 1000", repeats=2, queries=10, seed=2)
    command(cli, "pool", "--corpus", "c", "--size", "800 1000", "--repeats", "2", "--queries",
            "10", "--seed", "2")
    field = pipeline.build_pools(api, "c", size=800, field="medicine", queries=5)
    command(cli, "pool", "--corpus", "c", "--size", "800", "--field", "medicine", "--queries",
            "5")
    assert grid == ["all-800-s2-r0", "all-800-s2-r1", "all-1k-s2-r0", "all-1k-s2-r1"]
    assert field == ["medicine-800-r0"]
    assert pool_names(api / "corpora" / "c") == sorted(grid + field)
    assert files(api / "corpora") == files(cli / "corpora")
    assert stages(api, "c") == stages(cli, "c") == ["pool"] * 5
    # make pools: a damaged pool built again, by either door
    for root in (api, cli):
        (root / "corpora" / "c" / "pools" / grid[0] / "qrels.parquet").write_bytes(b"damaged")
    assert pipeline.build_pools(api, "c", repair=True) == sorted(grid + field)
    command(cli, "pool", "--corpus", "c", "--repair")
    assert pipeline.build_pools(api, "c", rebuild=[grid[1]]) == [grid[1]]
    command(cli, "pool", "--corpus", "c", "--rebuild", grid[1])
    assert files(api / "corpora") == files(cli / "corpora")
    with pytest.raises(InputError, match=r"^pool: give size \(e.g. 20k\)"):
        pipeline.build_pools(api, "c")
    with pytest.raises(InputError, match="build_pools: repeats='2': give a whole number"):
        pipeline.build_pools(api, "c", size=800, repeats="2")

    moves = pipeline.retire_pool(api, "c", grid[0])
    command(cli, "retire-pool", "--corpus", "c", "--pool", grid[0])
    assert moves == [(api / "corpora" / "c" / "pools" / grid[0],
                      api / "corpora" / "c" / "retired" / grid[0])]
    assert files(api / "corpora") == files(cli / "corpora")
    assert grid[0] not in pool_names(api / "corpora" / "c")


def test_the_papers_grid_from_python_is_pools_paper(corpus_dir, tmp_path):
    """build_paper_pools writes the test and validation pools pools-paper writes, returning
    their names; its refusals name its own arguments, as the command's name its options."""
    api, cli = tmp_path / "api", tmp_path / "cli"
    for root in (api, cli):
        copy_corpus(corpus_dir, root / "corpora" / "c")
    names = pipeline.build_paper_pools(api, "c", paper_sizes="800", paper_queries=5,
                                       paper_field_size=300, paper_field_queries=2,
                                       paper_repeats=1)
    command(cli, "pools-paper", "--corpus", "c", "--paper-sizes", "800", "--paper-queries",
            "5", "--paper-field-size", "300", "--paper-field-queries", "2", "--paper-repeats",
            "1")
    assert sorted(names) == pool_names(api / "corpora" / "c")
    assert {name for name in names if name.startswith("all-")} >= {"all-800-r0"}
    assert files(api / "corpora") == files(cli / "corpora")
    with pytest.raises(InputError, match=r"ask for fewer queries \(paper_queries\)"):
        pipeline.build_paper_pools(api, "c", paper_sizes="1M")


def test_training_ids_from_python_is_the_command(tmp_path):
    """training_ids (no data folder) writes the list training-ids writes, returning counts."""
    from tests.ingest.test_training_ids import SHAS, paper_ids

    src = tmp_path / "train.txt"
    src.write_text("".join(f"{sha}\n" for sha in SHAS))
    ids = paper_ids(tmp_path / "paper-ids", [{"sha": sha, "corpusid": 10 + i, "primary": True}
                                             for i, sha in enumerate(SHAS[:2])])
    counts = pipeline.training_ids(src, ids, tmp_path / "api.txt")
    assert main(["training-ids", "--src", str(src), "--paper-ids", str(ids), "--out",
                 str(tmp_path / "cli.txt")]) == 0
    assert counts == {"shas": 3, "corpus_ids": 2, "shas_not_found": 1}
    assert (tmp_path / "api.txt").read_text() == (tmp_path / "cli.txt").read_text() == "10\n11\n"


def test_download_from_python_is_the_command(tmp_path, monkeypatch, caplog):
    """download fetches what the download command fetches from a local Datasets API, returns
    its summary, and says the make corpus command that ingests it, for its data folder."""
    from tests.ingest.s2ag_server import KEY, S2Server
    from tests.ingest.test_download import LAST, RELEASES

    api, cli = tmp_path / "api", tmp_path / "cli"
    with S2Server(RELEASES) as server, caplog.at_level(logging.INFO, logger="pipeline"):
        monkeypatch.setenv("S2_API_URL", server.url)
        monkeypatch.setenv("S2_API_KEY", KEY)
        summary = pipeline.download(api, "s2ag", release=LAST, first=1, parallel=2, retries=2,
                                    backoff=0.01)
        said = caplog.text
        command(cli, "download", "--corpus", "s2ag", "--release", LAST, "--first", "1",
                "--parallel", "2", "--retries", "2", "--backoff", "0.01")
    assert summary["release"] == LAST
    assert all(got["files"] == 1 for got in summary["datasets"].values())
    assert f"next: make corpus CORPUS=s2ag SOURCE=s2ag DATA={api}" in said

    def fetched(root: Path) -> dict[str, bytes | object]:
        return {name: content for name, content in files(root / "corpora").items()
                if not name.endswith(DOWNLOAD_MANIFEST)}

    assert fetched(api) == fetched(cli) and len(fetched(api)) == 3
