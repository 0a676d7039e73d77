"""The Makefile is thin (issues 31.4, 41, 59): each target runs one `python -m pipeline goal`
process, with no loop over stages and no make calling make; what a goal needs, and its chain,
are declared once (pipeline/cli/goals.py: TARGETS) and checked before any stage runs; `make
help` is generated from the same declaration. Quick: refused goals, and make -n."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.goals import GOALS, TARGET_NAMES, TARGETS, help_text, step, valued
from tests.conftest import CHILD_BOUND_S, refusal

ROOT = Path(__file__).resolve().parents[2]
CLEARED = ("TIME", "SLURM_TIME", "CORPUS", "MODEL", "MODELS", "PYTHON", "VENV", "PY", "STAMP",
           "SRC", "OUT", "DATA", "EXECUTOR", "MAKEFLAGS")
# The values a needed variable gets when the test does not leave it out.
VALUES = {"CORPUS": "new", "MODELS": "bm25,random", "SRC": "{tmp}/src", "OUT": "{tmp}/out",
          "PAPER_IDS": "{tmp}/paper-ids", "POOL": "all-10k-r0", "RUN": "{tmp}/run.trec",
          "MODEL": "outside-run", "DATASET": "beir/scidocs", "JUDGE": "standin:1"}
# a goal's own value where VALUES' would be refused by its rules: make rerank's MODEL reranks
GOAL_VALUES = {("rerank", "MODEL"): "ms-marco-minilm"}


def value(goal: str, name: str, tmp: Path) -> str:
    return GOAL_VALUES.get((goal, name), VALUES[name]).format(tmp=tmp)


def make(tmp: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    """make with DATA under tmp (a stage that ran would have made it) and this Python."""
    (tmp / "installed").touch()
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.update(env or {})
    return subprocess.run(["make", "--no-print-directory", f"DATA={tmp / 'data'}",
                           f"PY={sys.executable}",
                           f"STAMP={tmp / 'installed'}", *args], cwd=ROOT,
                          capture_output=True, text=True, env=environ, timeout=CHILD_BOUND_S)


def refused(done: subprocess.CompletedProcess) -> str:
    """The refusal's line; make printed its goal's one command, no stage's."""
    assert all(" -m pipeline goal " in line for line in done.stdout.splitlines()), done.stdout
    return refusal(done)


NEEDS = [(t.name, name) for t in TARGETS for name in t.needs]


def test_the_goals_that_need_a_variable():
    """The declaration names what the issue's hand-written errors checked."""
    assert set(NEEDS) == {("fuse", "MODELS"), ("mdcr-jaccard", "MODELS"), ("rerank", "MODEL"),
                          ("import-mdcr", "CORPUS"), ("import-mdcr", "SRC"),
                          ("import-beir", "CORPUS"), ("import-beir", "SRC"),
                          ("import-irds", "CORPUS"), ("import-irds", "DATASET"),
                          ("import-csfcube", "CORPUS"), ("import-csfcube", "SRC"),
                          ("export-mdcr", "OUT"), ("mdcr-scores", "OUT"), ("export-mteb", "OUT"),
                          ("export-beir", "CORPUS"), ("export-beir", "POOL"),
                          ("export-beir", "OUT"),
                          ("download", "CORPUS"),
                          ("training-ids", "SRC"), ("training-ids", "PAPER_IDS"),
                          ("training-ids", "OUT"), ("retire-pool", "CORPUS"),
                          ("retire-pool", "POOL"), ("import-run", "CORPUS"),
                          ("import-run", "RUN"),  # no POOL: a run of the whole collection
                          ("import-run", "MODEL"), ("import-vectors", "CORPUS"),
                          ("import-vectors", "MODEL"), ("import-vectors", "SRC"),
                          ("judge", "MODELS"), ("judge", "JUDGE"), ("judge-page", "MODELS"),
                          ("judge-agreement", "CORPUS"), ("judge-agreement", "JUDGE")}


@pytest.mark.slow  # ~100 make runs (47 s of make test-fast); the declaration: the test above
@pytest.mark.parametrize("goal, missing", NEEDS)
def test_a_goal_without_what_it_needs_is_one_line_before_anything_runs(goal, missing,
                                                                       tmp_path):
    target = next(t for t in TARGETS if t.name == goal)
    given = [f"{name}={value(goal, name, tmp_path)}" for name in target.needs
             if name != missing]
    for extra in ((), (f"{missing}=",)):  # left out, or given empty
        if missing == "CORPUS" and extra:
            continue  # CORPUS= is a bad corpus name: refused as such
        line = refused(make(tmp_path, goal, *given, *extra))
        assert f"error: make {goal} needs {missing}=" in line, line
        assert not (tmp_path / "data").exists()
    # with it, the goal goes ahead (make -n: its stages printed)
    done = make(tmp_path, "-n", goal, *given,
                f"{missing}={value(goal, missing, tmp_path)}", "SPLIT=test")
    assert "needs" not in done.stderr, done.stderr[-1000:]


