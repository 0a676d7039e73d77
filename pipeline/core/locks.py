"""One lock per artifact, so concurrent jobs (make -j, SLURM arrays, two `make embed`)
update it in turn; the one naming rule for lock files.

A process that waits for a lock says whose it is, at once and then every `interval` seconds
(docs/errors.md, Guarantees): the process that Linux lists as holding the lock file
(/proc/locks), with its host, command, start time and state; nothing is written for it (a lock
taken changes no file). A holder that ends, even killed with -9, frees the lock (the kernel drops
it), so the wait lasts as long as the holder's own run; one that is stopped (Ctrl-Z, SIGSTOP)
never ends by itself: the waiter gives up once it has seen it stopped for `stopped_limit`
seconds, with one line naming it and how to resume or end it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import socket
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
_COMMAND_CHARS = 500  # of the holder's command line, shown


def lock_path(target: Path) -> Path:
    """The one lock naming rule: the lock of the artifact at `target` (a file, a folder, a
    run's name) is `.<name>.lock` beside it."""
    return target.parent / f".{target.name}.lock"


def is_lock(path: Path) -> bool:
    """Whether `path` is named as lock_path names a lock (`.<name>.lock`)."""
    return path.name.startswith(".") and path.name.endswith(".lock") and len(path.name) > 6


@contextlib.contextmanager
def file_lock(target: Path, waiting: Callable[[], None] | None = None,
              interval: float = WAIT_INTERVAL,
              stopped_limit: float = STOPPED_LIMIT) -> Iterator[None]:
    """An exclusive advisory lock on the artifact at `target` (lock_path), so concurrent jobs
    (make -j, SLURM arrays, two `make embed`) update one artifact in turn. When another holds
    it, `waiting` is called once (to say why in the caller's words), and a line naming the
    holder is logged at once and every `interval` seconds until the lock is free; a holder
    seen stopped for `stopped_limit` seconds is given up on (InputError). A lock file this
    call made is removed when the work inside fails (a refusal leaves nothing behind); one
    waiting on it then locks the file at its path afresh."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        created, handle = _open(path)
        with handle:
            if not _try_lock(handle):
                if waiting is not None:
                    waiting()
                _wait(handle, target, interval, stopped_limit)
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


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def holder(target: Path) -> dict:
    """Who holds the lock of `target`: the process of this host that /proc/locks names for its
    file (pid, host, command, started, state: running, stopped or ended); {} when none is
    named (a holder on another host sharing the disk, or no /proc)."""
    try:
        stat = lock_path(target).stat()
        table = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return {}
    file_id = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in table:  # "1: FLOCK  ADVISORY  WRITE <pid> <major:minor:inode> 0 EOF"
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[5] == file_id:
            return _process(int(fields[4]))
    return {}


def _process(pid: int) -> dict:
    """pid, host, command, start time and state of a process of this host."""
    found = {"pid": pid, "host": socket.gethostname(), "state": "ended"}
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return found
    words = [w.decode(errors="replace") for w in command]
    started = boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start, in ticks
    return {**found, "command": " ".join(shlex.join(words).split())[:_COMMAND_CHARS],
            "started": datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "state": "stopped" if stat[0] in ("T", "t") else "running"}


def describe(found: dict) -> str:
    """The holder in words: pid, host, command, start time, and whether it is stopped."""
    if not found:
        return "a process this host cannot name (on another host sharing the disk?)"
    if found["state"] == "ended":
        return f"pid {found['pid']} on {found['host']}, which has just ended"
    words = (f"pid {found['pid']} on {found['host']} ({found['command']}, started "
             f"{found['started']})")
    return f"{words}, which is stopped (Ctrl-Z or SIGSTOP)" if found["state"] == "stopped" \
        else words


def _wait(handle: IO[str], target: Path, interval: float, stopped_limit: float) -> None:
    """Wait for the lock, a line naming its holder at once and every `interval` seconds;
    InputError once the holder has been seen stopped for `stopped_limit` seconds."""
    start = time.monotonic()
    stopped_since: float | None = None
    next_line = start
    while not _try_lock(handle):
        now = time.monotonic()
        found = holder(target)
        if found.get("state") != "stopped":
            stopped_since = None
        elif stopped_since is None:
            stopped_since = now
        if stopped_since is not None and now - stopped_since >= stopped_limit:
            pid = found["pid"]
            raise InputError(
                f"{target}: gave up waiting for its lock after {now - start:.0f} s: it is held "
                f"by {describe(found)}: resume that process (kill -CONT {pid}, or fg in its "
                f"shell) or end it (kill {pid}), then run this again")
        if now >= next_line:
            log.warning("%s: waiting for its lock (%.0f s so far), held by %s", target,
                        now - start, describe(found))
            next_line = now + interval
        time.sleep(min(_POLL, interval))
