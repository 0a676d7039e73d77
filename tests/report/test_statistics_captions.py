"""The variance section's captions and the CSFCube significance section say what their numbers
show (issue 58): the narrower two-part interval explained where a row has one, the interval's
price in width beside a simulation of it, a draw estimate of 0 called an estimate, and the
significance section's CSFCube means the CSFCube table's fold means."""

from __future__ import annotations

import math
import re

import numpy as np
import polars as pl
from scipy.stats import norm

from pipeline.evaluation.evaluate import fold_means
from pipeline.evaluation.variance import half_widths, mean_squares
from pipeline.report.tables import csfcube_table, significance_section
from pipeline.report.variance import variance_tables


def frame(values: dict[tuple[int, str], np.ndarray]) -> pl.DataFrame:
    """The report's rows: (size, model) -> Q x R matrix of one scope ("all"), queries q000..."""
    return pl.DataFrame([
        {"scope": "all", "size": size, "metric": "map", "model": model,
         "query": f"q{i:03d}", "repeat": r, "value": float(y[i, r])}
        for (size, model), y in values.items()
        for i in range(y.shape[0]) for r in range(y.shape[1])])


def pair(rng: np.random.Generator, queries: int = 50, draws: int = 3, draw_sd: float = 0.0,
         even_draws: bool = False) -> dict[str, np.ndarray]:
    """Two models whose difference has a query effect, an interaction (sd 0.03) and a draw
    effect (sd `draw_sd`); `even_draws`: the interaction's draw means made equal, so the
    draws' mean square is that of the draw effect alone (0 without one)."""
    a = 0.3 + rng.normal(0, 0.1, (queries, 1)) + rng.normal(0, 0.01, (queries, draws))
    e = rng.normal(0, 0.03, (queries, draws))
    if even_draws:
        e -= e.mean(axis=0, keepdims=True)
    d = 0.04 + rng.normal(0, 0.02, (queries, 1)) + e + rng.normal(0, draw_sd, (1, draws))
    return {"a": a, "b": a - d}


def tables(rows: pl.DataFrame) -> dict[str, tuple[str, list[list[str]]]]:
    """Each variance table's prose (its caption and notes, as a reader reads them) and rows."""
    return {name: (" ".join([caption, *notes]), body)
            for name, caption, _, body, notes in variance_tables(rows, "demo")}


def bounds(cell: str) -> tuple[float, float]:
    low, high = map(float, cell.strip("[]").split(", "))
    return low, high


def test_the_narrower_two_part_interval_is_explained_only_where_a_row_has_one():
    """At 2k the interaction's draw means are equal (MS_R = 0): the queries-and-draws
    interval is narrower than the queries-only one and the caption names that row and says
    why; at 5k a draw effect widens it: not named; a table without such a row has no note."""
    rng = np.random.default_rng(58)
    narrow, wide = pair(rng, even_draws=True), pair(rng, draw_sd=0.02)
    both = tables(frame({**{(2000, m): y for m, y in narrow.items()},
                         **{(5000, m): y for m, y in wide.items()}}))
    caption, body = both["variance-differences"]
    widths = {row[0]: [np.diff(bounds(cell))[0] for cell in row[4:6]] for row in body}
    assert widths["all-2k"][1] < widths["all-2k"][0]  # the data carry the signal
    assert widths["all-5k"][1] > widths["all-5k"][0]
    assert "narrower than queries only (all-2k a - b)" in caption
    assert "t(R-1)² MS_R < t(Q-1)² MS_E" in caption and "all-5k a - b" not in caption
    assert "MS_R below 0.22 of MS_E" in caption  # (t(49) / t(2))², the rows' Q and R
    only_wide = tables(frame({(5000, m): y for m, y in wide.items()}))
    assert "narrower" not in only_wide["variance-differences"][0]


