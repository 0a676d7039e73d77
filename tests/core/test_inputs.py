"""The one staleness rule's digest of an input (issue 78): a manifest read as an input is
recorded by what it vouches for, so a report or the collected results stay current when an
artifact is made again the same way, and go stale when what it says changes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.checksums import sha256_file
from pipeline.core.inputs import MANIFEST_MOST, Roots, changed, input_sha256, record

RUN = {"stage": "search", "created": "2026-11-27T10:00:00Z", "seconds": 0.43,
       "code_version": "0.1.0 (git 6e21d34c47)", "queries_per_s": 115.3,
       "parameters": {"k": 500, "model": "bm25"}, "counts": {"queries": 50, "rows": 25000},
       "details": {"analysed_text_store": {"analysed": 10048, "reused": 0}},
       "inputs": {"indexes/@/p/bm25/lucene/_0.fdt": "aa"},
       "outputs": {"bm25.parquet": {"bytes": 10, "sha256": "bb"}}, "self_sha256": "cc"}


def write(path: Path, info: dict) -> Path:
    path.write_text(json.dumps(info, indent=1))
    return path


def test_a_manifest_made_again_the_same_way_keeps_its_digest(tmp_path):
    path = write(tmp_path / "bm25.manifest.json", RUN)
    before = input_sha256(path)
    again = {**RUN, "created": "2026-11-28T01:00:00Z", "seconds": 9.1, "queries_per_s": 5.5,
             "code_version": "0.1.0 (git 1cb4006)", "self_sha256": "dd",
             "details": {"analysed_text_store": {"analysed": 0, "reused": 10048}},
             "inputs": {"indexes/@/p/bm25/lucene/_1.fdt": "ee"}}
    write(path, again)
    assert input_sha256(path) == before
    assert sha256_file(path) != before  # its bytes did change


def test_what_a_manifest_vouches_for_changes_its_digest(tmp_path):
    path = write(tmp_path / "bm25.manifest.json", RUN)
    before = input_sha256(path)
    for key, value in (("parameters", {"k": 100, "model": "bm25"}),
                       ("counts", {"queries": 50, "rows": 5000}),
                       ("outputs", {"bm25.parquet": {"bytes": 10, "sha256": "ff"}})):
        write(path, {**RUN, key: value})
        assert input_sha256(path) != before, key


def test_a_corpus_manifest_of_sections_is_cut_section_by_section(tmp_path):
    sections = {"prefilter": {**RUN, "stage": "prefilter"}, "self_sha256": "x"}
    path = write(tmp_path / "manifest.json", sections)
    before = input_sha256(path)
    write(path, {"prefilter": {**RUN, "stage": "prefilter", "seconds": 99.0}, "self_sha256": "y"})
    assert input_sha256(path) == before
    write(path, {"prefilter": {**RUN, "stage": "prefilter", "parameters": {"k": 1}}})
    assert input_sha256(path) != before


def test_other_files_are_recorded_by_their_bytes(tmp_path):
    table = tmp_path / "values.parquet"
    pq.write_table(pa.table({"query": ["q1"], "map": [0.5]}), table)
    lines = tmp_path / "quarantine.jsonl"
    lines.write_text('{"parameters": 1}\n{"parameters": 2}\n')  # JSON lines: not one object
    plain = write(tmp_path / "list.json", {"models": ["a"]})  # an object vouching nothing
    big = tmp_path / "big.json"
    big.write_text('{"parameters": "' + "x" * MANIFEST_MOST + '"}')
    for path in (table, lines, plain, big):
        assert input_sha256(path) == sha256_file(path), path.name


def test_changed_asks_the_same_digest(tmp_path):
    roots = Roots(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs", "c")
    folder = tmp_path / "runs" / "c" / "p"
    folder.mkdir(parents=True)
    path = write(folder / "bm25.manifest.json", RUN)
    recorded = record(roots, [path])
    assert list(recorded) == ["runs/@/p/bm25.manifest.json"]
    write(path, {**RUN, "seconds": 3.0})
    assert changed(roots, recorded) == []
    write(path, {**RUN, "parameters": {"k": 100, "model": "bm25"}})
    # said with the corpus it means (the label keeps `@`, so a copied folder stays current)
    assert changed(roots, recorded) == ["its input runs/c/p/bm25.manifest.json changed since"]
    assert Roots(roots.corpora).shown("runs/@/p/x.json") == "runs/@/p/x.json"  # none known
    assert roots.shown("corpora/other/papers.parquet") == "corpora/other/papers.parquet"
