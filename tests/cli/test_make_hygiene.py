"""The Makefile's own hygiene: one model per MODEL, no TIME from the environment, PYTHON and
VENV never run as shell code, nothing written but by data targets, a moved data folder not
ingested again, imports that name the corpus they write.

Every case runs make as a user would, with DATA=<a fresh folder>; the stages themselves are
not run (PY=/bin/true, or make -n): these are checks of the Makefile, and they are quick.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import CHILD_BOUND_S, refusal

ROOT = Path(__file__).resolve().parents[2]
# make reads its variables from the environment too: a test sets the ones it means to
CLEARED = ("TIME", "SLURM_TIME", "CORPUS", "MODEL", "PYTHON", "VENV", "PY", "STAMP", "REPLACE",
           "METHOD", "MODELS", "SRC", "RAW", "DATA")


def make(root: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.update(MAKEFLAGS="", **(env or {}))
    return subprocess.run(["make", "--no-print-directory", f"DATA={root}", *args], cwd=ROOT,
                          capture_output=True, text=True, env=environ, timeout=CHILD_BOUND_S)


def refused(done: subprocess.CompletedProcess) -> str:
    """The one line of a refused call (exit status 2)."""
    assert not done.stdout, done.stdout
    return refusal(done)


def installed(root: Path) -> list[str]:
    """The stages run by the test's interpreter, the environment taken as installed."""
    (root / "installed").touch()
    return [f"PY={sys.executable}", f"STAMP={root / 'installed'}"]


def test_model_is_one_name(tmp_path):
    """Item 1: MODEL="bm25 random" passed the check and make died with "mixed implicit and
    normal rules"."""
    root = tmp_path / "data"
    pool = root / "corpora" / "c" / "pools" / "all-1k-r0"
    pool.mkdir(parents=True)
    (pool / "manifest.json").write_text("{}")  # a pool: make eval gets as far as its rules
    line = refused(make(root, "eval", "CORPUS=c", "MODEL=bm25 random"))
    assert "MODEL='bm25 random'" in line and "one model at a time" in line
    assert "DEMO_MODELS" in line and "mixed implicit" not in line
    assert "MODEL is empty" in refused(make(root, "eval", "CORPUS=c", "MODEL="))
    line = refused(make(root, "fuse", "CORPUS=c", "MODELS=bm25,random", "METHOD=rrf x"))
    assert "METHOD 'rrf x'" in line
    line = refused(make(root, "eval", "CORPUS=c", "MODEL=hf:org/name", "POOLING=cls mean"))
    assert "POOLING" in line
    assert [p.name for p in (root / "corpora" / "c").iterdir()] == ["pools"]  # no stamps


