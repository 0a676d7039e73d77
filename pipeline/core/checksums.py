"""A file's sha256, computed once: checksums kept beside the files, and the checks of an
artifact's files against what its manifest records.

A file's sha256 is kept beside its (size, mtime_ns, ctime_ns, inode) in a hidden
`.checksums.json` of its folder, and hashed again only when one of those changed (as git's
index does): every stage checks every input against its manifest before using it without
re-reading gigabytes. The ctime is what no user can set: bytes written in place and the mtime
put back (`touch -r`, `os.utime`) still change it, so such damage is hashed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.core.files import VERIFY
from pipeline.core.locks import file_lock
from pipeline.core.repair import Repair


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


def stat_key(path: str | os.PathLike) -> list[int] | None:
    """The (size, mtime_ns, ctime_ns, inode) of a file as this cache keys a kept hash (None
    when it is gone): a reader that kept what it made of the file trusts it while this holds,
    as the cache trusts a kept sha256 (collect's record of what it gathered)."""
    try:
        return _stat_key(os.stat(path))
    except OSError:
        return None


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


def remember(path: Path, sha: str) -> None:
    """Keep `sha`, hashed by whoever wrote the file as it wrote it, as the sha256 of `path` as
    it is now, so that checking the unchanged file later reads none of its bytes."""
    _remember(path, path.stat(), sha)


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


