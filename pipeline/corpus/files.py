"""A corpus's data files, as every reader writes them and every later stage reads them.

`papers.parquet`: corpusid, title, abstract, year, fields, n_inbound, n_outbound.
`citations.parquet`: citing, cited, dangling (the cited id is not a paper of the corpus: kept,
so that `n_inbound` stays what the source says, docs/ingest.md).
A file is read only after it is checked against the manifest section that vouches for it
(`corpus_file`); `paper_texts` gives the titles and abstracts of papers, `text_digests` a
fixed-width digest of each paper's text (what a store keeps beside each row it made).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.core.checksums import file_problem
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import VOUCHED_BY, corpus_repair, corpus_sections
from pipeline.layout import PREFILTERED

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
ROW_GROUP = 65_536  # rows per parquet row group: readers downstream stream group by group


def row_groups(path: Path, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """A parquet file one row group at a time: what bounds memory when streaming (pyarrow's
    iter_batches buffers many row groups when a batch spans them)."""
    import pyarrow.parquet as pq  # imports pandas too: only where parquet is streamed

    handle = pq.ParquetFile(path)
    for i in range(handle.num_row_groups):
        yield handle.read_row_group(i, columns=columns)


class GroupedWriter:
    """A ParquetWriter that gathers small tables into row groups of about ROW_GROUP rows."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int = ROW_GROUP):
        import pyarrow.parquet as pq

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


def corpus_file(corpus_dir: Path, name: str) -> Path:
    """`<corpus>/<name>`, checked against the manifest section that vouches for it (sha256,
    hashed again only when the file's stat changed): a damaged or half-written corpus file is
    refused with the command that rebuilds it, never read."""
    path = corpus_dir / name
    sections = corpus_sections(corpus_dir)
    recorded = next((sections[s]["outputs"][name] for s in VOUCHED_BY[name]
                     if name in sections.get(s, {}).get("outputs", {})), None)
    if recorded is None:
        why = "is missing" if not path.exists() else "is vouched for by no manifest section"
        raise InputError(f"{path} {why} (a corpus stage stopped half-way or never ran)",
                         corpus_repair(corpus_dir, sections))
    problem = file_problem(path, recorded, deep=False)
    if problem:
        raise InputError(f"{path}: {problem}", corpus_repair(corpus_dir, sections))
    return path


def paper_texts(corpus_dir: Path, ids: pl.Series) -> pl.DataFrame:
    """corpusid, title, abstract of the papers `ids`, from the checked prefiltered.parquet."""
    return (pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED))
            .filter(pl.col("corpusid").is_in(ids.implode()))
            .select("corpusid", "title", "abstract").collect())


# How a paper's text digest is made (recorded in the stores that keep one per row)
TEXT_DIGEST = "sha256 of the text fields as one JSON object, first 8 bytes as a uint64"


def text_digests(papers: pl.DataFrame, columns: Sequence[str] = ("title", "abstract")
                 ) -> np.ndarray:
    """Each paper's text digest (uint64, `TEXT_DIGEST`) over `columns`, the fields a stored
    row is made from: a store keeps it beside the row, so that a paper whose text changed
    since (a corpus made again in place) is never served its old row. About 1.8 s per million
    papers of 1,177 bytes on one core (benchmarks/store_digest.py)."""
    if not papers.height:
        return np.empty(0, dtype=np.uint64)
    texts = papers.select(pl.struct([pl.col(c) for c in columns]).struct.json_encode()
                          ).to_series()
    joined = b"".join(hashlib.sha256(text.encode()).digest()[:8] for text in texts)
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)