def test_a_default_corpus_is_not_the_corpus_an_import_writes(tmp_path):
    """CORPUS given in the environment counts as given; its default never does."""
    line = refused(make(tmp_path, "import-beir", f"SRC={tmp_path}"))
    assert line.endswith("needs CORPUS=<name of a new corpus> (the corpus it writes)")
    done = make(tmp_path, "-n", "import-beir", f"SRC={tmp_path}", env={"CORPUS": "new"})
    assert done.returncode == 0 and "goal import-beir" in done.stdout, done.stderr


@pytest.mark.parametrize("goal", ["eval", "index", "search"])
def test_a_goal_on_pools_without_a_pool_is_one_line(goal, tmp_path):
    line = refused(make(tmp_path, goal, "CORPUS=c"))
    assert "no pools for CORPUS=c under" in line and "make pool CORPUS=c SIZE=10k" in line
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("goal", ["demo", "fuse"])
def test_goals_that_run_every_stage_here_refuse_slurm(goal, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    line = refused(make(tmp_path, goal, "EXECUTOR=slurm", "MODELS=bm25,random",
                        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}))
    assert f"make {goal} runs its stages on this machine" in line


def make_database() -> str:
    """What make knows once it has read the Makefile (`make -p`: its variables and rules, as
    make itself prints them), for the help target, which needs no variable."""
    done = subprocess.run(["make", "--no-print-directory", "-pn", "help", "PYTHON=python3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={k: v for k, v in os.environ.items() if k not in CLEARED})
    assert done.returncode == 0, done.stderr
    return done.stdout


def makefile_targets() -> set[str]:
    """The phony targets make knows (its database: `name: ...` then `#  Phony target`)."""
    return set(re.findall(r"^([a-z][a-z0-9-]*):.*\n#  Phony target", make_database(), re.M))


def test_help_lists_every_target_from_the_declaration(tmp_path):
    """`make help` (the default goal) prints TARGETS, every target of the Makefile, with the
    system python before any environment exists; nothing in the Makefile writes it."""
    assert {t.name for t in TARGETS} == makefile_targets()
    for goal in ((), ("help",)):
        done = subprocess.run(["make", "--no-print-directory", *goal, "PYTHON=python3",
                               f"VENV={tmp_path / 'no-venv'}"], cwd=ROOT, capture_output=True,
                              text=True, timeout=CHILD_BOUND_S,
                              env={k: v for k, v in os.environ.items() if k not in CLEARED})
        assert done.returncode == 0, done.stderr
        assert done.stdout == help_text()
    for target in TARGETS:
        assert re.search(rf"^make {re.escape(target.name)}( |$)", done.stdout, re.M), target
        assert target.help in done.stdout
    assert not (tmp_path / "no-venv").exists()


def test_every_goal_runs_the_goal_runner_and_nothing_else(tmp_path):
    """Each pipeline target (GOALS) is one recipe that runs its goal, `python -m pipeline goal
    <target>`, ONE process that runs the target's chain (Target.after) itself: `make -n
    <target>`, whose `+` recipe runs, shows make's one line, then only the stages' commands
    (no make running make, no second goal)."""
    pool = tmp_path / "data" / "corpora" / "new" / "pools" / "all-1k-r0"
    pool.mkdir(parents=True)
    (pool / "manifest.json").write_text("{}")
    for name in GOALS:
        needs = {"CORPUS": "new", **{variable: value(name, variable, tmp_path)
                                     for variable in TARGET_NAMES[name].needs}}
        done = make(tmp_path, "-n", name, *(f"{k}={v}" for k, v in needs.items()))
        assert done.returncode == 0, (name, done.stderr)
        lines = done.stdout.splitlines()
        assert lines[0].endswith(f" -m pipeline goal {name}"), (name, lines)
        assert all(" -m pipeline --corpora-root " in line or not line.startswith("'")
                   for line in lines[1:]), (name, lines)
    chain = make(tmp_path, "-n", "mdcr-scores", "CORPUS=new", "OUT=o.json").stdout
    assert [re.search(r"--runs-root '[^']*' (\S+)", line).group(1)
            for line in chain.splitlines()[1:]] == ["corpus", "search", "eval", "mdcr-scores"]


def test_a_stage_takes_each_value_and_leaves_out_an_empty_one():
    """A template's NAME is the derived value, else make's; an empty one goes with its option
    (RAW not given: no --raw); DEMO_PAPERS and DEMO_SEED only when given (the corpus as made)."""
    v = argparse.Namespace(MODELS="bm25,random", RAW=None, MODEL_FILE="make's",
                           DEMO_PAPERS="40", DEMO_SEED="0", GIVEN="MODELS DEMO_SEED")
    options = valued(v, {"MODEL_FILE": "st--org--name"}, ("models", "MODELS"),
                     ("raw", "RAW"), ("model", "MODEL_FILE"))
    assert step("judge", [*options, ("index", True)]).argv() == [
        "judge", "--models", "bm25,random", "--model", "st--org--name", "--index"]
    options = valued(v, {}, ("synthetic", "DEMO_PAPERS"), ("seed", "DEMO_SEED"))
    assert step("corpus", options).argv() == ["corpus", "--synth-seed", "0"]
    assert step("corpus", [("synthetic", "")]).argv() == ["corpus", "--synth"]  # as made
