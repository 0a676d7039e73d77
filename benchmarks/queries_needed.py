"""Queries needed from pilots of the demo's shape: the true power of the report's own test at
the number the report prints, and how often it says "not reachable" where the truth cannot
reach the power (issue 89).

The report plans queries from what it measured: a pair's difference on Q0 queries x 3 pool
draws, a crossed design (y_qr = a_q + b_r + e_qr, `variance.mean_squares`). Its number
(`variance.queries_needed`'s `queries`: `pipeline.topic_set_size`'s and the queries-needed
table's) is `variance.topic_set_size` with the draw variance at its one-sided 90% upper
confidence bound (`variance.draw_upper`, the draws' mean square taken at least the
interaction's) and the query and interaction components at their estimates; "not reachable
with R draws" where the bound's draw part alone keeps the power below 0.8, with the fewest
draws that reach it there (`draws_needed`).

Per setting: PILOTS pilots of Q0 = 50 queries x 3 draws from the true components (query
variance S2_QUERY, a query sd of 14 MAP points; an interaction variance from RESIDS; a draw
sd from DRAW_SDS, 0 to 0.6 MAP points), at each difference of DELTAS (1, 2 and 5 points),
each pilot's number for 3, 5 and 10 planned draws, and the true power of the report's test at
it: `variance.interval_power` at the true components (the integral the tests check against
simulated data sets). The truth reaches the power with R draws where `topic_set_size` at the
true components gives a number (its `needed`). Beside it, for 3 draws, the number at the
pilot's estimates (`queries_point`, the rule before issue 71 and the API's side column). A
few pilots per setting go through `pipeline.topic_set_size` on a results frame too (the
API's `queries`, the same numbers).

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
SEED = 89
S2_QUERY = 0.02  # a difference's query variance: sd 14 MAP points (issue 47's example)
RESIDS = (0.0005, 0.005, 0.01)  # the query x draw interaction's variance
DRAW_SDS = (0.0, 0.0015, 0.003, 0.0045, 0.006)  # the true draw sd (MAP points / 100)
DELTAS = (0.01, 0.02, 0.05)  # the differences the report plans for
PILOT_QUERIES, PILOT_DRAWS = 50, 3  # the demo's shape
PLANNED = (3, 5, 10)  # the draws planned
ALPHA, POWER = 0.05, 0.8
API_PILOTS = 2  # pilots per setting also through pipeline.topic_set_size
FLOOR = 0.78  # the lowest median true power accepted where a number is printed
SAYS = 0.8  # the least share of "not reachable" accepted where the truth cannot reach


def settings() -> list[dict]:
    return [{"s2_resid": e, "draw_sd": sd, "delta": d}
            for d in DELTAS for sd in DRAW_SDS for e in RESIDS]


def pilots(setting: dict, count: int, seed: int) -> np.ndarray:
    """`count` pilots' differences, Q0 x 3 each (the mean is the difference; it does not
    enter the mean squares)."""
    rng = np.random.default_rng(seed)
    q, r = PILOT_QUERIES, PILOT_DRAWS
    return (setting["delta"] + rng.normal(0, math.sqrt(S2_QUERY), (count, q, 1))
            + rng.normal(0, setting["draw_sd"], (count, 1, r))
            + rng.normal(0, math.sqrt(setting["s2_resid"]), (count, q, r)))


def api_queries(d: np.ndarray, delta: float) -> dict[int, int | None]:
    """`pipeline.topic_set_size` on a results frame of one pilot (models a = 0.3 + d, b =
    0.3): its `queries` for `delta` and each planned number of draws."""
    import polars as pl

    import pipeline

    q, r = d.shape
    frame = pl.DataFrame([
        {"corpus": "sim", "seed": 0, "negatives": "all", "scope": "all", "size": 1000,
         "metric": "map", "model": model, "query": f"q{i:03d}", "repeat": j,
         "value": float(0.3 + (d[i, j] if model == "a" else 0.0))}
        for model in ("a", "b") for i in range(q) for j in range(r)])
    found = pipeline.topic_set_size(frame, deltas=[delta], draws=list(PLANNED))
    return dict(zip(found["draws"].to_list(), found["queries"].to_list(), strict=True))


def _summary(numbers: list[int | None], reasons: list[str | None], more: list[int | None],
             power: dict[int, float]) -> dict:
    """The share given a number and saying "not reachable", the true power at the numbers
    given (median, 10th percentile, share at least FLOOR), the share of all pilots given a
    number whose true power is below FLOOR (`short`), the numbers' median, and the median
    of the fewest draws the "not reachable" rows name."""
    count = len(numbers)
    given = [power[n] for n in numbers if n is not None]
    sizes = [n for n in numbers if n is not None]
    unreachable = [m for m, why in zip(more, reasons, strict=True)
                   if why is not None and why.startswith("not reachable")]
    named = [m for m in unreachable if m is not None]
    return {"given": len(given) / count, "not_reachable": len(unreachable) / count,
            "median_power": float(np.median(given)) if given else None,
            "p10_power": float(np.quantile(given, 0.1)) if given else None,
            "at_least_floor": float(np.mean(np.array(given) >= FLOOR)) if given else None,
            "short": sum(p < FLOOR for p in given) / count,
            "median_queries": float(np.median(sizes)) if sizes else None,
            "median_draws_needed": float(np.median(named)) if named else None}


def run(job: tuple[int, dict, int]) -> dict:
    index, setting, count = job
    start = time.perf_counter()
    delta, truth = setting["delta"], (S2_QUERY, setting["draw_sd"] ** 2, setting["s2_resid"])
    d = pilots(setting, count, SEED + index)
    _, ms_q, ms_r, ms_e = variance.mean_squares(d)
    q, r = PILOT_QUERIES, PILOT_DRAWS
    components = [variance.Components(q, r, 0.0, float(ms_q[i]), float(ms_r[i]),
                                      float(ms_e[i])) for i in range(count)]
    upper = [float(variance.draw_upper(c.ms_draw, c.ms_resid, q, r)) for c in components]
    out = {}
    for planned in PLANNED:
        found = [variance.topic_set_size(delta, c.s2_query, u, c.s2_resid, planned, ALPHA,
                                         POWER) for c, u in zip(components, upper, strict=True)]
        numbers = [f.queries for f in found]
        power = {n: variance.interval_power(n, delta, *truth, planned, ALPHA)
                 for n in set(numbers) - {None}}
        out[str(planned)] = {
            "needed": variance.topic_set_size(delta, *truth, planned, ALPHA, POWER).queries,
            "report": _summary(numbers, [f.reason for f in found],
                               [f.draws_needed for f in found], power)}
        if planned == PILOT_DRAWS:
            point = [variance.topic_set_size(delta, c.s2_query, c.s2_draw, c.s2_resid,
                                             planned, ALPHA, POWER) for c in components]
            at = {n.queries: variance.interval_power(n.queries, delta, *truth, planned, ALPHA)
                  for n in point if n.queries is not None}
            out[str(planned)]["estimates"] = _summary(
                [n.queries for n in point], [n.reason for n in point],
                [n.draws_needed for n in point], at)
        if planned == PLANNED[-1]:
            api = [api_queries(d[i], delta) for i in range(API_PILOTS)]
            agree = sum(a == {p: variance.topic_set_size(
                delta, components[i].s2_query, upper[i], components[i].s2_resid, p, ALPHA,
                POWER).queries for p in PLANNED} for i, a in enumerate(api))
    return {**setting, "pilots": count, "estimate_zero": float(np.mean(ms_r <= ms_e)),
            "planned": out, "api_agrees": f"{agree}/{API_PILOTS}",
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
              "s2_query": S2_QUERY, "pilot_queries": PILOT_QUERIES,
              "pilot_draws": PILOT_DRAWS, "alpha": ALPHA, "power": POWER,
              "upper_level": variance.UPPER_LEVEL,
              "reach_limit_sd": {f"{d}:{p}": math.sqrt(variance.reach_limit(d, p, ALPHA, POWER))
                                 for d in DELTAS for p in PLANNED},
              "rows": rows}
    (OUT / "queries_needed.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "queries_needed.md").write_text(markdown(report))


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def checks(report: dict) -> list[str]:
    """Per planned draws, in words: over the settings whose truth reaches the power, how
    many give a median true power of at least FLOOR at the report's number (all of them,
    and those where at least a quarter of pilots are given a number), the lowest median,
    the most pilots given a number that falls short; over those whose truth cannot reach
    it, the fewest pilots saying "not reachable"; and how often it is said where the truth
    can reach it."""
    lines = []
    for planned in map(str, PLANNED):
        parts = [r["planned"][planned] for r in report["rows"]]
        reach = [p["report"] for p in parts if p["needed"] is not None]
        given = [p for p in reach if p["median_power"] is not None]
        held = [p for p in given if p["median_power"] >= FLOOR]
        common = [p for p in given if p["given"] >= 0.25]
        says = [p["report"]["not_reachable"] for p in parts if p["needed"] is None]
        said = sorted(p["not_reachable"] for p in reach)
        lines.append(
            f"- R={planned}: where the truth reaches {report['power']} ({len(reach)} settings), "
            f"a median true power of at least {FLOOR} in {len(held)} of the {len(given)} "
            f"giving some pilot a number (lowest {min(p['median_power'] for p in given):.3f}), "
            f"in {sum(p['median_power'] >= FLOOR for p in common)} of the {len(common)} "
            "where at least a quarter of pilots get one"
            + (f" (lowest {min(p['median_power'] for p in common):.3f})" if common else "")
            + "; pilots given a number below it: at most "
            f"{max(p['short'] for p in reach):.2f} of a setting's; \"not reachable\" said "
            f"there in {said[0]:.2f}-{said[-1]:.2f} of pilots (median "
            f"{said[len(said) // 2]:.2f}). Where the truth cannot reach it ({len(says)} "
            "settings): " + (f"\"not reachable\" in {min(says):.2f}-{max(says):.2f} of pilots."
                             if says else "none."))
    return lines


def _short_share(report: dict) -> float:
    """The largest share of a setting's printed numbers whose true power is below FLOOR."""
    return max((1 - part["report"]["at_least_floor"] for r in report["rows"]
                for part in r["planned"].values()
                if part["report"]["at_least_floor"] is not None), default=0.0)


