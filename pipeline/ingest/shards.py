"""Reading JSONL shards: what every reader (S2ORC, S2AG) shares.

A shard is read by one worker process. Its bad lines go to its own quarantine file (shard,
1-based line, reason, raw text), concatenated in shard order at the end; `strict` stops at the
first one instead. What the shard holds is written as scratch parts (see `merge.py`), so nothing
of a shard is kept in memory beyond one block, and a line at most MAX_RECORD bytes
(`shard_lines`): a longer one, which no record is (a file of one character without a line
break), is refused at that line in one line naming the shard, without being read whole.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from isal import igzip, isal_zlib

from pipeline.core.errors import InputError
from pipeline.core.repair import Repair
from pipeline.core.textfiles import LineTooLong, bounded_lines
from pipeline.layout import GZIP_SUFFIX, SHARD_SUFFIXES

# what reading a damaged file raises (an incomplete download, a corrupt gzip stream)
READ_ERRORS = (OSError, EOFError, zlib.error, isal_zlib.error)
RAW_CHARS = 10_000  # a quarantined line's text is cut to this many characters
INT64_MAX = 2**63 - 1
INT32 = (-(2**31), 2**31 - 1)
ID_SPACE = " \t\n\r\f\v"  # stripped around an id written as a string
# a dataset with more of its lines quarantined than this share stops ingest (docs/ingest.md):
# its corpus could not be what was meant (a layout the reader does not know, say)
MAX_QUARANTINED_SHARE = 0.5
# bytes a line of a shard holds at most: more than any record of S2ORC or S2AG (their longest
# papers, abstracts and citation contexts are KBs), so a reader holds at most this of a line
MAX_RECORD = 64 << 20
DOWNLOAD_AGAIN = Repair("", note="download it again, or move it away")


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


def shard_lines(handle: IO[bytes], path: Path, repair: Repair = DOWNLOAD_AGAIN
                ) -> Iterator[tuple[int, bytes]]:
    """(1-based number, line without its line end) of each line of the shard `path` open as
    `handle`, each held whole only up to MAX_RECORD bytes: a longer line, no record, is one
    line (InputError with `repair`) naming the shard, the line and the bound, read no further."""
    try:
        yield from bounded_lines(handle, MAX_RECORD)
    except LineTooLong as exc:
        raise InputError(f"{path}: {exc}, more than any record holds (read no further): not "
                         "a file of JSON records", repair) from None


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


def read_id(record: dict[str, Any], name: str, required: bool = False) -> int | None:
    """The S2 id in `record[name]`: an integer, or the same in ASCII digits, as S2ORC and the
    S2AG releases before `citationid` write ids (whitespace around them stripped); None when
    null and not `required`; else BadLine (a bool, a float, a negative, other text)."""
    value = record.get(name)
    if value is None:
        if required:
            raise BadLine(name, f"{name} is missing or null")
        return None
    if isinstance(value, str):
        text = value.strip(ID_SPACE)
        if not (text.isascii() and text.isdigit()):
            raise BadLine(name, f"{name} {show(value)} is not an integer id")
        digits = text.lstrip("0") or "0"  # its length first: int() of 5,000 digits fails
        if len(digits) > 19 or int(digits) > INT64_MAX:
            raise BadLine(name, f"{name} {show(value)} is out of range")
        return int(digits)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadLine(name, f"{name} is a {type(value).__name__} ({show(value)}), "
                            "not an integer id")
    if not 0 <= value <= INT64_MAX:
        raise BadLine(name, f"{name} {value} is out of range")
    return value


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


# the prefix of a dataset's own line counts (`citation_lines_read`); the papers of S2AG and
# S2ORC's metadata fill the shared ones (`lines_read`, `quarantined`)
COUNT_PREFIX = {"abstracts": "abstract_", "citations": "citation_"}


@dataclass
class ShardResult:
    """How one shard's lines were accounted for (summed over shards in the manifest)."""

    counts: dict[str, int]
    line_by_line: bool = False
    by_reason: dict[str, int] = field(default_factory=dict)
    first_bad: str | None = None
    dataset: str = "metadata"  # its folder: S2ORC's metadata, or S2AG's papers, abstracts...

    def count(self, name: str) -> int:
        """One of its dataset's line counts (`lines_read`, `quarantined`), by its plain name."""
        return self.counts.get(COUNT_PREFIX.get(self.dataset, "") + name, 0)


def add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def per_dataset(results: list[ShardResult]) -> list[ShardResult]:
    """The shards' results summed per dataset, in the order the datasets were read."""
    sums: dict[str, ShardResult] = {}
    for result in results:
        total = sums.setdefault(result.dataset, ShardResult({}, dataset=result.dataset))
        add_counts(total.counts, result.counts)
        add_counts(total.by_reason, result.by_reason)
        total.first_bad = total.first_bad or result.first_bad
    return list(sums.values())


def check_quarantined(datasets: list[ShardResult], raw_dir: Path, what: str) -> None:
    """Stop (InputError, before anything is written) when a dataset has more than
    MAX_QUARANTINED_SHARE of its lines quarantined: a corpus made of the rest would lack what
    the dataset holds (every citation, so no query), which no later stage could tell."""
    for data in datasets:
        lines, bad = data.count("lines_read"), data.count("quarantined")
        if bad > MAX_QUARANTINED_SHARE * lines:
            raise InputError(
                f"{raw_dir / data.dataset}: {bad:,} of its {lines:,} lines ({bad / lines:.1%}) "
                f"are bad, more than the {MAX_QUARANTINED_SHARE:.0%} ingest accepts (the "
                f"first: {data.first_bad}); nothing was written: check that it holds "
                f"{data.dataset} records of {what}, or fix those lines")


def quarantine_line(data: ShardResult, path: Path) -> str | None:
    """What a dataset's quarantined lines were, and where they went; None when none."""
    bad = data.count("quarantined")
    if not bad:
        return None
    reasons = ", ".join(f"{reason} {n:,}" for reason, n in data.by_reason.items())
    return (f"{data.dataset}: {bad:,} of {data.count('lines_read'):,} lines quarantined "
            f"({reasons}), written to {path}")
