"""One lock per artifact, so concurrent jobs (make -j, SLURM arrays, two `make embed`)
update it in turn; the one naming rule for lock files."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path


def lock_path(target: Path) -> Path:
    """The one lock naming rule: the lock of the artifact at `target` (a file, a folder, a
    run's name) is `.<name>.lock` beside it."""
    return target.parent / f".{target.name}.lock"


def is_lock(path: Path) -> bool:
    """Whether `path` is named as lock_path names a lock (`.<name>.lock`)."""
    return path.name.startswith(".") and path.name.endswith(".lock") and len(path.name) > 6


@contextlib.contextmanager
def file_lock(target: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock on the artifact at `target` (lock_path), so concurrent jobs
    (make -j, SLURM arrays, two `make embed`) update one artifact in turn. `waiting` is called
    once when another holds it (to say so in the log), before waiting for it."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
