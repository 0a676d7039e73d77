"""The significance section's bootstrap intervals state their level per row (issues 79, 89): the
coverage simulated at the row's own queries, mean and number of pool draws, of the mean over
the query population given the drawn pools, read from the grid benchmarks/bootstrap_level.py
ships; one of its cells recomputed here by other code (scipy's bootstrap through
`bootstrap_ci`, fewer data sets)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.evaluation.significance import bootstrap_ci, bootstrap_level, intervals, level_grid
from pipeline.report.tables import (
    BOOTSTRAP_HEADER,
    CAPTION_WORDS,
    bootstrap_level_cell,
    interval_cell,
    significance_section,
)


def synthetic_grid() -> dict:
    """A grid of two shapes whose every cell is known: 0.5 + queries / 10,000 + mean / 100,
    and that minus 0.1 (the second shape, one draw only); with 3 draws the first shape's
    cells are 0.2 higher, the second has none."""
    queries, means = [10, 100], [0.1, 0.5, 0.9]
    one = [[0.5 + q / 10_000 + m / 100 for m in means] for q in queries]
    return {"queries": queries, "means": means, "families": ["a", "b"], "draws": [1, 3],
            "coverage": {"a": {"1": one, "3": [[v + 0.2 for v in r] for r in one]},
                         "b": {"1": [[v - 0.1 for v in r] for r in one],
                               "3": [[None] * 3 for _ in queries]}}}


def test_the_level_is_the_range_over_the_shapes_in_the_cells_around_the_row():
    grid = synthetic_grid()
    low, high = bootstrap_level(100, 0.5, 1, grid)  # a grid point: that cell alone
    assert (low, high) == (0.5 + 0.01 + 0.005 - 0.1, 0.5 + 0.01 + 0.005)
    low, high = bootstrap_level(50, 0.7, 1, grid)  # between: its four neighbours
    assert low == 0.5 + 0.001 + 0.005 - 0.1 and high == 0.5 + 0.01 + 0.009
    assert bootstrap_level(5, 0.5, 1, grid) is None
    assert bootstrap_level(50, 0.95, 1, grid) is None
    assert bootstrap_level_cell(50, 0.7, 1, 0.6, 0.8, grid=grid) == \
        f"{100 * low:.1f}-{100 * high:.1f}"
    assert bootstrap_level_cell(50, 1.0, 1, 0.9, 1.0, agree=True, grid=grid) == "≥ 95.0"
    assert bootstrap_level_cell(50, 0.5, 1, 0.4, 0.6, facet=True, grid=grid) == "-"
    assert bootstrap_level_cell(1, 0.5, 1, float("nan"), float("nan"), grid=grid) == "-"


def test_a_row_reads_only_the_cells_of_its_own_number_of_draws():
    """A 3-draw row's range comes from the 3-draw cells alone, though the 1-draw cells around
    it would lower its low end by 0.3 (and the second shape's 1-draw cells would enter it); a
    number of draws the grid did not simulate, or queries of different numbers of draws,
    get no level rather than another number's."""
    grid = synthetic_grid()
    low, high = bootstrap_level(50, 0.7, 3, grid)
    assert (low, high) == (0.5 + 0.001 + 0.005 + 0.2, 0.5 + 0.01 + 0.009 + 0.2)
    assert bootstrap_level(50, 0.7, 1, grid)[0] < low - 0.25
    assert bootstrap_level_cell(50, 0.7, 3, 0.6, 0.8, grid=grid) == \
        f"{100 * low:.1f}-{100 * high:.1f}"
    assert bootstrap_level(50, 0.7, 2, grid) is None
    assert bootstrap_level_cell(50, 0.7, 2, 0.6, 0.8, grid=grid) == "-"
    assert bootstrap_level_cell(50, 0.7, None, 0.6, 0.8, grid=grid) == "-"


def test_the_shipped_grid_gives_a_three_draw_row_its_three_draw_cells():
    """The issue's row: 25 queries, a MAP near 3 points, 3 draws. Its range is the lowest and
    highest of the shipped 3-draw cells around it; the 1-draw cells, which reach 99.8 at a
    mean of 0.01, are not in it."""
    grid = level_grid()
    q, means = grid["queries"].index(25), grid["means"]
    j = means.index(0.03)
    around = [grid["coverage"][f]["3"][q][k] for f in grid["families"] for k in (j - 1, j)]
    found = bootstrap_level(25, 0.02, 3, grid)
    assert found == (min(c for c in around if c is not None),
                     max(c for c in around if c is not None))
    assert found[1] < 0.9 < bootstrap_level(25, 0.02, 1, grid)[1]


def test_a_shipped_cell_recomputed_by_scipys_bootstrap():
    """The grid's most telling cell for P@10 near 0 (a beta-binomial whose per-query precision
    is Beta(m, 1 - m): most queries 0, a few high; one draw): 800 data sets through the
    pipeline's own `bootstrap_ci`, coverage of m among those whose values differ within 4
    standard errors of the shipped one."""
    grid = level_grid()
    family, queries, mean = "beta-binomial 1", 25, 0.03
    shipped = grid["coverage"][family]["1"][grid["queries"].index(queries)][
        grid["means"].index(mean)]
    rng = np.random.default_rng(2079)
    sets = 800
    p = rng.beta(mean, 1 - mean, (sets, queries))
    values = rng.binomial(10, p) / 10
    held, spread = 0, 0
    for i, row in enumerate(values):
        if np.ptp(row) == 0:  # agreeing_interval's, not a bootstrap: not in the grid's share
            continue
        low, high = bootstrap_ci(row, seed=i)
        held += low <= mean <= high
        spread += 1
    found = held / spread
    error = np.sqrt(shipped * (1 - shipped) / spread + shipped * (1 - shipped) / 4000)
    assert abs(found - shipped) < 4 * error, (found, shipped)


def values(models: dict[str, tuple[float, int]], queries: int, seed: int = 0) -> pl.DataFrame:
    """Per-query results of `models` (name -> Beta(a, b)'s mean and concentration; a mean of
    1 gives every query 1) on one pool, three repeats (pool draws)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, (mean, phi) in models.items():
        draws = (np.ones(queries) if mean == 1 else
                 rng.beta(mean * phi, (1 - mean) * phi, queries))
        rows += [{"scope": "all", "size": 1000, "metric": "map", "model": model,
                  "query": f"q{q:03d}", "repeat": r, "value": float(draws[q])}
                 for q in range(queries) for r in (0, 1, 2)]
    return pl.DataFrame(rows)


def intervals_table(rows: pl.DataFrame):
    [table] = [t for t in significance_section(rows) if t.header == BOOTSTRAP_HEADER]
    return table


def test_each_row_states_the_level_simulated_at_its_own_queries_and_mean():
    """A model near 0 and one near 0.5 on the same 25 queries get each its own level, the one
    the grid gives at its queries and mean (lower near the bound); every query at 1 gets
    Clopper-Pearson's; the intervals are `intervals`' as before; 8 queries (under the grid)
    get none, and a note says why."""
    models = {"low": (0.02, 2), "middle": (0.5, 2), "all-one": (1, 0)}
    rows = values(models, 25)
    table = intervals_table(rows)
    assert len(table.caption.split()) <= CAPTION_WORDS
    assert "mean over the query population given the drawn pools" in table.caption
    per_model = rows.group_by("model", "query").agg(pl.col("value").mean())
    expected = {m: interval_cell(lo, hi, n, mean)
                for m, n, mean, lo, hi in intervals(per_model).iter_rows()}
    cells = {r[2]: r for r in table.rows}
    for model in models:
        assert cells[model][5] == expected[model]
    level = {}
    for model in ("low", "middle"):
        mean = float(per_model.filter(pl.col("model") == model)["value"].mean())
        low, high = bootstrap_level(25, mean, 3)
        assert cells[model][6] == f"{100 * low:.1f}-{100 * high:.1f}"
        level[model] = low
    assert level["low"] < level["middle"]
    assert cells["all-one"][6] == "≥ 95.0"
    assert any("Clopper-Pearson" in note for note in table.notes)
    assert not any("no simulated level" in note for note in table.notes)
    few = intervals_table(values(models, 8))
    assert {r[6] for r in few.rows if r[2] != "all-one"} == {"-"}
    assert any("no simulated level" in note for note in few.notes)