def test_time_in_the_environment_is_not_the_slurm_limit(tmp_path):
    """Item 2: GNU time's TIME='%e' in the environment blocked every target."""
    root = tmp_path / "data"
    env = {"TIME": "%e"}
    assert make(root, "help", env=env).returncode == 0
    assert "REPEATS: 0 is too small" in refused(make(root, "pool", "REPEATS=0", env=env))
    assert "SLURM_TIME: '4h'" in refused(make(root, "help", "SLURM_TIME=4h", env=env))
    old = make(root, "help", "TIME=4h")  # the command line's old spelling: no longer taken
    assert old.returncode == 2 and "unknown variable TIME on make's command line" in old.stderr
    # the limit the jobs get: SLURM_TIME; never the environment's TIME
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    env = {"TIME": "%e", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    slurm = ["-n", "embed", "EXECUTOR=slurm", *installed(tmp_path)]
    for extra, limit in (((), None), (("SLURM_TIME=90",), "--slurm-time '90'"),
                         (("SLURM_TIME=4:00:00",), "--slurm-time '4:00:00'")):
        done = make(root, *slurm, *extra, env=env)
        assert done.returncode == 0, done.stderr
        assert "submit-embed" in done.stdout
        assert (limit in done.stdout) if limit else ("--slurm-time" not in done.stdout)
    assert "SLURM_TIME" in make(root, "help").stdout
    assert not root.exists()


def test_python_and_venv_are_not_shell_code(tmp_path):
    """Item 3: `make help PYTHON='touch x; python3'` created x."""
    root = tmp_path / "data"
    owned = tmp_path / "x"
    for args, env in (((f"PYTHON=touch {owned}; python3",), None),
                      ((), {"PYTHON": f"touch {owned}; python3"}),
                      ((f"PYTHON=python3`touch {owned}`",), None),
                      ((f"PY=touch {owned}",), None),
                      ((f"PYTHON=$(shell touch {owned})",), None),
                      (("PYTHON=",), None)):
        line = refused(make(root, "help", *args, env=env))
        name = (args[0] if args else next(iter(env))).partition("=")[0]
        assert f"error: {name} " in line or "holds a '$'" in line, line
        assert not owned.exists(), f"{args or env} ran as shell code"
    # a VENV make cannot take as a file name (';' in a rule): make stops on it, before anything
    done = make(root, "help", f"VENV=.venv; touch {owned}")
    assert done.returncode == 2 and not done.stdout and not owned.exists(), done.stderr
    assert "error: VENV " in refused(make(root, "help", f"VENV=.venv/{owned}`x`"))
    assert make(root, "help", "PYTHON=python3").returncode == 0
    # run quoted: a plain path is still one word to the shell
    done = make(root, "-n", "models", *installed(tmp_path))
    assert f"'{sys.executable}' -m pipeline" in done.stdout
    assert not root.exists()


def test_a_dollar_or_a_line_break_never_runs(tmp_path):
    """make runs a '$' of its command line as make code when it passes the value to a recipe:
    refused by make before anything runs. One in the environment reaches the check verbatim,
    which refuses it, as it does a line break."""
    root = tmp_path / "data"
    owned = tmp_path / "owned"
    for goal in (("-n", "eval"), ("eval",)):
        line = refused(make(root, *goal, f"MODEL=$(shell touch {owned})"))
        assert "holds a '$'" in line and not owned.exists()
    line = refused(make(root, "eval", env={"MODEL": f"$(shell touch {owned})"}))
    assert line == "error: MODEL holds a '$', which make would run as code: give a plain value"
    assert "MODEL holds a line break" in refused(make(root, "eval", "MODEL=bm25\nrandom"))
    assert not owned.exists() and not root.exists()


def tiny_raw(root: Path) -> None:
    """A synthetic S2ORC release of 300 papers where `make corpus CORPUS=c` looks for it."""
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    generate(root / "corpora" / "c" / "s2orc", SyntheticConfig(n_papers=300, n_shards=2))


def stages_ran(done: subprocess.CompletedProcess) -> set[str]:
    """The corpus stages that did work (the others said they were up to date)."""
    assert done.returncode == 0, done.stderr[-2000:]
    return {stage for stage in ("ingest", "prefilter")
            if f"[{stage}] up to date" not in done.stderr}


def test_only_data_targets_write_anything(tmp_path):
    """Item 4: every call (make help, a refused one) wrote corpora/<CORPUS>/.params; a
    mistyped CORPUS left an empty corpus folder behind. Now make keeps no stamps at all: every
    stage decides by content whether it has work to do."""
    root = tmp_path / "data"
    root.mkdir()
    for args in (("help",), ("help", "CORPUS=typo"), ("models", *installed(tmp_path))):
        done = make(root, *args)
        assert done.returncode == 0, (args, done.stderr[-1000:])
    make(root, "verify", *installed(tmp_path))  # its verdict is the stage's, not tested here
    for args in (("corpus", "CITATIONS=bogus"), ("pool", "CORPUS=typo", "REPEATS=0"),
                 ("eval", "CORPUS=nothing-yet")):
        refused(make(root, *args))
    assert not (root / "corpora").exists(), list(root.rglob("*"))
    # a changed parameter redoes that stage (and what follows); the same ones redo nothing
    tiny_raw(root)
    corpus = ["corpus", "CORPUS=c", *installed(tmp_path)]
    assert stages_ran(make(root, *corpus)) == {"ingest", "prefilter"}
    assert not (root / "corpora" / "c" / ".params").exists()
    assert stages_ran(make(root, *corpus)) == set()
    assert stages_ran(make(root, *corpus, "CITATIONS=outbound")) == {"prefilter"}
    manifest = root / "corpora" / "c" / "manifest.json"
    assert '"citations": "outbound"' in manifest.read_text()
    assert stages_ran(make(root, *corpus, "CITATIONS=outbound", "STRICT=1")) == {"ingest"}
    before = manifest.read_bytes()
    refused(make(root, *corpus, "CITATIONS=either", "REPEATS=0"))
    assert manifest.read_bytes() == before  # refused: untouched


def test_moved_data_folder_is_not_ingested_again(tmp_path):
    """Item 5: the ingest stamp held RAW's absolute path, so a copied or moved data folder was
    ingested again by the next make. Ingest compares its raw shards by name and bytes (hashed
    only when their stat changed), never by the folder's path."""
    root = tmp_path / "data"
    tiny_raw(root)
    corpus = ["corpus", "CORPUS=c", *installed(tmp_path)]
    assert stages_ran(make(root, *corpus)) == {"ingest", "prefilter"}
    moved = tmp_path / "elsewhere" / "data"
    moved.parent.mkdir()
    shutil.move(root, moved)  # a rename: the files keep their times
    assert stages_ran(make(moved, *corpus)) == set()
    copied = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(moved), str(copied)], check=True)  # new times and inodes
    assert stages_ran(make(copied, *corpus)) == set()
    # the raw shards elsewhere (RAW outside the data folder): the same bytes, nothing to do
    outside = tmp_path / "raw"
    shutil.copytree(copied / "corpora" / "c" / "s2orc", outside)
    assert stages_ran(make(copied, *corpus, f"RAW={outside}")) == set()
    # raw shards removed after ingest (to save space): the ingested corpus is kept as it is
    shutil.rmtree(outside)
    done = make(copied, *corpus, f"RAW={outside}")
    assert stages_ran(done) == set() and f"{outside} does not exist (removed after the " \
        "ingest, or never made): the corpus ingested from" in done.stderr


