"""Reading JSONL shards: what every reader (S2ORC, S2AG) shares.

A shard is read by one worker process. Its bad lines go to its own quarantine file (shard,
1-based line, reason, raw text), concatenated in shard order at the end; `strict` stops at the
first one instead. What the shard holds is written as scratch parts (see `merge.py`), so nothing
of a shard is kept in memory beyond one block.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from isal import igzip, isal_zlib

from pipeline.core.errors import InputError
from pipeline.layout import GZIP_SUFFIX, SHARD_SUFFIXES

# what reading a damaged file raises (an incomplete download, a corrupt gzip stream)
READ_ERRORS = (OSError, EOFError, zlib.error, isal_zlib.error)
RAW_CHARS = 10_000  # a quarantined line's text is cut to this many characters
INT64_MAX = 2**63 - 1
INT32 = (-(2**31), 2**31 - 1)


def open_shard(path: Path) -> IO[bytes]:
    """A shard's bytes: `.gz` through ISA-L's gzip (python-isal: the same stream as zlib's,
    decompressed about 2.5x faster, which is a quarter of a shard's read time), else plain.

    A 0-byte `.gz` file is not a gzip stream (even an empty one has a header and a trailer):
    it is a failed download, and raises EOFError as a truncated one does, so every reader
    reports it the same way. A 0-byte plain `.jsonl` is valid JSON Lines with no records, as a
    gzip stream of nothing is: an empty shard (an ingest that finds no papers at all stops)."""
    if path.name.endswith(GZIP_SUFFIX):
        if path.stat().st_size == 0:
            raise EOFError("an empty file, 0 bytes: not a gzip stream")
        return igzip.open(path, "rb")
    return path.open("rb")


def natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key comparing digit runs as numbers: metadata_2 before metadata_10."""
    parts = re.split(r"([0-9]+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def list_shards(folder: Path) -> list[Path]:
    """Every `*.jsonl.gz` and `*.jsonl` file in `folder`, in natural order (hidden files and
    our own temporaries aside)."""
    found = folder.iterdir() if folder.is_dir() else []
    return sorted((p for p in found if p.name.endswith(SHARD_SUFFIXES)
                   and not p.name.startswith(".") and p.is_file()),
                  key=lambda p: natural_key(p.name))


def find_shards(raw_dir: Path) -> list[Path]:
    """Every `*.jsonl.gz` and `*.jsonl` file under `<raw>/metadata/`, in natural order
    (the 2020 release names them metadata_0..99.jsonl.gz; any name is accepted)."""
    shards = list_shards(raw_dir / "metadata")
    if not shards:
        raise InputError(
            f"no S2ORC metadata shards under {raw_dir}/metadata/: expected *.jsonl.gz (or "
            "*.jsonl) files such as metadata_<k>.jsonl.gz (S2ORC 20200705v1 layout)"
        )
    return shards


S2AG_DATASETS = ("papers", "abstracts", "citations")  # the folders of an S2AG download


def find_datasets(raw_dir: Path) -> dict[str, list[Path]]:
    """The shards of each dataset folder; a missing or empty folder is an InputError."""
    found = {name: list_shards(raw_dir / name) for name in S2AG_DATASETS}
    missing = [name for name, shards in found.items() if not shards]
    if missing:
        raise InputError(
            f"no S2AG {'/'.join(missing)} shards under {raw_dir}: expected the folders "
            "papers/, abstracts/ and citations/ holding *.jsonl.gz (or *.jsonl) files, as "
            "the Semantic Scholar Datasets are downloaded")
    return found


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class BadLine(Exception):
    """Why one line is not a record: a category (manifest counts) and a short reason."""

    def __init__(self, category: str, reason: str):
        super().__init__(reason)
        self.category, self.reason = category, reason


def parse_line(line: bytes) -> dict[str, Any]:
    """One line as a JSON object, or BadLine (not UTF-8, invalid JSON, not an object)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise BadLine("not_utf8", f"not valid UTF-8 (byte {bad.start + 1})") from None
        raise BadLine("invalid_json", f"invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise BadLine("not_object", f"a JSON {type(obj).__name__}, not an object")
    return obj


def check_int(record: dict[str, Any], name: str, low: int = INT32[0], high: int = INT32[1],
              required: bool = False) -> None:
    value = record.get(name)
    if value is None:
        if required:
            raise BadLine(name, f"{name} is missing or null")
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadLine(name, f"{name} is a {type(value).__name__} ({show(value)}), "
                            "not an integer")
    if not low <= value <= high:
        raise BadLine(name, f"{name} {value} is out of range")


@dataclass
class Quarantine:
    """Bad lines of one shard: one JSON object each in its quarantine file, or, when strict,
    an InputError naming the shard and line."""

    handle: IO[bytes]
    strict: bool
    by_reason: dict[str, int] = field(default_factory=dict)
    first: str | None = None  # "<shard>:<line>: <reason>" of the first bad line
    count: int = 0
    base: Path | None = None  # records name a shard relative to this (else by file name)

    def add(self, shard: Path, line: int, raw: bytes, bad: BadLine) -> None:
        where = f"{shard}:{line}: {bad.reason}"
        if self.strict:
            raise InputError(f"{where}; fix or remove the line, or run without --strict to "
                             "quarantine it")
        self.first = self.first or where
        self.count += 1
        self.by_reason[bad.category] = self.by_reason.get(bad.category, 0) + 1
        text = raw.rstrip(b"\r\n").decode("utf-8", errors="backslashreplace")[:RAW_CHARS]
        name = shard.relative_to(self.base).as_posix() if self.base else shard.name
        record = {"shard": name, "line": line, "reason": bad.reason, "raw": text}
        self.handle.write(orjson.dumps(record) + b"\n")


@dataclass
class ShardResult:
    """How one shard's lines were accounted for (summed over shards in the manifest)."""

    counts: dict[str, int]
    line_by_line: bool = False
    by_reason: dict[str, int] = field(default_factory=dict)
    first_bad: str | None = None


def add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value
