"""Child processes that end with the stage that started them.

A stage killed mid-run (Ctrl-C, SLURM's time limit, `kill`) must not leave workers behind that
go on writing into its scratch folder or hold the CPU: every child asks Linux to SIGKILL it
when its parent dies. multiprocessing's resource tracker (a process of its own that spawned
children share) may be killed too: it is relaunched where needed, without its library warning
(`quiet_tracker`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_PR_SET_PDEATHSIG = 1
# multiprocessing's warning when its resource tracker is gone (a user killed it): it
# relaunches one; what it tracks (the pools' semaphores) is the stage's to end, which it does
TRACKER_DIED = "resource_tracker: process died unexpectedly"


def quiet_tracker() -> None:
    """A resource tracker killed by a user prints no library text from this process, for its
    life: no 'resource_tracker: process died unexpectedly, relaunching' warning, and no
    KeyError traceback of the relaunched tracker told to forget a name it never knew (the
    semaphores of a pool made before the kill, unregistered as late as exit): `_Quiet`.
    Idempotent."""
    from multiprocessing import resource_tracker

    warnings.filterwarnings("ignore", message=TRACKER_DIED)
    tracker = resource_tracker._resource_tracker
    if isinstance(getattr(resource_tracker.unregister, "__self__", None), _Quiet) or not all(
            hasattr(tracker, name) for name in ("_fd", "_lock", "_check_alive")):
        return  # installed, or a Python whose tracker this does not know: as it is
    quiet = _Quiet(tracker)
    resource_tracker.register, resource_tracker.unregister = quiet.register, quiet.unregister


class _Quiet:
    """multiprocessing's resource tracker (register, unregister), each name told only to the
    tracker that knows it: one registered with a tracker since killed (an earlier
    `generation`) is not sent to its relaunched successor, which would print a KeyError
    traceback (the tracker of the name is gone: nothing is left to forget)."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.generation = 0  # the trackers launched after one died
        self.owners: dict[tuple[str, str], int] = {}

    def _alive(self) -> bool:
        with self.tracker._lock:
            return self.tracker._fd is not None and bool(self.tracker._check_alive())

    def register(self, name: str, rtype: str) -> None:
        if self.tracker._fd is not None and not self._alive():
            self.generation += 1  # the register below launches the next one
        self.tracker.register(name, rtype)
        self.owners[(name, rtype)] = self.generation

    def unregister(self, name: str, rtype: str) -> None:
        owner = self.owners.pop((name, rtype), 0)  # not seen: registered before this was
        if self._alive() and owner == self.generation:
            self.tracker.unregister(name, rtype)


def die_with_parent(parent: int | None = None) -> None:
    """In a child: be killed with SIGKILL when the parent process dies (Linux; else a no-op).
    `parent`: the parent's pid, so that a child whose parent died before this call (a kill
    while the pool was starting) exits at once instead of living on unseen."""
    quiet_tracker()
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
    quiet_tracker()
    return ProcessPoolExecutor(workers, mp_context=context,
                               initializer=die_with_parent, initargs=(os.getpid(),))
