"""Issue 39.10: a command that does not name the demo corpus's settings (DEMO_PAPERS, DEMO_SEED)
uses the corpus as it is; remaking it needs the settings given, and says so in a log line.

`make demo DEMO_PAPERS=20k`, then a plain `make fuse MODELS=bm25,random`, regenerated the demo
corpus at the default 120k (and with it every pool, index and run), with no line saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.files import read_json
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
# make reads its variables from the environment too: the test gives the ones it means to
CLEARED = ("CORPUS", "DEMO_PAPERS", "DEMO_SEED", "MODEL", "MODELS", "PYTHON", "VENV", "PY",
           "STAMP", "RAW", "DATA", "TIME", "SLURM_TIME")


def make(root: Path, *args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ["MAKEFLAGS"] = ""
    installed = root.parent / "installed"
    installed.touch()
    return subprocess.run(["make", "--no-print-directory", f"DATA={root}", f"PY={sys.executable}",
                           f"STAMP={installed}", *args], cwd=ROOT, capture_output=True,
                          text=True, env=environ, timeout=CHILD_BOUND_S)


def synth_settings(root: Path) -> dict:
    """The settings the demo's shards were generated with (the generator's manifest)."""
    return read_json(root / "corpora" / "demo" / "s2orc" / "manifest.json")["parameters"]


@pytest.mark.slow  # make corpus, three times
def test_commands_without_the_demo_settings_keep_the_demo_as_it_is(tmp_path):
    root = tmp_path / "data"
    done = make(root, "corpus", "CORPUS=demo", "DEMO_PAPERS=300")
    assert done.returncode == 0, done.stderr[-2000:]
    assert synth_settings(root)["n_papers"] == 300
    papers = root / "corpora" / "demo" / "papers.parquet"
    before = papers.read_bytes()

    # no DEMO_PAPERS: the corpus as it is, said in one line; nothing made again
    done = make(root, "corpus", "CORPUS=demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert synth_settings(root)["n_papers"] == 300 and papers.read_bytes() == before
    kept = [line for line in done.stderr.splitlines() if "as it is" in line]
    assert len(kept) == 1 and "300 papers" in kept[0] and "DEMO_PAPERS" in kept[0], done.stderr
    assert "[ingest] up to date" in done.stderr and "[prefilter] up to date" in done.stderr

    # every command that chains through the corpus, and make demo, pass no size they were
    # not given (make -n: the commands only)
    for goal in (["fuse", "MODELS=bm25,random"], ["pool"], ["pools"], ["demo"]):
        done = make(root, "-n", *goal, "CORPUS=demo")
        assert done.returncode == 0, (goal, done.stderr[-2000:])
        assert "120k" not in done.stdout and "--synth-seed" not in done.stdout, (goal, done.stdout)

    # the settings given: made again, and said so, naming both
    done = make(root, "corpus", "CORPUS=demo", "DEMO_PAPERS=400")
    assert done.returncode == 0, done.stderr[-2000:]
    assert synth_settings(root)["n_papers"] == 400 and papers.read_bytes() != before
    remade = [line for line in done.stderr.splitlines() if "generated again" in line]
    assert len(remade) == 1 and "300" in remade[0] and "400" in remade[0], done.stderr

    # one setting given: the others as they are (400 papers kept, the seed changed)
    done = make(root, "corpus", "CORPUS=demo", "DEMO_SEED=1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (synth_settings(root)["n_papers"], synth_settings(root)["seed"]) == (400, 1)


def demo_stages(tmp_path: Path, **variables: str) -> list[list[str]]:
    """The commands `make demo` runs, in order, as its goal makes them (make -n prints them):
    make's `variables` given, the data under `tmp_path`, nothing run."""
    from pipeline.cli.goals import GOALS
    from pipeline.cli.variables import GOALS_ENV, derived, read

    v = read({"DATA": str(tmp_path), GOALS_ENV: "demo", **variables})
    v.DRY_RUN = True
    return [step.argv() for step in GOALS["demo"].steps(v, derived(v))]


def models_of(stages: list[list[str]], name: str) -> list[str]:
    return [s[s.index("--model") + 1] for s in stages if s[0] == name]


def test_the_demo_embeds_only_the_models_it_is_asked_for(tmp_path):
    """`make demo DEMO_MODELS="bm25 random"` embedded MiniLM anyway (273 of its 295 s; issue
    46): the embed stage is each encoder of DEMO_MODELS, and none without one."""
    for models, embedded in (("bm25 random", []), ("bm25 minilm random", ["minilm"]),
                             ("scibert,bm25,minilm", ["scibert", "minilm"])):
        stages = demo_stages(tmp_path, DEMO_MODELS=models)
        assert models_of(stages, "embed") == embedded
        assert models_of(stages, "search") == models.replace(",", " ").split()
        assert models_of(stages, "eval") == models.replace(",", " ").split()


def test_the_demo_judges_a_sample_only_when_asked(tmp_path):
    """`make demo JUDGE=standin:1` (issue 60): after every model is searched and scored and
    before the report, the judging stage samples the demo models' runs with the stand-in (the
    report's "Beyond citations" section then exists); without JUDGE, no judging stage."""
    for judge in ({}, {"JUDGE": "standin:1", "SAMPLE": "4", "QUERY_VARIANT": "title"}):
        stages = demo_stages(tmp_path, DEMO_MODELS="bm25 random", **judge)
        names = [s[0] for s in stages]
        assert names[-1] == "report" and names[-2] == ("judge" if judge else "eval")
        assert names.count("judge") == (1 if judge else 0)
    judged = stages[-2]
    assert judged[judged.index("--models") + 1] == "bm25~title,random~title"  # the runs'
    assert judged[judged.index("--judge") + 1] == "standin:1"
    assert judged[judged.index("--sample") + 1] == "4"

    # make -n demo: JUDGE passed on only when given
    root = tmp_path / "data"
    plain, judging = make(root, "-n", "demo"), make(root, "-n", "demo", "JUDGE=standin:1")
    assert plain.returncode == 0 and judging.returncode == 0, judging.stderr[-2000:]
    assert "--judge " not in plain.stdout and "--judge 'standin:1'" in judging.stdout
