"""One lock per artifact, so concurrent jobs (make -j, SLURM arrays, two `make embed`)
update it in turn; the one naming rule for lock files.

The holder writes who it is into the lock file (pid, host, command, since when), so that a
process waiting for the lock can say whose it is: at once, then every `interval` seconds while
it waits (docs/errors.md, "Waiting for a lock"). A holder that ends, even killed with -9,
frees the lock (the kernel drops it), so the wait lasts as long as the holder's own run; one
that is stopped (Ctrl-Z, SIGSTOP) never ends by itself: the waiter gives up once it has seen it
stopped for `stopped_limit` seconds, with one line naming it and how to resume or end it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pipeline.core.errors import InputError

log = logging.getLogger(__name__)

WAIT_INTERVAL = 30.0  # seconds between the waiting lines
STOPPED_LIMIT = 600.0  # seconds a stopped holder is waited for before giving up
_POLL = 0.1  # seconds between two tries of the lock, at most
_COMMAND_CHARS = 200  # of the holder's command line, recorded


def lock_path(target: Path) -> Path:
    """The one lock naming rule: the lock of the artifact at `target` (a file, a folder, a
    run's name) is `.<name>.lock` beside it."""
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def file_lock(target: Path, waiting: Callable[[], None] | None = None,
              interval: float = WAIT_INTERVAL,
              stopped_limit: float = STOPPED_LIMIT) -> Iterator[None]:
    """An exclusive advisory lock on the artifact at `target` (lock_path), so concurrent jobs
    (make -j, SLURM arrays, two `make embed`) update one artifact in turn. When another holds
    it, `waiting` is called once (to say why in the caller's words), and a line naming the
    holder is logged at once and every `interval` seconds until the lock is free; a holder
    seen stopped for `stopped_limit` seconds is given up on (InputError)."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        if not _try_lock(handle):
            if waiting is not None:
                waiting()
            _wait(handle, target, interval, stopped_limit)
        try:
            _record_holder(handle)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _record_holder(handle: IO[str]) -> None:
    """Write who holds the lock into its file (read by the processes waiting for it)."""
    holder = {"pid": os.getpid(), "host": socket.gethostname(),
              "command": " ".join(shlex.join(sys.orig_argv).split())[:_COMMAND_CHARS],
              "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")}
    with contextlib.suppress(OSError):  # a lock whose file cannot be written still locks
        handle.truncate(0)
        handle.write(json.dumps(holder) + "\n")
        handle.flush()


def holder(target: Path) -> dict:
    """Who holds (or last held) the lock of `target`, as recorded: {} when unknown."""
    try:
        found = json.loads(lock_path(target).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _state(pid: object, host: object) -> str:
    """'running', 'stopped' or 'ended' for a process of this host; '' when it cannot be told
    (another host's, or no /proc)."""
    if not isinstance(pid, int) or host != socket.gethostname():
        return ""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "ended"
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()  # after the command's name, which may hold spaces
    return "stopped" if fields and fields[0] in ("T", "t") else "running"


def describe(found: dict, state: str) -> str:
    """The holder in words: pid, host, command, since when, and its state when known."""
    if not found:
        return "another process (it has not said who it is)"
    words = f"pid {found.get('pid')} on {found.get('host')} ({found.get('command')}, since " \
            f"{found.get('since')})"
    if state == "stopped":
        return f"{words}, which is stopped (Ctrl-Z or SIGSTOP)"
    if state == "ended":  # the lock changed hands before the new holder wrote its name
        return f"another process (the last recorded holder, {words}, has ended)"
    return words


def _wait(handle: IO[str], target: Path, interval: float, stopped_limit: float) -> None:
    """Wait for the lock, a line naming its holder at once and every `interval` seconds;
    InputError once the holder has been seen stopped for `stopped_limit` seconds."""
    start = time.monotonic()
    stopped_since: float | None = None
    next_line = start
    while not _try_lock(handle):
        now = time.monotonic()
        found = holder(target)
        state = _state(found.get("pid"), found.get("host"))
        if state != "stopped":
            stopped_since = None
        elif stopped_since is None:
            stopped_since = now
        if stopped_since is not None and now - stopped_since >= stopped_limit:
            pid = found.get("pid")
            raise InputError(
                f"{target}: gave up waiting for its lock after {now - start:.0f} s: it is held "
                f"by {describe(found, state)}: resume that process (kill -CONT {pid}, or fg in "
                f"its shell) or end it (kill {pid}), then run this again")
        if now >= next_line:
            log.warning("%s: waiting for its lock (%.0f s so far), held by %s", target,
                        now - start, describe(found, state))
            next_line = now + interval
        time.sleep(min(_POLL, interval))
