"""The S2AG reader: hand-written Semantic Scholar Datasets records (docs/ingest.md) give the same
contracts as S2ORC: fields by source, abstracts joined, counts, dangling flags, quarantine."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.ingest import ingest, merge, prefilter
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
ABSTRACT = "We study how citation graphs shape the retrieval of scientific papers at scale."


def paper(corpusid: int, year: int | None = 2019, external=("Medicine",),
          model=("Biology",), cited_by: int | None = 5, refs: int | None = 2,
          title: str | None = None) -> dict:
    """One `papers` record as S2AG writes it, nested fields and all."""
    return {
        "corpusid": corpusid,
        "externalids": {"DOI": f"10.1000/{corpusid}", "PubMed": None, "ArXiv": None,
                        "ACL": None, "DBLP": None, "PubMedCentral": None, "MAG": str(corpusid)},
        "title": title if title is not None else f"Paper {corpusid} on graphs",
        "authors": [{"authorId": "17", "name": "Zoran Medić"},
                    {"authorId": None, "name": "Jan Šnajder"}],
        "venue": "JCDL", "year": year, "referencecount": refs, "citationcount": cited_by,
        "influentialcitationcount": 0, "isopenaccess": True,
        "s2fieldsofstudy": [{"category": c, "source": "external"} for c in external]
        + [{"category": c, "source": "s2-fos-model"} for c in model],
        "publicationtypes": ["JournalArticle"], "publicationdate": "2019-05-01",
        "journal": {"name": "JCDL", "volume": "1", "pages": "1-10"},
    }


def cite(citing: int | None, cited: int | None, number: int = 1) -> dict:
    return {"citationid": number, "citingcorpusid": citing, "citedcorpusid": cited,
            "isinfluential": False, "contexts": ["as shown in [1]"], "intents": [["background"]]}


def write(path: Path, records: list, gz: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n"
                    for r in records)
    path.write_bytes(gzip.compress(data) if gz else data)


def s2ag_release(root: Path) -> Path:
    """2 papers shards (gz and plain), 1 abstracts shard, 2 citations shards, with one bad line
    in each dataset, a repeated paper, abstract and citation, and unmatched citation ids."""
    raw = root / "s2ag"
    write(raw / "papers" / "part-0.jsonl.gz", [
        paper(1, cited_by=9, refs=4),
        paper(2, external=("Computer Science", "Medicine", "Computer Science"),
              model=("Computer Science", "Mathematics"), cited_by=None, refs=None),
        paper(3, year=None), paper(4, external=(), model=("Physics",)),
        b'{"corpusid": "x1"}', b""])
    write(raw / "papers" / "part-1.jsonl", [
        paper(5, title="Copy later"), paper(1, title="A later copy of paper 1"), paper(6)],
        gz=False)
    write(raw / "abstracts" / "part-0.jsonl.gz", [
        {"corpusid": 1, "abstract": ABSTRACT}, {"corpusid": 2, "abstract": None},
        {"corpusid": 5, "abstract": ABSTRACT + " Five."}, {"corpusid": 1, "abstract": "dup"},
        {"corpusid": 99, "abstract": "an abstract without a paper"},
        {"corpusid": -3, "abstract": "a negative id"}])
    write(raw / "citations" / "part-0.jsonl.gz", [
        cite(2, 1, 1), cite(5, 1, 2), cite(5, None, 3)])
    write(raw / "citations" / "part-1.jsonl.gz", [
        cite(6, 777, 4), cite(2, 1, 5), cite(None, 3, 6),
        {"citationid": 7, "citingcorpusid": "2x", "citedcorpusid": 1}])
    return raw


def rows(path: Path) -> list[tuple]:
    return pl.read_parquet(path).rows()


def test_s2ag_papers_abstracts_and_citations_are_joined(tmp_path):
    raw = s2ag_release(tmp_path)
    info = ingest(raw, tmp_path / "c", source="s2ag")
    assert rows(tmp_path / "c" / "papers.parquet") == [  # the first copy of paper 1 kept
        (1, "Paper 1 on graphs", ABSTRACT, 2019, ["Medicine"], 9, 4),
        (2, "Paper 2 on graphs", None, 2019, ["Computer Science", "Medicine"], 0, 0),
        (3, "Paper 3 on graphs", None, None, ["Medicine"], 5, 2),
        (4, "Paper 4 on graphs", None, 2019, [], 5, 2),
        (5, "Copy later", ABSTRACT + " Five.", 2019, ["Medicine"], 5, 2),
        (6, "Paper 6 on graphs", None, 2019, ["Medicine"], 5, 2),
    ]
    cites = pl.read_parquet(tmp_path / "c" / "citations.parquet").sort("citing", "cited")
    assert cites.rows() == [(2, 1, False), (5, 1, False), (6, 777, True)]
    counts = info["counts"]
    assert counts == counts | {
        "lines_read": 8, "blank_lines": 1, "quarantined": 1, "duplicate_records": 1,
        "papers": 6, "abstract_lines_read": 6, "abstract_blank_lines": 0,
        "abstract_quarantined": 1, "citation_lines_read": 7, "citation_blank_lines": 0,
        "citation_quarantined": 1, "bad_cited_id": 1, "bad_citing_id": 1,
        "duplicate_edges": 1, "edges": 3, "dangling_edges": 1}
    assert counts["lines_read"] == (counts["papers"] + counts["quarantined"]
                                    + counts["duplicate_records"])
    assert counts["citation_lines_read"] == sum(counts[name] for name in (
        "edges", "duplicate_edges", "bad_cited_id", "bad_citing_id", "citation_quarantined"))
    assert info["shards"] == ["papers/part-0.jsonl.gz", "papers/part-1.jsonl",
                              "abstracts/part-0.jsonl.gz", "citations/part-0.jsonl.gz",
                              "citations/part-1.jsonl.gz"]
    bad = [json.loads(x) for x in (tmp_path / "c" / "quarantine.jsonl").read_text().splitlines()]
    assert [(b["shard"], b["line"]) for b in bad] == [  # papers, abstracts, citations
        ("papers/part-0.jsonl.gz", 5), ("abstracts/part-0.jsonl.gz", 6),
        ("citations/part-1.jsonl.gz", 4)]
    assert [b["reason"] for b in bad] == ["corpusid 'x1' is not an integer id",
                                          "corpusid -3 is out of range",
                                          "citingcorpusid '2x' is not an integer id"]
    assert info["quarantine"]["by_reason"] == {"corpusid": 2, "citingcorpusid": 1}
    # prefilter runs on it and reconciles with the papers dataset's lines
    section = prefilter(tmp_path / "c")
    assert section["reconciliation"]["balanced"]
    assert section["counts"]["kept"] == 2  # 1 and 5: the others lack an abstract or a year
    other = ingest(raw, tmp_path / "s2fos", source="s2ag", fos_source="s2-fos-model")
    assert other["parameters"]["fos_source"] == "s2-fos-model"
    assert pl.read_parquet(tmp_path / "s2fos" / "papers.parquet")["fields"].to_list() == [
        ["Biology"], ["Computer Science", "Mathematics"], ["Biology"], ["Physics"],
        ["Biology"], ["Biology"]]


def test_s2ag_field_types_are_not_guessed_from_a_blocks_first_rows(tmp_path):
    """A run of over 100 papers without a field, year or title (common for `external`),
    then papers with them: one block, typed as the schema says."""
    raw = s2ag_release(tmp_path)
    write(raw / "papers" / "part-1.jsonl", [
        {"corpusid": i, "title": None, "year": None, "s2fieldsofstudy": None}
        for i in range(10, 140)] + [paper(140)], gz=False)
    ingest(raw, tmp_path / "c", source="s2ag")
    papers = pl.read_parquet(tmp_path / "c" / "papers.parquet")
    assert papers.height == 4 + 131
    assert papers.row(by_predicate=pl.col("corpusid") == 140) == (
        140, "Paper 140 on graphs", None, 2019, ["Medicine"], 5, 2)
    assert papers.row(by_predicate=pl.col("corpusid") == 10) == (10, None, None, None, [], 0, 0)


@pytest.mark.slow
def test_s2ag_output_does_not_depend_on_workers(tmp_path, monkeypatch):
    raw = s2ag_release(tmp_path)
    ingest(raw, tmp_path / "one-bucket", source="s2ag")
    monkeypatch.setattr(merge, "BUCKET_PAPERS", 1)  # one bucket per estimated record
    one = ingest(raw, tmp_path / "one", source="s2ag")
    two = ingest(raw, tmp_path / "two", source="s2ag", workers=2)
    assert one["buckets"] == two["buckets"] > 1
    assert one["counts"] == two["counts"]
    for name in ("papers.parquet", "citations.parquet", "quarantine.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    for name in ("papers.parquet", "citations.parquet"):  # buckets change the order only
        many = pl.read_parquet(tmp_path / "one" / name)
        assert sorted(many.rows()) == sorted(rows(tmp_path / "one-bucket" / name))


def test_s2ag_strict_names_the_file_and_line(tmp_path):
    raw = s2ag_release(tmp_path)
    with pytest.raises(InputError, match=r"papers/part-0\.jsonl\.gz:5: corpusid 'x1' is not an"):
        ingest(raw, tmp_path / "strict", source="s2ag", strict=True)
    assert not (tmp_path / "strict" / "papers.parquet").exists()
    write(raw / "papers" / "part-0.jsonl.gz", [paper(1)])
    with pytest.raises(InputError, match=r"abstracts/part-0\.jsonl\.gz:6: corpusid -3 is out"):
        ingest(raw, tmp_path / "strict", source="s2ag", strict=True)


@pytest.mark.parametrize("dataset", ["papers", "abstracts", "citations"])
def test_s2ag_layout_errors_name_the_missing_folder(tmp_path, dataset):
    raw = s2ag_release(tmp_path)
    for shard in (raw / dataset).iterdir():  # an empty folder
        shard.unlink()
    with pytest.raises(InputError, match=f"no S2AG {dataset} shards under .*papers/, "
                                         "abstracts/ and citations/"):
        ingest(raw, tmp_path / "c", source="s2ag")
    shutil.rmtree(raw / dataset)  # no folder at all
    with pytest.raises(InputError, match=f"no S2AG {dataset} shards"):
        ingest(raw, tmp_path / "c", source="s2ag")
    assert not (tmp_path / "c" / "papers.parquet").exists()


@pytest.mark.slow
def test_cli_ingests_an_s2ag_release(tmp_path):
    raw = s2ag_release(tmp_path)
    base = [sys.executable, "-m", "pipeline", "--corpora-root", str(tmp_path / "corpora"),
            "--runs-root", str(tmp_path / "runs"), "ingest", "--corpus", "s2ag"]
    env = {**os.environ, "MAKEFLAGS": ""}
    done = subprocess.run([*base, "--raw", str(raw), "--source", "s2ag", "--fos-source",
                           "s2-fos-model", "--threads", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    corpus = tmp_path / "corpora" / "s2ag"
    manifest = json.loads((corpus / "manifest.json").read_text())["ingest"]
    assert manifest["parameters"]["source"] == "s2ag" and manifest["workers"] == 2
    assert manifest["counts"]["papers"] == 6
    assert pl.read_parquet(corpus / "papers.parquet")["fields"].to_list()[3] == ["Physics"]
    # each dataset's quarantine on a line of its own, not among the summary line's counts
    [summary] = [line for line in done.stderr.splitlines() if "[ingest] done" in line]
    assert "quarantined" not in summary and "citation_lines_read=7" in summary
    assert (f"[ingest] citations: 1 of 7 lines quarantined (citingcorpusid 1), written to "
            f"{corpus / 'quarantine.jsonl'}") in done.stderr.splitlines()
    wrong = subprocess.run([*base, "--raw", str(raw / "papers"), "--source", "s2ag"],
                           cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S, env=env)
    assert wrong.returncode == 2 and "no S2AG papers/abstracts/citations shards" in wrong.stderr


@pytest.mark.slow
def test_make_corpus_reads_an_s2ag_release(tmp_path):
    raw = s2ag_release(tmp_path)
    (tmp_path / "installed").touch()
    done = subprocess.run(
        ["make", "--no-print-directory", "corpus", "CORPUS=s2ag", f"RAW={raw}",
         f"DATA={tmp_path / 'data'}", f"PY={sys.executable}", f"STAMP={tmp_path / 'installed'}",
         "THREADS=2", "FOS_SOURCE=s2-fos-model"],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S, env={**os.environ,
        "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    corpus = tmp_path / "data" / "corpora" / "s2ag"
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["ingest"]["parameters"]["source"] == "s2ag"
    assert manifest["ingest"]["workers"] == 2
    assert pl.read_parquet(corpus / "prefiltered.parquet").height == 2


IDS = ("corpusid", "citingcorpusid", "citedcorpusid")


def older(record: dict) -> dict:
    """A record as the S2AG releases before `citationid` write it (their samples: ids as
    digit strings, no citationid, an `updated` stamp)."""
    return {name: str(value) if name in IDS and value is not None else value
            for name, value in record.items() if name != "citationid"} | {
        "updated": "2020-09-13T15:59:00.392Z"}


def release_of(raw: Path, layout) -> Path:
    """The same papers, abstracts and citations in a layout (`older`, or as they are), with
    bad ids that stay bad in both: a negative, text, a float, a bool."""
    write(raw / "papers" / "part-0.jsonl.gz", [
        *(layout(paper(i, refs=3)) for i in (1, 2, 3, 4)),
        b'{"corpusid": "-3", "title": "a negative id"}', b'{"corpusid": 7.0}'])
    write(raw / "abstracts" / "part-0.jsonl.gz", [
        layout({"corpusid": 1, "abstract": ABSTRACT}),
        layout({"corpusid": 3, "abstract": ABSTRACT + " Three."}),
        b'{"corpusid": true, "abstract": "a bool"}'])
    write(raw / "citations" / "part-0.jsonl.gz", [
        layout(cite(2, 1, 1)), layout(cite(3, 1, 2)), layout(cite(4, 2, 3)),
        layout(cite(4, None, 4)), layout(cite(1, 999, 5)),
        b'{"citingcorpusid": "12a", "citedcorpusid": "1"}',
        b'{"citingcorpusid": "2", "citedcorpusid": 1.5}'])
    return raw


def test_s2ag_ids_as_digit_strings_give_the_same_corpus_bytes(tmp_path):
    """Issue 56: an older release's ids (`"20187272"`) are ids, not bad lines: its corpus is
    byte for byte the newer layout's (integers and citationid)."""
    newer = ingest(release_of(tmp_path / "newer", lambda r: r), tmp_path / "a", source="s2ag")
    old = ingest(release_of(tmp_path / "older", older), tmp_path / "b", source="s2ag")
    assert b'"citingcorpusid": "2"' in gzip.decompress(
        (tmp_path / "older" / "citations" / "part-0.jsonl.gz").read_bytes())
    for name in ("papers.parquet", "citations.parquet", "quarantine.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert newer["counts"] == old["counts"]
    assert old["counts"] == old["counts"] | {
        "papers": 4, "quarantined": 2, "abstract_quarantined": 1, "edges": 4,
        "citation_quarantined": 2, "bad_cited_id": 1}
    assert sorted(rows(tmp_path / "b" / "citations.parquet")) == [
        (1, 999, True), (2, 1, False), (3, 1, False), (4, 2, False)]
    assert rows(tmp_path / "b" / "papers.parquet")[2][:3] == (3, "Paper 3 on graphs",
                                                              ABSTRACT + " Three.")
    reasons = [json.loads(line)["reason"] for line in
               (tmp_path / "b" / "quarantine.jsonl").read_text().splitlines()]
    assert reasons == ["corpusid '-3' is not an integer id",
                       "corpusid is a float (7.0), not an integer id",
                       "corpusid is a bool (True), not an integer id",
                       "citingcorpusid '12a' is not an integer id",
                       "citedcorpusid is a float (1.5), not an integer id"]


def test_s2ag_ingest_logs_each_datasets_quarantine_on_its_own_line(tmp_path, caplog):
    raw = s2ag_release(tmp_path)
    with caplog.at_level("INFO", logger="pipeline"):
        ingest(raw, tmp_path / "c", source="s2ag")
    where = tmp_path / "c" / "quarantine.jsonl"
    assert [m for m in caplog.messages if "quarantined" in m] == [
        f"[ingest] papers: 1 of 8 lines quarantined (corpusid 1), written to {where}",
        f"[ingest] abstracts: 1 of 6 lines quarantined (corpusid 1), written to {where}",
        f"[ingest] citations: 1 of 7 lines quarantined (citingcorpusid 1), written to {where}"]


def test_s2ag_a_dataset_mostly_quarantined_stops_ingest_and_writes_nothing(tmp_path):
    """Issue 56: more than half of a dataset's lines bad (here 4 of 5 citations) is one
    InputError naming the dataset, the count, the share and the first reason; the corpus
    made before stays as it was, byte for byte."""
    raw = s2ag_release(tmp_path)
    corpus = tmp_path / "c"
    ingest(raw, corpus, source="s2ag")
    before = {p.name: p.read_bytes() for p in corpus.iterdir() if p.is_file()}
    write(raw / "citations" / "part-0.jsonl.gz", [
        {"citingcorpusid": "2a", "citedcorpusid": 1}, cite(2, 1, 1)])
    write(raw / "citations" / "part-1.jsonl.gz", [{"citingcorpusid": -1, "citedcorpusid": 1}] * 3)
    with pytest.raises(InputError) as caught:
        ingest(raw, corpus, source="s2ag")
    message = str(caught.value)
    assert message.startswith(
        f"{raw / 'citations'}: 4 of its 5 lines (80.0%) are bad, more than the 50% ingest "
        f"accepts (the first: {raw / 'citations' / 'part-0.jsonl.gz'}:1: citingcorpusid "
        "'2a' is not an integer id); nothing was written")
    assert "\n" not in message
    assert {p.name: p.read_bytes() for p in corpus.iterdir() if p.is_file()} == before
    assert not list(tmp_path.rglob("*.tmp"))


def test_s2ag_a_dataset_wholly_quarantined_stops_build_corpus(tmp_path):
    from pipeline import Data, build_corpus

    raw = s2ag_release(tmp_path)
    for shard in (raw / "abstracts").iterdir():
        shard.unlink()
    write(raw / "abstracts" / "part-0.jsonl", [{"corpusid": 1, "abstract": 7}] * 3, gz=False)
    with pytest.raises(InputError, match=r"abstracts: 3 of its 3 lines \(100\.0%\) are bad.*"
                                         r"part-0\.jsonl:1: abstract is a int \(7\), not a "
                                         r"string"):
        build_corpus(Data(tmp_path / "data"), "s2", raw=raw, source="s2ag")
    assert not list((tmp_path / "data").rglob("*.parquet"))


def test_cli_stops_on_a_wholly_quarantined_dataset_in_one_line(tmp_path):
    raw = s2ag_release(tmp_path)
    write(raw / "citations" / "part-1.jsonl.gz", [older(cite(2, 1)) | {"citedcorpusid": "1b"}])
    write(raw / "citations" / "part-0.jsonl.gz", [{"citingcorpusid": "x"}] * 2)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--corpora-root", str(tmp_path / "corpora"),
         "--runs-root", str(tmp_path / "runs"), "ingest", "--corpus", "s2ag", "--raw", str(raw),
         "--source", "s2ag"],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.search(r"citations: 3 of its 3 lines \(100\.0%\) are bad, more than the 50% "
                     r"ingest accepts \(the first: .*citations/part-0\.jsonl\.gz:1: "
                     r"citingcorpusid 'x' is not an integer id\)", lines[0]), lines[0]
    assert not (tmp_path / "corpora" / "s2ag" / "papers.parquet").exists()


