"""Workers die with the stage that started them, also when it died before they were ready."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.processes import worker_pool
from tests.conftest import CHILD_BOUND_S

CHILD = ("import os, sys; from pipeline.core.processes import die_with_parent; "
         "die_with_parent({parent}); print('alive')")


def run_child(parent: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD.format(parent=parent)],
                          capture_output=True, text=True, timeout=CHILD_BOUND_S)


def test_a_child_whose_parent_is_gone_exits_at_once():
    # the pid given is not the child's parent: as if the stage died before the worker started
    done = run_child("os.getppid() + 1 if os.getppid() > 1 else 2")
    assert done.returncode == 1 and "alive" not in done.stdout


def test_a_child_of_a_living_parent_works():
    done = run_child("os.getppid()")
    assert done.returncode == 0 and done.stdout.strip() == "alive"


def test_the_pool_runs_its_work():
    with worker_pool(2) as pool:
        assert list(pool.map(abs, [-1, -2, 3])) == [1, 2, 3]


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    """Spawned workers never import the script that started them: one without an
    `if __name__ == "__main__":` guard (the README's example) runs once, and its pool works
    (imported again, it would start a pool in each worker and fail, or wait for its locks)."""
    script = tmp_path / "example.py"
    script.write_text("from pipeline.core.processes import worker_pool\n"
                      "print('started', flush=True)\n"
                      "with worker_pool(2) as pool:\n"
                      "    print(sum(pool.map(abs, [-1, -2, -3])))\n")
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=CHILD_BOUND_S, cwd=tmp_path, env={**os.environ,
                          "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["started", "6"], done.stdout


KILLS_THE_TRACKER = """
import os, signal, sys, time
from pathlib import Path
from pipeline.core.processes import worker_pool


def tracker() -> int:
    '''multiprocessing's resource tracker: the child of this process that runs it.'''
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rpartition(")")[2].split()[1]) == os.getpid() and \\
                    b"resource_tracker" in (stat.parent / "cmdline").read_bytes():
                return int(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue
    raise SystemExit("no resource tracker")


if __name__ == "__main__":
    with worker_pool(2) as pool:
        print(sum(pool.map(abs, [-1, -2, -3])), flush=True)
        os.kill(tracker(), int(sys.argv[1]))
        time.sleep(0.5)
        print(sum(pool.map(abs, [-4, -5])), flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_resource_tracker_prints_no_library_text(sig, tmp_path):
    """Issue 78: killing multiprocessing's resource tracker (started for a pool's spawned
    workers) printed its warning ('process died unexpectedly, relaunching') and, at exit, the
    relaunched tracker's KeyError tracebacks for the semaphores it never knew. Now the pool
    works on and nothing but its own output is printed."""
    script = tmp_path / "kills_the_tracker.py"
    script.write_text(KILLS_THE_TRACKER)
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, str(script), str(int(sig))], capture_output=True,
                          text=True, timeout=CHILD_BOUND_S, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["6", "9"] and done.stderr == ""
