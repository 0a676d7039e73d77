"""Ingest keeps every row and edge; prefilter drops exactly what MDCR §3 says, counted."""

from __future__ import annotations

import gzip

import polars as pl
import pytest

from pipeline.errors import InputError
from pipeline.ingest import ingest, prefilter
from pipeline.synthetic import SyntheticConfig, generate
from tests.conftest import copy_corpus
from tests.test_synthetic import read_rows


def test_contract_columns_and_counts(raw_corpus, corpus_dir):
    rows = read_rows(raw_corpus)
    papers = pl.read_parquet(corpus_dir / "papers.parquet")
    assert papers.columns == ["corpusid", "title", "abstract", "year", "fields", "n_inbound",
                              "n_outbound"]
    assert papers.schema["corpusid"] == pl.Int64
    assert papers.height == len(rows)
    cites = pl.read_parquet(corpus_dir / "citations.parquet")
    assert cites.schema == {"citing": pl.Int64, "cited": pl.Int64}
    assert cites.height == sum(len(r["outbound_citations"]) for r in rows)
    assert cites.unique().height == cites.height
    null_fields = sum(r["mag_field_of_study"] is None for r in rows)
    assert null_fields > 0 and papers["fields"].null_count() == 0  # null list -> []


def expected_reason(row: dict) -> str:
    if row["year"] is None:
        return "no_year"
    if not (row["title"] or "").strip():
        return "no_title"
    if len((row["abstract"] or "").strip()) < 30:
        return "short_abstract"
    if len(row["inbound_citations"]) < 3:
        return "few_citations"
    return "kept"


def test_prefilter_counts_match_a_hand_count(raw_corpus, corpus_dir):
    import json

    rows = read_rows(raw_corpus)
    expected = {r: 0 for r in ("no_year", "no_title", "short_abstract", "few_citations", "kept")}
    for row in rows:
        expected[expected_reason(row)] += 1
    counts = json.loads((corpus_dir / "manifest.json").read_text())["prefilter"]["counts"]
    assert {k: counts[k] for k in expected} == expected
    assert counts["total"] == len(rows)
    kept = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    assert kept.height == expected["kept"]
    assert kept["abstract"].str.len_chars().min() >= 30
    assert kept["n_inbound"].min() >= 3


def test_citation_mode_is_configurable(corpus_dir, tmp_path):
    copy = copy_corpus(corpus_dir, tmp_path / "copy")
    inbound = prefilter(copy, "inbound")["counts"]["kept"]
    either = prefilter(copy, "either")["counts"]["kept"]
    assert either > inbound
    with pytest.raises(InputError, match="unknown citation mode"):
        prefilter(copy, "sideways")


def test_malformed_shard_is_a_clear_error_and_leaves_nothing(tmp_path):
    generate(tmp_path / "raw", SyntheticConfig(n_papers=200, n_shards=2))
    with gzip.open(tmp_path / "raw" / "metadata" / "metadata_1.jsonl.gz", "at") as handle:
        handle.write("{not json\n")
    with pytest.raises(InputError, match="metadata_1.jsonl.gz: not S2ORC metadata"):
        ingest(tmp_path / "raw", tmp_path / "corpus")
    assert not list((tmp_path / "corpus").glob("*.parquet"))


def test_missing_shards_are_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no S2ORC metadata shards"):
        ingest(tmp_path, tmp_path / "corpus")
