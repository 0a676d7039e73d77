"""The Makefile chains the stages through real files: `make eval` builds what is missing for
the pools that exist, and a second run does nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHILD_BOUND_S, copy_corpus

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(raw_corpus, corpus_dir, tmp_path_factory) -> Path:
    """A data root holding the small corpus: its raw shards, and a copy of it ingested and
    prefiltered (no pools)."""
    root = tmp_path_factory.mktemp("data")
    copy_corpus(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (root / "installed").touch()  # newer than pyproject.toml: make does not reinstall
    return root


def make(data: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # the test's interpreter runs the stages
    cmd = ["make", "--no-print-directory", f"DATA={data}", "CORPUS=small", "THREADS=1",
           f"PY={sys.executable}", f"STAMP={data / 'installed'}", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**os.environ, "MAKEFLAGS": ""})
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done


def stage_records(data: Path) -> list[dict]:
    path = data / "runs" / "small" / "stage-times.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stage_pids(data: Path, stage: str, skip: int = 0) -> dict[str, int]:
    """pool -> process id of the stage's records in the stage-times log (after the first
    `skip` records)."""
    return {r["pool"]: r["pid"] for r in stage_records(data)[skip:]
            if r["stage"] == stage and "pool" in r}


def test_pool_eval_report_chain(data):
    make(data, "pool", "SIZE=800 1600", "QUERIES=15")
    make(data, "pool", "FIELD=medicine", "SIZE=700", "QUERIES=10")
    pools = sorted(p.name for p in (data / "corpora" / "small" / "pools").iterdir()
                   if not p.name.startswith("."))  # not the pools' lock files
    assert pools == ["all-1600-r0", "all-800-r0", "medicine-700-r0"]
    # each stage on its own; Lucene's index (the default arrays engine indexes in memory)
    indexed = make(data, "index", "MODEL=bm25", "BM25_ENGINE=lucene")
    assert indexed.stdout.count(" index ") == 1 and " search " not in indexed.stdout
    assert len(stage_pids(data, "index")) == 3
    # every pool searched by one process (one JVM), then scored by one process
    searched = make(data, "search", "MODEL=bm25")
    assert searched.stdout.count(" search ") == 1 and " eval " not in searched.stdout
    searches = stage_pids(data, "search")
    assert sorted(searches) == pools and len(set(searches.values())) == 1
    assert not list((data / "runs" / "small").glob("*/bm25.eval.json"))
    logged = len(stage_records(data))
    first = make(data, "eval", "MODEL=bm25")
    assert first.stdout.count(" eval ") == 1 and not stage_pids(data, "search", logged)
    assert "3 current runs kept, 0 to search" in first.stderr
    evals = stage_pids(data, "eval")
    assert sorted(evals) == pools and len(set(evals.values())) == 1
    for pool in pools:
        assert (data / "indexes" / "small" / pool / "bm25" / "manifest.json").exists()
        run = json.loads((data / "runs" / "small" / pool / "bm25.manifest.json").read_text())
        assert run["details"]["engine"] == "arrays"
        info = json.loads((data / "runs" / "small" / pool / "bm25.eval.json").read_text())
        assert info["means"]["map"] > 0
        assert (data / "runs" / "small" / pool / "bm25.parquet").exists()  # kept by make
    logged = len(stage_records(data))
    again = make(data, "eval", "MODEL=bm25")
    assert "3 current evaluations kept, 0 to score" in again.stderr
    assert not stage_pids(data, "search", logged) and not stage_pids(data, "eval", logged)
    # a run lost since: that pool alone is searched and scored again
    before = {p: (data / "runs" / "small" / p / "bm25.parquet").stat().st_mtime_ns
              for p in pools}
    (data / "runs" / "small" / "all-800-r0" / "bm25.parquet").unlink()
    logged = len(stage_records(data))
    redo = make(data, "eval", "MODEL=bm25")
    assert sorted(stage_pids(data, "search", logged)) == ["all-800-r0"]
    # the same bytes again: its evaluation is kept, not recomputed
    assert not stage_pids(data, "eval", logged) and "3 current evaluations kept" in redo.stderr
    for pool in ("all-1600-r0", "medicine-700-r0"):
        assert (data / "runs" / "small" / pool / "bm25.parquet").stat().st_mtime_ns == \
            before[pool]
    make(data, "eval", "MODEL=random")
    # fusion: the components' runs of each pool, fused, scored
    make(data, "fuse", "MODELS=bm25,random", "METHOD=rrf")
    fused = "fuse--rrf--bm25--random"
    assert all((data / "runs" / "small" / p / f"{fused}.eval.json").exists() for p in pools)
    logged = len(stage_records(data))
    make(data, "fuse", "MODELS=bm25,random")
    assert not stage_pids(data, "search", logged) and not stage_pids(data, "eval", logged)
    (data / "runs" / "small" / "all-800-r0" / "random.parquet").unlink()
    logged = len(stage_records(data))
    make(data, "fuse", "MODELS=bm25,random")
    # the lost component run is searched again, alone; the same bytes, so the fused run is kept
    # (tests/retrieval/test_fusion.py: a changed component makes it stale)
    assert stage_pids(data, "search", logged).keys() == {"all-800-r0"}
    report = make(data, "report").stdout
    assert "| bm25 |" in report and "| random |" in report and "Stage times" in report
    assert (data / "runs" / "reports" / "small-map-vs-pool-size.png").exists()


def test_changed_settings_rebuild_what_they_change(data):
    """Defects 5 and 11: a changed CITATIONS rebuilt nothing; SEED=1 overwrote seed-0 pools;
    a failed collect was never redone."""
    corpus = data / "corpora" / "small"
    if not (corpus / "pools").exists():
        make(data, "pool", "SIZE=800", "QUERIES=15")
        make(data, "eval", "MODEL=bm25")
    out = make(data, "corpus", "CITATIONS=outbound").stderr
    assert "[ingest] up to date" in out and "[prefilter] up to date" not in out
    sections = json.loads((corpus / "manifest.json").read_text())
    assert sections["prefilter"]["parameters"]["citations"] == "outbound"
    logged = len(stage_records(data))
    make(data, "eval", "MODEL=bm25", "CITATIONS=outbound")
    assert "all-800-r0" in stage_pids(data, "search", logged)  # its pool was rebuilt
    pool = json.loads((corpus / "pools" / "all-800-r0" / "manifest.json").read_text())
    assert pool["inputs"]["corpora/@/prefiltered.parquet"] == \
        sections["prefilter"]["outputs"]["prefiltered.parquet"]["sha256"]
    logged = len(stage_records(data))
    make(data, "eval", "MODEL=bm25", "CITATIONS=outbound")
    assert not stage_pids(data, "search", logged) and not stage_pids(data, "eval", logged)
    # results.parquet lost after evaluation: the next make writes it again
    (data / "runs" / "results.parquet").unlink()
    assert "collect" in make(data, "eval", "MODEL=bm25", "CITATIONS=outbound").stdout
    assert (data / "runs" / "results.parquet").exists()
    # a second seed is a second pool, never an overwrite
    make(data, "pool", "SIZE=800", "QUERIES=15", "SEED=1", "CITATIONS=outbound")
    pools = sorted(p.name for p in (corpus / "pools").iterdir()
                    if not p.name.startswith("."))
    assert "all-800-r0" in pools and "all-800-s1-r0" in pools


def test_pools_paper_builds_the_grid_with_validation_pools(data):
    """`make pools-paper`: dataset- and field-level pools, repeats, test and validation."""
    make(data, "pools-paper", "PAPER_SIZES=800 1600", "PAPER_QUERIES=10",
         "PAPER_FIELD_SIZE=400", "PAPER_FIELD_QUERIES=4", "PAPER_REPEATS=2")
    pools = {p.name for p in (data / "corpora" / "small" / "pools").iterdir()
             if not p.name.startswith(".")}
    for split in ("", "-val"):
        for size in ("800", "1600"):
            assert {f"all-{size}-r0{split}", f"all-{size}-r1{split}"} <= pools
        assert f"medicine-400-r0{split}" in pools
    bad = make(data, "pools-paper", "PAPER_REPEATS=0", check=False)
    assert bad.returncode == 2 and "PAPER_REPEATS: 0 is too small" in bad.stderr


def test_mdcr_benchmark_chain(raw_corpus, corpus_dir, tmp_path_factory):
    """make mdcr builds the benchmark corpus from field-level pools and runs; make eval scores
    it like any corpus (no ingest), a second time redoes nothing; the official files go out and
    come back in (string ids), with a scores file the official evaluation reads."""
    root = tmp_path_factory.mktemp("mdcr-data")
    copy_corpus(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (root / "installed").touch()
    make(root, "pool", "FIELD=medicine biology", "SIZE=600", "QUERIES=8")
    built = make(root, "mdcr", "MDCR_MODELS=bm25")
    # one process: the models' searches, then the benchmark
    assert [line.split(" --runs-root ")[1].split()[1] for line in built.stdout.splitlines()
            ] == ["corpus", "search", "mdcr"], built.stdout
    assert "[search] bm25:" in built.stderr and (root / "corpora" / "small-mdcr" / "pools" /
                                            "medicine-65-r0" / "candidates.parquet").exists()
    scored = make(root, "eval", "CORPUS=small-mdcr", "MODEL=bm25")
    assert " ingest " not in scored.stdout and " prefilter " not in scored.stdout
    info = json.loads((root / "runs" / "small-mdcr" / "medicine-65-r0" / "bm25.eval.json")
                      .read_text())
    assert set(info["means"]) == {"map", "ndcg", "recall@5"}  # METRICS=auto: the mdcr set
    assert {"official", "graph", "random", "most_cited", "bm25"} == set(
        info["means_by_negatives"])  # "official": the lists the official evaluator reads
    again = make(root, "eval", "CORPUS=small-mdcr", "MODEL=bm25")
    assert "current runs kept, 0 to search" in again.stderr
    assert "current evaluations kept, 0 to score" in again.stderr
    official = root / "official"
    make(root, "export-mdcr", "CORPUS=small-mdcr", f"OUT={official}")
    make(root, "import-mdcr", "CORPUS=mdcr", f"SRC={official}")
    make(root, "mdcr-scores", "CORPUS=mdcr", "MODEL=bm25", f"OUT={root / 'scores.json'}")
    done = subprocess.run([sys.executable, "-m", "pipeline", "mdcr-evaluate", "--benchmark",
                           str(official / "mdcr_test.json"), "--scores",
                           str(root / "scores.json")], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert done.stdout.splitlines()[-1].startswith("AVG\tmap: ")
    report = make(root, "report", "CORPUS=mdcr").stdout
    assert "MDCR Table 3" in report and "| bm25 |" in report
    jaccard = make(root, "mdcr-jaccard", "MODELS=bm25,random").stdout
    assert "| bm25 | random |" in jaccard and "the 10 highest-ranked negatives" in jaccard
    for args, message in ((("mdcr", "MDCR_MODELS=nope"), "MDCR_MODELS: 'nope'"),
                          (("import-mdcr", "CORPUS=x"), "needs SRC="),
                          (("mdcr-jaccard",), "needs MODELS="),
                          (("export-mdcr", "CORPUS=small-mdcr", "SPLIT=train"), "SPLIT")):
        bad = make(root, *args, check=False)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr[-500:])


def test_beir_collection_and_query_variants_through_make(tmp_path_factory):
    """make import-beir, then make eval on it (no ingest; METRICS=auto: nDCG@10, R@100);
    QUERY_VARIANT runs beside the full-query runs, and a second make redoes nothing."""
    root = tmp_path_factory.mktemp("beir-data")
    (root / "installed").touch()
    src = root / "collection"
    (src / "qrels").mkdir(parents=True)
    docs = {"a": "protein folding contacts", "b": "graph neural networks", "c": "soil carbon"}
    (src / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": k, "title": v, "text": v}) + "\n" for k, v in docs.items()))
    (src / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": "protein folding"})
                                       + "\n" + json.dumps({"_id": "2", "text": "soil"}) + "\n")
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\ta\t2\n2\tc\t1\n")
    make(root, "import-beir", f"SRC={src}", "CORPUS=tiny")
    scored = make(root, "eval", "CORPUS=tiny", "MODEL=bm25")
    assert " ingest " not in scored.stdout
    [pool] = [p.name for p in (root / "runs" / "tiny").iterdir() if p.name.startswith("beir")]
    info = json.loads((root / "runs" / "tiny" / pool / "bm25.eval.json").read_text())
    assert info["means"] == {"ndcg@10": 1.0, "recall@100": 1.0}
    make(root, "eval", "CORPUS=tiny", "MODEL=bm25", "QUERY_VARIANT=typos")
    assert (root / "runs" / "tiny" / pool / "bm25~typos.eval.json").exists()
    again = make(root, "eval", "CORPUS=tiny", "MODEL=bm25", "QUERY_VARIANT=typos")
    assert "1 current runs kept, 0 to search" in again.stderr
    bad = make(root, "import-beir", "CORPUS=x", check=False)
    assert bad.returncode == 2 and "needs SRC=" in bad.stderr