def trial_release(root: Path) -> Path:
    """An S2AG trial download (make download FIRST=1): the first papers file and the first
    abstracts file hold other papers, so no paper has its abstract; one bad papers line, one
    paper repeated, one without a year."""
    raw = root / "s2ag"
    write(raw / "papers" / "part-0.jsonl.gz", [
        paper(1), paper(2), paper(3, year=None), paper(4), paper(1, title="again"),
        b'{"corpusid": "x1"}'])
    write(raw / "abstracts" / "part-0.jsonl.gz", [
        {"corpusid": 100 + i, "abstract": ABSTRACT} for i in range(4)])
    write(raw / "citations" / "part-0.jsonl.gz", [cite(2, 1, 1), cite(4, 1, 2)])
    return raw


# what the refusal says of the trial release: the lines read and each one's fate
KEPT_NONE = ("no paper of corpus s2 passes the prefilter: of 6 papers lines read, 1 "
             "quarantined, 1 duplicate record, 4 papers dropped (1 no_year, 3 short_abstract)")


@pytest.mark.slow
def test_s2ag_a_corpus_that_keeps_no_paper_is_refused_in_one_line(tmp_path):
    """A trial S2AG download whose papers have no abstract: once ingested and prefiltered to 0
    papers, "done", and make pool then said "no prefiltered 2019 paper cites a paper of year
    <= 2018". Now build_corpus is refused in one line counting every line read by its fate,
    and no prefiltered file or prefilter section is written."""
    from pipeline import Data, build_corpus

    raw = trial_release(tmp_path)
    with pytest.raises(InputError) as caught:
        build_corpus(Data(tmp_path / "data"), "s2", raw=raw, source="s2ag")
    message = str(caught.value)
    assert message.startswith(KEPT_NONE) and "\n" not in message
    assert "abstracts dataset" in message  # what to do: the abstracts that go with the papers
    corpus = tmp_path / "data" / "corpora" / "s2"
    assert not (corpus / "prefiltered.parquet").exists()
    assert "prefilter" not in json.loads((corpus / "manifest.json").read_text())
    assert not list(corpus.rglob("*.tmp"))
    # too few citations: the refusal names the other citation mode in the API's words
    write(raw / "abstracts" / "part-0.jsonl.gz", [
        {"corpusid": i, "abstract": ABSTRACT} for i in range(1, 5)])
    with pytest.raises(InputError, match=r"\(1 no_year, 3 few_citations\): no paper has 100 "
                                         r"citations or more, counted as inbound: count "
                                         r"citations='either'"):
        build_corpus(Data(tmp_path / "data"), "s3", raw=raw, source="s2ag", min_citations=100)


