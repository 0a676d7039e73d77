"""A make goal is one Python process (issue 59): `make eval` reads make's variables once (from
MAKEFLAGS), checks them once and runs its chain (corpus, search, eval) in that process. Counted
by a sitecustomize on PYTHONPATH that records every Python start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
# Each Python start appends its command line to STARTS_LOG (site imports it at start-up)
COUNTER = """
import os, sys
with open(os.environ["STARTS_LOG"], "a") as log:
    log.write(" ".join(sys.orig_argv) + "\\n")
"""
SETTINGS = ["CORPUS=demo", "DEMO_PAPERS=3k", "QUERIES=20", "THREADS=1"]


def make(data: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    """make on `data` with this Python as the environment's (taken as installed)."""
    (data / "installed").parent.mkdir(parents=True, exist_ok=True)
    (data / "installed").touch()
    environ = {k: v for k, v in os.environ.items()
               if k not in ("CORPUS", "MODEL", "PYTHON", "VENV", "PY", "STAMP", "DATA")}
    environ.update(env or {}, MAKEFLAGS="")
    return subprocess.run(["make", "--no-print-directory", f"DATA={data}", f"PY={sys.executable}",
                           f"STAMP={data / 'installed'}", *SETTINGS, *args], cwd=ROOT,
                          capture_output=True, text=True, env=environ, timeout=CHILD_BOUND_S)


@pytest.mark.slow
def test_make_eval_with_nothing_to_do_starts_one_python_process(tmp_path):
    """Built once (pool, eval), a second `make eval` finds every stage current: one Python
    start in all, whose three stages (corpus, search, eval) each ran and kept what is there."""
    data = tmp_path / "data"
    for args in (("pool", "SIZE=1k"), ("eval", "MODEL=bm25")):
        done = make(data, *args)
        assert done.returncode == 0, done.stderr[-2000:]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(COUNTER)
    starts = tmp_path / "starts.log"
    env = {"PYTHONPATH": os.pathsep.join((str(site), str(ROOT))), "STARTS_LOG": str(starts)}
    done = make(data, "eval", "MODEL=bm25", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 current runs kept, 0 to search" in done.stderr
    assert "1 current evaluations kept, 0 to score" in done.stderr
    lines = starts.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith("-m pipeline goal eval"), lines
    ran = [line.split(" --runs-root ")[1].split()[1] for line in done.stdout.splitlines()
           if " --runs-root " in line]
    assert ran == ["corpus", "search", "eval"], done.stdout
    # the counter counts: a goal whose recipe starts a second Python (make help's) shows two
    starts.unlink()
    assert make(data, "eval", "MODEL=bm25", "help", env=env).returncode == 0
    assert len(starts.read_text().splitlines()) == 2
