"""Where numba caches the kernels a process compiles (docs/cluster.md: what a fresh job pays
before its first paper). Standard library only: `python -m pipeline` calls it before any stage,
`pipeline.metrics` (the library's door to numba's kernels) on import.

numba caches a kernel (`njit(cache=True)`: the BM25 engine's, the metrics', ranx's, the methods
of its typed containers) beside the kernel's source, in `__pycache__`, where that folder is
writable; else in the user's cache folder (`$XDG_CACHE_HOME/numba`, `~/.cache/numba`);
`NUMBA_CACHE_DIR`, when set, comes before both. Where none is writable (an install that is
not, a shared environment or a container's image, and a home that is not either) numba
refuses to define such a kernel at all: `import ranx` fails ("cannot cache function ...: no
locator available"), and so would a scoring. That case gets a folder of its own here
(`numba_cache`): NUMBA_CACHE_DIR set, for this process and those it starts, to a private
folder in the temporary directory. Private: the cache holds code numba runs, so the folder
must be this user's, made here with mode 0700 and found so, never one another user could have
made or written; else nothing is set. Node-local: it lasts as long as the node's temporary
directory (a job's processes, the jobs after it on the node), not across nodes; a folder on
shared disk (NUMBA_CACHE_DIR, docs/cluster.md) lasts across both. Not a data root: those may
be shared by a group, and what is cached here is run."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

CACHE_VARIABLE = "NUMBA_CACHE_DIR"
# The packages whose kernels the stages compile, and where each keeps them (under its folder)
KERNEL_FOLDERS = {"pipeline": (".", "retrieval/bm25"), "numba": ("typed",),
                  "ranx": ("metrics",)}


def fallback_folder() -> Path:
    """This user's private numba cache in the temporary directory (module doc)."""
    return Path(tempfile.gettempdir()) / f"mdcr-numba-cache-{os.getuid()}"


def _package_folder(name: str) -> Path | None:
    """Where package `name` lives, without importing it; None when it is not installed (the
    system Python of `make check`) or not a folder."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec else []
    return Path(locations[0]) if locations else None


def _writable(folder: Path) -> bool:
    """Whether numba could write into `folder` (made if missing): its nearest existing
    ancestor is a folder this process may write into."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def user_cache(environ: MutableMapping[str, str]) -> Path:
    """numba's user-wide cache folder, as its appdirs names it: ~/Library/Caches/numba on
    macOS, else $XDG_CACHE_HOME/numba (~/.cache/numba where it is not set)."""
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~/Library/Caches")) / "numba"
    return Path(environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "numba"


def uncached_kernels(environ: MutableMapping[str, str]) -> list[Path]:
    """The kernel folders (`__pycache__`) numba could cache into neither there nor in the
    user's cache folder: [] when NUMBA_CACHE_DIR is set (the user's choice) or numba is not
    installed."""
    if environ.get(CACHE_VARIABLE) or _package_folder("numba") is None:
        return []
    if _writable(user_cache(environ)):
        return []
    found = []
    for package, subfolders in KERNEL_FOLDERS.items():
        folder = _package_folder(package)
        for sub in subfolders if folder else ():
            cache = (folder / sub).resolve() / "__pycache__"
            if not _writable(cache):
                found.append(cache)
    return found


def _private(folder: Path) -> bool:
    """`folder` exists or is made, a real folder (no link), this user's, which no one else
    may write into."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def numba_cache(environ: MutableMapping[str, str] = os.environ) -> Path | None:
    """Set NUMBA_CACHE_DIR to this user's private folder (`fallback_folder`) when numba would
    cache some kernel nowhere (`uncached_kernels`), before numba is imported; the folder, or
    None when nothing was set (numba's own places do, the user chose one, or the fallback is
    not private)."""
    if not uncached_kernels(environ):
        return None
    folder = fallback_folder()
    if not _private(folder):
        return None
    environ[CACHE_VARIABLE] = str(folder)
    return folder
