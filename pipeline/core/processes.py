"""Child processes that end with the stage that started them.

A stage killed mid-run (Ctrl-C, SLURM's time limit, `kill`) must not leave workers behind that
go on writing into its scratch folder or hold the CPU: every child asks Linux to SIGKILL it
when its parent dies.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """In a child: be killed with SIGKILL when the parent process dies (Linux; else a no-op).
    `parent`: the parent's pid, so that a child whose parent died before this call (a kill
    while the pool was starting) exits at once instead of living on unseen."""
    if sys.platform == "linux":
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


class _Worker(multiprocessing.context.SpawnProcess):
    """A spawned worker that does not import the script that started it: a script without an
    `if __name__ == "__main__":` guard (the README's example) would run again in each worker,
    wait for the locks its parent holds, and hang. Workers run the pipeline's functions only."""

    def start(self) -> None:
        main = sys.modules["__main__"]
        saved = {key: main.__dict__[key] for key in ("__file__", "__spec__")
                 if key in main.__dict__}
        main.__dict__.pop("__file__", None)  # spawn re-imports __main__ by its file or spec
        main.__spec__ = None
        try:
            super().start()
        finally:
            main.__dict__.update(saved)


class _Spawn(multiprocessing.context.SpawnContext):
    Process = _Worker


def worker_pool(workers: int, start: str = "spawn") -> ProcessPoolExecutor:
    """A process pool whose workers die with this process (spawned ones never run the
    script again: _Worker). Create it (and submit to it) from the main thread: Linux ties the
    death signal to the thread that started the worker."""
    context = _Spawn() if start == "spawn" else multiprocessing.get_context(start)
    return ProcessPoolExecutor(workers, mp_context=context,
                               initializer=die_with_parent, initargs=(os.getpid(),))
