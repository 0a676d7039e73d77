"""The S2ORC 2020 metadata reader (docs/ingest.md): one `metadata/*.jsonl[.gz]` shard at a time.

A clean shard is cut into blocks of about `BLOCK` bytes at line ends, each checked (UTF-8, one
`{...}` record per line, so row i is line i + 1) and parsed by pyarrow.
A shard with any doubt is read again line by line: each bad line is quarantined (or, strict,
stops the run) and the good ones go on in blocks. Either way memory is bounded by a block, not
by the shard. Rows go to scratch parts (`merge.PartSink`) tagged with their (shard, line) key,
so the merge can keep the first record of each paper id by shard and line order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.json as pajson

from pipeline.core.atomic import disk_errors
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import raw_repair
from pipeline.ingest import shards
from pipeline.ingest.merge import PartSink, key
from pipeline.ingest.shards import (
    ID_SPACE,
    INT32,
    READ_ERRORS,
    BadLine,
    Quarantine,
    ShardResult,
    check_int,
    find_shards,
    open_shard,
    parse_line,
    read_id,
    shard_lines,
    show,
)
from pipeline.layout import GZIP_SUFFIX, lines_file

S2ORC_SCHEMA = pa.schema([
    ("paper_id", pa.string()),
    ("title", pa.string()),
    ("abstract", pa.string()),
    ("year", pa.int64()),
    ("mag_field_of_study", pa.list_(pa.string())),
    ("outbound_citations", pa.list_(pa.string())),
    ("inbound_citations", pa.list_(pa.string())),
])
STRING_FIELDS = ("paper_id", "title", "abstract")
LIST_FIELDS = ("mag_field_of_study", "outbound_citations", "inbound_citations")
BLOCK = 16 << 20  # bytes of JSON per block: what one worker holds at a time
BYTES_PER_PAPER = {GZIP_SUFFIX: 700, "": 2_000}  # about, in S2ORC 2020 (to size the merge buckets)
_READ = pajson.ReadOptions(block_size=4 << 20)  # pyarrow parses a block in 4 MB pieces
_PARSE = pajson.ParseOptions(explicit_schema=S2ORC_SCHEMA, unexpected_field_behavior="ignore")


def estimated_papers(shards: list[Path]) -> int:
    return sum(p.stat().st_size
               // BYTES_PER_PAPER[GZIP_SUFFIX if p.name.endswith(GZIP_SUFFIX) else ""]
               for p in shards)


def _blocks(path: Path) -> Iterator[bytes]:
    """The shard's bytes in blocks of about BLOCK bytes, each cut after a newline (the last one
    may end without). We cut and hand out blocks ourselves, so nothing reads ahead: memory
    holds one block however large the shard. Bytes beyond shards.MAX_RECORD (a line as long
    as that, or a block larger) are a ValueError: the line-by-line reader, which holds a line
    up to that bound, then reads the shard (and refuses a longer line)."""
    with open_shard(path) as raw:
        rest = b""
        while chunk := raw.read(BLOCK):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if len(data) > shards.MAX_RECORD:
                raise ValueError("a line too long for the block reader")
            rest = data[cut:]
            if cut:
                yield data[:cut]
        if rest:
            yield rest


def _clean_lines(block: bytes) -> int | None:
    """The number of lines in a block when each is exactly one `{...}` record in valid UTF-8
    (no blank line, no object over two lines, LF line ends), else None: then row i of the
    parsed block is its line i + 1. C-speed scans, no copy of the data."""
    lines = block.count(b"\n") + (not block.endswith(b"\n"))
    if not (block.startswith(b"{") and (block.endswith(b"}\n") or block.endswith(b"}"))
            and block.count(b"}\n{") == lines - 1):
        return None
    offsets = pa.py_buffer(np.array([0, len(block)], dtype=np.int64))
    try:
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(block)).validate(full=True)
    except pa.ArrowInvalid:
        return None  # not UTF-8
    return lines


def _paper_id() -> pl.Expr:
    return pl.col("paper_id").str.strip_chars(ID_SPACE)


def _rows_are_valid(df: pl.DataFrame) -> bool:
    """Every paper_id an integer id and every year an int32 (what the line check demands)."""
    return bool(df.select(
        (_paper_id().str.contains(r"^[0-9]+$")
         & _paper_id().cast(pl.Int64, strict=False).is_not_null()).fill_null(False).all(),
        (pl.col("year").is_null() | pl.col("year").is_between(*INT32)).all(),
    ).row(0) == (True, True))


def _convert(df: pl.DataFrame, keys: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame,
                                                          dict[str, int]]:
    """Good rows of one block (line order) -> paper rows, edges (both with their record's
    key) and counts. A record's repeated citations are counted and written once."""
    df = df.with_columns(corpusid=_paper_id().cast(pl.Int64), _key=pl.Series(keys))
    papers = df.select(
        "corpusid", "title", "abstract",
        pl.col("year").cast(pl.Int32),
        fields=pl.col("mag_field_of_study").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        n_inbound=pl.col("inbound_citations").list.len().fill_null(0).cast(pl.Int32),
        n_outbound=pl.col("outbound_citations").list.len().fill_null(0).cast(pl.Int32),
        _key="_key",
    )
    edges = (df.select(citing="corpusid", cited="outbound_citations", _key="_key")
             .explode("cited").drop_nulls("cited"))
    cited = edges["cited"].cast(pl.Int64, strict=False)
    if cited.null_count():  # ids with spaces around them (rare): strip, then cast again
        cited = edges["cited"].str.strip_chars().cast(pl.Int64, strict=False)
    # the cast also takes a sign ("+5", "-0"), which read_id's rule refuses (memchr scans)
    signed = edges["cited"].str.contains("+", literal=True) | edges["cited"].str.contains(
        "-", literal=True)
    edges = edges.with_columns(cited=pl.when((cited >= 0) & ~signed).then(cited))
    bad_cited = edges["cited"].null_count()
    edges = edges.drop_nulls("cited")
    # a record's repeated citations: hashing every edge twice costs a second; test first
    repeated = edges.select(pl.struct("_key", "cited").is_duplicated().any()).item()
    unique = edges.unique(maintain_order=True) if repeated else edges
    counts = {"records": df.height, "bad_cited_id": bad_cited,
              "duplicate_edges": edges.height - unique.height}
    return papers, unique, counts


