"""The significance section's bootstrap interval: its coverage at each row's queries and mean
(issue 79).

The report gives each model's 95% percentile bootstrap interval of the mean over queries
(`significance.bootstrap_ci`: 1,000 resamples; `agreeing_interval` where every query's value
is the same), each query's value first averaged over the repeats (pool draws). What it
estimates is the mean over the population of queries given the pools drawn: resampling
queries sees no other draw. Its coverage of that mean depends on the number of queries, the
mean and the shape of the values, so the report states it per row, looked up in the grid this
script writes (`significance.bootstrap_level`).

Grid: QUERIES x MEANS x FAMILIES x DRAWS, 4,000 data sets a cell (VALUES // queries where
fewer: 2,000 at 1,000 queries), values in [0, 1]:

- `continuous`, `zero-inflated`, `P@10`: bounded_intervals.py's crossed logit-normal model
  (logit y = mu + a_q + b_r + e_qr; zero-inflated: 40% of the queries 0 in every draw, means
  up to 0.6 only; P@10: Binomial(10, y) / 10), the mean given the pools from its draw effects;
- `beta-binomial 1`, `beta-binomial 4`: P@10 as Binomial(10, p_q) / 10 in each draw, p_q ~
  Beta(m phi, (1 - m) phi) with phi 1 (U-shaped: most queries near 0 or 1) or 4; a draw adds
  binomial noise and no shift, so the mean given the pools is m.

A data set's interval is the percentile interval of 1,000 resamples drawn as multinomial
counts (the same resampling as scipy's), or `agreeing_interval` where every value agrees;
coverage is the share of the data sets whose values differ (a row the report gives a two-sided
bootstrap interval) whose interval holds the mean given their pools (and, for the record, the
population mean over pool draws too); a cell where fewer than MIN_SPREAD differ has none.

Writes pipeline/data/bootstrap_level.json (the grid the report reads) and
benchmarks/results/bootstrap_level.json and .md.

Usage: .venv/bin/python benchmarks/bootstrap_level.py [--sets 4000] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bounded_intervals import (  # noqa: E402
    ZERO_SHARE,
    data_sets,
    location,
    population_mean,
)
from benchmarks.machine import in_parallel, machine  # noqa: E402
from pipeline.evaluation.significance import agreeing_interval, bootstrap_level  # noqa: E402
from pipeline.layout import BOOTSTRAP_LEVEL_GRID  # noqa: E402

log = logging.getLogger("bootstrap_level")

OUT = ROOT / "benchmarks" / "results"
SEED = 79
QUERIES = (10, 25, 50, 100, 250, 1000)
MEANS = (0.0001, 0.001, 0.01, 0.03, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 0.99, 0.999, 0.9999)
FAMILIES = ("continuous", "zero-inflated", "P@10", "beta-binomial 1", "beta-binomial 4")
DRAWS = (1, 3)
VALUES = 2_000_000  # data sets x queries at most in a cell (2,000 sets at 1,000 queries)
RESAMPLES = 1000
CHUNK = 500  # data sets sharing one draw of resample counts
MIN_SPREAD = 200  # data sets whose values differ that a cell's coverage needs
# the cells: 25, 50 and 100 queries near 0, 0.5 and 1
SHOWN_QUERIES = (25, 50, 100)
SHOWN_MEANS = (0.01, 0.03, 0.5, 0.97, 0.99)


def beta_binomial(rng: np.random.Generator, sets: int, queries: int, draws: int, mean: float,
                  phi: float) -> np.ndarray:
    """(sets, Q, R) P@10-like values: Binomial(10, p_q) / 10 in each draw, p_q ~ Beta(mean
    phi, (1 - mean) phi)."""
    p = rng.beta(mean * phi, (1 - mean) * phi, (sets, queries, 1))
    return rng.binomial(10, np.broadcast_to(p, (sets, queries, draws))) / 10


def percentile_bootstrap(rng: np.random.Generator, per_query: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile bootstrap interval of each row's mean (RESAMPLES resamples as
    multinomial counts, fresh every CHUNK rows); `agreeing_interval` where a row's values all
    agree, as `bootstrap_ci` gives it."""
    sets, n = per_query.shape
    low, high = np.empty(sets), np.empty(sets)
    for start in range(0, sets, CHUNK):
        part = per_query[start:start + CHUNK]
        counts = rng.multinomial(n, np.full(n, 1 / n), size=RESAMPLES)
        means = part @ counts.T / n
        low[start:start + CHUNK], high[start:start + CHUNK] = np.percentile(
            means, [2.5, 97.5], axis=1)
    agree = np.ptp(per_query, axis=1) == 0
    bound = agreeing_interval(per_query[:, 0], n)
    return np.where(agree, bound[0], low), np.where(agree, bound[1], high)


