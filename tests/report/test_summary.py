"""The report's opening summary (issue 79): each sentence quotes cells of the table it cites,
and changes with the data the table is made from (the winner swapped, a difference made
indistinguishable, the crossing moved, a run left out, the spread of the queries grown); at
most 8 sentences; first in the Markdown file and the HTML page."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.evaluation.significance import compare
from pipeline.layout import RESULTS_FILE
from pipeline.report.build import SECTIONS, Report, build_report, load_results
from pipeline.report.summary import (
    MAX_SENTENCES,
    Sentence,
    first_number,
    negated,
    reach_draws,
    summary_sentences,
)

CORPUS = "demo"
SIZES = (2000, 5000, 10000)
FIELDS = ("Medicine", "Biology")
JITTER = 0.002


def frame(models: dict[str, tuple[float, float]], noise: float = 0.02, queries: int = 30,
          spread: float = 0.1, seed: int = 79, draw_sd: float = 0.0) -> pl.DataFrame:
    """Per-query MAP of `models` (name -> its value at 2k and its change per e-fold of pool
    size) on dataset-level pools of SIZES x 3 draws (nested: one query sample per draw), and
    field-level pools of 1k (one draw): a query's effect shared by the models (sd `spread`),
    a model's own on each query (sd `noise`), a little of each draw's (sd JITTER) and, where
    `draw_sd`, a model's own shift in each draw (sd `draw_sd`); clipped to [0, 1]."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, spread, queries)
    own = {model: rng.normal(0, noise, queries) for model in models}
    rows = []

    def add(pool: str, level: str, scope: str, field: str | None, size: int, repeat: int,
            drift: float) -> None:
        for model, (level_at_2k, slope) in models.items():
            base = level_at_2k + slope * math.log(size / SIZES[0]) + drift
            if draw_sd:
                base += rng.normal(0, draw_sd)
            values = np.clip(base + effect + own[model] + rng.normal(0, JITTER, queries), 0, 1)
            rows.extend({"corpus": CORPUS, "pool": pool, "level": level, "scope": scope,
                         "field": field, "size": size, "repeat": repeat, "seed": 0,
                         "split": "test", "candidates": size, "model": model,
                         "query": f"q{q:03d}", "negatives": "all", "metric": "map",
                         "value": float(v)} for q, v in enumerate(values))

    for size in SIZES:
        for repeat in range(3):
            add(f"all-{size // 1000}k-r{repeat}", "dataset", "all", None, size, repeat,
                rng.normal(0, 0.002))
    for field in FIELDS:
        add(f"{field.lower()}-1k-r0", "field", field.lower(), field, 1000, 0, 0.0)
    return pl.DataFrame(rows, infer_schema_length=None)


def made(tmp_path: Path, results: pl.DataFrame) -> tuple[Report, list[Sentence]]:
    """The report of `results` and its summary's sentences."""
    runs = tmp_path / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    results.write_parquet(runs / RESULTS_FILE)
    report = build_report(runs, CORPUS)
    found = summary_sentences(load_results(runs, CORPUS), report.sections[1:])
    assert report.sections[0].text is not None
    # one finding a line
    assert "".join(f"- {s.text}\n" for s in found) in report.sections[0].text.replace("\\", "")
    traced(report, found)
    return report, found


def traced(report: Report, sentences: list[Sentence]) -> None:
    """Every quoted cell is the cell of the table its sentence cites (or its negation, its
    leading number, one of its clauses, as the quote says), and written in the sentence."""
    assert len(sentences) <= MAX_SENTENCES
    for sentence in sentences:
        for quote in sentence.quotes:
            assert quote.table in sentence.sources
            table = report.tables[quote.table]
            cell = table.rows[quote.row][table.header.index(quote.column)]
            expected = {"cell": cell, "negated": negated(cell) if quote.how == "negated" else "",
                        "first": first_number(cell), "reach": reach_draws(cell)}.get(quote.how)
            if quote.how == "part":
                assert quote.text in cell.split("; "), (quote, cell)
            else:
                assert quote.text == expected, (quote, cell)
            assert quote.text in sentence.text, (quote, sentence.text)


def one(sentences: list[Sentence], kind: str, words: str = "") -> Sentence:
    found = [s for s in sentences if s.kind == kind and words in s.text]
    assert len(found) == 1, [s.text for s in sentences]
    return found[0]


BASE = {"bm25": (0.40, -0.05), "minilm": (0.30, -0.05), "random": (0.01, 0.0)}


