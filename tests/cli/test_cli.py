"""Bad input on the make targets and the CLI: one line, exit status 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "MAKEFLAGS": ""}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("args,message", [
    (["pool", "FIELD=Medicin"], "unknown FIELD 'Medicin'"),
    (["demo", "DEMO_FIELDS=medicine physik"], "unknown FIELD 'physik'"),
    (["demo", "DEMO_FIELD_SIZE=0"], "DEMO_FIELD_SIZE"),
    (["corpus", "SOURCE=s2orc2"], "SOURCE"),
    (["corpus", "FOS_SOURCE=mag"], "FOS_SOURCE"),
    (["eval", "MODEL=bert-huge"], "unknown MODEL 'bert-huge'"),
    (["eval", "MODEL=hf:org/name", "POOLING=max"], "POOLING 'max' for org/name: use cls"),
    (["eval", "MODEL=hf:org//name"], "write a Hugging Face id as hf:<org>/<name>"),
    (["eval", "MODEL=scincl", "POOLING=cls"], "POOLING=cls is for MODEL=hf:<id>"),
    (["pool", "SIZE=20kk"], "malformed SIZE '20kk'"),
    (["pool", "SIZE=2G", "FIELD=Medicine"], "malformed SIZE '2G'"),
    (["embed", "EXECUTOR=pbs"], "EXECUTOR: 'pbs': use local"),
    (["embed", "SHARDS=0"], "SHARDS: 0 is too small"),
    (["embed", "SHARDS=4x"], "SHARDS: '4x' is not a whole number"),
    (["embed", "GPUS_PER_TASK=-1"], "GPUS_PER_TASK: -1 is too small"),
    (["embed", "TIME=4h"], "TIME: '4h': give a SLURM time limit"),
    (["eval", "PARTITION=gpu a100"], "PARTITION: 'gpu a100'"),
    (["eval", "MODEL=bm25", "BM25_ENGINE=solr"], "BM25_ENGINE: 'solr': use one of lucene"),
    (["search", "BACKEND=cuda"], "BACKEND: 'cuda': use one of auto"),
])
def test_make_rejects_bad_variables(args, message):
    done = run(["make", "--no-print-directory", *args])
    assert done.returncode == 2
    output = (done.stdout + done.stderr).strip().splitlines()
    assert len(output) == 1, output
    assert message in output[0]


def test_make_eval_without_pools_says_what_to_do(tmp_path):
    done = run(["make", "--no-print-directory", "eval", "CORPUS=no-such-corpus"])
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "make pool" in lines[0]


def test_cli_input_errors_are_one_line(tmp_path):
    cases = [
        ["pool", "--corpus", "nothing", "--size", "10k"],
        ["search", "--corpus", "nothing", "--model", "bm25", "--pool", "all-1k-r0"],
        ["check", "--field", "Alchemy"],
        ["ingest", "--corpus", "nothing"],
    ]
    for case in cases:
        done = run([sys.executable, "-m", "pipeline", "--corpora-root", str(tmp_path),
                    "--runs-root", str(tmp_path / "runs"), *case])
        assert done.returncode == 2, case
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, lines)
    assert not list(tmp_path.rglob("*.parquet"))


def test_check_runs_without_the_environment():
    """The Makefile validates with the system python: no third-party import allowed."""
    code = ("import sys; import pipeline.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'polars', 'torch', 'pyarrow', 'faiss', 'ranx')]; print(bad)")
    done = run([sys.executable, "-c", code])
    assert done.stdout.strip() == "[]"
