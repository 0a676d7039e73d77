"""Merging what the shard readers wrote into the corpus files, in bounded memory.

Readers run one process per shard and write into a scratch folder:
- `papers/<part>.parquet`: paper rows (PAPERS_SCHEMA) plus `_key`, the record's place in the
  input (shard, line); parts in name order are the order of `papers.parquet`;
- `ids/<b>/<part>.parquet`: (corpusid, _key) of every record whose id falls in bucket b;
- `edges/<b>/<part>.parquet`: (citing, cited, _key of the citing record) of every citation whose
  cited id falls in bucket b.
Buckets are `corpusid % n_buckets`, so all copies of an id meet in one bucket: duplicates are
found, and dangling citations flagged, one bucket at a time. Memory is bounded by a bucket
(n_buckets grows with the input) and a row group, never by the corpus or one shard.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.logs import track
from pipeline.core.processes import worker_pool
from pipeline.corpus.files import CITATIONS_SCHEMA, PAPERS_SCHEMA, GroupedWriter, row_groups
from pipeline.layout import array_file, table_file

EDGE_BATCH = 1 << 22  # edges checked at once: a hash set of the bucket's ids is built per batch
BUCKET_PAPERS = 2_000_000  # ids per bucket, at most about: 16 bytes each while deduplicating
SCRATCH = {"compression": "lz4"}  # scratch parts: cheap to write and to read back
T = TypeVar("T")
R = TypeVar("R")


def key(shard: int, line: np.ndarray | pl.Expr) -> Any:
    """A record's place in the input as one int64: shard-major, then 1-based line."""
    return (shard << 32) + line


def bucket_count(estimated_papers: int) -> int:
    """Buckets for a corpus of about this many records (each bucket ~ BUCKET_PAPERS ids)."""
    return max(1, math.ceil(estimated_papers / BUCKET_PAPERS))


class BucketWriter:
    """One scratch parquet file per bucket for one part, opened on first use."""

    def __init__(self, folder: Path, part: str, n_buckets: int, schema: pa.Schema):
        self.folder, self.part, self.n_buckets, self.schema = folder, part, n_buckets, schema
        self._writers: dict[int, pq.ParquetWriter] = {}

    def write(self, df: pl.DataFrame, id_column: str) -> None:
        if df.height == 0:
            return
        tagged = df.with_columns(_bucket=pl.col(id_column) % self.n_buckets)
        for (bucket,), group in tagged.partition_by("_bucket", as_dict=True).items():
            writer = self._writers.get(bucket)
            if writer is None:
                path = self.folder / str(bucket) / table_file(self.part)
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = self._writers[bucket] = pq.ParquetWriter(path, self.schema, **SCRATCH)
            writer.write_table(group.drop("_bucket").to_arrow().cast(self.schema))

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()


IDS_SCHEMA = pa.schema([("corpusid", pa.int64()), ("_key", pa.int64())])
EDGES_SCHEMA = pa.schema([("citing", pa.int64()), ("cited", pa.int64()), ("_key", pa.int64())])
PARTS_SCHEMA = PAPERS_SCHEMA.append(pa.field("_key", pa.int64()))


def in_order(fn: Callable[[T], R], tasks: Iterable[T], workers: int, desc: str,
             unit: str) -> Iterator[R]:
    """fn over tasks, `workers` processes at a time, results in task order (so outputs never
    depend on the number of workers); an exception stops the rest and is raised in order.
    Progress (pipeline.core.logs) as "[desc] done/total unit"."""
    tasks = list(tasks)
    bar = {"total": len(tasks), "show": len(tasks) >= 2}
    if workers <= 1 or len(tasks) < 2:
        yield from track(map(fn, tasks), desc, unit, **bar)
        return
    with worker_pool(min(workers, len(tasks))) as pool:
        futures = [pool.submit(fn, task) for task in tasks]
        try:
            yield from track((future.result() for future in futures), desc, unit, **bar)
        finally:
            for future in futures:
                future.cancel()


def _parts(folder: Path) -> list[Path]:
    return sorted(folder.glob(table_file("*"))) if folder.is_dir() else []


def _dedupe_bucket(job: tuple[Path, int]) -> np.ndarray:
    """Keys of the records that repeat an id of this bucket (all but the first by key); the
    bucket's distinct ids are saved as `uniq/<b>.npy` for the dangling check."""
    work, bucket = job
    parts = _parts(work / "ids" / str(bucket))
    ids = (pl.concat([pl.read_parquet(p) for p in parts]) if parts
           else pl.DataFrame(schema={"corpusid": pl.Int64, "_key": pl.Int64}))
    ids = ids.sort("corpusid", "_key")
    repeat = ids["corpusid"].is_first_distinct().not_()
    np.save(work / "uniq" / array_file(str(bucket)), ids.filter(~repeat)["corpusid"].to_numpy())
    return ids.filter(repeat)["_key"].to_numpy()