def test_imports_name_the_corpus_they_write(tmp_path):
    """Item 6: make import-mdcr / import-beir without CORPUS wrote into the default corpus
    demo; REPLACE=1 is forwarded as --replace."""
    root = tmp_path / "data"
    src = tmp_path / "src"
    src.mkdir()
    for target in ("import-mdcr", "import-beir"):
        line = refused(make(root, target, f"SRC={src}", *installed(tmp_path)))
        assert line.endswith(f"error: make {target} needs CORPUS=<name of a new corpus> "
                             "(the corpus it writes)"), line
        done = make(root, "-n", target, f"SRC={src}", "CORPUS=new", *installed(tmp_path))
        assert done.returncode == 0 and f"{target} --corpus 'new'" in done.stdout
        assert "--replace" not in done.stdout
        done = make(root, "-n", target, f"SRC={src}", *installed(tmp_path),
                    env={"CORPUS": "new"})
        assert done.returncode == 0 and f"{target} --corpus 'new'" in done.stdout
        done = make(root, "-n", target, f"SRC={src}", "CORPUS=new", "REPLACE=1",
                    *installed(tmp_path))
        assert done.returncode == 0 and "--replace" in done.stdout
    done = make(root, "-n", "mdcr", "MDCR_MODELS=", "REPLACE=1", *installed(tmp_path))
    assert done.returncode == 0 and "--out 'demo-mdcr'" in done.stdout
    assert "--replace" in done.stdout
    assert "REPLACE: '2'" in refused(make(root, "help", "REPLACE=2"))
    assert not root.exists()
    # the stages take the option
    for stage in ("import-mdcr", "import-beir", "mdcr"):
        done = subprocess.run([sys.executable, "-m", "pipeline", stage, "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=CHILD_BOUND_S)
        assert done.returncode == 0 and "--replace" in done.stdout, stage


def test_the_schedule_names_tests_that_exist():
    """make test's schedule (tests/conftest.py) names test modules, tests and fixtures: one
    renamed since would silently lose its place (a long test started late again) or its
    grouping (a fixture built once per run built on both workers, or not shared)."""
    from tests.conftest import BUILT_ONCE, LONG_FIRST

    files = {path.name: path.read_text() for path in (ROOT / "tests").rglob("test_*.py")}
    for entry in LONG_FIRST:
        module, _, test = entry.partition("::")
        assert module in files, f"LONG_FIRST: no test module {module}"
        name, _, param = test.partition("[")
        assert f"def {name}(" in files[module] or not name, f"LONG_FIRST: no {test}"
        assert f'"{param[:-1]}"' in files[module] or not param, f"LONG_FIRST: no id {param[:-1]}"
    assert len(set(LONG_FIRST)) == len(LONG_FIRST)
    for module, fixture in BUILT_ONCE:
        text = files[module]
        assert f"def {fixture}(" in text, f"BUILT_ONCE: no fixture {fixture} in {module}"
        body = text.split(f"def {fixture}(", 1)[1].split("\ndef ", 1)[0]
        assert "built_once(" in body, f"BUILT_ONCE: {module}'s {fixture} is built per worker"