@pytest.mark.slow
def test_cli_refuses_a_corpus_that_keeps_no_paper_in_one_line(tmp_path):
    raw = trial_release(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--corpora-root", str(tmp_path / "corpora"),
         "--runs-root", str(tmp_path / "runs"), "corpus", "--corpus", "s2", "--raw", str(raw),
         "--source", "s2ag"],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert KEPT_NONE in line
    assert not (tmp_path / "corpora" / "s2" / "prefiltered.parquet").exists()


# ---- the corpus's recorded source -------------------------------------------------------------
@pytest.fixture
def ingested_s2ag(tmp_path) -> Path:
    """DATA with corpus `mine` (not named s2ag) ingested from S2AG's datasets in its raw
    folder corpora/mine/s2ag, through the API with source='s2ag'."""
    from pipeline import Data, build_corpus

    data = tmp_path / "data"
    s2ag_release(data / "corpora" / "mine")  # corpora/mine/s2ag
    build_corpus(Data(data), "mine", source="s2ag")
    return data


def test_the_source_the_corpus_records_is_used_when_none_is_given(ingested_s2ag, caplog):
    """Once: without SOURCE, "no S2ORC metadata shards" (the default for a corpus not named
    s2ag), though the corpus's manifest says it was read from S2AG. Now its recorded source:
    the corpus is current, nothing read again; a source given that contradicts it is one line
    naming both, and nothing is written."""
    from pipeline import Data, build_corpus, ingest_corpus

    corpus = ingested_s2ag / "corpora" / "mine"
    before = {p.name: p.read_bytes() for p in corpus.iterdir() if p.is_file()}
    with caplog.at_level("INFO", logger="pipeline"):
        build_corpus(Data(ingested_s2ag), "mine")
        assert ingest_corpus(Data(ingested_s2ag), "mine")["parameters"]["source"] == "s2ag"
    assert "[ingest] up to date (same raw shards, settings and outputs)" in caplog.messages
    for call in (build_corpus, ingest_corpus):
        with pytest.raises(InputError) as caught:
            call(Data(ingested_s2ag), "mine", source="s2orc")
        message = str(caught.value)
        assert "\n" not in message and "source='s2orc'" in message
        assert "corpus mine was ingested from s2ag" in message
    assert {p.name: p.read_bytes() for p in corpus.iterdir() if p.is_file()} == before


