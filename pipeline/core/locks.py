"""One lock per artifact, so concurrent jobs (make -j, SLURM arrays, two `make embed`)
update it in turn; the one naming rule for lock files."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


def lock_path(target: Path) -> Path:
    """The one lock naming rule: the lock of the artifact at `target` (a file, a folder, a
    run's name) is `.<name>.lock` beside it."""
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def file_lock(target: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock on the artifact at `target` (lock_path), so concurrent jobs
    (make -j, SLURM arrays, two `make embed`) update one artifact in turn. `waiting` is called
    once when another holds it (to say so in the log), before waiting for it. A lock file this
    call made is removed when the work inside fails (a refusal leaves nothing behind); one
    waiting on it then locks the file at its path afresh."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        created, handle = _open(path)
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                fcntl.flock(handle, fcntl.LOCK_EX)
            if not _same_file(handle, path):
                continue  # its maker refused and removed it: lock the one at `path` now
            try:
                yield
            except BaseException:
                if created:  # a refusal (any error) leaves no lock file it made behind it
                    path.unlink(missing_ok=True)
                raise
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
            return


def _open(path: Path) -> tuple[bool, IO[str]]:
    """(whether this call made it, the lock file at `path` open)."""
    try:
        return True, path.open("x")
    except FileExistsError:
        return False, path.open("a")


def _same_file(handle: IO[str], path: Path) -> bool:
    """Whether the open lock file is still the one at `path` (not removed by its maker)."""
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False