def cell(family: str, draws: int, target: float, sets: int) -> list[dict]:
    """Every QUERIES cell of one family, number of draws and mean (one seeded generator)."""
    rng = np.random.default_rng([SEED, FAMILIES.index(family), draws, MEANS.index(target)])
    mu = None if family.startswith("beta") else location(target, family)
    population = target if mu is None else population_mean(mu, family)
    rows = []
    for queries in QUERIES:
        many = min(sets, VALUES // queries)
        if mu is None:
            values = beta_binomial(rng, many, queries, draws, target,
                                   float(family.split()[-1]))
            given = np.full(many, target)
        else:
            values, given = data_sets(rng, many, queries, draws, mu, family)
        per_query = values.mean(axis=2)
        low, high = percentile_bootstrap(rng, per_query)
        held = (low <= given) & (given <= high)
        spread = np.ptp(per_query, axis=1) > 0  # a bootstrap, not agreeing_interval
        enough = int(spread.sum()) >= MIN_SPREAD
        rows.append({"family": family, "draws": draws, "target": target, "queries": queries,
                     "sets": many, "bootstrapped": int(spread.sum()),
                     # of the data sets whose values differ (what a row with a two-sided
                     # bootstrap interval is): None where too few to say
                     "coverage": round(float(held[spread].mean()), 4) if enough else None,
                     "population_coverage": round(float(
                         ((low <= population) & (population <= high))[spread].mean()), 4)
                     if enough else None,
                     # every data set, agreeing_interval's included
                     "coverage_all": round(float(held.mean()), 4),
                     "agreeing": round(float(1 - spread.mean()), 4)})
    return rows


def grid_of(rows: list[dict]) -> dict:
    """The package's grid: coverage[family][draws] a QUERIES x MEANS list (None: not
    simulated, zero-inflated above 1 - ZERO_SHARE)."""
    coverage = {f: {str(r): [[None] * len(MEANS) for _ in QUERIES] for r in DRAWS}
                for f in FAMILIES}
    for row in rows:
        coverage[row["family"]][str(row["draws"])][QUERIES.index(row["queries"])][
            MEANS.index(row["target"])] = row["coverage"]
    return {"what": "coverage of the 95% percentile bootstrap (1,000 resamples) of the mean "
                    "over the query population given the drawn pools; "
                    "benchmarks/bootstrap_level.py",
            "seed": SEED, "sets": {str(q): min(4000, VALUES // q) for q in QUERIES},
            "queries": list(QUERIES), "means": list(MEANS), "families": list(FAMILIES),
            "draws": list(DRAWS), "coverage": coverage}


def stated(queries: int, mean: float, draws: int, grid: dict) -> str:
    """The level the report states for a row of `queries`, `mean` and `draws`."""
    from pipeline.report.tables import bootstrap_level_cell

    return bootstrap_level_cell(queries, mean, draws, mean, mean, grid=grid)


def markdown(report: dict, grid: dict) -> list[str]:
    by = {(r["family"], r["draws"], r["target"], r["queries"]): r for r in report["rows"]}
    lines = ["# The significance section's bootstrap interval: its level at a row's queries "
             "and mean (issue 79)", "",
             f"`benchmarks/bootstrap_level.py` on {report['machine']}; {report['seconds']:.0f} s "
             f"on {report['workers']} workers (load {report['load_before']} before, "
             f"{report['load_after']} after). Seed {SEED}.", "",
             "The 95% percentile bootstrap of the mean over queries (1,000 resamples; "
             "`agreeing_interval` where every value agrees), each query's value the mean over "
             "its R draws. Coverage: the share of data sets whose interval holds the mean over "
             "the query population given the pools drawn (what resampling queries estimates), "
             "among the data sets whose values differ (a report row whose every query agrees "
             "shows Clopper-Pearson's bound instead); in brackets, of the population mean over "
             "pool draws; where some data sets agree, the coverage over all of them (their "
             f"`agreeing_interval` included) and their share; - where fewer than {MIN_SPREAD} "
             "data sets differ. 4,000 data sets a cell "
             "(2,000 at 1,000 queries); Monte Carlo error of a coverage near 95%: 0.35 points, "
             "near 80%: 0.6. Shapes: `continuous`, `zero-inflated` (means up to "
             f"{1 - ZERO_SHARE:g}), `P@10`: bounded_intervals.py's crossed logit-normal model; "
             "`beta-binomial phi`: P@10 as Binomial(10, p) / 10, p ~ Beta(m phi, (1 - m) phi). "
             "**stated**: the report's cell for a row of that many queries and that mean "
             "and R (`tables.bootstrap_level_cell`), the lowest-highest over every shape at "
             "that R, "
             "read from pipeline/data/bootstrap_level.json.", "",
             "## 25, 50 and 100 queries near 0, 0.5 and 1", "",
             "| Q | mean | R | " + " | ".join(FAMILIES) + " | stated |",
             "|" + "---|" * (4 + len(FAMILIES))]
    for queries in SHOWN_QUERIES:
        for target in SHOWN_MEANS:
            for draws in DRAWS:
                parts = []
                for family in FAMILIES:
                    row = by.get((family, draws, target, queries))
                    parts.append("-" if row is None or row["coverage"] is None else
                                 f"{100 * row['coverage']:.1f} "
                                 f"({100 * row['population_coverage']:.1f})"
                                 + (f"; all {100 * row['coverage_all']:.1f}, agree "
                                    f"{100 * row['agreeing']:.1f}%" if row["agreeing"] else ""))
                lines.append(f"| {queries} | {target:g} | {draws} | " + " | ".join(parts)
                             + f" | {stated(queries, target, draws, grid)} |")
    lines += ["", "## The grid the report reads: lowest-highest coverage over the shapes at "
              "each R, of the mean given the pools", "",
              "| Q | R | " + " | ".join(f"{m:g}" for m in MEANS) + " |",
              "|" + "---|" * (2 + len(MEANS))]
    for queries in QUERIES:
        for draws in DRAWS:
            cells = []
            for target in MEANS:
                found = bootstrap_level(queries, target, draws, grid)
                cells.append("-" if found is None else
                             f"{100 * found[0]:.1f}-{100 * found[1]:.1f}")
            lines.append(f"| {queries} | {draws} | " + " | ".join(cells) + " |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    jobs = [(family, draws, target, args.sets) for family in FAMILIES for draws in DRAWS
            for target in MEANS if not (family == "zero-inflated" and target > 1 - ZERO_SHARE)]
    runs, how = in_parallel(cell, jobs, args.workers)
    rows = [row for run in runs for row in run]
    grid = grid_of(rows)
    (ROOT / "pipeline" / BOOTSTRAP_LEVEL_GRID).write_text(json.dumps(grid, indent=1) + "\n")
    report = {"machine": machine(), "seed": SEED, "sets": args.sets,
              "seconds": how["seconds"], "workers": how["workers"],
              "load_before": how["load_before"], "load_after": how["load_after"], "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bootstrap_level.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "bootstrap_level.md").write_text("\n".join(markdown(report, grid)))
    log.info("%d cells in %.0f s", len(rows), how["seconds"])


if __name__ == "__main__":
    main()
