"""What every ingest reader produces (DESIGN.md contracts) and the corpus manifest.

`papers.parquet`: corpusid, title, abstract, year, fields, n_inbound, n_outbound.
`citations.parquet`: citing, cited, dangling (the cited id is not a paper of the corpus: kept,
so that `n_inbound` stays what the source says, SPEC.md §1).
`<corpus>/manifest.json` holds one section per corpus stage (ingest, prefilter).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.artifacts import MANIFEST, file_lock, read_json, write_json

PAPERS_SCHEMA = pa.schema([
    ("corpusid", pa.int64()),
    ("title", pa.string()),
    ("abstract", pa.string()),
    ("year", pa.int32()),
    ("fields", pa.list_(pa.string())),
    ("n_inbound", pa.int32()),
    ("n_outbound", pa.int32()),
])
CITATIONS_SCHEMA = pa.schema([("citing", pa.int64()), ("cited", pa.int64()),
                              ("dangling", pa.bool_())])
# Every reader fills these; `lines_read = papers + quarantined + duplicate_records` (+ the
# lines of the other S2AG datasets, counted apart).
INGEST_COUNTS = ("lines_read", "blank_lines", "papers", "quarantined", "duplicate_records",
                 "edges", "bad_cited_id", "duplicate_edges", "dangling_edges")
QUARANTINE = "quarantine.jsonl"
ROW_GROUP = 65_536  # rows per parquet row group: readers downstream stream group by group


def update_corpus_manifest(corpus_dir: Path, section: str, data: dict | None) -> None:
    """Record one stage's manifest under its own key in `<corpus>/manifest.json` (None removes
    it: a stage does so before it starts replacing its files, so a kill leaves no manifest
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


def row_groups(path: Path, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """A parquet file one row group at a time: what bounds memory when streaming (pyarrow's
    iter_batches buffers many row groups when a batch spans them)."""
    handle = pq.ParquetFile(path)
    for i in range(handle.num_row_groups):
        yield handle.read_row_group(i, columns=columns)


class GroupedWriter:
    """A ParquetWriter that gathers small tables into row groups of about ROW_GROUP rows."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int = ROW_GROUP):
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")
        self.schema, self.rows = schema, rows
        self.pending: list[pa.Table] = []
        self.count = 0

    def write(self, table: pa.Table) -> None:
        self.pending.append(table.cast(self.schema))
        self.count += table.num_rows
        if sum(t.num_rows for t in self.pending) >= self.rows:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending).combine_chunks()  # bytes must not depend on
            self.writer.write_table(table, row_group_size=self.rows)  # how rows were batched
            self.pending = []

    def __enter__(self) -> GroupedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.flush()
        self.writer.close()
