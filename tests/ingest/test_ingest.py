"""Ingest keeps one record per paper and every edge, quarantines bad lines by file and line;
prefilter drops exactly what MDCR §3 says, counted and reconciled with ingest."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.ingest import find_shards, ingest, prefilter
from pipeline.ingest.synthetic import SyntheticConfig, generate
from tests.conftest import copy_corpus
from tests.ingest.test_synthetic import read_rows


def test_contract_columns_and_counts(raw_corpus, corpus_dir):
    rows = read_rows(raw_corpus)
    papers = pl.read_parquet(corpus_dir / "papers.parquet")
    assert papers.columns == ["corpusid", "title", "abstract", "year", "fields", "n_inbound",
                              "n_outbound"]
    assert papers.schema["corpusid"] == pl.Int64
    assert papers.height == len(rows)
    cites = pl.read_parquet(corpus_dir / "citations.parquet")
    assert cites.schema == {"citing": pl.Int64, "cited": pl.Int64, "dangling": pl.Boolean}
    assert cites.height == sum(len(r["outbound_citations"]) for r in rows)
    assert cites.unique().height == cites.height
    # citations to ids outside the corpus are kept, flagged and counted
    ids = {int(r["paper_id"]) for r in rows}
    outside = sum(int(c) not in ids for r in rows for c in r["outbound_citations"])
    assert outside > 0 and cites["dangling"].sum() == outside
    assert not cites.filter(~pl.col("dangling"))["cited"].is_in(list(ids)).not_().any()
    counts = json.loads((corpus_dir / "manifest.json").read_text())["ingest"]["counts"]
    assert counts["dangling_edges"] == outside
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
    rows = read_rows(raw_corpus)
    expected = {r: 0 for r in ("no_year", "no_title", "short_abstract", "few_citations", "kept")}
    for row in rows:
        expected[expected_reason(row)] += 1
    section = json.loads((corpus_dir / "manifest.json").read_text())["prefilter"]
    counts = section["counts"]
    assert {k: counts[k] for k in expected} == expected
    recon = section["reconciliation"]
    assert recon["balanced"] is True and recon["lines_read"] == len(rows)
    assert recon["kept"] == expected["kept"] and recon["quarantined"] == 0
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


def raw_corpus_of_200(tmp_path: Path, n_shards: int = 2) -> Path:
    """A 200-paper S2ORC-format corpus in `n_shards` shards (100 lines each for 2 shards)."""
    raw = tmp_path / "raw"
    generate(raw, SyntheticConfig(n_papers=200, n_shards=n_shards))
    return raw


def shard_lines(shard: Path) -> list[bytes]:
    with gzip.open(shard, "rb") as handle:
        return handle.read().splitlines()


def write_lines(shard: Path, lines: list[bytes]) -> None:
    shard.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))


def quarantined(corpus: Path) -> list[dict]:
    return [json.loads(line) for line in (corpus / "quarantine.jsonl").read_text().splitlines()]


def sorted_parquet(path: Path) -> pl.DataFrame:
    table = pl.read_parquet(path)
    return table.sort(table.columns[:2])


def test_duplicate_records_keep_the_first_copy_and_only_its_citations(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    single = tmp_path / "single"
    ingest(raw, single)
    shard0, shard1 = (raw / "metadata" / f"metadata_{k}.jsonl.gz" for k in (0, 1))
    n0 = len(shard_lines(shard0))
    shard0.write_bytes(shard0.read_bytes() * 2)  # the shard appended to itself
    first = json.loads(shard_lines(shard0)[0])
    later = first | {"title": "A later copy", "outbound_citations": ["1", "2", "3"]}
    write_lines(shard1, [*shard_lines(shard1), json.dumps(later).encode()])

    counts = ingest(raw, tmp_path / "doubled")["counts"]
    papers = pl.read_parquet(tmp_path / "doubled" / "papers.parquet")
    assert papers["corpusid"].is_unique().all()
    assert sorted_parquet(tmp_path / "doubled" / "papers.parquet").equals(
        sorted_parquet(single / "papers.parquet"))
    assert "A later copy" not in papers["title"].to_list()
    cites = pl.read_parquet(tmp_path / "doubled" / "citations.parquet")
    assert cites.unique().height == cites.height
    assert sorted_parquet(tmp_path / "doubled" / "citations.parquet").equals(
        sorted_parquet(single / "citations.parquet"))
    assert counts["papers"] == 200
    assert counts["duplicate_records"] == n0 + 1
    assert counts["lines_read"] == 200 + n0 + 1 == (
        counts["papers"] + counts["quarantined"] + counts["duplicate_records"])


def test_a_bad_year_is_quarantined_with_its_shard_and_true_line(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    shard = raw / "metadata" / "metadata_1.jsonl.gz"
    lines = shard_lines(shard)
    row = json.loads(lines[41])
    lines[41] = json.dumps(row | {"year": 2019.5}).encode()
    write_lines(shard, lines)
    counts = ingest(raw, tmp_path / "corpus")["counts"]
    [entry] = quarantined(tmp_path / "corpus")
    assert (entry["shard"], entry["line"], entry["raw"]) == ("metadata_1.jsonl.gz", 42,
                                                            lines[41].decode())
    assert "year" in entry["reason"] and "2019.5" in entry["reason"]
    papers = pl.read_parquet(tmp_path / "corpus" / "papers.parquet")
    assert papers.height == counts["papers"] == 199
    assert int(row["paper_id"]) not in papers["corpusid"].to_list()


BAD_LINES = {  # what makes the line bad -> a word its quarantine reason must hold
    b"{not json": "JSON",
    b'{"paper_id": "900000001", "title": "t", "year": "2019"}': "year",
    b'{"paper_id": "900000002", "title": "t", "year": 2019.5}': "year",
    b'{"paper_id": "900000003", "title": "caf\xe9 latin-1"}': "UTF-8",
    b'{"paper_id": "W12x", "title": "t"}': "paper_id",
    b"[1, 2, 3]": "object",
    b'{"paper_id": "900000004", "outbound_citations": "1000001"}': "outbound_citations",
}


def test_bad_lines_are_quarantined_and_the_rest_ingested(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    clean = tmp_path / "clean"
    ingest(raw, clean)
    shard = raw / "metadata" / "metadata_0.jsonl.gz"
    lines = shard_lines(shard)
    expected = {}
    for k, (bad, word) in enumerate(BAD_LINES.items()):
        lines.insert(10 * k + 3, bad)
        expected[10 * k + 4] = (bad, word)
    lines.insert(80, b"   ")  # blank: counted, not quarantined
    expected = {line + (line > 80): value for line, value in expected.items()}
    write_lines(shard, lines)

    info = ingest(raw, tmp_path / "corpus")
    entries = quarantined(tmp_path / "corpus")
    assert {e["line"] for e in entries} == set(expected)
    for entry in entries:
        bad, word = expected[entry["line"]]
        assert entry["shard"] == "metadata_0.jsonl.gz"
        assert word in entry["reason"]
        assert entry["raw"] == bad.decode("utf-8", errors="backslashreplace")
    assert any("\\xe9" in e["raw"] for e in entries)
    assert sorted_parquet(tmp_path / "corpus" / "papers.parquet").equals(
        sorted_parquet(clean / "papers.parquet"))
    assert sorted_parquet(tmp_path / "corpus" / "citations.parquet").equals(
        sorted_parquet(clean / "citations.parquet"))
    counts = info["counts"]
    assert (counts["lines_read"], counts["papers"], counts["quarantined"],
            counts["duplicate_records"], counts["blank_lines"]) == (207, 200, 7, 0, 1)
    assert info["line_by_line_shards"] == ["metadata_0.jsonl.gz"]
    assert sum(info["quarantine"]["by_reason"].values()) == 7

    recon = prefilter(tmp_path / "corpus")["reconciliation"]
    assert recon["balanced"] is True
    assert (recon["lines_read"], recon["quarantined"], recon["duplicate_records"]) == (207, 7, 0)
    assert recon["kept"] + sum(recon["dropped"].values()) == 200


def test_strict_mode_stops_at_the_first_bad_line_with_file_and_line(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    shard = raw / "metadata" / "metadata_1.jsonl.gz"
    lines = shard_lines(shard)
    lines[56] = lines[56].replace(b'"year":', b'"year":"x",  "was":', 1)
    lines[70] = b"{not json"
    write_lines(shard, lines)
    with pytest.raises(InputError) as error:
        ingest(raw, tmp_path / "corpus", strict=True)
    message = str(error.value)
    assert message.startswith(f"{shard}:57: year is a str")
    assert message.endswith("; fix or remove the line, or run without --strict to quarantine it")
    assert "\n" not in message
    assert not list((tmp_path / "corpus").glob("*.parquet"))
    assert not (tmp_path / "corpus" / "quarantine.jsonl").exists()


def test_malformed_line_is_quarantined_by_default_and_an_error_when_strict(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    shard = raw / "metadata" / "metadata_1.jsonl.gz"
    n = len(shard_lines(shard))
    with gzip.open(shard, "at") as handle:
        handle.write("{not json\n")
    counts = ingest(raw, tmp_path / "corpus")["counts"]
    assert (counts["papers"], counts["quarantined"], counts["lines_read"]) == (200, 1, 201)
    [entry] = quarantined(tmp_path / "corpus")
    assert (entry["shard"], entry["line"], entry["raw"]) == ("metadata_1.jsonl.gz", n + 1,
                                                            "{not json")
    with pytest.raises(InputError, match=rf"metadata_1\.jsonl\.gz:{n + 1}: invalid JSON"):
        ingest(raw, tmp_path / "strict", strict=True)
    assert not list((tmp_path / "strict").glob("*.parquet"))


def test_clean_ingest_writes_an_empty_quarantine(tmp_path):
    raw = raw_corpus_of_200(tmp_path)
    info = ingest(raw, tmp_path / "corpus")
    assert (tmp_path / "corpus" / "quarantine.jsonl").read_bytes() == b""
    assert info["counts"]["quarantined"] == info["counts"]["blank_lines"] == 0
    assert info["line_by_line_shards"] == []  # clean shards take the fast path


def test_any_jsonl_shard_name_is_read_in_natural_order(tmp_path):
    raw = raw_corpus_of_200(tmp_path, n_shards=3)
    meta = raw / "metadata"
    (meta / "metadata_2.jsonl.gz").rename(meta / "part-a.jsonl.gz")
    (meta / "metadata_1.jsonl.gz").rename(meta / "metadata_10.jsonl.gz")
    plain = shard_lines(meta / "metadata_0.jsonl.gz")
    (meta / "metadata_0.jsonl.gz").unlink()
    (meta / "metadata_2.jsonl").write_bytes(b"".join(line + b"\n" for line in plain))
    (meta / "README.txt").write_text("not a shard")
    # a changed copy of a metadata_2 paper in metadata_10: natural order keeps the original
    first = json.loads(plain[0])
    write_lines(meta / "metadata_10.jsonl.gz", [
        *shard_lines(meta / "metadata_10.jsonl.gz"),
        json.dumps(first | {"title": "A later copy"}).encode(),
    ])
    names = ["metadata_2.jsonl", "metadata_10.jsonl.gz", "part-a.jsonl.gz"]
    assert [p.name for p in find_shards(raw)] == names
    info = ingest(raw, tmp_path / "corpus")
    assert info["shards"] == names
    assert (info["counts"]["papers"], info["counts"]["duplicate_records"]) == (200, 1)
    papers = pl.read_parquet(tmp_path / "corpus" / "papers.parquet")
    title = papers.filter(pl.col("corpusid") == int(first["paper_id"]))["title"].item()
    assert title == first["title"]


def test_an_empty_corpus_is_a_clear_error(tmp_path):
    meta = tmp_path / "raw" / "metadata"
    meta.mkdir(parents=True)
    (meta / "metadata_0.jsonl.gz").write_bytes(gzip.compress(b""))
    (meta / "metadata_1.jsonl").write_bytes(b"\n\n")
    with pytest.raises(InputError, match=f"no papers in {re.escape(str(tmp_path / 'raw'))}"):
        ingest(tmp_path / "raw", tmp_path / "corpus")
    assert not list((tmp_path / "corpus").glob("*.parquet"))


def test_a_signed_cited_id_is_a_bad_id_as_a_paper_id_is(tmp_path):
    """Issue 56's sibling: polars' cast takes "+5" and "-0" as ids; the one id rule
    (shards.read_id) does not, so they are counted as bad_cited_id, not kept as edges."""
    raw = raw_corpus_of_200(tmp_path)
    shard = raw / "metadata" / "metadata_0.jsonl.gz"
    lines = shard_lines(shard)
    first, other = json.loads(lines[0]), json.loads(lines[1])["paper_id"]
    first["outbound_citations"] = [f"+{other}", "-0", f" {other} "]
    write_lines(shard, [json.dumps(first).encode(), *lines[1:]])
    info = ingest(raw, tmp_path / "corpus")
    assert info["counts"]["bad_cited_id"] == 2
    cites = pl.read_parquet(tmp_path / "corpus" / "citations.parquet")
    assert cites.filter(pl.col("citing") == int(first["paper_id"]))["cited"].to_list() == [
        int(other)]


def test_shards_mostly_quarantined_stop_ingest_and_write_nothing(tmp_path):
    """Issue 56's sibling: S2ORC shards with more than half of their lines bad (here a shard
    of string years after a clean one) stop ingest with one line naming the metadata folder,
    the count, the share and the first reason, instead of a corpus of the few good ones."""
    raw = raw_corpus_of_200(tmp_path)
    shard = raw / "metadata" / "metadata_1.jsonl.gz"
    bad = [json.dumps(json.loads(line) | {"year": "2019"}).encode()
           for line in shard_lines(raw / "metadata" / "metadata_0.jsonl.gz")]
    write_lines(shard, bad * 2)
    with pytest.raises(InputError) as caught:
        ingest(raw, tmp_path / "corpus")
    assert str(caught.value).startswith(
        f"{raw / 'metadata'}: 200 of its 300 lines (66.7%) are bad, more than the 50% ingest "
        f"accepts (the first: {shard}:1: year is a str ('2019'), not an integer)")
    assert not (tmp_path / "corpus").exists() or not list((tmp_path / "corpus").iterdir())


def test_missing_shards_are_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no S2ORC metadata shards"):
        ingest(tmp_path, tmp_path / "corpus")


CORPUS_FILES = ("papers.parquet", "citations.parquet", "quarantine.jsonl")


@pytest.mark.slow
def test_output_does_not_depend_on_blocks_or_workers(raw_corpus, corpus_dir, tmp_path,
                                                     monkeypatch):
    """Small blocks (many cuts at line ends) and two worker processes give the same bytes as
    the default run; more merge buckets give the same rows (citations in bucket order);
    prefiltered papers keep the order of papers.parquet."""
    from pipeline.ingest import merge, s2orc

    monkeypatch.setattr(s2orc, "BLOCK", 64 << 10)  # about 40 papers per block
    info = ingest(raw_corpus, tmp_path / "blocks")
    assert info["line_by_line_shards"] == []
    for name in CORPUS_FILES:
        assert (tmp_path / "blocks" / name).read_bytes() == (corpus_dir / name).read_bytes()
    monkeypatch.undo()
    ingest(raw_corpus, tmp_path / "two", workers=2)
    for name in CORPUS_FILES:
        assert (tmp_path / "two" / name).read_bytes() == (corpus_dir / name).read_bytes(), name
    monkeypatch.setattr(merge, "BUCKET_PAPERS", 1000)
    assert ingest(raw_corpus, tmp_path / "buckets")["buckets"] >= 4
    for name in ("papers.parquet", "citations.parquet"):
        assert sorted_parquet(tmp_path / "buckets" / name).equals(
            sorted_parquet(corpus_dir / name)), name
    papers = pl.read_parquet(corpus_dir / "papers.parquet")["corpusid"]
    kept = pl.read_parquet(corpus_dir / "prefiltered.parquet")["corpusid"]
    assert kept.to_list() == papers.filter(papers.is_in(kept.implode())).to_list()


def test_a_line_split_across_blocks_or_with_crlf_is_read_exactly(tmp_path, monkeypatch):
    """Blocks are cut only at line ends; CRLF line ends and a last line without a newline
    send the shard down the line-by-line path, with the same records."""
    from pipeline.ingest import s2orc

    raw = raw_corpus_of_200(tmp_path)
    lines = shard_lines(raw / "metadata" / "metadata_0.jsonl.gz")
    expected = ingest(raw, tmp_path / "lf")["counts"]
    monkeypatch.setattr(s2orc, "BLOCK", 1000)
    write_lines(raw / "metadata" / "metadata_0.jsonl.gz", lines)
    assert ingest(raw, tmp_path / "small")["counts"] == expected
    (raw / "metadata" / "metadata_0.jsonl.gz").unlink()
    (raw / "metadata" / "metadata_0.jsonl").write_bytes(b"\r\n".join(lines))
    info = ingest(raw, tmp_path / "crlf")
    assert info["line_by_line_shards"] == ["metadata_0.jsonl"]
    assert info["counts"] == expected
    for name in ("papers.parquet", "citations.parquet"):
        assert (tmp_path / "crlf" / name).read_bytes() == (tmp_path / "lf" / name).read_bytes()


@pytest.mark.parametrize("target", ["empty", "corpus"])
def test_a_users_link_is_never_replaced_by_an_import(target, corpus_dir, tmp_path):
    """corpora/<c> as a symbolic link to a scratch disk: installing a corpus written whole
    (the imports, make mdcr) refused it before by deleting the link and writing a local folder.
    Now: refused in one line naming the link; the link and what it points to are untouched."""
    from pipeline.corpus.install import install_corpus

    scratch = tmp_path / "scratch" / "c"
    scratch.mkdir(parents=True)
    if target == "corpus":
        copy_corpus(corpus_dir, scratch)
    def files() -> list[tuple[str, bytes]]:  # hidden bookkeeping (the checksum cache) aside
        return sorted((p.name, p.read_bytes()) for p in scratch.iterdir()
                      if not p.name.startswith("."))

    before = files()
    link = tmp_path / "corpora" / "c"
    link.parent.mkdir()
    link.symlink_to(scratch)
    built = copy_corpus(corpus_dir, tmp_path / "corpora" / ".c.built.tmp")
    (built / "prefiltered.parquet").write_bytes(b"other papers")  # not the same corpus
    with pytest.raises(InputError, match="is a symbolic link"):
        install_corpus(built, link, [], replace=True, section="collection")
    assert link.is_symlink() and link.resolve() == scratch.resolve()
    assert files() == before


def test_an_s2orc_line_longer_than_any_record_is_refused_naming_its_shard(tmp_path,
                                                                          monkeypatch):
    """S2ORC's reader holds a shard's line up to shards.MAX_RECORD bytes too (here 100,000,
    its block reader giving the shard to the line-by-line one): a longer line is one line
    naming the shard and the line."""
    from pipeline.ingest import shards

    raw = raw_corpus_of_200(tmp_path)
    monkeypatch.setattr(shards, "MAX_RECORD", 100_000)
    long = raw / "metadata" / "metadata_9.jsonl"
    long.write_bytes(b'{"paper_id": "1", "title": "' + b"x" * 300_000 + b'"}\n')
    with pytest.raises(InputError) as caught:
        ingest(raw, tmp_path / "corpus")
    assert str(caught.value).startswith(f"{long}: line 1 is longer than 100000 bytes, more than "
                                        "any record holds (read no further)"), caught.value
