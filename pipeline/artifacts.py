"""Atomic writes, manifests and checksums shared by every stage (DESIGN.md, 'Contracts')."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST_VERSION = 1


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds.

    A killed job therefore never leaves a half-written file under the final name.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a parquet file atomically (zstd, statistics on)."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def write_json(obj: Any, path: Path) -> None:
    """Write a JSON file atomically, pretty-printed and with sorted keys."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def code_version() -> str:
    """The git commit of the pipeline code, or 'unknown' outside a checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def manifest(stage: str, parameters: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The common head of every manifest: what made the artifact, with which parameters."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "stage": stage,
        "parameters": parameters,
        "code_version": code_version(),
        "python": platform.python_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **fields,
    }


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so concurrent jobs (make -j, SLURM arrays) update one store
    in turn."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
