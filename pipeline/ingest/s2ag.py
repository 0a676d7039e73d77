"""The S2AG reader: the Semantic Scholar Datasets `papers`, `abstracts` and `citations`
(docs/ingest.md), joined on corpusid into the same contracts as the S2ORC reader.

Every shard is read by one worker, line by line (orjson), in blocks of BLOCK_RECORDS records,
so memory holds one block. Papers and abstracts go to scratch files bucketed by
`corpusid % n_buckets`; each bucket is then joined on its own (a paper gets the first abstract
record of its id) and handed to the shared merge with its (shard, line) keys, which keeps the
first record of each id. Citations go straight to the shared edge buckets.

- ids: an integer, or the same in digits as the releases before `citationid` write them
  (`"citingcorpusid":"20187272"`), read by `shards.read_id` as S2ORC's `paper_id` is, so both
  layouts give the same corpus;
- fields: the distinct `s2fieldsofstudy` categories whose `source` is `fos_source`
  (`external`, MAG-like, or `s2-fos-model`), in first-seen order;
- n_inbound / n_outbound: S2AG's own `citationcount` / `referencecount` (null -> 0);
- a citation whose cited corpusid is null (a reference S2 did not match to a paper) is counted
  as `bad_cited_id`, one whose citing corpusid is null as `bad_citing_id`, and neither is kept;
  repeated (citing, cited) pairs are kept once and counted as `duplicate_edges` (all copies
  meet in one cited bucket).

Counts: the papers dataset fills the shared ones (`lines_read`, `blank_lines`, `quarantined`,
`records`), so `lines_read = papers + quarantined + duplicate_records` holds for it; the other
two datasets count apart, `abstract_lines_read`, `abstract_blank_lines`, `abstract_quarantined`
and `citation_lines_read`, `citation_blank_lines`, `citation_quarantined`, with
`citation_lines_read = edges + duplicate_edges + bad_cited_id + bad_citing_id +
citation_quarantined`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.atomic import disk_errors
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import raw_repair
from pipeline.ingest.merge import (
    EDGES_SCHEMA,
    IDS_SCHEMA,
    PARTS_SCHEMA,
    SCRATCH,
    BucketWriter,
    bucket_count,
    in_order,
    key,
)
from pipeline.ingest.shards import (
    COUNT_PREFIX,
    READ_ERRORS,
    BadLine,
    Quarantine,
    ShardResult,
    check_int,
    find_datasets,
    open_shard,
    parse_line,
    read_id,
    shard_lines,
    show,
)
from pipeline.ingest.shards import (
    S2AG_DATASETS as DATASETS,
)
from pipeline.layout import GZIP_SUFFIX, lines_file, table_file

BLOCK_RECORDS = 50_000
# bytes of one S2AG record, about (gz, plain): estimates each dataset's records from its shards'
# sizes, to size the buckets (an estimate too low for a dataset would make its buckets large)
BYTES_PER_RECORD = {"papers": (400, 1_200), "abstracts": (500, 1_200), "citations": (100, 300)}
RAW_PAPERS = pa.schema([("corpusid", pa.int64()), ("title", pa.string()), ("year", pa.int32()),
                        ("fields", pa.list_(pa.string())), ("n_inbound", pa.int32()),
                        ("n_outbound", pa.int32()), ("_key", pa.int64())])
RAW_ABSTRACTS = pa.schema([("corpusid", pa.int64()), ("abstract", pa.string()),
                           ("_key", pa.int64())])
# the parsed rows' types, given to polars: inferring them from a block's first rows fails when
# those all lack a value (a run of papers without an `external` field, say)
ROWS = {
    "papers": pl.from_arrow(RAW_PAPERS.empty_table()).drop("_key").schema,
    "abstracts": pl.from_arrow(RAW_ABSTRACTS.empty_table()).drop("_key").schema,
    "citations": pl.Schema({"citing": pl.Int64, "cited": pl.Int64}),
}


def _string(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is not None and not isinstance(value, str):
        raise BadLine(name, f"{name} is a {type(value).__name__} ({show(value)}), not a string")
    return value


def _paper(record: dict[str, Any], fos_source: str) -> tuple:
    corpusid = read_id(record, "corpusid", required=True)
    for name in ("year", "citationcount", "referencecount"):
        check_int(record, name)
    labels = record.get("s2fieldsofstudy")
    labels = [] if labels is None else labels
    if not isinstance(labels, list) or not all(
            isinstance(x, dict) and isinstance(x.get("category"), str | None) for x in labels):
        raise BadLine("s2fieldsofstudy", f"s2fieldsofstudy {show(labels)} is not a list of "
                                         "{category: str, source} objects")
    fields = list(dict.fromkeys(x["category"] for x in labels
                                if x.get("source") == fos_source and x.get("category")))
    return (corpusid, _string(record, "title"), record.get("year"), fields,
            record.get("citationcount") or 0, record.get("referencecount") or 0)


def _abstract(record: dict[str, Any], fos_source: str) -> tuple:
    return read_id(record, "corpusid", required=True), _string(record, "abstract")


def _citation(record: dict[str, Any], fos_source: str) -> tuple:
    return read_id(record, "citingcorpusid"), read_id(record, "citedcorpusid")


PARSERS: dict[str, Callable[[dict[str, Any], str], tuple]] = {
    "papers": _paper, "abstracts": _abstract, "citations": _citation}


@dataclass
class ShardJob:
    dataset: str
    path: Path
    index: int  # the shard's place in its dataset (natural order)
    work: Path
    n_buckets: int
    strict: bool
    fos_source: str


def _records(job: ShardJob, quarantine: Quarantine, counts: dict[str, int]
             ) -> Iterator[tuple[list[tuple], list[int]]]:
    """Blocks of (parsed rows, their 1-based line numbers); bad lines quarantined."""
    parse = PARSERS[job.dataset]
    rows: list[tuple] = []
    lines: list[int] = []
    try:
        with open_shard(job.path) as handle:
            for number, line in shard_lines(handle, job.path,
                                            raw_repair(job.path.parent.parent)):
                if not line.strip():
                    counts["blank"] += 1
                    continue
                counts["lines"] += 1
                try:
                    rows.append(parse(parse_line(line), job.fos_source))
                except BadLine as exc:
                    quarantine.add(job.path, number, line, exc)
                    continue
                lines.append(number)
                if len(rows) >= BLOCK_RECORDS:
                    yield rows, lines
                    rows, lines = [], []
    except READ_ERRORS as exc:
        raise InputError(f"{job.path}: cannot read it ({exc}): an incomplete download or "
                         "damaged bytes", raw_repair(job.path.parent.parent)) from None
    if rows:
        yield rows, lines


def read_shard(job: ShardJob) -> ShardResult:
    """One shard of one dataset into scratch buckets."""
    name = f"{DATASETS.index(job.dataset)}{job.index:06d}"
    (job.work / "quarantine").mkdir(exist_ok=True)
    folder, schema, id_column = {
        "papers": (job.work / "s2ag-papers", RAW_PAPERS, "corpusid"),
        "abstracts": (job.work / "s2ag-abstracts", RAW_ABSTRACTS, "corpusid"),
        "citations": (job.work / "edges", EDGES_SCHEMA, "cited"),
    }[job.dataset]
    writer = BucketWriter(folder, name, job.n_buckets, schema)
    counts = {"lines": 0, "blank": 0, "kept": 0, "bad_cited_id": 0, "bad_citing_id": 0}
    with (job.work / "quarantine" / lines_file(name)).open("wb") as handle:
        # named as in the manifest's shards: dataset folder and file
        quarantine = Quarantine(handle, job.strict, base=job.path.parent.parent)
        for rows, lines in _records(job, quarantine, counts):
            df = pl.DataFrame(rows, schema=ROWS[job.dataset], orient="row")
            if job.dataset == "citations":
                complete = df.drop_nulls()
                counts["bad_citing_id"] += df["citing"].null_count()
                counts["bad_cited_id"] += df.filter(pl.col("citing").is_not_null())[
                    "cited"].null_count()
                # -1: no record's key, so the merge never drops an S2AG edge
                df = complete.with_columns(_key=pl.lit(-1, dtype=pl.Int64))
            else:
                df = df.with_columns(_key=key(job.index, np.array(lines, dtype=np.int64)))
            counts["kept"] += df.height
            with disk_errors(job.work.parent):
                writer.write(df, id_column)  # cast to the folder's schema there
        with disk_errors(job.work.parent):
            writer.close()
    prefix = COUNT_PREFIX.get(job.dataset, "")
    result = {f"{prefix}lines_read": counts["lines"], f"{prefix}blank_lines": counts["blank"],
              f"{prefix}quarantined": quarantine.count}
    if job.dataset == "papers":
        result["records"] = counts["kept"]
    elif job.dataset == "citations":
        result |= {count: counts[count] for count in ("bad_cited_id", "bad_citing_id")}
    return ShardResult(result, by_reason=quarantine.by_reason, first_bad=quarantine.first,
                       dataset=job.dataset)


def _read_bucket(folder: Path) -> pl.DataFrame | None:
    parts = sorted(folder.glob(table_file("*"))) if folder.is_dir() else []
    return pl.concat([pl.read_parquet(p) for p in parts]) if parts else None


def _dedupe_edges(folder: Path) -> int:
    """Every copy of a (citing, cited) pair is in one cited bucket: keep the first (by shard
    and line order), as one file; return how many copies were dropped."""
    edges = _read_bucket(folder)
    if edges is None:
        return 0
    unique = edges.unique(["citing", "cited"], maintain_order=True)
    for part in folder.glob(table_file("*")):
        part.unlink()
    pq.write_table(unique.to_arrow().cast(EDGES_SCHEMA), folder / table_file("edges"), **SCRATCH)
    return edges.height - unique.height


def join_bucket(job: tuple[Path, int]) -> int:
    """A bucket's papers with their first abstract, in (shard, line) order, as the shared
    merge's papers part and ids; its citations deduplicated (the copies are returned)."""
    work, bucket = job
    duplicate_edges = _dedupe_edges(work / "edges" / str(bucket))
    papers = _read_bucket(work / "s2ag-papers" / str(bucket))
    if papers is None:
        return duplicate_edges
    abstracts = _read_bucket(work / "s2ag-abstracts" / str(bucket))
    if abstracts is None:
        papers = papers.with_columns(abstract=pl.lit(None, dtype=pl.String))
    else:
        first = abstracts.sort("_key").unique("corpusid", keep="first").drop("_key")
        papers = papers.join(first, on="corpusid", how="left")
    papers = papers.sort("_key").select(PARTS_SCHEMA.names)
    name = f"{bucket:06d}"
    (work / "papers").mkdir(exist_ok=True)
    pq.write_table(papers.to_arrow().cast(PARTS_SCHEMA), work / "papers" / table_file(name),
                   **SCRATCH)
    (work / "ids" / str(bucket)).mkdir(parents=True, exist_ok=True)
    pq.write_table(papers.select("corpusid", "_key").to_arrow().cast(IDS_SCHEMA),
                   work / "ids" / str(bucket) / table_file(name), **SCRATCH)
    return duplicate_edges


