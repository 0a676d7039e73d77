"""Ingest S2ORC 2020 metadata shards and prefilter them (SPEC.md §1-2, MDCR §3).

Ingest streams one gzipped JSONL shard at a time into two parquet contracts (DESIGN.md):
`papers.parquet` (corpusid, title, abstract, year, fields, n_inbound, n_outbound) and
`citations.parquet` (citing, cited). Prefilter keeps papers with a year, a title, an abstract
of at least 30 characters and at least three citations, and counts every drop by its reason.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import polars as pl
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.artifacts import atomic_path, file_lock, manifest, read_json, write_json
from pipeline.errors import InputError

CitationMode = Literal["inbound", "outbound", "either"]
CITATION_MODES: tuple[str, ...] = ("inbound", "outbound", "either")

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
CITATIONS_SCHEMA = pa.schema([("citing", pa.int64()), ("cited", pa.int64())])
DROP_REASONS = ("no_year", "no_title", "short_abstract", "few_citations")


def update_corpus_manifest(corpus_dir: Path, section: str, data: dict) -> None:
    """Record one stage's manifest under its own key in `<corpus>/manifest.json`."""
    path = corpus_dir / "manifest.json"
    with file_lock(corpus_dir / ".manifest.lock"):
        current = read_json(path) if path.exists() else {}
        current[section] = data
        write_json(current, path)


def find_shards(raw_dir: Path) -> list[Path]:
    """The metadata shards under an S2ORC folder, in numeric order."""
    shards = sorted((raw_dir / "metadata").glob("metadata_*.jsonl.gz"),
                    key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    if not shards:
        raise InputError(
            f"no S2ORC metadata shards under {raw_dir}/metadata/: expected "
            "metadata_<k>.jsonl.gz files (S2ORC 20200705v1 layout)"
        )
    return shards


def _read_shard(path: Path) -> pa.Table:
    try:
        return pajson.read_json(
            pa.input_stream(str(path), compression="gzip"),
            read_options=pajson.ReadOptions(block_size=64 << 20),
            parse_options=pajson.ParseOptions(explicit_schema=S2ORC_SCHEMA,
                                              unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, OSError) as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{path}: not S2ORC metadata JSONL ({first}); check the file") from None


def _convert(table: pa.Table) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """One shard's rows -> (papers, citations, counts of what was skipped)."""
    df = pl.from_arrow(table).with_columns(
        corpusid=pl.col("paper_id").str.strip_chars().cast(pl.Int64, strict=False)
    )
    bad_id = df["corpusid"].null_count()
    df = df.filter(pl.col("corpusid").is_not_null())
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
    counts = {"rows": table.num_rows, "bad_paper_id": bad_id, "bad_cited_id": bad_cited,
              "duplicate_edges": edges.height - unique.height}
    return papers, unique, counts


def ingest(raw_dir: Path, corpus_dir: Path) -> dict:
    """Stream S2ORC shards into `papers.parquet` and `citations.parquet` (written atomically)."""
    shards = find_shards(raw_dir)
    start = time.perf_counter()
    totals = {"rows": 0, "papers": 0, "edges": 0, "bad_paper_id": 0, "bad_cited_id": 0,
              "duplicate_edges": 0}
    # writers close before the atomic renames (contexts exit in reverse order)
    with (
        atomic_path(corpus_dir / "papers.parquet") as papers_tmp,
        atomic_path(corpus_dir / "citations.parquet") as cites_tmp,
        pq.ParquetWriter(papers_tmp, PAPERS_SCHEMA, compression="zstd") as papers_out,
        pq.ParquetWriter(cites_tmp, CITATIONS_SCHEMA, compression="zstd") as cites_out,
    ):
        for shard in tqdm(shards, desc="ingest", unit="shard"):
            papers, edges, counts = _convert(_read_shard(shard))
            papers_out.write_table(papers.to_arrow().cast(PAPERS_SCHEMA))
            cites_out.write_table(edges.to_arrow().cast(CITATIONS_SCHEMA))
            totals["papers"] += papers.height
            totals["edges"] += edges.height
            for key, value in counts.items():
                totals[key] += value
    ids = pl.scan_parquet(corpus_dir / "papers.parquet").select("corpusid")
    totals["duplicate_paper_ids"] = totals["papers"] - ids.unique().collect().height
    totals["dangling_edges"] = (
        pl.scan_parquet(corpus_dir / "citations.parquet")
        .join(ids, left_on="cited", right_on="corpusid", how="anti")
        .select(pl.len()).collect().item()
    )
    info = manifest("ingest", {"raw_dir": str(raw_dir)}, counts=totals,
                    shards=[s.name for s in shards],
                    seconds=round(time.perf_counter() - start, 2))
    update_corpus_manifest(corpus_dir, "ingest", info)
    return info


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


def prefilter(corpus_dir: Path, mode: CitationMode = "inbound", min_citations: int = 3,
              min_abstract: int = 30) -> dict:
    """Write `prefiltered.parquet` and record drop counts by reason in the corpus manifest."""
    if mode not in CITATION_MODES:
        raise InputError(f"unknown citation mode {mode!r}: use one of {', '.join(CITATION_MODES)}")
    papers_path = corpus_dir / "papers.parquet"
    if not papers_path.exists():
        raise InputError(f"{papers_path} is missing: run the ingest stage first")
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
    counts.setdefault("kept", 0)
    counts["total"] = sum(counts[r] for r in DROP_REASONS) + counts["kept"]
    info = manifest(
        "prefilter",
        {"citations": mode, "min_citations": min_citations, "min_abstract_chars": min_abstract},
        counts=counts, seconds=round(time.perf_counter() - start, 2),
    )
    update_corpus_manifest(corpus_dir, "prefilter", info)
    return info
