"""Reading and writing the pipeline's parquet and JSON files, atomically (core/atomic.py).

A manifest carries the sha256 of its own content (`self_sha256`), so a manifest damaged in
place, even one that is still valid JSON, is refused (`CorruptManifest`) with the command that
repairs it; a parquet file that cannot be read is refused the same way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError, first_line
from pipeline.core.repair import Repair

VERIFY = Repair("verify", note="it names the command that rebuilds what is damaged")

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


def is_corrupt(path: Path) -> bool:
    """Whether the manifest at `path` exists but cannot be read (read_json's CorruptManifest):
    an import asked to replace what it wrote may write over it."""
    try:
        read_json(path)
    except CorruptManifest:
        return True
    except InputError:
        return False
    return False


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


def read_parquet(path: Path, columns: list[str] | None = None,
                 repair: Repair | None = None) -> Any:
    """A parquet file as a polars DataFrame, or a one-line InputError naming the file; one that
    cannot be read carries `repair` where the caller knows what remakes it (else verify,
    which names it)."""
    import polars as pl

    try:
        return pl.read_parquet(path, columns=columns)
    except FileNotFoundError:
        raise InputError(f"{path} is missing: rerun the stage that writes it") from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{path} cannot be read as parquet ({first_line(exc)})",
                         repair or VERIFY) from None


