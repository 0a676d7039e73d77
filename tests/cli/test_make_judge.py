"""Issue 60 through make, on a scratch DATA holding the session's small corpus: `make judge`
samples and judges each pool's unjudged top-ranked candidates, `make judge-page` writes the
judging page, `make report` gets the "Beyond citations" section, whose numbers are
`pipeline.inferred` on the same files; a rerun of the three changes no byte. One model is
enough to judge (MODELS's fusion rule is make fuse's), and fusing one is still refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.checksums import CHECKSUMS
from pipeline.judging.assessor import StandinAssessor
from pipeline.judging.stage import sampling
from pipeline.layout import (
    judging_page_path,
    pool_names,
    sample_path,
)
from tests.conftest import CHILD_BOUND_S, copy_corpus, refusal
from tests.judging.test_wiring import assert_means_are_inferred

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("bm25", "random")
STANDIN = StandinAssessor(1)
SIZES = ("800", "1600")
JUDGE = ("MODELS=bm25,random", f"JUDGE={STANDIN.name}", "SAMPLE=4")
# make reads its variables from the environment too: the test gives the ones it means to
CLEARED = ("CORPUS", "MODEL", "MODELS", "JUDGE", "JUDGE_URL", "SAMPLE", "SAMPLE_SEED",
           "JUDGE_DEPTH", "PYTHON", "VENV", "PY", "STAMP", "DATA")


def make(data: Path, *args: str) -> subprocess.CompletedProcess:
    """make on `data` (corpus small, this interpreter as the installed environment's)."""
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ["MAKEFLAGS"] = ""
    return subprocess.run(["make", "--no-print-directory", f"DATA={data}", "CORPUS=small",
                           "THREADS=1", f"PY={sys.executable}",
                           f"STAMP={data / 'installed'}", *args],
                          cwd=ROOT, capture_output=True, text=True, env=environ,
                          timeout=CHILD_BOUND_S)


def ok(data: Path, *args: str) -> subprocess.CompletedProcess:
    done = make(data, *args)
    assert done.returncode == 0, (args, done.stderr[-2000:])
    return done


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def means_table(report: str, assessor: str) -> pl.DataFrame:
    """The report's Markdown table of the judged means (pools, metric, model, ...,
    citations, with the sample): the one under the heading `beyond citations, judged by`."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ")
                 and f"beyond citations, judged by {assessor}" in line)
    rows = []
    for line in lines[start:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    header, body = rows[0], rows[2:]
    return pl.DataFrame(body, schema=header, orient="row")


@pytest.fixture(scope="module")
def data(raw_corpus, corpus_dir, tmp_path_factory) -> Path:
    """A scratch DATA holding the small corpus (raw shards and the ingested copy), its two
    pools built and searched by BM25 and the random floor through make."""
    root = tmp_path_factory.mktemp("judge-data")
    copy_corpus(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (root / "installed").touch()  # newer than pyproject.toml: make does not reinstall
    ok(root, "pool", f"SIZE={' '.join(SIZES)}", "QUERIES=15")
    for model in MODELS:
        ok(root, "eval", f"MODEL={model}")
    return root


@pytest.mark.slow  # make pool, eval (twice), judge, judge-page, report, then all again
def test_make_judge_page_and_report_through_make(data):
    ok(data, "judge", *JUDGE)
    page = ok(data, "judge-page", *JUDGE[::2]).stdout  # MODELS and SAMPLE: no assessor
    assert str(judging_page_path(data / "runs", "small")) in page
    report = ok(data, "report")
    text = (data / "runs" / "reports" / "small.md").read_text()
    headings = [line for line in text.splitlines()
                if line.startswith(f"## small: beyond citations, judged by {STANDIN.name} ")]
    assert len(headings) == 1 and "NOT a judgment of relevance" in headings[0], report.stdout

    # the section's infAP with the sample is pipeline.inferred on the same files
    pools = pool_names(data / "corpora" / "small")
    assert len(pools) == len(SIZES)
    assert_means_are_inferred(means_table(text, STANDIN.name), data / "corpora" / "small",
                              data / "runs", pools, MODELS, STANDIN)

    # a rerun of the three changes no byte (the stage-times log aside, which logs each run,
    # and the hidden stat caches beside the checksums, which record the files' inodes)
    before = files(data / "runs")
    ok(data, "judge", *JUDGE)
    ok(data, "judge-page", *JUDGE[::2])
    ok(data, "report")
    after = files(data / "runs")
    times = re.compile(rf"(^|/)(stage-times\.jsonl|{re.escape(CHECKSUMS)})$")
    assert {k: v for k, v in after.items() if not times.search(k)} == {
        k: v for k, v in before.items() if not times.search(k)}

    # one model is enough to judge; fusing one is refused, as before
    done = ok(data, "judge", "MODELS=bm25", f"JUDGE={STANDIN.name}", "SAMPLE=4")
    assert "[judge]" in done.stderr
    for pool in pools:
        one = sampling(["bm25"], 4).name  # a sample of its own: MODELS=bm25,random's kept
        assert pl.read_parquet(sample_path(data / "runs", "small", pool, one)).height > 0
    line = refusal(make(data, "fuse", "MODELS=bm25"))
    assert "MODELS needs two or more different models" in line
    # the assessor's own refusal, in make's words (the command line's: --judge)
    labels = data / "bad-labels.tsv"
    labels.write_text("query\tdoc\tgrade\n")
    line = refusal(make(data, "judge", "MODELS=bm25", f"JUDGE=file:{labels}"))
    assert line.startswith(f"error: JUDGE=file:{labels}: its first line is not the header"), line
