"""Bad input on the make targets and the CLI: one line, exit status 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHILD_BOUND_S, refusal

ROOT = Path(__file__).resolve().parents[2]


def run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "MAKEFLAGS": ""}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=CHILD_BOUND_S)


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
    (["embed", "SLURM_TIME=4h"], "SLURM_TIME: '4h': give a SLURM time limit"),
    (["eval", "PARTITION=gpu a100"], "PARTITION: 'gpu a100'"),
    (["eval", "MODEL=bm25", "BM25_ENGINE=solr"], "BM25_ENGINE: 'solr': use one of lucene"),
    (["search", "BACKEND=cuda"], "BACKEND: 'cuda': use one of auto"),
    (["mdcr", "CORPUS=demo", "MDCR=demo"], "MDCR=demo names the source corpus itself"),
    (["demo", "DEMO_MODELS=bm25,nope"], "DEMO_MODELS: unknown MODEL 'nope'"),
    (["demo", "DEMO_MODELS=bm25 Random"], "DEMO_MODELS: MODEL 'Random': write it as registered"),
])
def test_make_rejects_bad_variables(args, message):
    done = run(["make", "--no-print-directory", *args])
    assert message in refusal(done) and not done.stdout


def test_demo_models_are_separated_by_commas_or_spaces(tmp_path):
    """DEMO_MODELS as the demo reads it (commas or spaces): the check reads it so too."""
    for models in ("bm25,random", "bm25 random", "bm25, random"):
        done = run(["make", "--no-print-directory", "-n", "demo", f"DEMO_MODELS={models}",
                    f"DATA={tmp_path}"])
        assert done.returncode == 0, done.stderr
        assert [line.split(" --model ")[1].split()[0] for line in done.stdout.splitlines()
                if " search " in line] == ["'bm25'", "'random'"], done.stdout


def test_make_n_demo_prints_its_stages_and_changes_nothing(tmp_path):
    """make demo starts the demo's stage-times log afresh (the report's times are this run's);
    make -n demo only prints the stages: the log is left as it is."""
    log = tmp_path / "runs" / "demo" / "stage-times.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"stage": "embed"}\n')
    done = run(["make", "--no-print-directory", "-n", "demo", f"DATA={tmp_path}"])
    assert done.returncode == 0, done.stderr
    assert [line.split(" --runs-root ")[1].split()[1] for line in done.stdout.splitlines()
            if " --runs-root " in line][-1] == "report"
    assert log.read_text() == '{"stage": "embed"}\n'
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "runs", "runs/demo", "runs/demo/stage-times.jsonl"]


def test_make_demo_is_the_demo_corpus_whatever_corpus_says(tmp_path):
    """make demo makes and scores the demo corpus: CORPUS on make's command line or in the
    environment changes neither its corpus nor the defaults that follow CORPUS (SOURCE s2ag
    for s2ag, QUERIES 50 on the demo); a value given is kept."""
    for given, env in ((["CORPUS=other"], {}), ([], {"CORPUS": "s2ag"}),
                       (["QUERIES=7"], {"CORPUS": "s2ag"})):
        done = subprocess.run(["make", "--no-print-directory", "-n", "demo", f"DATA={tmp_path}",
                               *given], cwd=ROOT, capture_output=True, text=True,
                               timeout=CHILD_BOUND_S,
                              env={**os.environ, "MAKEFLAGS": "", **env})
        assert done.returncode == 0, done.stderr
        stages = [line.split(" --runs-root ")[1].split(" ", 1)[1]
                  for line in done.stdout.splitlines() if " --runs-root " in line]
        assert all(" --corpus 'demo'" in stage for stage in stages), stages
        assert "--source 's2orc'" in stages[0], stages[0]
        queries = "7" if given == ["QUERIES=7"] else "50"
        assert stages[1].startswith("pool ") and f"--queries '{queries}'" in stages[1], stages


def test_make_eval_without_pools_says_what_to_do(tmp_path):
    done = run(["make", "--no-print-directory", "eval", "CORPUS=no-such-corpus"])
    assert "make pool" in refusal(done) and not done.stdout


def test_cli_input_errors_are_one_line(tmp_path):
    cases = [
        ["pool", "--corpus", "nothing", "--size", "10k"],
        ["search", "--corpus", "nothing", "--model", "bm25", "--pool", "all-1k-r0"],
        ["check", "--field", "Alchemy"],
        ["ingest", "--corpus", "nothing"],
    ]
    spelled = [["eval", "--corpus", "nothing", "--model", "Bm25"],  # MODEL's rule, every door
               ["search", "--corpus", "nothing", "--model", "BM25~title"]]
    for case in cases + spelled:
        done = run([sys.executable, "-m", "pipeline", "--corpora-root", str(tmp_path),
                    "--runs-root", str(tmp_path / "runs"), *case])
        assert done.returncode == 2, case
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, lines)
        assert case not in spelled or "write it as registered, 'bm25'" in lines[0], lines
    assert not list(tmp_path.rglob("*.parquet"))


def test_check_runs_without_the_environment():
    """The Makefile validates with the system python: no third-party import allowed."""
    code = ("import sys; import pipeline.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'polars', 'torch', 'pyarrow', 'faiss', 'ranx')]; print(bad)")
    done = run([sys.executable, "-c", code])
    assert done.stdout.strip() == "[]"


def test_every_command_declares_what_it_writes_and_is_refused_before_it_runs(tmp_path):
    """Each command declares the folders it writes into (Command.writes), checked before any
    work: make download into a data folder that cannot be one (a file in its place) is one
    line naming it, before the download asks for its key (download declared nothing once)."""
    from pipeline.cli.commands import COMMANDS
    from pipeline.cli.registry import WRITES

    assert all(set(entry.writes) <= set(WRITES) for entry in COMMANDS.values())
    assert "corpora" in COMMANDS["download"].writes and "runs" in COMMANDS["submit-embed"].writes
    blocked = tmp_path / "corpora"
    blocked.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "S2_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(blocked),
                           "download", "--corpus", "s2ag"], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=CHILD_BOUND_S)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {blocked} is a file, not a folder: move it "
                                        "away or point DATA (or the --*-root options) elsewhere"]