def markdown(report: dict) -> str:
    limits = "; ".join(f"{float(k.split(':')[0]) * 100:g} points with {k.split(':')[1]} "
                       f"draws: {sd * 100:.2f}" for k, sd in report["reach_limit_sd"].items())
    lines = [
        "# Queries needed from pilots of the demo's shape (issue 89)", "",
        f"`benchmarks/queries_needed.py` on {report['machine']}; {report['seconds']:.0f} s "
        f"with {report['workers']} workers (load {report['load_before']} before, "
        f"{report['load_after']} after). Seed {report['seed']}.", "",
        f"Per setting {report['pilots']} pilots of {report['pilot_queries']} queries x "
        f"{report['pilot_draws']} draws of a pair's difference under the crossed design "
        f"(query variance {report['s2_query']}: sd {math.sqrt(report['s2_query']) * 100:.0f} "
        "MAP points; draw sd and interaction variance as given), each planned for R draws at "
        f"alpha {report['alpha']}, power {report['power']}. **report**: the report's number "
        "(`pipeline.topic_set_size`'s `queries`, the table's number): `topic_set_size` with the "
        f"draw variance at its one-sided {report['upper_level'] * 100:g}% upper confidence "
        "bound (the draws' mean square taken at least the interaction's) and the query and "
        "interaction components at their estimates; \"not "
        "reachable\" where the bound's draw part alone keeps the power below 0.8. "
        "**estimates** (R=3 only): the number at the pilot's estimates (`queries_point`). "
        "needed: the true n (`topic_set_size` at the truth; - where R draws cannot reach "
        "0.8). est. 0: the share of pilots whose draw estimate is 0. True power: "
        "`variance.interval_power` at the true components, at the number given; p10 its "
        f"10th percentile; >= {FLOOR}: the share of the numbers given whose true power is at "
        f"least {FLOOR}; short: the share of all pilots given a number whose true power is "
        f"below {FLOOR}. draws: the median of the fewest draws a \"not reachable\" names. "
        f"The draw sd beyond which R draws never reach 0.8 (x100): {limits}. API: pilots "
        "whose `pipeline.topic_set_size` on a results frame gave the same numbers.", "",
        "Checks (a median true power of at least 0.78 where a number is printed, \"not "
        f"reachable\" in at least {SAYS:.0%} of pilots whose truth cannot reach the power):",
        "", *checks(report), "",
        "The bound takes the draws' mean square at least the interaction's (`draw_upper`): "
        "where the interaction is large beside the draw variance, the pilot's 3 draws cannot "
        "bound the draw variance below what R draws can handle, and the report says \"not "
        "reachable\" with the draws that reach it at the bound, in most pilots even where the "
        "truth could reach the power: the price of a number that holds. Where the draws "
        "barely matter (a large difference, many draws) the query component at its estimate "
        f"decides (over all settings, up to {_short_share(report):.0%} of a setting's "
        f"numbers fall short of {FLOOR}).", ""]
    header = ("| R | interaction | draw sd x100 | needed | est. 0 | gives a number | not "
              "reachable | draws | median power | p10 | >= 0.78 | short | median n | "
              "estimates: median power | not reachable | median n | API |")
    rule = "|---" * 17 + "|"
    for delta in sorted({r["delta"] for r in report["rows"]}):
        rows = [r for r in report["rows"] if r["delta"] == delta]
        lines += [f"## A difference of {delta * 100:g} MAP points", "", header, rule]
        for planned in map(str, PLANNED):
            for r in rows:
                part = r["planned"][planned]
                a, e = part["report"], part.get("estimates")
                plug = (f"{_p(e['median_power'])} | {e['not_reachable']:.2f} | "
                        f"{_n(e['median_queries'])}" if e else "- | - | -")
                lines.append(
                    f"| {planned} | {r['s2_resid']:g} | {r['draw_sd'] * 100:g} | "
                    f"{_n(part['needed'])} | {r['estimate_zero']:.2f} | {a['given']:.2f} | "
                    f"{a['not_reachable']:.2f} | {_n(a['median_draws_needed'])} | "
                    f"{_p(a['median_power'])} | {_p(a['p10_power'])} | "
                    f"{'-' if a['at_least_floor'] is None else format(a['at_least_floor'], '.2f')}"
                    f" | {a['short']:.2f} | {_n(a['median_queries'])} | {plug} | "
                    f"{r['api_agrees'] if planned == str(PLANNED[-1]) else '-'} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
