"""The report's HTML page (`runs/reports/<corpus>.html`, pipeline/report/html.py): one file
that holds every table's cells, the plots and the provenance of the numbers, fetches
nothing, and is the same bytes for the same results. The browser's view of it:
test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from pipeline.layout import (
    MANIFEST,
    REPORT_PAGE_SUFFIX,
    REPORT_PLOT_SUFFIX,
    RESULTS_FILE,
    pool_dir,
    report_file,
    reports_dir,
    run_paths,
)
from pipeline.report.build import Report, Section, Table, build_report
from pipeline.report.html import mark_meaning
from tests.report.conftest import REPORT_CORPUS, REPORT_MODELS
from tests.report.test_report_determinism import results_frame, write_results


class Tables(HTMLParser):
    """The page's data tables as text: name -> (header, rows), and every attribute that
    loads something (src, href)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, tuple[list[str], list[list[str]]]] = {}
        self.links: list[str] = []
        self.images: list[str] = []
        self._name: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._head = False

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.links += [v for k, v in attrs if k in ("src", "href") and v is not None]
        if tag == "img":
            self.images.append(found["src"])
        if tag == "table" and "data" in (found.get("class") or "").split():
            self._name = found["data-name"]
            self.tables[self._name] = ([], [])
        elif tag == "thead":
            self._head = True
        elif tag == "tbody":
            self._head = False
        elif tag == "tr" and self._name:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._name:
            header, rows = self.tables[self._name]
            if self._head:
                header += self._row
            else:
                rows.append(self._row)
            self._row = None
        elif tag == "table":
            self._name = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> Tables:
    parser = Tables()
    parser.feed(text)
    return parser


def plain(cell: str) -> str:
    """A report cell as the page shows it: bold is markup, not asterisks."""
    return cell.replace("**", "")


