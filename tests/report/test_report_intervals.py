"""The report's intervals and verdicts as a reader meets them (issue 71): on a small judged
report (the report fixture's pools with an RRF fusion, judged by the stand-in), no interval of a
metric outside [0, 100] (of a difference outside [-100, 100]), no interval of zero width from a
sample, no pair called "reversed" whose interval with the sample holds 0, and every caption's
stated range of queries fitting the table it sits over (or naming the rows outside it); then
each construction on values made to reach the cases: means near 0 and 1, every value agreeing,
a point estimate whose sign alone changes."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.evaluation.significance import agreeing_interval, bootstrap_ci, logit_interval
from pipeline.judging.intervals import bounded_interval, differences, means
from pipeline.layout import Place, pool_names
from pipeline.models import get_model
from pipeline.report.build import Report
from pipeline.report.judged import _interval
from pipeline.report.tables import fold_interval, interval_cell, significance_section
from pipeline.retrieval.search import search_pool
from tests.conftest import pair_values
from tests.report.conftest import REPORT_CORPUS

FUSED = "fuse--rrf--bm25--random"
JUDGED = ("bm25", FUSED, "random")
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"\[({NUMBER}), ({NUMBER})\]")
ONE_SIDED = re.compile(rf"\[([≥≤]) ({NUMBER})\]")
RANGE = re.compile(rf"at ({NUMBER}) to ({NUMBER}) queries")


@pytest.fixture(scope="module")
def judged_report(report_data, tmp_path_factory) -> Report:
    """The report of a copy of the report fixture's data (dataset-level pools of 20 queries
    and 2 draws, field-level pools of 8 queries) with bm25 and random fused by RRF, every
    pool judged by the stand-in (SAMPLE 8) over bm25, the fusion and random."""
    root = tmp_path_factory.mktemp("intervals")
    shutil.copytree(report_data, root, dirs_exist_ok=True)
    corpus = root / "corpora" / REPORT_CORPUS
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in pool_names(corpus):
        search_pool(place, pool, get_model(FUSED), threads=1)
        eval_run(place, pool, FUSED)
    collect_results(root / "corpora", root / "indexes", root / "runs")
    data = pipeline.Data(root)
    pipeline.judge(data, REPORT_CORPUS, list(JUDGED), "standin:1", sample=8)
    return pipeline.build_report(data, REPORT_CORPUS)


def markdown_tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) of each pipe table of Markdown `text` (its heading: the `## `
    line above it), cells unescaped as printed."""
    found, heading, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            heading = line[3:]
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(_cells(lines[i]))
                i += 1
            found.append((heading, header, rows))
            continue
        i += 1
    return found


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def every_table(report: Report) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(name, caption and notes, header, rows) of every table the report prints: its tables,
    and the tables of its sections written as Markdown text (none but a crossover's note)."""
    out = [(name, t.prose, t.header, t.rows) for name, t in report.tables.items()]
    for section in report.sections:
        if section.text:
            out += [(section.name, heading, header, rows)
                    for heading, header, rows in markdown_tables(section.text)]
    return out


def number(text: str) -> float:
    return float(text.replace(",", ""))


# the columns of each table whose intervals are of a metric's mean (x100: [0, 100]) or of a
# difference of two (x100: [-100, 100]); the shift is a difference of two differences
MEAN_COLUMNS = {"95% interval", "citations", "with the sample"}
DIFFERENCE_TABLES = ("judged-", "variance-differences")


def bounded_range(name: str, column: str) -> tuple[float, float] | None:
    if name.endswith("-pairs"):
        return (-200.0, 200.0) if column == "shift" else (-100.0, 100.0)
    if name == "variance-differences":
        return -100.0, 100.0
    if name.endswith("-means") or (name == "significance-intervals"
                                   and column == "95% interval"):
        return 0.0, 100.0
    return None


def test_no_interval_leaves_the_range_or_is_a_point(judged_report):
    seen = {"bounded": 0, "one-sided": 0}
    for name, _, header, rows in every_table(judged_report):
        for row in rows:
            for column, cell in zip(header, row, strict=True):
                limits = bounded_range(name, column)
                for low, high in INTERVAL.findall(cell):
                    low, high = number(low), number(high)
                    assert low < high, (name, column, cell)  # never a point
                    if limits:
                        seen["bounded"] += 1
                        assert limits[0] <= low and high <= limits[1], (name, column, cell)
                for side, end in ONE_SIDED.findall(cell):
                    seen["one-sided"] += 1
                    value = number(cell.split(" [")[0]) if " [" in cell else None
                    if value is not None:  # 100.0 [≥ 88.7]: the bound lies below the value
                        assert (number(end) < value) if side == "≥" else (number(end) > value), \
                            cell
                    if limits:
                        assert limits[0] <= number(end) <= limits[1], (name, column, cell)
    assert seen["bounded"] > 50  # the check saw the judged and significance intervals


def test_reversed_only_where_the_interval_with_the_sample_excludes_0(judged_report):
    pairs = [t for name, t in judged_report.tables.items() if name.endswith("-pairs")]
    assert pairs
    verdicts = set()
    for table in pairs:
        frame = table.frame()
        for row in frame.iter_rows(named=True):
            verdicts.add(row["order"].split(",")[0].split(":")[0].split(" (")[0])
            cited = number(row["citations"].split(" [")[0])
            found = INTERVAL.findall(row["with the sample"])
            if row["order"].startswith("reversed"):
                low, high = map(number, found[0])
                assert (high < 0) if cited > 0 else (low > 0), row
            if row["order"].startswith("kept"):
                low, high = map(number, found[0])
                assert (low > 0) if cited > 0 else (high < 0), row
            if row["order"].startswith("not determined") and found:
                low, high = map(number, found[0])
                assert low <= 0 <= high, row
    assert verdicts <= {"reversed", "kept", "not determined", "ordered by the sample"}


def queries_by_pool(report: Report) -> dict[str, int]:
    """Each pool's queries as the variance table shows them ("20 x 2": the pools' queries)."""
    table = report.tables["variance"]
    return {row[0]: int(row[2].split(" x ")[0]) for row in table.rows}


def table_queries(name: str, header: list[str], rows: list[list[str]],
                  pools: dict[str, int]) -> list[int]:
    """The queries of each row of a table: its queries column, else its pools' (by the pools
    column, in the variance table's names)."""
    if "queries" in header:
        return [int(r[header.index("queries")]) for r in rows if r[header.index("queries")]
                .isdigit()]
    if "pools" in header:
        return [pools[r[header.index("pools")]] for r in rows if r[header.index("pools")] in pools]
    return []


def ranges_fit(report: Report, names: Callable[[str], bool]) -> int:
    """Assert that every caption of the tables `names` picks that states a range of queries
    ("at 25 to 1,000 queries") sits over rows inside it, or names the rows outside it ("rows of
    8 or 20 queries ... lie outside"); return how many ranges were checked."""
    pools = queries_by_pool(report)
    stated = 0
    for name, caption, header, rows in every_table(report):
        if not names(name):
            continue
        for low, high in RANGE.findall(caption):
            stated += 1
            low, high = number(low), number(high)
            queries = table_queries(name, header, rows, pools)
            assert queries, (name, caption)  # a range stated over a table that shows queries
            outside = sorted({q for q in queries if not low <= q <= high})
            if outside:  # then the caption names them
                said = re.search(r"rows of ([\d, or]+) quer(?:y|ies)[^;]* lie outside",
                                 caption, re.IGNORECASE)
                assert said, (name, outside, caption)
                named = {int(n) for n in re.findall(r"\d+", said.group(1))}
                assert set(outside) <= named, (name, outside, caption)
    return stated


def test_every_captions_range_of_queries_fits_its_table(judged_report):
    """The judged tables' captions and notes (the significance intervals state each row's own
    simulated level, no range)."""
    stated = ranges_fit(judged_report, lambda name: not name.startswith("variance"))
    assert stated >= 2  # the judged means and pairs notes at least


def test_the_variance_sections_range_of_queries_fits_its_table(judged_report):
    """The variance section's captions (pipeline/report/variance.py): its differences'
    caption stated "at 30 to 1,000 queries" over pools of 8 and 20 (issue 71)."""
    ranges_fit(judged_report, lambda name: name.startswith("variance"))


# ---- each construction, on values made to reach its cases -----------------------------------
def test_agreeing_values_give_the_clopper_pearson_bound_never_a_point():
    assert agreeing_interval(1.0, 25) == pytest.approx((0.05 ** (1 / 25), 1.0))
    assert agreeing_interval(0.0, 50) == pytest.approx((0.0, 1 - 0.05 ** (1 / 50)))
    low, high = agreeing_interval(0.3, 25)
    share = 1 - 0.05 ** (1 / 25)
    assert (low, high) == pytest.approx((0.3 * (1 - share), 0.3 + share * 0.7))
    assert all(math.isnan(v) for v in agreeing_interval(2.0, 25))  # outside the range
    # the bootstrap of 25 queries all at 1, and the fold bootstrap likewise
    assert bootstrap_ci(np.ones(25)) == pytest.approx((0.05 ** (1 / 25), 1.0))
    folds = {f"q{i}": "fold 1" if i < 10 else "fold 2" for i in range(25)}
    ones = pl.DataFrame({"query": [f"q{i}" for i in range(25)], "value": [1.0] * 25})
    assert fold_interval(ones, folds) == pytest.approx((0.05 ** (1 / 25), 1.0))
    assert interval_cell(*bootstrap_ci(np.ones(25)), 25, 1.0) == "[≥ 88.7]"
    assert interval_cell(*bootstrap_ci(np.zeros(50)), 50, 0.0) == "[≤ 5.8]"
    # a Q x R matrix all at 1: the same bound over its queries
    interval, agree = bounded_interval(np.ones((25, 3)))
    assert agree and (interval.low, interval.high) == pytest.approx((0.05 ** (1 / 25), 1.0))
    assert _interval(1.0, interval.low, interval.high, agree, 25) == "100.0 [≥ 88.7]"
    # a difference all 0: symmetric, marked
    gap, agree = bounded_interval(np.zeros((25, 3)), bounds=(-1.0, 1.0), logit=False)
    assert agree and gap.low == pytest.approx(-gap.high)
    assert _interval(0.0, gap.low, gap.high, agree, 25, (-1.0, 1.0)) == \
        "0.0 [-11.3, 11.3] (all equal)"


def test_a_sign_change_inside_the_interval_is_not_determined_not_reversed():
    """The medicine 1k case: the citations say a > b, the sample's point a < b but its
    interval holds 0 (-9.4 [-25.7, 6.9]): not determined; reversed only with the interval
    beyond 0."""
    values = pair_values({f"medicine-1k-r{r}": (0.05, -0.03) for r in range(3)}
                         | {f"medicine-2k-r{r}": (0.05, -0.08) for r in range(3)}, 0.1, 25)
    pairs = differences(values).sort("size")
    unclear, clear = pairs.row(0, named=True), pairs.row(1, named=True)
    assert unclear["inferred"] < 0 < unclear["cited"] and unclear["low"] < 0 < unclear["high"]
    assert not unclear["reversed"] and unclear["verdict"].startswith("not determined")
    assert clear["high"] < 0 and clear["reversed"] and clear["verdict"].startswith("reversed")


def test_the_significance_section_says_its_level_and_where_rows_lie_outside():
    rng = np.random.default_rng(0)
    rows = pl.DataFrame([{"scope": "all", "size": size, "metric": "map", "model": model,
                          "query": f"q{q:02d}", "repeat": 0,
                          "value": 1.0 if model == "a" else float(rng.uniform(0, 0.1))}
                         for size, queries in ((1000, 8), (2000, 30))
                         for model in ("a", "b") for q in range(queries)])
    [table] = [t for t in significance_section(rows) if "95% interval" in t.header]
    heading, header, body = table.prose, table.header, table.rows
    assert "95% percentile bootstrap interval" in heading and header[3] == "queries"
    assert "given the drawn pools" in heading  # the mean it estimates (issue 79)
    # each row's own simulated level: none under the grid's fewest queries (8), and a note
    # saying so; Clopper-Pearson's bound where every query is 1
    levels = {(r[0], r[2]): r[6] for r in body}
    assert levels[("all-1k", "b")] == "-" and "no simulated level" in heading
    assert re.fullmatch(r"[\d.]+-[\d.]+", levels[("all-2k", "b")])
    assert levels[("all-1k", "a")] == levels[("all-2k", "a")] == "≥ 95.0"
    assert "[≥ x]" in heading  # model a is 1 on every query: its one-sided bound explained
    cells = {(r[0], r[2]): r[5] for r in body}
    assert cells[("all-1k", "a")] == "[≥ 68.8]" and cells[("all-2k", "a")] == "[≥ 90.5]"


def test_the_means_caption_names_rows_outside_the_simulated_range():
    values = pair_values({f"all-1k-r{r}": (0.05, 0.05) for r in range(2)}, 0.05, 8)
    frame = means(values)
    from pipeline.report.judged import means_interval_note

    note = means_interval_note(frame)
    assert "at 25 to 1,000 queries" in note
    assert "rows of 8 queries or 2 draws lie outside the simulated range" in note


def test_the_demo_cases_of_the_issue_stay_inside():
    """The issue's cells: a mean of 0.935 with half 0.101 ("93.5 [83.4, 103.6]"), 0.013 with
    half 0.0165 ("1.3 [-0.4, 2.9]"): inside [0, 1] on the logit scale, and skewed away from
    the bound."""
    for mean, half in ((0.935, 0.101), (0.013, 0.0165)):
        low, high = logit_interval(mean, half)
        assert 0 < low < mean < high < 1
        assert (high - mean < mean - low) if mean > 0.5 else (high - mean > mean - low)


def test_written_files_hold_the_same_cells(judged_report, tmp_path):
    """The Markdown file build_report writes holds the tables checked above."""
    assert isinstance(judged_report.markdown, str)
    path = Path(tmp_path) / "report.md"
    path.write_text(judged_report.document)
    tables = markdown_tables(path.read_text())
    assert any(h[:3] == ["pools", "metric", "model"] and "with the sample" in h
               for _, h, _ in tables)


def test_a_printed_interval_is_never_a_point_and_its_marks_compile():
    from pipeline.report.tables import latex_text, span

    assert span(0.99951, 0.99958) == "[99.95, 99.96]"  # one decimal would print a point
    assert span(0.2, 0.3) == "[20.0, 30.0]" and span(2.0, 3.5, scale=1) == "[2.0, 3.5]"
    assert latex_text("100.0 [≥ 88.7]") == r"100.0 [$\geq$ 88.7]"
    assert latex_text("0.0 [≤ 11.3]") == r"0.0 [$\leq$ 11.3]"