@dataclass
class ShardJob:
    path: Path
    index: int  # the shard's place in the input (natural order)
    work: Path  # the scratch folder
    n_buckets: int
    strict: bool


class _Blocks:
    """Converts blocks of good rows and hands them to the sink, summing counts."""

    def __init__(self, job: ShardJob):
        self.job = job
        self.sink = PartSink(job.work, f"{job.index:06d}", job.n_buckets)
        self.counts = {"records": 0, "bad_cited_id": 0, "duplicate_edges": 0}

    def add(self, df: pl.DataFrame, lines: np.ndarray) -> None:
        papers, edges, counts = _convert(df, key(self.job.index, lines))
        with disk_errors(self.job.work.parent):  # a full disk is not a bad shard
            self.sink.add(papers, edges)
        for name, value in counts.items():
            self.counts[name] += value


def _read_fast(job: ShardJob) -> _Blocks | None:
    """The whole shard through pyarrow, block by block, or None (and nothing left written)
    when any line needs a closer look."""
    blocks = _Blocks(job)
    rows = 0
    try:
        for block in _blocks(job.path):
            lines = _clean_lines(block)
            if lines is None:
                raise ValueError("a line needs the line-by-line check")
            df = pl.from_arrow(pajson.read_json(pa.BufferReader(block), read_options=_READ,
                                                parse_options=_PARSE))
            if df.height != lines or not _rows_are_valid(df):
                raise ValueError("a line needs the line-by-line check")
            blocks.add(df, np.arange(rows + 1, rows + 1 + lines, dtype=np.int64))
            rows += lines
    except (pa.ArrowException, ValueError, *READ_ERRORS):
        # bad JSON or UTF-8, a type pyarrow refuses, an empty or corrupt file
        blocks.sink.discard()
        return None
    with disk_errors(job.work.parent):
        blocks.sink.close()
    return blocks