def test_the_price_the_caption_states_is_the_simulated_width_ratio():
    """The caption's price (the median half-width over that of an interval that knew the
    components) against 4,000 simulated data sets of 50 queries x 3 draws whose difference is
    the interaction alone: within 0.05 of it; where the queries carry the variance the ratio
    is about 1, as the caption says. Banerjee's name comes with what his theorem does not
    cover, and nothing says the interval holds its level."""
    rng = np.random.default_rng(59)
    caption = tables(frame({(2000, m): y for m, y in pair(rng, draw_sd=0.02).items()})
                     )["variance-differences"][0]
    price = float(re.search(r"knew the components times (\d+\.\d) with 3 draws", caption)[1])
    q, r = 50, 3

    def ratio(s2_query: float, s2_resid: float) -> float:
        y = (rng.normal(0, math.sqrt(s2_query), (4000, q, 1))
             + rng.normal(0, math.sqrt(s2_resid), (4000, q, r)))
        _, ms_q, ms_r, ms_e = mean_squares(y)
        half = half_widths(ms_q, ms_r, ms_e, q, r)[1]
        return float(np.median(half) / (norm.ppf(0.975) * math.sqrt(
            s2_query / q + s2_resid / (q * r))))

    assert abs(ratio(0.0, 1.0) - price) < 0.05 and price > 1.5
    assert abs(ratio(1.0, 1e-6) - 1.0) < 0.05
    assert "His theorem does not cover the subtracted MS_E" in caption
    assert "holds its level" not in caption and "Banerjee 1960:" not in caption
    two = tables(frame({(2000, m): y[:, :2] for m, y in pair(rng, draw_sd=0.02).items()}))
    assert "components times 4.4 with 2 draws" in two["variance-differences"][0]


def test_a_draw_estimate_of_0_is_called_an_estimate():
    """A model whose draw means are equal has a draw estimate of 0 (its share 0%): the
    caption calls it an estimate on 2 degrees of freedom, not a measured absence; where every
    model's draw share is positive, or with one draw, it says nothing of the kind."""
    rng = np.random.default_rng(60)
    flat = rng.normal(0.3, 0.05, (30, 3))
    flat -= flat.mean(axis=0, keepdims=True) - flat.mean()  # equal draw means: MS_R = 0
    moving = rng.normal(0.3, 0.05, (30, 3)) + np.array([[0.0, 0.05, -0.05]])
    caption, body = tables(frame({(2000, "flat"): flat, (2000, "moving"): moving}))["variance"]
    shares = {row[1]: row[6] for row in body}
    assert shares == {"flat": "0%", "moving": shares["moving"]} and shares["moving"] != "0%"
    assert "Draw 0%: the draw estimate is 0 on 2 degrees of freedom" in caption
    assert "not a measurement of no draw variance" in caption
    assert "Draw 0%" not in tables(frame({(2000, "moving"): moving}))["variance"][0]
    assert "Draw 0%" not in tables(frame({(2000, "flat"): flat[:, :1]}))["variance"][0]


def csfcube_rows() -> tuple[pl.DataFrame, dict[str, str]]:
    """One CSFCube facet pool, 8 queries in test folds of 6 (low values) and 2 (high): the
    mean of the folds' means is far from the plain mean over the queries."""
    rng = np.random.default_rng(61)
    queries = [f"q{i}" for i in range(8)]
    folds = {q: "fold1" if i < 6 else "fold2" for i, q in enumerate(queries)}
    base = np.where(np.arange(8) < 6, 0.2, 0.8) + rng.normal(0, 0.02, 8)
    rows = [{"level": "csfcube", "negatives": "all", "field": "method", "scope": "method",
             "size": 900, "pool": "csfcube-method-900-r0", "model": model, "query": q,
             "metric": metric, "value": float(base[i] - shift - 0.01 * metric.startswith("map"))}
            for model, shift in (("a", 0.0), ("b", 0.05)) for i, q in enumerate(queries)
            for metric in ("ndcg%20", "map_ranked-l2")]
    return pl.DataFrame(rows), folds


def cells_of(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of `text`."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ")]