def test_best_follows_the_winner(tmp_path):
    """The best model per setting and its lead over the next, from the differences table:
    swapping the two models' levels swaps the sentence."""
    _, found = made(tmp_path / "a", frame(BASE))
    dataset = one(found, "best", "dataset-level")
    assert dataset.sources == ("variance-differences",)
    assert "bm25 is best on all-2k, all-5k and all-10k, ahead of the next model, minilm" \
        in dataset.text and "over queries and pool draws" in dataset.text
    fields = one(found, "best", "field-level")
    assert "bm25 is best on biology-1k and medicine-1k" in fields.text
    assert "the paired t-test's, from one pool draw" in fields.text
    # minilm's lead is negated: the table prints bm25 - minilm
    assert any(q.how == "cell" for q in dataset.quotes)
    swapped = {**BASE, "bm25": BASE["minilm"], "minilm": BASE["bm25"]}
    _, found = made(tmp_path / "b", frame(swapped))
    dataset = one(found, "best", "dataset-level")
    assert "minilm is best on all-2k, all-5k and all-10k, ahead of the next model, bm25" \
        in dataset.text
    assert {q.how for q in dataset.quotes} >= {"negated"}
    lead = re.search(r"by (\d+\.\d) \[(\d+\.\d), (\d+\.\d)\] on all-2k", dataset.text)
    assert lead and 0 < float(lead[2]) < float(lead[1]) < float(lead[3])


def test_not_distinguishable(tmp_path):
    """A lead whose interval holds 0 is no "best": the models are not distinguishable."""
    close = {"bm25": (0.40, -0.05), "minilm": (0.398, -0.05)}
    _, found = made(tmp_path, frame(close, noise=0.1))
    dataset = one(found, "best", "dataset-level")
    assert " is best" not in dataset.text
    assert "bm25 and minilm are not distinguishable on all-2k, all-5k and all-10k" \
        in dataset.text and "each interval holds 0" in dataset.text
    for low, high in re.findall(r"\[(-?\d+\.\d), (-?\d+\.\d)\]", dataset.text):
        assert float(low) <= 0 <= float(high)


def test_crossing_moves(tmp_path):
    """Where BM25's curve crosses the encoder's, from the crossover table: moving the data's
    crossing moves the sentence's; a gap that widens has none in the measured range."""
    crossing = {"bm25": (0.40, -0.05), "minilm": (0.45, -0.10), "random": (0.01, 0.0)}
    sizes = []
    for name, bm25 in (("early", (0.42, -0.05)), ("late", (0.40, -0.05))):
        _, found = made(tmp_path / name, frame({**crossing, "bm25": bm25}))
        said = one(found, "crossing")
        assert said.sources == ("crossover",) and "random" not in said.text
        where = re.search(r"bm25 - minilm \(dataset\): crosses at ([\d.]+)k candidates within "
                          r"the measured range \[2k, 10k\], 95% interval \[", said.text)
        assert where, said.text
        sizes.append(float(where[1]) * 1000)
    # the gap -0.03 (-0.05) + 0.05 ln(s / 2k) is 0 at 2k e^0.6 (2k e): 3.6k and 5.4k
    assert sizes[0] == pytest.approx(2000 * math.e ** 0.6, rel=0.1)
    assert sizes[1] == pytest.approx(2000 * math.e, rel=0.1)
    _, found = made(tmp_path / "none", frame({**crossing, "bm25": (0.50, -0.02)}))
    said = one(found, "crossing")
    assert "no crossing in the measured range [2k, 10k] (gap widening)" in said.text
    assert "crosses at" not in said.text


def test_queries_needed_follow_the_spread(tmp_path):
    """The queries a stated difference needs, from the queries-needed table: more spread
    between the models' values over queries needs more queries."""
    counts = []
    for noise in (0.02, 0.06):
        _, found = made(tmp_path / str(noise), frame(BASE, noise=noise))
        said = one(found, "queries")
        assert said.sources == ("queries-needed",)
        assert "To tell bm25 from minilm on all-10k by a difference of 1, 2 or 5 in MAP x100" \
            in said.text and "3 pool draws" in said.text
        found_counts = [int(q.text) for q in said.quotes if q.how == "first"]
        assert len(found_counts) == 3 and found_counts == sorted(found_counts, reverse=True)
        counts.append(found_counts)
    assert all(b > a for a, b in zip(counts[0], counts[1], strict=True))


def test_left_out(tmp_path):
    """What the report leaves out, from the not-shown section: a run of another depth, and
    evaluations not current; neither: said so."""
    _, found = made(tmp_path / "all", frame(BASE))
    assert one(found, "left-out").text.startswith("No evaluation was left out as not current")
    results = frame(BASE).with_columns(
        depth=pl.when(pl.col("model") == "minilm").then(100).otherwise(500))
    report, found = made(tmp_path / "depth", results)
    said = one(found, "left-out")
    assert said.sources == ("other-depths",)
    assert "1 run of another depth than the report's top 500" in said.text
    assert "minilm (top 100)" in said.text
    # the evaluations collect left out (as its manifest records them) are named too
    data = load_results(tmp_path / "depth" / "runs", CORPUS)
    data.stale = [{"run": f"{CORPUS}/all-2k-r0/specter", "why": "its store changed",
                   "repair": "make eval MODEL=specter"}]
    sections = tuple(section(data) for section in SECTIONS)
    said = one(summary_sentences(data, sections), "left-out")
    assert said.sources == ("left-out", "other-depths")
    assert "1 evaluation left out as not current" in said.text
    assert f"{CORPUS}/all-2k-r0/specter" in said.text


