"""The S2AG reader: hand-written Semantic Scholar Datasets records (SPEC.md §1) give the same
contracts as S2ORC: fields by source, abstracts joined, counts, dangling flags, quarantine."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import InputError
from pipeline.ingest import ingest, prefilter

ROOT = Path(__file__).resolve().parents[1]
ABSTRACT = "We study how citation graphs shape the retrieval of scientific papers at scale."


def paper(corpusid: int, year: int | None = 2019, external=("Medicine",),
          model=("Biology",), cited_by: int = 5, refs: int = 2, title: str | None = None) -> dict:
    return {
        "corpusid": corpusid,
        "externalids": {"DOI": f"10.1000/{corpusid}", "PubMed": None, "ArXiv": None,
                        "ACL": None, "DBLP": None, "PubMedCentral": None, "MAG": str(corpusid)},
        "title": title if title is not None else f"Paper {corpusid} on graphs",
        "authors": [{"authorId": "17", "name": "Zoran Medić"}],
        "venue": "JCDL", "year": year, "referencecount": refs, "citationcount": cited_by,
        "influentialcitationcount": 0, "isopenaccess": True,
        "s2fieldsofstudy": [{"category": c, "source": "external"} for c in external]
        + [{"category": c, "source": "s2-fos-model"} for c in model],
        "publicationtypes": ["JournalArticle"], "publicationdate": "2019-05-01",
        "journal": {"name": "JCDL", "volume": "1", "pages": "1-10"},
    }


def write(path: Path, records: list, gz: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n"
                    for r in records)
    path.write_bytes(gzip.compress(data) if gz else data)


def s2ag_release(root: Path) -> Path:
    raw = root / "s2ag"
    write(raw / "papers" / "part-0.jsonl.gz", [
        paper(1), paper(2, external=("Computer Science", "Medicine")), paper(3, year=None),
        paper(4, external=(), model=("Physics",)), b'{"corpusid": "x1"}'])
    write(raw / "papers" / "part-1.jsonl", [
        paper(5, title="Copy later"), paper(1, title="A later copy of paper 1"), paper(6)],
        gz=False)
    write(raw / "abstracts" / "part-0.jsonl.gz", [
        {"corpusid": 1, "abstract": ABSTRACT}, {"corpusid": 2, "abstract": None},
        {"corpusid": 5, "abstract": ABSTRACT + " Five."}, {"corpusid": 1, "abstract": "dup"},
        {"corpusid": 99, "abstract": "an abstract without a paper"}])
    write(raw / "citations" / "part-0.jsonl.gz", [
        {"citationid": 1, "citingcorpusid": 2, "citedcorpusid": 1, "isinfluential": False,
         "contexts": ["as shown in [1]"], "intents": [["background"]]},
        {"citationid": 2, "citingcorpusid": 5, "citedcorpusid": 1, "isinfluential": True,
         "contexts": None, "intents": None},
        {"citationid": 3, "citingcorpusid": 5, "citedcorpusid": None, "isinfluential": False,
         "contexts": [], "intents": []}])
    write(raw / "citations" / "part-1.jsonl.gz", [
        {"citationid": 4, "citingcorpusid": 6, "citedcorpusid": 777, "isinfluential": False},
        {"citationid": 5, "citingcorpusid": 2, "citedcorpusid": 1, "isinfluential": False}])
    return raw


def test_s2ag_papers_abstracts_and_citations_are_joined(tmp_path):
    raw = s2ag_release(tmp_path)
    info = ingest(raw, tmp_path / "c", source="s2ag")
    papers = pl.read_parquet(tmp_path / "c" / "papers.parquet").sort("corpusid")
    assert papers["corpusid"].to_list() == [1, 2, 3, 4, 5, 6]
    one = papers.row(0, named=True)
    assert one["title"] == "Paper 1 on graphs" and one["abstract"] == ABSTRACT  # first copies
    assert one["fields"] == ["Medicine"] and one["n_inbound"] == 5 and one["n_outbound"] == 2
    assert papers["fields"].to_list()[1] == ["Computer Science", "Medicine"]
    assert papers["fields"].to_list()[3] == []
    assert papers["abstract"].to_list()[1] is None and papers["abstract"].to_list()[3] is None
    assert papers["year"].to_list()[2] is None
    cites = pl.read_parquet(tmp_path / "c" / "citations.parquet").sort("citing", "cited")
    assert cites.rows() == [(2, 1, False), (5, 1, False), (6, 777, True)]
    counts = info["counts"]
    assert counts["lines_read"] == 8 and counts["quarantined"] == 1
    assert counts["duplicate_records"] == 1 and counts["papers"] == 6
    assert counts["lines_read"] == counts["papers"] + counts["quarantined"] + 1
    assert counts["abstract_lines_read"] == 5 and counts["citation_lines_read"] == 5
    assert counts["bad_cited_id"] == 1 and counts["dangling_edges"] == 1
    assert counts["edges"] == 3
    assert info["shards"][0] == "papers/part-0.jsonl.gz" and len(info["shards"]) == 5
    bad = [json.loads(x) for x in (tmp_path / "c" / "quarantine.jsonl").read_text().splitlines()]
    assert [(b["shard"], b["line"]) for b in bad] == [("part-0.jsonl.gz", 5)]
    assert "corpusid" in bad[0]["reason"]
    # prefilter runs on it and reconciles with the papers dataset's lines
    section = prefilter(tmp_path / "c")
    assert section["reconciliation"]["balanced"]
    assert section["counts"]["kept"] == 2  # 1 and 5: the others lack an abstract or a year
    other = ingest(raw, tmp_path / "s2fos", source="s2ag", fos_source="s2-fos-model")
    assert other["parameters"]["fos_source"] == "s2-fos-model"
    fos = pl.read_parquet(tmp_path / "s2fos" / "papers.parquet").sort("corpusid")
    assert fos["fields"].to_list()[0] == ["Biology"] and fos["fields"].to_list()[3] == ["Physics"]


def test_s2ag_output_does_not_depend_on_workers(tmp_path):
    raw = s2ag_release(tmp_path)
    ingest(raw, tmp_path / "one", source="s2ag")
    ingest(raw, tmp_path / "two", source="s2ag", workers=2)
    for name in ("papers.parquet", "citations.parquet", "quarantine.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_s2ag_strict_and_layout_errors(tmp_path):
    raw = s2ag_release(tmp_path)
    with pytest.raises(InputError, match=r"part-0\.jsonl\.gz:5: corpusid is a str"):
        ingest(raw, tmp_path / "strict", source="s2ag", strict=True)
    assert not (tmp_path / "strict" / "papers.parquet").exists()
    for folder in (raw / "citations").iterdir():
        folder.unlink()
    with pytest.raises(InputError, match="no S2AG citations shards under .*citations/"):
        ingest(raw, tmp_path / "c", source="s2ag")


def test_make_corpus_reads_an_s2ag_release(tmp_path):
    raw = s2ag_release(tmp_path)
    (tmp_path / "installed").touch()
    done = subprocess.run(
        ["make", "--no-print-directory", "corpus", "CORPUS=s2ag", f"RAW={raw}",
         f"DATA={tmp_path / 'data'}", f"PY={sys.executable}", f"STAMP={tmp_path / 'installed'}",
         "THREADS=2", "FOS_SOURCE=s2-fos-model"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    corpus = tmp_path / "data" / "corpora" / "s2ag"
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["ingest"]["parameters"]["source"] == "s2ag"
    assert manifest["ingest"]["workers"] == 2
    assert pl.read_parquet(corpus / "prefiltered.parquet").height == 2