def test_csfcube_significance_prints_the_tables_fold_means():
    """Issue 58: the significance section printed plain means (22.3) beside the CSFCube table's
    fold means (22.44). With the queries' folds its means are the table's and its bootstrap
    intervals bracket them; without folds it says it prints plain means."""
    rows, folds = csfcube_rows()
    _, table = csfcube_table(rows, folds)
    text = "\n".join(t.markdown for t in significance_section(rows, folds))
    for model, cells in zip(("a", "b"), table, strict=True):
        values = (rows.filter(pl.col("model") == model)
                  .pivot("metric", index="query", values="value").sort("query"))
        by_fold = {f: sorted(q for q in folds if folds[q] == f) for f in ("fold1", "fold2")}
        fold = fold_means(values, by_fold, ["ndcg%20", "map_ranked-l2"])
        plain = float(values["ndcg%20"].mean())
        assert cells[2].replace("**", "") == (f"{fold['ndcg%20'] * 100:.2f} / "
                                              f"{fold['map_ranked-l2'] * 100:.2f}")
        assert abs(fold["ndcg%20"] - plain) > 0.1  # the folds weigh the queries unequally
        _, _, _, _, mean, interval, level = next(
            c for c in cells_of(text) if len(c) == 7 and c[:3] == ["method-900", "ndcg%20", model])
        assert level == "-"  # the fold-by-fold bootstrap: no level simulated for it (issue 79)
        assert mean == f"{fold['ndcg%20'] * 100:.1f}" != f"{plain * 100:.1f}"
        low, high = bounds(interval)
        assert low < fold["ndcg%20"] * 100 < high
    pairs = next(c for c in cells_of(text) if c[:4] == ["method-900", "ndcg%20", "a", "b"])
    by_fold = {f: sorted(q for q in folds if folds[q] == f) for f in ("fold1", "fold2")}
    fold_a, fold_b = (fold_means(rows.filter(pl.col("model") == m, pl.col("metric") == "ndcg%20")
                                 .select("query", "value"), by_fold, ["value"])["value"]
                      for m in ("a", "b"))
    assert pairs[4:6] == [f"{fold_a * 100:.1f}", f"{fold_b * 100:.1f}"]
    assert "every mean here is the mean of the two test folds' means" in text
    plain_text = "\n".join(t.markdown for t in significance_section(rows))
    assert "plain means over the queries here (no query's test fold was found" in plain_text
    assert "every mean here" not in plain_text


def test_the_differences_caption_states_the_level_of_its_own_queries_and_draws():
    """Issue 71: the caption said "at most 5% false positives at 30 to 1,000 queries" above
    pools of 25. Its level is now integrated for the table's own queries x draws (over where
    the variance comes from): 2.2-5.0% at 25 x 3, the design named; a pool of 2 queries (the
    fewest with an interval) is above 5% there, and the caption says where."""
    from pipeline.evaluation.variance import level_range

    rng = np.random.default_rng(71)
    caption = tables(frame({(2000, m): y for m, y in pair(rng, queries=25).items()})
                     )["variance-differences"][0]
    assert "30 to 1,000" not in caption
    low, high = level_range(25, 3)
    assert f"{low * 100:.1f}-{high * 100:.1f}% false positives" in caption
    assert "this table's queries x draws (25 x 3)" in caption and "at most 5% everywhere" in caption
    mixed = tables(frame({**{(2000, m): y for m, y in pair(rng, queries=25).items()},
                          **{(1000, m): y for m, y in pair(rng, queries=2).items()}})
                   )["variance-differences"][0]
    assert "(2 x 3, 25 x 3)" in mixed and "above 5% at 2 x 3" in mixed, mixed


def test_the_queries_needed_table_is_planned_at_the_draw_bound_and_narrow():
    """Issue 89: the table's number is planned at the draw sd's 90% upper bound (sd+, its own
    column), a row per pair and R, a column per delta, one number or reason a cell, never
    rising with R; the notes say why it holds and key every abbreviation; eight columns
    (method columns in the notes)."""
    rng = np.random.default_rng(72)
    name, caption, header, body, notes = variance_tables(
        frame({(2000, m): y for m, y in pair(rng, draw_sd=0.005).items()}), "demo")[-1]
    assert name == "queries-needed"
    assert header == ["pools", "a", "b", "R", "sd+", "1", "2", "5"]
    assert [row[3] for row in body] == ["3", "5", "10"]  # several draws measured: no R=1
    prose = " ".join([caption, *notes])
    for words in ("90% upper bound (sd+)", "one-sided 90% upper confidence bound",
                  "Power falls as the draw variance rises", "never rises with R",
                  "R≥m: not reachable with the row's R draws", "No row for R=1",
                  "benchmarks/results/queries_needed.md"):
        assert words in prose, words
    one = re.compile(r"\d+|R≥\d+|R>100|> 10,000,000")
    assert all(one.fullmatch(c) for row in body for c in row[5:])  # one number a cell
    for column in range(5, 8):
        numbers = [math.inf if not row[column].isdigit() else int(row[column]) for row in body]
        assert numbers == sorted(numbers, reverse=True), column  # never rising with R
    assert all(re.fullmatch(r"\d+\.\d\d|0", row[4]) for row in body)