@pytest.fixture(scope="module")
def saved(report_data, tmp_path_factory) -> tuple[Path, Report, str]:
    """The fixture data's report saved under a copy of its runs folder: (runs folder, report,
    the page's text)."""
    runs = tmp_path_factory.mktemp("html") / "runs"
    shutil.copytree(report_data / "runs", runs)
    built = build_report(runs, REPORT_CORPUS, 0, report_data / "corpora")
    built.save()
    page = report_file(reports_dir(runs), REPORT_CORPUS, suffix=REPORT_PAGE_SUFFIX)
    return runs, built, page.read_text(encoding="utf-8")


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_the_page_is_written_beside_the_markdown_and_fetches_nothing(saved):
    runs, built, text = saved
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    found = parse(text)
    # nothing loaded from elsewhere: every src/href is inline data or a link within the page
    assert found.links and all(link.startswith(("data:", "#")) for link in found.links)
    assert not re.search(r"https?://|@import|<link rel=\"stylesheet|<script src", text)
    # every plot, byte for byte the PNG written beside it
    names = [p.name for s in built.sections for p in s.plots]
    assert {"map-vs-pool-size", "fields-600"} <= set(names)
    shown = [base64.b64decode(src.split(",", 1)[1]) for src in found.images]
    written = [report_file(reports_dir(runs), REPORT_CORPUS, n, REPORT_PLOT_SUFFIX).read_bytes()
               for n in names]
    assert shown == written
    assert built.html == text  # the page in memory is the page saved


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_every_table_is_on_the_page_cell_for_cell(saved):
    _, built, text = saved
    tables = parse(text).tables
    assert {"dataset", "field-600"} <= set(built.tables)
    for name, table in built.tables.items():
        header, rows = tables[name]
        assert header == table.header, name
        assert rows == [[plain(c) for c in row] for row in table.rows], name
    # the significance section's two tables are tables of the report like the others
    assert {"significance", "significance-intervals"} <= set(built.tables)


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_marks_say_what_they_mean(saved):
    _, built, text = saved
    caption = built.tables["dataset"].caption
    worse = mark_meaning(caption, "†", "")
    assert "95% interval of its difference excludes 0" in worse and "summary" in worse
    assert mark_meaning(caption, "bold", "") == "best MAP"
    assert '<b title="best MAP">' in text
    # random is far below BM25 on every pool: its MAP carries the mark, explained on hover
    random_row = next(r for r in built.tables["dataset"].rows if r[0] == "random")
    assert all("†" in c for c in random_row[1:])
    assert f'<abbr class="sig" title="{html.escape(worse)}">†</abbr>' in text


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_provenance_names_each_pool_and_run_with_its_checksums(saved, report_data):
    runs, built, text = saved
    tables = parse(text).tables
    corpus_dir = report_data / "corpora" / REPORT_CORPUS
    results = pl.read_parquet(runs / RESULTS_FILE)
    pools = sorted(results["pool"].unique().to_list())
    header, rows = tables["provenance-pools"]
    assert [r[0] for r in rows] == pools
    for row in rows:
        info = json.loads((pool_dir(corpus_dir, row[0]) / MANIFEST).read_text())
        cells = dict(zip(header, row, strict=True))
        for name, record in info["outputs"].items():
            assert f"{name} {record['sha256']}" in cells["files (sha256)"]
        assert f"size={info['parameters']['size']}" in cells["parameters"]
        assert cells["made by"] == info["code_version"]
        assert cells["rebuild"].startswith(f"make pools CORPUS={REPORT_CORPUS}")
    header, rows = tables["provenance-runs"]
    assert [(r[0], r[1]) for r in rows] == [(p, m) for p in pools for m in REPORT_MODELS]
    for row in rows:
        cells = dict(zip(header, row, strict=True))
        paths = run_paths(runs, REPORT_CORPUS, row[0], row[1])
        search = json.loads(paths.manifest.read_text())
        for name, record in search["outputs"].items():
            assert f"{name} {record['sha256']}" in cells["files (sha256)"]
        assert cells["rebuild"] == f"make eval CORPUS={REPORT_CORPUS} MODEL={row[1]}"
        assert "k=500" in cells["search parameters"]
        assert "metrics=map,ndcg,recall@30" in cells["evaluation parameters"]
    about = dict(built.provenance.about)
    assert about["results.parquet sha256"] == hashlib.sha256(
        (runs / RESULTS_FILE).read_bytes()).hexdigest()
    assert about["rebuild this page"] == f"make report CORPUS={REPORT_CORPUS} SEED=0"
    assert about["manifests not found"] == "0"
    assert "mdcr-pipeline" in about["package"]
    assert about["code that wrote this page"] in text


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_a_section_added_later_is_on_the_page_without_work(saved):
    """The page is rendered from the report's data: a new section's table and text appear."""
    _, built, _ = saved
    extra = Section("leakage", (Table("leakage", "queries in a training set; bold: most",
                                      ["model", "share"], [["bm25", "**0.0**"]]),))
    text = Report(built.corpus, built.seed, built.runs_root, (*built.sections, extra),
                  built.provenance).page({})
    assert '<section id="s-leakage">' in text and '<a href="#s-leakage">' in text
    assert parse(text).tables["leakage"] == (["model", "share"], [["bm25", "0.0"]])
    assert '<b title="most">0.0</b>' in text


def test_missing_manifests_are_counted_and_named(tmp_path):
    """Results whose pools and runs have no manifest (written by hand): the page says so."""
    runs = tmp_path / "runs"
    write_results(runs, results_frame())
    built = build_report(runs, "scidocs")
    about = dict(built.provenance.about)
    # one pool, three runs (a search manifest and an evaluation each), results.manifest.json
    assert about["manifests not found"] == "8"
    assert "beir-300-r0/manifest.json (missing)" in built.provenance.missing
    assert "Manifests not found (8)" in built.html


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_the_same_results_give_the_same_page(saved, report_data, tmp_path):
    """Again, in another folder: the same bytes, provenance included (the manifests' records,
    never where the data lies). Rows in another order: test_report_determinism.py (a
    collected results.parquet rewritten no longer matches its manifest, and is refused)."""
    runs, _, text = saved
    again = tmp_path / "runs"
    shutil.copytree(runs, again)
    shutil.rmtree(reports_dir(again))
    build_report(again, REPORT_CORPUS, 0, report_data / "corpora").save()
    page = report_file(reports_dir(again), REPORT_CORPUS, suffix=REPORT_PAGE_SUFFIX)
    assert page.read_text(encoding="utf-8") == text