def _check_record(line: bytes) -> dict[str, Any]:
    """The seven used fields of one line, typed as S2ORC_SCHEMA says, or BadLine."""
    obj = parse_line(line)
    record = {name: obj.get(name) for name in S2ORC_SCHEMA.names}
    for name in STRING_FIELDS:
        value = record[name]
        if value is not None and not isinstance(value, str):
            raise BadLine(name, f"{name} is a {type(value).__name__} ({show(value)}), "
                                "not a string")
    read_id(record, "paper_id", required=True)  # kept a string: the block parser casts it
    check_int(record, "year")
    for name in LIST_FIELDS:
        value = record[name]
        if value is not None and not isinstance(value, list):
            raise BadLine(name, f"{name} is a {type(value).__name__} ({show(value)}), "
                                "not a list")
        if value and not all(isinstance(item, str) or item is None for item in value):
            item = next(i for i in value if not isinstance(i, str) and i is not None)
            raise BadLine(name, f"{name} holds a {type(item).__name__} ({show(item)}), "
                                "not a string")
    return record


def _read_by_line(job: ShardJob, quarantine: Quarantine) -> tuple[_Blocks, int]:
    """The slow path: every line parsed and type-checked on its own; bad lines quarantined,
    blank lines counted, good records handed on in blocks of about BLOCK bytes."""
    blocks = _Blocks(job)
    good: list[bytes] = []
    numbers: list[int] = []
    size = blank = 0

    def flush() -> None:
        nonlocal size
        if good:
            table = pajson.read_json(pa.BufferReader(b"\n".join(good)),
                                     read_options=_READ, parse_options=_PARSE)
            blocks.add(pl.from_arrow(table), np.array(numbers, dtype=np.int64))
        good.clear()
        numbers.clear()
        size = 0

    try:
        with open_shard(job.path) as handle:
            for number, line in shard_lines(handle, job.path,
                                            raw_repair(job.path.parent.parent)):
                if not line.strip():
                    blank += 1
                    continue
                try:
                    good.append(orjson.dumps(_check_record(line)))
                except BadLine as exc:
                    quarantine.add(job.path, number, line, exc)
                    continue
                numbers.append(number)
                size += len(good[-1])
                if size >= BLOCK:
                    flush()
            flush()
    except READ_ERRORS as exc:
        blocks.sink.discard()
        raise InputError(f"{job.path}: cannot read it ({exc}): an incomplete download or "
                         "damaged bytes", raw_repair(job.path.parent.parent)) from None
    except BaseException:
        blocks.sink.discard()
        raise
    with disk_errors(job.work.parent):
        blocks.sink.close()
    return blocks, blank


def read_shard(job: ShardJob) -> ShardResult:
    """One shard into scratch parts: pyarrow's streaming reader when every line is a clean
    record (the common case), else line by line with bad lines quarantined."""
    blocks = _read_fast(job)
    if blocks is not None:
        counts = blocks.counts | {"lines_read": blocks.counts["records"], "blank_lines": 0,
                                  "quarantined": 0}
        return ShardResult(counts)
    (job.work / "quarantine").mkdir(exist_ok=True)
    with (job.work / "quarantine" / lines_file(f"{job.index:06d}")).open("wb") as handle:
        quarantine = Quarantine(handle, job.strict)
        blocks, blank = _read_by_line(job, quarantine)
    counts = blocks.counts | {"lines_read": blocks.counts["records"] + quarantine.count,
                              "blank_lines": blank, "quarantined": quarantine.count}
    return ShardResult(counts, line_by_line=True, by_reason=quarantine.by_reason,
                       first_bad=quarantine.first)


WHAT = "an S2ORC metadata release"
# how a raw folder that does not exist is made (said when it is missing)
MADE_BY = "give RAW= the folder of the S2ORC release, which holds metadata/ (docs/ingest.md)"
SETTINGS: tuple[str, ...] = ()


def raw_shards(raw_dir: Path) -> tuple[Path, list[Path]]:
    """The folder shard names are relative to, and the shards (`metadata/*.jsonl[.gz]`)."""
    return raw_dir / "metadata", find_shards(raw_dir)


def stage(raw_dir: Path, work: Path, strict: bool, workers: int
          ) -> tuple[list[Path], int, list[ShardResult]]:
    """Read every shard into the merge's scratch layout; return the shards read, the bucket
    count and one result per shard."""
    from pipeline.ingest.merge import bucket_count, in_order

    shards = find_shards(raw_dir)
    n_buckets = bucket_count(estimated_papers(shards))
    jobs = [ShardJob(path, i, work, n_buckets, strict) for i, path in enumerate(shards)]
    return shards, n_buckets, list(in_order(read_shard, jobs, workers, "ingest", "shards"))