def _estimated(datasets: dict[str, list[Path]], name: str) -> int:
    """About how many records a dataset's shards hold, from their sizes."""
    gz, plain = BYTES_PER_RECORD[name]
    return sum(p.stat().st_size // (gz if p.name.endswith(GZIP_SUFFIX) else plain)
               for p in datasets[name])


WHAT = "an S2AG download (papers, abstracts, citations)"
# how a raw folder that does not exist is made (said when it is missing)
MADE_BY = ("make download CORPUS={corpus} downloads the S2AG datasets into it (with RAW=, into "
           "that folder), or give RAW= the folder that holds them")
SETTINGS = ("fos_source",)


def raw_shards(raw_dir: Path) -> tuple[Path, list[Path]]:
    """The folder shard names are relative to, and the shards of the three datasets."""
    return raw_dir, [p for shards in find_datasets(raw_dir).values() for p in shards]


def stage(raw_dir: Path, work: Path, strict: bool, workers: int, fos_source: str = "external"
          ) -> tuple[list[Path], int, list[ShardResult]]:
    """Read every shard of the three datasets into the merge's scratch layout; return the
    shards read (papers, abstracts, citations), the bucket count and one result per shard."""
    datasets = find_datasets(raw_dir)
    # a bucket is joined in memory: ~500k papers and as many abstracts (a quarter of the merge's
    # buckets) and ~8M edges; a partial download (few papers, all citations) gets more buckets
    n_buckets = bucket_count(max(4 * _estimated(datasets, "papers"),
                                 4 * _estimated(datasets, "abstracts"),
                                 _estimated(datasets, "citations") // 4))
    jobs = [ShardJob(name, path, i, work, n_buckets, strict, fos_source)
            for name in DATASETS for i, path in enumerate(datasets[name])]
    results = list(in_order(read_shard, jobs, workers, "ingest", "shards"))
    with disk_errors(work.parent):
        duplicates = sum(in_order(join_bucket, [(work, b) for b in range(n_buckets)], workers,
                                  "ingest", "join buckets"))
    # copies of a citation span shards: they are counted with the first citations shard
    results[jobs.index(next(j for j in jobs if j.dataset == "citations"))].counts[
        "duplicate_edges"] = duplicates
    return [job.path for job in jobs], n_buckets, results