@pytest.mark.slow  # make, twice, and the command line, twice
def test_the_doors_use_the_recorded_source(ingested_s2ag):
    """`python -m pipeline corpus` without --source: the corpus current (exit 0); with a
    contradicting --source, exit 2 in one line; make -n pool without SOURCE: the corpus stage
    reads corpora/mine/s2ag as S2AG; with SOURCE=s2orc, make corpus refuses in one line."""
    env = {k: v for k, v in os.environ.items() if k not in ("SOURCE", "RAW", "CORPUS", "DATA")}
    env["MAKEFLAGS"] = ""
    cli = [sys.executable, "-m", "pipeline", "--corpora-root", str(ingested_s2ag / "corpora"),
           "--runs-root", str(ingested_s2ag / "runs"), "corpus", "--corpus", "mine"]
    done = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[ingest] up to date" in done.stderr
    bad = subprocess.run([*cli, "--source", "s2orc"], cwd=ROOT, capture_output=True,
                         text=True, timeout=CHILD_BOUND_S, env=env)
    assert bad.returncode == 2 and "--source s2orc" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    installed = ingested_s2ag.parent / "installed"
    installed.touch()
    make = ["make", "--no-print-directory", f"DATA={ingested_s2ag}", f"PY={sys.executable}",
            f"STAMP={installed}", "CORPUS=mine"]
    shown = subprocess.run([*make, "-n", "pool", "SIZE=1k"], cwd=ROOT, capture_output=True,
                           text=True, timeout=CHILD_BOUND_S, env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    [corpus_line] = [line for line in shown.stdout.splitlines() if " corpus " in line]
    assert "--source 's2ag'" in corpus_line
    assert f"--raw '{ingested_s2ag / 'corpora' / 'mine' / 's2ag'}'" in corpus_line
    bad = subprocess.run([*make, "corpus", "SOURCE=s2orc"], cwd=ROOT, capture_output=True,
                         text=True, timeout=CHILD_BOUND_S, env=env)
    assert bad.returncode == 2 and "SOURCE=s2orc" in bad.stderr and "s2ag" in bad.stderr
    ours = [line for line in bad.stderr.splitlines() if line.strip() and not re.match(
        r"make(\[\d+\])?: ", line)]  # make's own "*** [corpus] Error 2" (make[1] under make)
    assert ours == ["error: SOURCE=s2orc: corpus mine was ingested from s2ag (its manifest."
                    "json): leave SOURCE out, or read s2orc into another CORPUS"], bad.stderr


def test_a_line_longer_than_any_record_is_refused_naming_its_shard_unread(tmp_path,
                                                                           monkeypatch):
    """The 8th trial: a shard of 1 GB of one character without a line break (gzipped to 1 MB)
    was held whole (3.39 GB) before it was called bad. A shard's line is read up to
    shards.MAX_RECORD bytes (here 1,000): a longer one is refused in one line naming the
    shard and the line, read no further (the memory traced stays far below the line's 16 MiB),
    and nothing is written."""
    import tracemalloc

    from pipeline.ingest import shards

    raw = s2ag_release(tmp_path)
    ingest(raw, tmp_path / "first", source="s2ag")  # the stage's imports, before measuring
    monkeypatch.setattr(shards, "MAX_RECORD", 1000)
    long = raw / "papers" / "part-2.jsonl.gz"
    long.write_bytes(gzip.compress(b"[" * (16 << 20), mtime=0))
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            ingest(raw, tmp_path / "c", source="s2ag")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(caught.value).startswith(f"{long}: line 1 is longer than 1000 bytes, more than "
                                        "any record holds (read no further)"), caught.value
    assert "\n" not in str(caught.value) and peak < 4 << 20, peak
    assert not (tmp_path / "c" / "papers.parquet").exists()


def test_a_raw_folder_that_does_not_exist_is_said_so_with_how_to_make_it(tmp_path, caplog):
    """The 8th trial: make corpus CORPUS=s2ag without RAW said ".../s2ag is gone" of a folder
    that never existed. A new corpus's raw folder that does not exist is one line saying so
    and how it is made (make download, or RAW=); a corpus ingested from another folder is
    kept as it is, the line naming the folder it does not find and the one it was read from."""
    from pipeline import Data, build_corpus

    data = Data(tmp_path / "data")
    default = tmp_path / "data" / "corpora" / "s2ag" / "s2ag"
    with pytest.raises(InputError) as caught:
        build_corpus(data, "s2ag")
    assert str(caught.value) == (
        f"{default} does not exist: make download CORPUS=s2ag downloads the S2AG datasets into "
        "it (with RAW=, into that folder), or give RAW= the folder that holds them")
    raw = s2ag_release(tmp_path / "elsewhere")
    build_corpus(data, "s2ag", raw=raw)
    with caplog.at_level("INFO", logger="pipeline"):
        build_corpus(data, "s2ag")
    assert (f"[ingest] {default} does not exist (removed after the ingest, or never made): "
            f"the corpus ingested from {raw} is kept as it is; to ingest again, make download "
            "CORPUS=s2ag downloads") in caplog.text
    assert "is gone" not in caplog.text
