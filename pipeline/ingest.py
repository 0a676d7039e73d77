"""Ingest S2ORC 2020 metadata shards and prefilter them (SPEC.md §1-2, MDCR §3).

Ingest streams one JSONL shard (gzipped or not) at a time into two parquet contracts
(DESIGN.md): `papers.parquet` (corpusid, title, abstract, year, fields, n_inbound, n_outbound)
and `citations.parquet` (citing, cited). A clean shard is parsed by pyarrow in one pass; a shard
with a bad line is re-read line by line, and each bad line goes to `quarantine.jsonl` (shard,
1-based line, reason, raw text) instead of stopping the run (`strict=True` stops at the first
one instead). One record is kept per paper id: the first by shard order, then line order.
Every line is accounted for: `lines_read = papers + quarantined + duplicate_records`.

Prefilter keeps papers with a year, a title, an abstract of at least 30 characters and at least
three citations, counts every drop by its reason and reconciles them with the ingest counts.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.artifacts import (
    MANIFEST,
    atomic_path,
    file_lock,
    file_problem,
    fingerprints,
    manifest,
    outputs_intact,
    read_json,
    scratch_dir,
    write_json,
)
from pipeline.errors import InputError
from pipeline.naming import CITATION_MODES

CitationMode = Literal["inbound", "outbound", "either"]

S2ORC_SCHEMA = pa.schema([
    ("paper_id", pa.string()),
    ("title", pa.string()),
    ("abstract", pa.string()),
    ("year", pa.int64()),
    ("mag_field_of_study", pa.list_(pa.string())),
    ("outbound_citations", pa.list_(pa.string())),
    ("inbound_citations", pa.list_(pa.string())),
])
PAPERS_SCHEMA = pa.schema([
    ("corpusid", pa.int64()),
    ("title", pa.string()),
    ("abstract", pa.string()),
    ("year", pa.int32()),
    ("fields", pa.list_(pa.string())),
    ("n_inbound", pa.int32()),
    ("n_outbound", pa.int32()),
])
EDGES_SCHEMA = pa.schema([("citing", pa.int64()), ("cited", pa.int64())])
# dangling: the cited id is not a paper of the corpus (kept, so n_inbound stays S2ORC's count)
CITATIONS_SCHEMA = pa.schema([*EDGES_SCHEMA, ("dangling", pa.bool_())])
DROP_REASONS = ("no_year", "no_title", "short_abstract", "few_citations")

QUARANTINE = "quarantine.jsonl"
RAW_CHARS = 10_000  # a quarantined line's text is cut to this many characters
SHARD_SUFFIXES = (".jsonl.gz", ".jsonl")
INGEST_COUNTS = ("lines_read", "blank_lines", "papers", "quarantined", "duplicate_records",
                 "edges", "bad_cited_id", "duplicate_edges", "dangling_edges")
ID_SPACE = " \t\n\r\f\v"  # stripped around a paper_id, the same in polars and in Python
INT32 = (-(2**31), 2**31 - 1)  # papers.parquet stores the year as int32
INT64_MAX = 2**63 - 1
STRING_FIELDS = ("paper_id", "title", "abstract")
LIST_FIELDS = ("mag_field_of_study", "outbound_citations", "inbound_citations")
_READ = pajson.ReadOptions(block_size=64 << 20)
_PARSE = pajson.ParseOptions(explicit_schema=S2ORC_SCHEMA, unexpected_field_behavior="ignore")
_LF, _CR, _OPEN, _CLOSE = (ord(c) for c in "\n\r{}")


def update_corpus_manifest(corpus_dir: Path, section: str, data: dict | None) -> None:
    """Record one stage's manifest under its own key in `<corpus>/manifest.json` (None removes
    it: a stage does so before it starts rewriting its files, so a kill leaves no manifest
    vouching for half-replaced files)."""
    path = corpus_dir / MANIFEST
    with file_lock(corpus_dir / ".manifest.lock"):
        current = read_json(path) if path.exists() else {}
        if data is None:
            if section not in current:
                return
            del current[section]
        else:
            current[section] = data
        write_json(current, path)


def corpus_section(corpus_dir: Path, section: str) -> dict:
    path = corpus_dir / MANIFEST
    return read_json(path).get(section, {}) if path.exists() else {}


def _natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key comparing digit runs as numbers: metadata_2 before metadata_10."""
    parts = re.split(r"([0-9]+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def find_shards(raw_dir: Path) -> list[Path]:
    """Every `*.jsonl.gz` and `*.jsonl` file under `<raw>/metadata/`, in natural order
    (SPEC.md §1: the release names them metadata_0..99.jsonl.gz; any name is accepted)."""
    folder = raw_dir / "metadata"
    found = folder.iterdir() if folder.is_dir() else []
    shards = sorted((p for p in found if p.name.endswith(SHARD_SUFFIXES)
                     and not p.name.startswith(".") and p.is_file()),
                    key=lambda p: _natural_key(p.name))
    if not shards:
        raise InputError(
            f"no S2ORC metadata shards under {raw_dir}/metadata/: expected *.jsonl.gz (or "
            "*.jsonl) files such as metadata_<k>.jsonl.gz (S2ORC 20200705v1 layout)"
        )
    return shards


# ---------------------------------------------------------------------------------------------
# Reading one shard: fast path (pyarrow, whole shard) or line by line (bad lines quarantined)
# ---------------------------------------------------------------------------------------------


class _BadLine(Exception):
    """Why one line is not an S2ORC record: a category (manifest counts) and a short reason."""

    def __init__(self, category: str, reason: str):
        super().__init__(reason)
        self.category, self.reason = category, reason


class _Quarantine:
    """Bad lines: one JSON object each in `quarantine.jsonl`, or, when strict, an InputError."""

    def __init__(self, handle: IO[bytes], strict: bool):
        self.handle, self.strict = handle, strict
        self.by_reason: dict[str, int] = {}
        self.first: str | None = None  # "<shard>:<line>: <reason>" of the first bad line

    def add(self, shard: Path, line: int, raw: bytes, bad: _BadLine) -> None:
        where = f"{shard}:{line}: {bad.reason}"
        if self.strict:
            raise InputError(f"{where}; fix or remove the line, or run without --strict to "
                             "quarantine it")
        self.first = self.first or where
        self.by_reason[bad.category] = self.by_reason.get(bad.category, 0) + 1
        text = raw.rstrip(b"\r\n").decode("utf-8", errors="backslashreplace")[:RAW_CHARS]
        record = {"shard": shard.name, "line": line, "reason": bad.reason, "raw": text}
        self.handle.write(orjson.dumps(record) + b"\n")


@dataclass
class _ShardRead:
    """The good rows of one shard, in line order (so the first copy of an id is the first
    line), and how its lines were accounted for."""

    table: pa.Table  # S2ORC_SCHEMA
    lines_read: int  # non-blank lines = rows + quarantined
    blank_lines: int = 0
    quarantined: int = 0
    line_by_line: bool = False


class _CheckedStream:
    """A shard's bytes as pyarrow reads them, checked in the same pass (C-speed scans, no copy
    of the data): valid UTF-8, and every newline sits between `}` and `{` (no blank line, no
    object over two lines, LF line ends). With as many rows as lines, row i is line i + 1."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._edge = b""  # the last two bytes read: a `}\n{` may straddle two reads
        self._partial = b""  # bytes after the last newline read, UTF-8 checked with the next
        self._first = b""
        self.newlines = self.between = 0  # newlines, and newlines between `}` and `{`
        self.ok = True  # False after a line longer than a read block: too long for pyarrow

    closed = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._stream.read(size)
        if chunk and self.ok:
            self._check(chunk)
        return chunk

    def _check(self, chunk: bytes) -> None:
        self._first = self._first or chunk[:1]
        self.newlines += chunk.count(b"\n")
        self.between += chunk.count(b"}\n{") + (self._edge + chunk[:2]).count(b"}\n{")
        self._edge = (self._edge + chunk[-2:])[-2:]
        first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
        if first < 0:  # inside a long line: keep it whole for the UTF-8 check, up to a limit
            self._partial += chunk
            self.ok = len(self._partial) <= _READ.block_size
            return
        # UnicodeDecodeError or ArrowInvalid: the caller reads the shard line by line
        (self._partial + chunk[: first + 1]).decode()
        offsets = pa.py_buffer(np.array([first + 1, last + 1], dtype=np.int64))
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(chunk)).validate(full=True)
        self._partial = chunk[last + 1:]

    def lines(self) -> int | None:
        """Read to the end (pyarrow may stop early); the number of lines, or None unless every
        line is exactly one `{...}` record."""
        while self.read(64 << 20):
            pass
        if not self.ok or self._first != b"{":
            return None
        self._partial.decode()
        if self._edge.endswith(b"\n"):
            whole = self._edge.endswith(b"}\n") and self.newlines == self.between + 1
            return self.newlines if whole else None
        return self.newlines + 1 if self._edge.endswith(b"}") and (
            self.newlines == self.between) else None


def _open_stream(path: Path) -> Any:
    return pa.input_stream(str(path), compression="gzip" if path.name.endswith(".gz") else None)


def _paper_id() -> pl.Expr:
    return pl.col("paper_id").str.strip_chars(ID_SPACE)


def _rows_are_valid(table: pa.Table) -> bool:
    """Every paper_id an integer id and every year an int32 (what the line check demands)."""
    df = pl.from_arrow(table.select(["paper_id", "year"]))
    return bool(df.select(
        (_paper_id().str.contains(r"^[0-9]+$")
         & _paper_id().cast(pl.Int64, strict=False).is_not_null()).fill_null(False).all(),
        (pl.col("year").is_null() | pl.col("year").is_between(*INT32)).all(),
    ).row(0) == (True, True))


def _read_fast(path: Path) -> pa.Table | None:
    """The whole shard through pyarrow, or None when any line needs a closer look."""
    try:
        with _open_stream(path) as raw:
            stream = _CheckedStream(raw)
            table = pajson.read_json(stream, read_options=_READ, parse_options=_PARSE)
            lines = stream.lines()
    except (pa.ArrowException, ValueError, OSError, EOFError):
        return None  # bad JSON or UTF-8, a type pyarrow refuses, an empty or corrupt file
    if table.num_rows != lines or not _rows_are_valid(table):
        return None
    return table


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_record(line: bytes) -> dict[str, Any]:
    """The seven used fields of one line, typed as S2ORC_SCHEMA says, or _BadLine."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise _BadLine("not_utf8", f"not valid UTF-8 (byte {bad.start + 1})") from None
        raise _BadLine("invalid_json", f"invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _BadLine("not_object", f"a JSON {type(obj).__name__}, not an object")
    record = {name: obj.get(name) for name in S2ORC_SCHEMA.names}
    for name in STRING_FIELDS:
        value = record[name]
        if value is not None and not isinstance(value, str):
            raise _BadLine(name, f"{name} is a {type(value).__name__} ({_show(value)}), "
                                 "not a string")
    if record["paper_id"] is None:
        raise _BadLine("paper_id", "paper_id is missing or null")
    paper_id = record["paper_id"].strip(ID_SPACE)
    if not (paper_id.isascii() and paper_id.isdigit() and len(paper_id) <= 19
            and int(paper_id) <= INT64_MAX):
        raise _BadLine("paper_id", f"paper_id {_show(record['paper_id'])} is not an integer id")
    year = record["year"]
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
        raise _BadLine("year", f"year is a {type(year).__name__} ({_show(year)}), "
                               "not an integer")
    if year is not None and not INT32[0] <= year <= INT32[1]:
        raise _BadLine("year", f"year {year} is out of range")
    for name in LIST_FIELDS:
        value = record[name]
        if value is not None and not isinstance(value, list):
            raise _BadLine(name, f"{name} is a {type(value).__name__} ({_show(value)}), "
                                 "not a list")
        if value and not all(isinstance(item, str) or item is None for item in value):
            item = next(i for i in value if not isinstance(i, str) and i is not None)
            raise _BadLine(name, f"{name} holds a {type(item).__name__} ({_show(item)}), "
                                 "not a string")
    return record


def _read_by_line(path: Path, quarantine: _Quarantine) -> _ShardRead:
    """The slow path: every line parsed and type-checked on its own; bad lines quarantined,
    blank lines counted, good records handed to pyarrow in line order."""
    good: list[bytes] = []
    blank = bad = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    blank += 1
                    continue
                try:
                    good.append(orjson.dumps(_check_record(line)))
                except _BadLine as exc:
                    bad += 1
                    quarantine.add(path, number, line, exc)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read it ({exc}); check the file (an incomplete "
                         "download?)") from None
    table = (pajson.read_json(pa.BufferReader(b"\n".join(good)), read_options=_READ,
                              parse_options=_PARSE)
             if good else S2ORC_SCHEMA.empty_table())
    return _ShardRead(table, lines_read=len(good) + bad, blank_lines=blank, quarantined=bad,
                      line_by_line=True)


def _read_shard(path: Path, quarantine: _Quarantine) -> _ShardRead:
    """One shard's good rows in line order: pyarrow on the whole shard when every line is a
    clean record (the common case), else line by line with bad lines quarantined."""
    table = _read_fast(path)
    if table is not None:
        return _ShardRead(table, lines_read=table.num_rows)
    return _read_by_line(path, quarantine)


# ---------------------------------------------------------------------------------------------
# Converting and deduplicating
# ---------------------------------------------------------------------------------------------


def _convert(table: pa.Table, seen: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame,
                                                         dict[str, int]]:
    """One shard's good rows (line order) -> (papers, citations, counts).

    A record whose id is in `seen` (sorted ids of earlier shards) or on an earlier line of this
    shard is a duplicate: counted, and dropped with its citations.
    """
    df = pl.from_arrow(table).with_columns(corpusid=_paper_id().cast(pl.Int64))
    ids = df["corpusid"].to_numpy()
    keep = df.select(pl.col("corpusid").is_first_distinct()).to_series().to_numpy()
    if len(seen):
        keep &= seen[np.minimum(np.searchsorted(seen, ids), len(seen) - 1)] != ids
    df = df.filter(pl.Series(keep))
    papers = df.select(
        "corpusid", "title", "abstract",
        pl.col("year").cast(pl.Int32),
        fields=pl.col("mag_field_of_study").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        n_inbound=pl.col("inbound_citations").list.len().fill_null(0).cast(pl.Int32),
        n_outbound=pl.col("outbound_citations").list.len().fill_null(0).cast(pl.Int32),
    )
    edges = (
        df.select(citing="corpusid", cited="outbound_citations")
        .explode("cited")
        .drop_nulls("cited")
        .with_columns(pl.col("cited").str.strip_chars().cast(pl.Int64, strict=False))
    )
    bad_cited = edges["cited"].null_count()
    edges = edges.drop_nulls("cited")
    unique = edges.unique(maintain_order=True)
    counts = {"duplicate_records": len(ids) - df.height, "bad_cited_id": bad_cited,
              "duplicate_edges": edges.height - unique.height}
    return papers, unique, counts


def _merge_ids(seen: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Sorted union of `seen` and `new` (disjoint), in O(len(seen) + len(new))."""
    new = np.sort(new)
    return np.insert(seen, np.searchsorted(seen, new), new)


def ingest(raw_dir: Path, corpus_dir: Path, strict: bool = False) -> dict:
    """Ingest under the corpus's lock: two ingests of one corpus run in turn."""
    with file_lock(corpus_dir / ".locks" / "corpus.lock"):
        return _ingest(raw_dir, corpus_dir, strict)


def _ingest(raw_dir: Path, corpus_dir: Path, strict: bool = False) -> dict:
    """Stream S2ORC shards into `papers.parquet`, `citations.parquet` and `quarantine.jsonl`
    (all written atomically; SPEC.md §1). One record per paper id, the first by shard then
    line order. `strict`: the first bad line is an InputError naming its file and line."""
    shards = find_shards(raw_dir)
    start = time.perf_counter()
    totals = dict.fromkeys(INGEST_COUNTS, 0)
    seen = np.empty(0, dtype=np.int64)
    line_by_line: list[str] = []
    # writers close before the atomic renames (contexts exit in reverse order)
    with (
        scratch_dir(corpus_dir, "ingest") as work,
        atomic_path(corpus_dir / "papers.parquet") as papers_tmp,
        atomic_path(corpus_dir / "citations.parquet") as cites_tmp,
        atomic_path(corpus_dir / QUARANTINE) as quarantine_tmp,
        quarantine_tmp.open("wb") as quarantine_out,
    ):
        quarantine = _Quarantine(quarantine_out, strict)
        with (
            pq.ParquetWriter(papers_tmp, PAPERS_SCHEMA, compression="zstd") as papers_out,
            pq.ParquetWriter(work / "edges.parquet", EDGES_SCHEMA) as edges_out,
        ):
            for shard in tqdm(shards, desc="ingest", unit="shard", disable=None):
                read = _read_shard(shard, quarantine)
                papers, edges, counts = _convert(read.table, seen)
                seen = _merge_ids(seen, papers["corpusid"].to_numpy())
                papers_out.write_table(papers.to_arrow().cast(PAPERS_SCHEMA))
                edges_out.write_table(edges.to_arrow().cast(EDGES_SCHEMA))
                if read.line_by_line:
                    line_by_line.append(shard.name)
                counts |= {"lines_read": read.lines_read, "blank_lines": read.blank_lines,
                           "quarantined": read.quarantined, "papers": papers.height,
                           "edges": edges.height}
                for key, value in counts.items():
                    totals[key] += value
        if totals["papers"] == 0:
            hint = f"; first bad line {quarantine.first}" if quarantine.first else ""
            raise InputError(
                f"no papers in {raw_dir}: its {len(shards)} shard(s) hold "
                f"{totals['lines_read']} line(s), {totals['quarantined']} of them bad{hint}; "
                "check that it is an S2ORC metadata release"
            )
        totals["dangling_edges"] = _flag_dangling(work / "edges.parquet", seen, cites_tmp)
        # the files are about to be replaced: until the new section is written, no manifest
        # vouches for them (a failure before this point leaves the old corpus as it was)
        update_corpus_manifest(corpus_dir, "ingest", None)
    info = manifest("ingest", {"raw_dir": str(raw_dir), "strict": strict}, counts=totals,
                    shards=[s.name for s in shards], line_by_line_shards=line_by_line,
                    quarantine={"file": QUARANTINE, "by_reason": quarantine.by_reason},
                    inputs={s.name: {"bytes": s.stat().st_size,
                                     "mtime_ns": s.stat().st_mtime_ns} for s in shards},
                    outputs=fingerprints(corpus_dir, ["papers.parquet", "citations.parquet",
                                                      QUARANTINE]),
                    seconds=round(time.perf_counter() - start, 2))
    update_corpus_manifest(corpus_dir, "ingest", info)
    return info


def _flag_dangling(edges: Path, corpus_ids: np.ndarray, out: Path) -> int:
    """Write the citations with a `dangling` flag (cited id outside the corpus: kept and
    counted, SPEC.md §1); return how many are dangling. Only the ids are held in memory."""
    known = pl.Series("corpusid", corpus_ids).implode()
    (pl.scan_parquet(edges).with_columns(dangling=~pl.col("cited").is_in(known))
     .sink_parquet(out, compression="zstd"))
    return int(pl.scan_parquet(out).select(pl.col("dangling").sum()).collect().item())


def drop_reason(mode: CitationMode, min_citations: int, min_abstract: int) -> pl.Expr:
    """The first prefilter rule a paper fails (MDCR §3, in the paper's order), or null."""
    cites = {
        "inbound": pl.col("n_inbound"),
        "outbound": pl.col("n_outbound"),
        "either": pl.max_horizontal("n_inbound", "n_outbound"),
    }[mode]
    return (
        pl.when(pl.col("year").is_null()).then(pl.lit("no_year"))
        .when(pl.col("title").fill_null("").str.strip_chars() == "").then(pl.lit("no_title"))
        .when(pl.col("abstract").fill_null("").str.strip_chars().str.len_chars() < min_abstract)
        .then(pl.lit("short_abstract"))
        .when(cites < min_citations).then(pl.lit("few_citations"))
        .otherwise(None)
    )


def reconcile(corpus_dir: Path, counts: dict[str, int]) -> dict[str, Any]:
    """Every raw line accounted for: lines_read (ingest) == kept + drops + quarantined +
    duplicate_records, each term stated; `balanced` is False when the ingest counts are missing
    from `<corpus>/manifest.json`."""
    path = corpus_dir / MANIFEST
    ingested = corpus_section(corpus_dir, "ingest").get("counts", {})
    terms = {key: ingested.get(key) for key in ("lines_read", "quarantined", "duplicate_records")}
    dropped = {reason: counts[reason] for reason in DROP_REASONS}
    missing = [key for key, value in terms.items() if value is None]
    balanced = not missing and terms["lines_read"] == (
        counts["kept"] + sum(dropped.values()) + terms["quarantined"] + terms["duplicate_records"]
    )
    result = {
        "equation": "lines_read == kept + sum(dropped) + quarantined + duplicate_records",
        "lines_read": terms["lines_read"], "kept": counts["kept"], "dropped": dropped,
        "quarantined": terms["quarantined"], "duplicate_records": terms["duplicate_records"],
        "balanced": bool(balanced),
    }
    if missing:
        result["missing"] = f"no ingest counts {', '.join(missing)} in {path}: rerun ingest"
    return result


def prefilter(corpus_dir: Path, mode: CitationMode = "inbound", min_citations: int = 3,
              min_abstract: int = 30) -> dict:
    """Prefilter under the corpus's lock (so a manifest never describes another run's file)."""
    if not corpus_dir.is_dir():
        raise InputError(f"{corpus_dir} does not exist: run the ingest stage first")
    with file_lock(corpus_dir / ".locks" / "corpus.lock"):
        return _prefilter(corpus_dir, mode, min_citations, min_abstract)


def _prefilter(corpus_dir: Path, mode: CitationMode, min_citations: int,
               min_abstract: int) -> dict:
    """Write `prefiltered.parquet` and record drop counts by reason in the corpus manifest,
    reconciled with the ingest counts (SPEC.md §2: every dropped paper counted by reason)."""
    if mode not in CITATION_MODES:
        raise InputError(f"unknown citation mode {mode!r}: use one of {', '.join(CITATION_MODES)}")
    papers_path = corpus_dir / "papers.parquet"
    if not papers_path.exists():
        raise InputError(f"{papers_path} is missing: run the ingest stage first")
    parameters = {"citations": mode, "min_citations": min_citations,
                  "min_abstract_chars": min_abstract}
    recorded = corpus_section(corpus_dir, "ingest").get("outputs", {}).get("papers.parquet")
    if recorded is None or file_problem(papers_path, recorded, deep=False):
        raise InputError(f"{papers_path} does not match the ingest manifest (ingest stopped "
                         "half-way or the file was replaced): run the ingest stage again")
    inputs = {"papers.parquet": recorded["sha256"]}
    old = corpus_section(corpus_dir, "prefilter")
    if (old.get("parameters") == parameters and old.get("inputs") == inputs
            and outputs_intact(corpus_dir, old)):
        print("[prefilter] up to date", file=sys.stderr)
        os.utime(corpus_dir / "prefiltered.parquet")  # newer than its inputs, for make
        return old
    start = time.perf_counter()
    tagged = pl.scan_parquet(papers_path).with_columns(
        reason=drop_reason(mode, min_citations, min_abstract)
    )
    by_reason = tagged.group_by("reason").agg(pl.len()).collect()
    counts = {r: 0 for r in DROP_REASONS} | {
        (row["reason"] or "kept"): row["len"] for row in by_reason.iter_rows(named=True)
    }
    with atomic_path(corpus_dir / "prefiltered.parquet") as tmp:
        tagged.filter(pl.col("reason").is_null()).drop("reason").sort("corpusid").sink_parquet(
            tmp, compression="zstd"
        )
        update_corpus_manifest(corpus_dir, "prefilter", None)  # the file is being replaced
    counts.setdefault("kept", 0)
    counts["total"] = sum(counts[r] for r in DROP_REASONS) + counts["kept"]
    info = manifest(
        "prefilter", parameters, counts=counts, reconciliation=reconcile(corpus_dir, counts),
        inputs=inputs, outputs=fingerprints(corpus_dir, ["prefiltered.parquet"]),
        seconds=round(time.perf_counter() - start, 2),
    )
    update_corpus_manifest(corpus_dir, "prefilter", info)
    return info