def dedupe(work: Path, n_buckets: int, workers: int) -> np.ndarray:
    """Sorted keys of every record dropped as a duplicate id (MDCR keeps one record per paper:
    the first by input order)."""
    (work / "uniq").mkdir(exist_ok=True)
    dropped = list(in_order(_dedupe_bucket, [(work, b) for b in range(n_buckets)], workers,
                            "ingest", "dedupe buckets"))
    return np.sort(np.concatenate(dropped)) if dropped else np.empty(0, dtype=np.int64)


def _kept(table: pa.Table, dropped: np.ndarray) -> pa.Table:
    if len(dropped):
        keys = table.column("_key").to_numpy()
        table = table.filter(pa.array(~np.isin(keys, dropped)))
    return table


def write_papers(work: Path, out: Path, dropped: np.ndarray) -> int:
    """`papers.parquet` from the reader's parts in order, without the dropped records."""
    with GroupedWriter(out, PAPERS_SCHEMA) as writer:
        for part in track(_parts(work / "papers"), "ingest", "paper parts"):
            for table in row_groups(part):
                writer.write(_kept(table, dropped).drop_columns(["_key"]))
    return writer.count


def _row_group_runs(path: Path, rows: int) -> Iterator[pa.Table]:
    """Consecutive row groups of a parquet file read together, about `rows` rows at a time
    (the readers write small groups: one per block and bucket)."""
    handle = pq.ParquetFile(path)
    group: list[int] = []
    size = 0
    for i in range(handle.num_row_groups):
        group.append(i)
        size += handle.metadata.row_group(i).num_rows
        if size >= rows:
            yield handle.read_row_groups(group)
            group, size = [], 0
    if group:
        yield handle.read_row_groups(group)


def write_citations(work: Path, n_buckets: int, out: Path, dropped: np.ndarray) -> dict[str, int]:
    """`citations.parquet`, bucket by bucket: the edges of kept records, each flagged dangling
    when its cited id is not a paper of the corpus."""
    dangling_edges = 0
    with GroupedWriter(out, CITATIONS_SCHEMA, rows=1 << 20) as writer:
        for bucket in track(range(n_buckets), "ingest", "citation buckets",
                            show=n_buckets >= 2):
            known = pl.Series(np.load(work / "uniq" / array_file(str(bucket)))).implode()
            for part in _parts(work / "edges" / str(bucket)):
                for table in _row_group_runs(part, EDGE_BATCH):
                    table = _kept(table, dropped)
                    # a hash lookup: 3x faster than np.searchsorted into the bucket's ids
                    dangling = pl.Series(table.column("cited")).is_in(known).not_()
                    writer.write(pa.table([table.column("citing"), table.column("cited"),
                                           dangling.to_arrow()], schema=CITATIONS_SCHEMA))
                    dangling_edges += int(dangling.sum())
    return {"edges": writer.count, "dangling_edges": dangling_edges}


class PartSink:
    """Where one reader part (an S2ORC shard) goes: its paper rows in order, its ids and edges
    by bucket. `discard()` removes what was written (a shard restarted line by line)."""

    def __init__(self, work: Path, part: str, n_buckets: int):
        self.work, self.part = work, part
        (work / "papers").mkdir(parents=True, exist_ok=True)
        self.papers = pq.ParquetWriter(work / "papers" / table_file(part), PARTS_SCHEMA,
                                       **SCRATCH)
        self.ids = BucketWriter(work / "ids", part, n_buckets, IDS_SCHEMA)
        self.edges = BucketWriter(work / "edges", part, n_buckets, EDGES_SCHEMA)

    def add(self, papers: pl.DataFrame, edges: pl.DataFrame) -> None:
        """papers: PARTS_SCHEMA columns; edges: citing, cited, _key."""
        self.papers.write_table(papers.to_arrow().cast(PARTS_SCHEMA))
        self.ids.write(papers.select("corpusid", "_key"), "corpusid")
        self.edges.write(edges, "cited")

    def close(self) -> None:
        self.papers.close()
        self.ids.close()
        self.edges.close()

    def discard(self) -> None:
        self.close()
        for path in [self.work / "papers" / table_file(self.part),
                     *self.work.glob(f"ids/*/{table_file(self.part)}"),
                     *self.work.glob(f"edges/*/{table_file(self.part)}")]:
            path.unlink(missing_ok=True)