def test_at_most_eight_sentences(tmp_path):
    """A corpus with pools of every level still has at most 8 sentences, the crossing, the
    queries and what was left out kept."""
    results = frame(BASE)
    extra = []
    for level in ("collection", "mdcr", "csfcube", "other", "more"):
        part = results.filter(pl.col("level") == "field", pl.col("scope") == "medicine")
        extra.append(part.with_columns(level=pl.lit(level), scope=pl.lit(level),
                                       pool=pl.lit(f"{level}-1k-r0")))
    _, found = made(tmp_path, pl.concat([results, *extra]))
    assert len(found) == MAX_SENTENCES
    assert [s.kind for s in found][-3:] == ["crossing", "queries", "left-out"]


def test_summary_comes_first(tmp_path):
    """The Markdown file opens with the summary right after its title; the HTML page shows it
    as its first section."""
    report, found = made(tmp_path, frame(BASE))
    assert report.sections[0].name == "summary"
    head = f"# Results: {CORPUS}\n\n## Summary\n\n"
    assert report.document.startswith(head)
    assert found[0].text.startswith("On dataset-level pools")
    page = report.page({})
    sections = re.findall(r'<section id="s-([^"]+)"', page)
    assert sections[0] == "summary"
    first = page[page.index('<section id="s-summary"'):page.index("</section>")]
    assert "bm25 is best on all-2k, all-5k and all-10k" in first
    # its heading above its sentences, as in the Markdown, one finding a line (issue 89)
    assert first.index(">Summary<") < first.index("bm25 is best on")
    assert first.count("<li>") == len(found) > 1


def daggers(report: Report) -> dict[tuple[str, str], bool]:
    """(dataset table column, model) -> whether its cell carries a †."""
    table = report.tables["dataset"]
    return {(column, row[0]): "†" in cell for row in table.rows
            for column, cell in zip(table.header[1:], row[1:], strict=True)}


def test_the_dagger_and_the_summary_share_one_test(tmp_path):
    """Issue 89: the tables' † is the summary's test. Two models of one level, each shifted
    by its own draw effect (sd 3 MAP points, 3 draws): the paired t over draw-averaged
    queries, Holm-adjusted (the † before), calls the pair different at some size, but the
    draws' variance says nothing is; no † there, and the summary names no leader. A clear
    difference (10 points, small draw effects) gets its † in every column and "best" in the
    summary."""
    same = {"bm25": (0.40, -0.05), "minilm": (0.40, -0.05)}
    results = frame(same, noise=0.02, draw_sd=0.03, seed=3)
    dataset = results.filter(pl.col("level") == "dataset")
    old = [compare(dataset.filter(pl.col("size") == size).group_by("model", "query").agg(
        pl.col("value").mean()).sort("model", "query"))["significant"][0] for size in SIZES]
    assert any(old), old  # the paired t over queries alone would have marked it
    report, found = made(tmp_path / "same", results)
    assert not any(daggers(report).values())
    sentence = one(found, "best", "dataset-level").text
    assert " is best" not in sentence and "not distinguishable" in sentence, sentence
    report, found = made(tmp_path / "apart", frame({"bm25": (0.50, -0.05),
                                                    "minilm": (0.40, -0.05)}))
    marks = daggers(report)
    assert all(marks[(c, "minilm")] for c in report.tables["dataset"].header[1:]), marks
    assert not any(marks[(c, "bm25")] for c in report.tables["dataset"].header[1:])
    assert "bm25 is best on all-2k, all-5k and all-10k" in one(
        found, "best", "dataset-level").text
    dataset_notes = " ".join(report.tables["dataset"].notes)
    assert "the test of the summary's" in dataset_notes
    assert "Holm" not in report.tables["dataset"].caption


def test_queries_not_reachable_name_the_draws_that_reach_them(tmp_path):
    """Issue 89: where the pair's draws differ so much that 3 draws cannot reach the power at
    the draw variance's upper bound, the sentence says so with the fewest draws that reach
    it (the table's "R≥m", quoted), and states the condition its numbers hold under."""
    shift = {0: 0.0, 1: 0.008, 2: -0.006}  # minilm's own offset per dataset-level draw
    results = frame(BASE).with_columns(value=pl.col("value") + pl.when(
        (pl.col("model") == "minilm") & (pl.col("level") == "dataset"))
        .then(pl.col("repeat").replace_strict(shift, return_dtype=pl.Float64))
        .otherwise(0.0))
    report, found = made(tmp_path, results)
    said = one(found, "queries")
    assert "(alpha 0.05, power 0.8 with 3 pool draws, planned at the draw variance's 90% " \
        "upper bound)" in said.text, said.text
    reach = [q for q in said.quotes if q.how == "reach"]
    assert reach, said.text
    table = report.tables["queries-needed"]
    deltas = [q.column for q in reach]
    draws = [q.text for q in reach]
    words = " and ".join([", ".join(deltas[:-1]), deltas[-1]] if len(deltas) > 1 else deltas)
    needed = " and ".join([", ".join(draws[:-1]), draws[-1]] if len(draws) > 1 else draws)
    assert f"for {words} it is not reachable with 3 draws ({needed} draws reach it)" \
        in said.text, said.text
    for quote in reach:
        assert table.rows[quote.row][table.header.index("R")] == "3"
        assert int(quote.text) > 3
