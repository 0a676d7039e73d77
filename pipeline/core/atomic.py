"""Files and folders that appear under their final name only when complete.

A write goes to a temporary beside its target, named `.<name>.<host>-<pid>.<random>.tmp`, and
is renamed into place; the next write into the same folder (or `make sweep`) removes the
temporaries of dead processes of this host, so a kill leaves no debris for long. Files and
folders get the permissions the umask allows (0644 / 0755 under umask 022), not mkstemp's
0600 / 0700. A full disk is one line naming the folder (`disk_errors`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pipeline.core.errors import InputError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _current_umask()
FILE_MODE = 0o666 & ~UMASK
DIR_MODE = 0o777 & ~UMASK
HOST = re.sub(r"[^A-Za-z0-9]+", "-", socket.gethostname()) or "host"
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9-]+)-(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")


def temp_prefix(name: str) -> str:
    return f".{name}.{HOST}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale_temporary(path: Path) -> bool:
    """A temporary left by a dead process of this host (debris of a kill)."""
    match = _TEMP.match(path.name)
    return bool(match and match["host"] == HOST and not _pid_alive(int(match["pid"])))


def stale_temporaries(folder: Path) -> list[Path]:
    """Temporaries in `folder` left by dead processes of this host."""
    return [p for p in folder.iterdir() if is_stale_temporary(p)] if folder.is_dir() else []


def is_temporary(path: Path) -> bool:
    return bool(_TEMP.match(path.name))


def sweep_temporaries(roots: tuple[Path, ...]) -> list[Path]:
    """The temporaries under `roots` that stopped processes of this host left, removed (a
    folder before those below it); their paths, sorted."""
    removed: list[Path] = []
    for root in roots:
        folders = {p.parent for p in root.rglob(".*.tmp")} if root.exists() else set()
        for folder in sorted(folders):
            for path in stale_temporaries(folder):
                remove(path)
                removed.append(path)
    return sorted(removed)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep(folder: Path) -> int:
    """Remove the temporaries of dead processes in `folder`; return how many."""
    stale = stale_temporaries(folder)
    for path in stale:
        remove(path)
    return len(stale)


def _disk_full(exc: OSError, folder: Path) -> InputError | None:
    """The one-line error for a write that the file system refused (full, read-only, not
    ours to write), or None for other errors."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return InputError(f"no space left writing in {folder}/ ({os.strerror(exc.errno)}): "
                          "free space there or point DATA at a larger disk, then rerun")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return InputError(f"cannot write in {folder}/ ({os.strerror(exc.errno)}): make it "
                          "writable, or point DATA at a folder you can write, then rerun")
    return None


@contextlib.contextmanager
def disk_errors(folder: Path) -> Iterator[None]:
    """A full disk (or file size limit) while writing under `folder` is one line naming it."""
    try:
        yield
    except OSError as exc:
        raise (_disk_full(exc, folder) or exc) from None


def check_writable(folder: Path) -> None:
    """Refuse, before any work, a folder the stage could not write into (read-only, not the
    user's): its nearest existing ancestor must be writable, and a file in its place is an
    error. Root passes permission checks, so a read-only mount is still caught at write time."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{probe} is a file, not a folder: move it away or point DATA (or "
                         "the --*-root options) elsewhere")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"cannot write in {probe}/ (permission denied): make it writable, or "
                         "point DATA at a folder you can write, then rerun")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds.

    A killed job therefore never leaves a half-written file under the final name; its
    temporary is removed by the next write into the same folder.
    """
    with disk_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        raise (_disk_full(exc, path.parent) or exc) from None
    finally:
        tmp_path.unlink(missing_ok=True)


def temp_dir(folder: Path, name: str) -> Path:
    """A new temporary folder in `folder`, named as temporaries are (swept after a kill), with
    the permissions the umask allows (755 under umask 022), not mkdtemp's 700: every folder
    the pipeline makes is made here or by mkdir, so a colleague on a shared disk can read it."""
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(name), suffix=".tmp", dir=folder))
    os.chmod(tmp, DIR_MODE)
    return tmp


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; it replaces `path` if the block succeeds."""
    with disk_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path.parent)
        tmp = temp_dir(path.parent, path.name)
    try:
        yield tmp
        if path.exists():  # move the old one aside first: rename cannot replace a full folder
            old = temp_dir(path.parent, path.name)
            os.replace(path, old)
            os.replace(tmp, path)
            remove(old)
        else:
            os.replace(tmp, path)
    except OSError as exc:
        raise (_disk_full(exc, path.parent) or exc) from None
    finally:
        remove(tmp)


@contextlib.contextmanager
def scratch_dir(folder: Path, name: str) -> Iterator[Path]:
    """A temporary working folder inside `folder`, removed afterwards (and swept after a kill)."""
    with disk_errors(folder):
        folder.mkdir(parents=True, exist_ok=True)
        sweep(folder)
        tmp = temp_dir(folder, name)
    try:
        yield tmp
    finally:
        remove(tmp)


