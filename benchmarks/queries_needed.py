"""Queries needed from a 3-draw pilot: the true power of the report's own test at the number the
report gives, and the level the report quotes for it (issues 71, 79).

The report plans queries from what it measured: a pair's difference on Q0 queries x 3 pool
draws, a crossed design (y_qr = a_q + b_r + e_qr, `variance.mean_squares`). Its number,
`variance.assured_size` (`pipeline.topic_set_size`'s `queries`, the queries-needed table's
number), is the fewest queries at which the queries-and-draws interval's expected power over
the components' posterior (Jeffreys' prior, no component below 0, restricted to components
with which 3 draws can reach the power) is 0.8, and never fewer than the number at the
estimates, `variance.topic_set_size` at them (`queries_point`, the table's plug-in column);
"not reachable" where the posterior probability of a reachable draw component is below 0.05
(`variance.reach_probability`).

Per setting: PILOTS pilots of Q0 = 25 or 100 queries x 3 draws from the true components
(query variance S2_QUERY, a query sd of 14 MAP points, an interaction of 0.0005, 0.005 or
0.01, a draw sd from GRID: for each difference the report plans for, 1, 2 and 5 points, from
0 past the reach limit), each pilot's two numbers with 3 planned draws, and the true power of
the report's test at each number: `variance.interval_power` at the true components (the
integral the tests check against simulated data sets). The true n needed: `topic_set_size`
at the true components. Beside each setting's median, the level the report's table quotes for
a row with that difference and draw sd (`pipeline.report.variance.power_quote`, whose
SIMULATED_POWER holds this file's medians). A few pilots per setting go through
`pipeline.topic_set_size` on a results frame too (the API's `queries`, the same numbers).

Writes benchmarks/results/queries_needed.json and .md.

Usage: .venv/bin/python benchmarks/queries_needed.py [--pilots 100] [--workers 2]
[--markdown] (--markdown: the .md again from the .json, nothing run)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.evaluation import variance  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
SEED = 71
S2_QUERY = 0.02  # a difference's query variance: sd 14 MAP points (issue 47's example)
RESIDS = (0.0005, 0.005, 0.01)  # the query x draw interaction's variance
# the draw sds simulated (MAP points / 100) at each difference the report plans for
# (pipeline.report.variance.DELTAS): from 0 past the reach limit (0.31, 0.61 and 1.53 points
# at differences of 1, 2 and 5 points with 3 draws), so each of its rows has a nearest one
GRID = {0.01: (0.0, 0.0015, 0.003, 0.0045),
        0.02: (0.0, 0.0015, 0.003, 0.0045, 0.006, 0.0075),
        0.05: (0.0, 0.003, 0.006, 0.009, 0.012, 0.015)}
PILOT_QUERIES = (25, 100)
DRAWS = 3  # measured and planned
ALPHA, POWER = 0.05, 0.8
API_PILOTS = 2  # pilots per setting also through pipeline.topic_set_size


def settings() -> list[dict]:
    return [{"s2_resid": e, "draw_sd": sd, "delta": d, "pilot_queries": q}
            for d, sds in GRID.items() for sd in sds for e in RESIDS for q in PILOT_QUERIES]


def pilots(setting: dict, count: int, seed: int) -> np.ndarray:
    """`count` pilots' differences, Q0 x 3 each (the mean is the difference; it does not
    enter the mean squares)."""
    rng = np.random.default_rng(seed)
    q = setting["pilot_queries"]
    return (setting["delta"] + rng.normal(0, math.sqrt(S2_QUERY), (count, q, 1))
            + rng.normal(0, setting["draw_sd"], (count, 1, DRAWS))
            + rng.normal(0, math.sqrt(setting["s2_resid"]), (count, q, DRAWS)))


def api_queries(d: np.ndarray, delta: float) -> tuple[int | None, int | None]:
    """`pipeline.topic_set_size` on a results frame of one pilot (models a = 0.3 + d, b =
    0.3): its `queries` and `queries_point` for `delta` and 3 draws."""
    import polars as pl

    import pipeline

    q, r = d.shape
    frame = pl.DataFrame([
        {"corpus": "sim", "seed": 0, "negatives": "all", "scope": "all", "size": 1000,
         "metric": "map", "model": model, "query": f"q{i:03d}", "repeat": j,
         "value": float(0.3 + (d[i, j] if model == "a" else 0.0))}
        for model in ("a", "b") for i in range(q) for j in range(r)])
    row = pipeline.topic_set_size(frame, deltas=[delta], draws=[DRAWS]).row(0, named=True)
    return row["queries"], row["queries_point"]


def run(job: tuple[int, dict, int]) -> dict:
    index, setting, count = job
    start = time.perf_counter()
    delta, truth = setting["delta"], (S2_QUERY, setting["draw_sd"] ** 2, setting["s2_resid"])
    d = pilots(setting, count, SEED + index)
    _, ms_q, ms_r, ms_e = variance.mean_squares(d)
    q = setting["pilot_queries"]
    assured, point = [], []
    for i in range(count):
        c = variance.Components(q, DRAWS, 0.0, float(ms_q[i]), float(ms_r[i]), float(ms_e[i]))
        assured.append(variance.assured_size(delta, c.ms_query, c.ms_draw, c.ms_resid, q,
                                             DRAWS, DRAWS, ALPHA, POWER).queries)
        point.append(variance.topic_set_size(delta, c.s2_query, c.s2_draw, c.s2_resid, DRAWS,
                                             ALPHA, POWER).queries)
    needed = variance.topic_set_size(delta, *truth, DRAWS, ALPHA, POWER).queries
    power = {n: variance.interval_power(n, delta, *truth, DRAWS, ALPHA)
             for n in {*assured, *point} - {None}}
    api = [api_queries(d[i], delta) == (assured[i], point[i]) for i in range(API_PILOTS)]

    def summary(numbers: list[int | None]) -> dict:
        given = [power[n] for n in numbers if n is not None]
        sizes = [n for n in numbers if n is not None]
        return {"given": len(given) / count,
                "not_reachable": sum(n is None for n in numbers) / count,
                "median_power": float(np.median(given)) if given else None,
                "p10_power": float(np.quantile(given, 0.1)) if given else None,
                "median_queries": float(np.median(sizes)) if sizes else None,
                "at_least_078": float(np.mean(np.array(given) >= 0.78)) if given else None}

    return {**setting, "pilots": count, "needed": needed,
            "estimate_zero": float(np.mean(ms_r <= ms_e)),
            "assured": summary(assured), "point": summary(point),
            "api_agrees": f"{sum(api)}/{len(api)}",
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pilots", type=int, default=100)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.markdown:
        report = json.loads((OUT / "queries_needed.json").read_text())
        (OUT / "queries_needed.md").write_text(markdown(report))
        return
    before = [round(v, 2) for v in os.getloadavg()]
    start = time.perf_counter()
    jobs = [(i, s, args.pilots) for i, s in enumerate(settings())]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(run, jobs))
    report = {"machine": machine(), "seconds": round(time.perf_counter() - start, 1),
              "load_before": before, "load_after": [round(v, 2) for v in os.getloadavg()],
              "seed": SEED, "pilots": args.pilots, "workers": args.workers,
              "s2_query": S2_QUERY, "draws": DRAWS, "alpha": ALPHA, "power": POWER,
              "reach_limit_sd": {str(d): math.sqrt(variance.reach_limit(d, DRAWS, ALPHA, POWER))
                                 for d in GRID},
              "rows": rows}
    (OUT / "queries_needed.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "queries_needed.md").write_text(markdown(report))


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(report: dict) -> str:
    from pipeline.report.variance import power_quote

    limits = ", ".join(f"{float(d) * 100:g} points: {sd * 100:.2f}"
                       for d, sd in report["reach_limit_sd"].items())
    lines = [
        "# Queries needed from a 3-draw pilot (issues 71, 79)", "",
        f"`benchmarks/queries_needed.py` on {report['machine']}; {report['seconds']:.0f} s "
        f"with {report['workers']} workers (load {report['load_before']} before, "
        f"{report['load_after']} after). Seed {report['seed']}.", "",
        f"Per setting {report['pilots']} pilots of Q0 queries x {report['draws']} draws of a "
        "pair's difference under the crossed design (query variance "
        f"{report['s2_query']}: sd {math.sqrt(report['s2_query']) * 100:.0f} MAP points; draw "
        "sd and interaction variance as given), planned with 3 draws at alpha "
        f"{report['alpha']}, power {report['power']}. **report**: the report's number "
        "(`variance.assured_size`, `pipeline.topic_set_size`'s `queries`, the table's "
        "number): the fewest queries at which the queries-and-draws interval's expected "
        "power over the components' posterior (Jeffreys' prior, no component below 0, among "
        "the components with which 3 draws can reach 0.8) is 0.8, never fewer than at the "
        "estimates; \"not reachable\" where the posterior probability of a reachable draw "
        "component is below 0.05 (`variance.reach_probability`). **estimates**: "
        "`topic_set_size` at the pilot's estimates (`queries_point`, the table's plug-in "
        "column), \"not reachable\" where the estimated draw variance alone keeps the power "
        "below 0.8. True power: `variance.interval_power` at the true components, at the "
        "number given. needed: the true n (`topic_set_size` at the truth; - where 3 draws "
        "cannot reach 0.8). est. 0: the share of pilots whose draw estimate is 0. >= 0.78: "
        "the share of the pilots given a number whose true power there is at least 0.78. "
        "**the report quotes**: the median true power the report's queries-needed table "
        "quotes for a row with this difference and an estimated draw sd of this setting's "
        "(`pipeline.report.variance.power_quote`: the lowest and highest median here over "
        "the interactions and Q0 at that difference and draw sd). The draw sd beyond which 3 "
        f"draws never reach 0.8 (x100): {limits}. API: pilots whose `pipeline.topic_set_size` "
        "on a results frame gave the same two numbers.", ""]
    header = ("| interaction | draw sd x100 | Q0 | needed | est. 0 | gives a number | not "
              "reachable | report: median power | the report quotes | p10 | >= 0.78 | "
              "median n | estimates: median power | p10 | >= 0.78 | not reachable | median n "
              "| API |")
    rule = "|---" * 18 + "|"
    for delta in sorted({r["delta"] for r in report["rows"]}):
        rows = [r for r in report["rows"] if r["delta"] == delta]
        lines += [f"## A difference of {delta * 100:g} MAP points", "", header, rule]
        for r in rows:
            a, p = r["assured"], r["point"]
            quote = power_quote(delta, r["draw_sd"], report["draws"])
            lines.append(
                f"| {r['s2_resid']:g} | {r['draw_sd'] * 100:g} | {r['pilot_queries']} | "
                f"{_n(r['needed'])} | {r['estimate_zero']:.2f} | {a['given']:.2f} | "
                f"{a['not_reachable']:.2f} | {_median(a)} | {quote} | {_tail(a)} | "
                f"{_n(a['median_queries'])} | {_median(p)} | {_tail(p)} | "
                f"{p['not_reachable']:.2f} | {_n(p['median_queries'])} | {r['api_agrees']} |")
        lines.append("")
        reachable = [r for r in rows if r["needed"] is not None]
        checked = [r for r in reachable if r["assured"]["median_power"] is not None]
        if checked:
            low = min(r["assured"]["median_power"] for r in checked)
            before = min(r["point"]["median_power"] for r in checked
                         if r["point"]["median_power"] is not None)
            worst = max(r["assured"]["not_reachable"] for r in reachable)
            plug = max(r["point"]["not_reachable"] for r in reachable)
            lines += [f"Where 3 draws can reach 0.8: lowest median true power at the report's "
                      f"number {low:.3f} (at the estimates' {before:.3f}); most pilots saying "
                      f"\"not reachable\": {worst:.2f} (at the estimates: {plug:.2f}).", ""]
    return "\n".join(lines)


def _median(part: dict) -> str:
    return "-" if part["median_power"] is None else f"{part['median_power']:.3f}"


def _tail(part: dict) -> str:
    if part["median_power"] is None:
        return "- | -"
    return f"{part['p10_power']:.3f} | {part['at_least_078']:.2f}"


if __name__ == "__main__":
    main()
