"""The level of the report's intervals of a bounded mean, near the metric's bounds (issue 71).

Every metric the report shows lies in [0, 1]. Its intervals of a mean are:

- the significance section's 95% percentile bootstrap over queries (`significance.bootstrap_ci`,
  1,000 resamples: here drawn as multinomial counts, the same resampling), inside [0, 1] as
  every resample's mean is;
- the judged section's queries-and-draws interval (`variance.half_widths` on a Q x R matrix:
  each model's mean with and without the judged sample), mean ± half, which left [0, 1] near
  its bounds ("93.5 [83.4, 103.6]", "1.3 [-0.4, 2.9]"): shipped now on the logit scale
  (`significance.logit_interval`), beside the arcsine-square-root scale as the alternative
  measured;
- where every sampled value agrees (all 1, all 0: "100.0 [100.0, 100.0]" from a sample),
  `significance.agreeing_interval` (Clopper-Pearson's one-sided bound on the share that
  differs) in place of a point.

Three parts:

1. **Parametric** (numpy, vectorised): data sets of Q = 10, 25, 50, 100 or 1,000 queries x R
   = 1 or 3 pool draws, values in [0, 1] from a crossed logit-normal model, logit y = mu + a_q
   + b_r + e_qr (sd 1.2 query, 0.25 draw, 0.6 interaction), in three families: `continuous`
   (AP- or nDCG-like), `zero-inflated` (40% of the queries 0 in every draw: nothing relevant
   retrieved, as a random ranking's AP from the citations), `P@10` (Binomial(10, p_qr) / 10:
   values in tenths, many exactly 1 near the top); mu set so that the population mean is
   0.013, 0.05, 0.5, 0.935 or 0.99 (Gauss-Hermite quadrature). The coverage (over queries and
   draws: of the population mean; over queries alone: of the mean given the pools drawn), the
   share of intervals leaving [0, 1], of data sets whose values all agree, and the median
   width, by interval: the symmetric one before, the logit one shipped, the arcsine one, and
   for the significance section the percentile bootstrap (kept), BCa and the studentised
   bootstrap on the logit scale (measured).
2. **Judged estimators** (tests/judging/simulation.py: the pipeline's design with nested pools
   of two sizes, three draws, two models, relevance planted at known rates, the sample drawn
   as sample.py draws it and inferred.py's estimators) at 25 queries (SAMPLE 8) and 50
   (SAMPLE 20): the coverage of the population mean of jkAP, infAP, infP@10 and infNDCG@10 by
   the symmetric interval and by the shipped one (`intervals.bounded_interval`), with the
   sample and from the citations alone.
3. **The differences' interval below 30 queries** (the judged pairs', the variance
   section's): its false positives at a true difference of 0 over interval_level.py's grid,
   at 10, 20 and 25 queries and 2 to 10 draws (`variance.interval_power`).

Writes benchmarks/results/bounded_intervals.json and .md.

Usage: .venv/bin/python benchmarks/bounded_intervals.py [--sets 4000] [--boot-sets 2000]
[--judged-sets 400]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.evaluation.significance import (  # noqa: E402
    agreeing_interval,
    logit_interval,
)
from pipeline.evaluation.variance import half_widths, mean_squares  # noqa: E402
from pipeline.judging.intervals import bounded_interval  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
SEED = 71
SD_QUERY, SD_DRAW, SD_RESID = 1.2, 0.25, 0.6  # the logit scale's components
ZERO_SHARE = 0.4  # zero-inflated: the share of queries at 0 in every draw
MEANS = (0.013, 0.05, 0.5, 0.935, 0.99)
FAMILIES = ("continuous", "zero-inflated", "P@10")
QUERIES = (10, 25, 50, 100, 1000)
VALUES = 2_000_000  # values a cell's data sets hold at most (fewer sets at 1,000 queries)
DRAWS = (1, 3)
RESAMPLES = 1000
BOOTSTRAPS = ("bootstrap", "BCa", "logit-t boot")
INTERVALS = ("symmetric", "logit", "arcsine", "bootstrap", "BCa", "logit-t boot")
NODES = np.polynomial.hermite_e.hermegauss(80)  # probabilists' Hermite: weight exp(-x^2/2)


def _expit(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))


def population_mean(mu: float, family: str) -> float:
    """E[y] of the family at location mu: the crossed model's marginal is logit-normal with
    the three components' total variance (the binomial's mean is its p)."""
    x, w = NODES
    sd = (SD_QUERY ** 2 + SD_DRAW ** 2 + SD_RESID ** 2) ** 0.5
    mean = float((w * _expit(mu + sd * x)).sum() / w.sum())
    return mean * (1 - ZERO_SHARE) if family == "zero-inflated" else mean


def conditional_mean(mu: float, family: str, draw: np.ndarray) -> np.ndarray:
    """E[y | b] at each draw effect of `draw` (any shape): the mean over the population of
    queries of the pools drawn, what an interval over queries alone estimates."""
    x, w = NODES
    sd = (SD_QUERY ** 2 + SD_RESID ** 2) ** 0.5
    mean = (w * _expit(mu + draw[..., None] + sd * x)).sum(axis=-1) / w.sum()
    return mean * (1 - ZERO_SHARE) if family == "zero-inflated" else mean


def location(target: float, family: str) -> float:
    """mu whose population mean is `target` (bisection on the logit scale)."""
    low, high = -20.0, 20.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if population_mean(mid, family) < target else (low, mid)
    return (low + high) / 2


def data_sets(rng: np.random.Generator, sets: int, queries: int, draws: int, mu: float,
              family: str) -> tuple[np.ndarray, np.ndarray]:
    """(sets, Q, R) values of the family, and each data set's mean over the population of
    queries given its R draws (`conditional_mean` averaged over them)."""
    draw = rng.normal(0, SD_DRAW, (sets, 1, draws))
    eta = (mu + rng.normal(0, SD_QUERY, (sets, queries, 1)) + draw
           + rng.normal(0, SD_RESID, (sets, queries, draws)))
    p = _expit(eta)
    given = conditional_mean(mu, family, draw[:, 0, :]).mean(axis=1)
    if family == "P@10":
        return rng.binomial(10, p) / 10, given
    if family == "zero-inflated":
        return np.where(rng.random((sets, queries, 1)) < ZERO_SHARE, 0.0, p), given
    return p, given


def arcsine_interval(mean: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The alternative measured: mean ± half on the arcsine-square-root scale (delta method:
    half / (2 sqrt(m (1 - m)))), the angle clipped to [0, pi/2], and back."""
    inside = (mean > 0) & (mean < 1)
    m = np.where(inside, mean, 0.5)
    angle = np.arcsin(np.sqrt(m))
    spread = np.where(inside, half / (2 * np.sqrt(m * (1 - m))), 0.0)
    low = np.sin(np.clip(angle - spread, 0, np.pi / 2)) ** 2
    high = np.sin(np.clip(angle + spread, 0, np.pi / 2)) ** 2
    return (np.where(inside, low, np.clip(mean - half, 0, 1)),
            np.where(inside, high, np.clip(mean + half, 0, 1)))


def _row_percentiles(values: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Each row's percentile at its own share (linear interpolation, as np.percentile)."""
    ordered = np.sort(values, axis=1)
    place = np.clip(shares, 0, 1) * (values.shape[1] - 1)
    below = np.floor(place).astype(np.int64)
    above = np.minimum(below + 1, values.shape[1] - 1)
    rows = np.arange(len(values))
    return ordered[rows, below] + (place - below) * (ordered[rows, above] - ordered[rows, below])


def bootstrap(rng: np.random.Generator, per_query: np.ndarray, chunk: int = 100
              ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The 95% bootstrap intervals of each data set's mean (rows of `per_query`), RESAMPLES
    resamples as multinomial counts (a resample draws each query k times), fresh for every
    `chunk` data sets: `bootstrap`, the percentile interval; `BCa`, Efron's bias-corrected
    and accelerated one (z0 from the resamples below the mean, the acceleration from the
    jackknife's skewness, as scipy's `bootstrap(method="BCa")`)."""
    from scipy.special import ndtr, ndtri

    sets, n = per_query.shape
    out = {name: (np.empty(sets), np.empty(sets)) for name in ("bootstrap", "BCa", "logit-t boot")}
    z = float(ndtri(0.025))
    for start in range(0, sets, chunk):
        part = per_query[start:start + chunk]
        counts = rng.multinomial(n, np.full(n, 1 / n), size=RESAMPLES)  # (B, n)
        means = part @ counts.T / n  # (chunk, B)
        where = slice(start, start + chunk)
        low, high = np.percentile(means, [2.5, 97.5], axis=1)
        out["bootstrap"][0][where], out["bootstrap"][1][where] = low, high
        theta = part.mean(axis=1, keepdims=True)
        score = ((means < theta).sum(axis=1) + (means <= theta).sum(axis=1)) / (2 * RESAMPLES)
        with np.errstate(divide="ignore", invalid="ignore"):
            z0 = ndtri(score)
            jack = (n * theta - part) / (n - 1)
            u = (n - 1) * (jack.mean(axis=1, keepdims=True) - jack)
            accel = (u ** 3).sum(axis=1) / n ** 3 / 6 / ((u ** 2).sum(axis=1) / n ** 2) ** 1.5
            shares = [ndtr(z0 + (z0 + q) / (1 - accel * (z0 + q))) for q in (z, -z)]
        shares = [np.nan_to_num(s, nan=0.5) for s in shares]
        out["BCa"][0][where] = _row_percentiles(means, shares[0])
        out["BCa"][1][where] = _row_percentiles(means, shares[1])
        # the bootstrap-t on the logit scale: each resample studentised by its own standard
        # error there, se(mean*) / (mean* (1 - mean*))
        squares = part ** 2 @ counts.T / n
        sd = np.sqrt(np.maximum(squares - means ** 2, 0) / (n - 1))
        m = np.clip(means, 1e-9, 1 - 1e-9)
        centre = np.clip(theta, 1e-9, 1 - 1e-9)
        se_star = sd / (m * (1 - m))
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = (np.log(m / (1 - m)) - np.log(centre / (1 - centre))) / se_star
        t_star = np.where(se_star > 0, t_star, 0.0)
        t_low, t_high = np.percentile(t_star, [2.5, 97.5], axis=1)
        se = part.std(axis=1, ddof=1) / np.sqrt(n) / (centre[:, 0] * (1 - centre[:, 0]))
        logit = np.log(centre[:, 0] / (1 - centre[:, 0]))
        out["logit-t boot"][0][where] = _expit(logit - t_high * se)
        out["logit-t boot"][1][where] = _expit(logit - t_low * se)
    return out


def shipped_half(values: np.ndarray) -> np.ndarray:
    """The report's half-width of each data set's mean (`half_widths`' queries and draws;
    with one draw the queries' t), with the fallback where it is 0 while the values differ:
    MS_R replaced by max(MS_R, MS_E) and MS_Q untruncated (intervals.py's `bounded_interval`)."""
    q, r = values.shape[1:]
    _, ms_q, ms_r, ms_e = mean_squares(values)
    half = half_widths(ms_q, ms_r, ms_e, q, r)[1]
    if r > 1:
        spare = half_widths(ms_q, np.maximum(ms_r, ms_e), 0.0, q, r)[1]
        half = np.where(half > 0, half, spare)
    return half


def parametric(rng: np.random.Generator, sets: int, boot_sets: int) -> list[dict]:
    rows = []
    for family in FAMILIES:
        for target in MEANS:
            if family == "zero-inflated" and target > 1 - ZERO_SHARE:
                continue
            mu = location(target, family)
            population = population_mean(mu, family)
            for draws in DRAWS:
                for queries in QUERIES:
                    many = min(sets, VALUES // queries)
                    values, given = data_sets(rng, many, queries, draws, mu, family)
                    mean = values.mean(axis=(1, 2))
                    agree = np.ptp(values.reshape(many, -1), axis=1) == 0
                    half = shipped_half(values)
                    found = {"symmetric": (mean - half, mean + half),
                             "logit": logit_interval(mean, half),
                             "arcsine": arcsine_interval(mean, half),
                             # over queries, each query's values averaged over the draws
                             **bootstrap(rng, values[:boot_sets].mean(axis=2))}
                    agreeing = agreeing_interval(mean, queries)
                    for name, (low, high) in found.items():
                        n = len(low)
                        point = agree[:n]
                        # over queries and draws: the population's mean; over queries alone
                        # (one draw, or the bootstrap of draw-averaged values): the mean
                        # given the pools drawn
                        truth = (population if draws > 1 and name not in BOOTSTRAPS
                                 else given[:n])
                        low = np.where(point, agreeing[0][:n], low)
                        high = np.where(point, agreeing[1][:n], high)
                        raw = found[name]
                        rows.append({
                            "family": family, "target": target, "truth": population,
                            "queries": queries, "draws": draws, "interval": name, "sets": n,
                            "coverage": float(np.mean((low <= truth) & (truth <= high))),
                            "below": float(np.mean(high < truth)),
                            "above": float(np.mean(low > truth)),
                            "outside_range": float(np.mean((raw[0] < 0) | (raw[1] > 1))),
                            "points": float(np.mean(raw[1] - raw[0] <= 0)),
                            "agreeing": float(np.mean(point)),
                            "median_width": float(np.median(high - low))})
    return rows


JUDGED_METRICS = ("jkAP", "infAP", "infP@10", "infNDCG@10")


def judged(sets: int) -> list[dict]:
    """The judged estimators' coverage of their population mean (the truth's mean over every
    data set), the symmetric and the logit interval, at SAMPLE 8 with 25 queries and SAMPLE 20
    with 50 (three draws, nested pools of two sizes)."""
    from tests.judging.simulation import SIZES, Design, run

    rows = []
    for queries, budget in ((25, 8), (50, 20)):
        start = time.perf_counter()
        result = run(SEED + queries, sets, Design(queries=queries, draws=3, budget=budget))
        took = time.perf_counter() - start
        for size in SIZES:
            for model in (0, 1):
                for metric in JUDGED_METRICS:
                    target = float(result[size, model, "truth", metric].mean())
                    for kind in ("inferred", "cited"):
                        values = result[size, model, kind, metric]
                        if kind == "cited":  # the citations' own population mean
                            target = float(values.mean())
                        mean = values.mean(axis=(1, 2))
                        half = shipped_half(values)
                        # the report's own: intervals.bounded_interval, data set by data set
                        shipped = np.array([[i.low, i.high] for i, _ in map(bounded_interval,
                                                                             values)])
                        for name, (low, high) in (("symmetric", (mean - half, mean + half)),
                                                  ("logit", (shipped[:, 0], shipped[:, 1]))):
                            raw = (low, high)
                            rows.append({
                                "queries": queries, "sample": budget, "size": size,
                                "model": model + 1, "metric": metric, "kind": kind,
                                "interval": name, "sets": len(mean), "truth": target,
                                "coverage": float(np.mean((low <= target) & (target <= high))),
                                "outside_range": float(np.mean((raw[0] < 0) | (raw[1] > 1))),
                                "points": float(np.mean(raw[1] - raw[0] <= 0)),
                                "median_width": float(np.median(high - low)),
                                "seconds": round(took, 1)})
    return rows


DIFFERENCE_QUERIES = (10, 20, 25)  # below interval_level.py's 30 to 1,000
DIFFERENCE_DRAWS = (2, 3, 5, 10)


def difference_levels() -> list[dict]:
    """The false-positive rate of the differences' queries-and-draws interval (the judged
    pairs' and the variance section's, `variance.half_widths`) at a true difference of 0,
    integrated over the mean squares' chi-squares (`variance.interval_power`), over
    interval_level.py's grid of the draw term's share and the interaction's, at
    DIFFERENCE_QUERIES: its map covers 30 to 1,000 queries, the field pools have 25."""
    from benchmarks.interval_level import DRAW_SHARES, RESID_SHARES, setting
    from pipeline.evaluation.variance import interval_power

    rows = []
    for queries in DIFFERENCE_QUERIES:
        for draws in DIFFERENCE_DRAWS:
            rates = [interval_power(queries, 0.0, *setting(queries, draws, d, e), draws)
                     for d in DRAW_SHARES for e in RESID_SHARES]
            rows.append({"queries": queries, "draws": draws, "lowest": min(rates),
                         "highest": max(rates)})
    return rows


def summary(rows: list[dict], queries: tuple[int, int] = (25, 1000)) -> dict:
    """Per interval and number of draws, the range of coverage over the cells with
    `queries[0]` to `queries[1]` queries, the lowest cell, and the largest share of the
    symmetric interval leaving [0, 1]."""
    out: dict[str, dict] = {}
    for row in rows:
        if not queries[0] <= row["queries"] <= queries[1]:
            continue
        key = f"{row['interval']}, R={row['draws']}"
        found = out.setdefault(key, {"coverage": [1.0, 0.0], "lowest": None,
                                     "outside_range": 0.0})
        found["coverage"] = [min(found["coverage"][0], row["coverage"]),
                             max(found["coverage"][1], row["coverage"])]
        if row["coverage"] == found["coverage"][0]:
            found["lowest"] = {k: row[k] for k in ("family", "target", "queries")}
        found["outside_range"] = max(found["outside_range"], row["outside_range"])
    return out


def markdown(report: dict) -> list[str]:
    lines = ["# Intervals of a bounded mean: inside [0, 1], and their level (issue 71)", "",
             f"`benchmarks/bounded_intervals.py` on {report['machine']}; {report['seconds']:.0f} s "
             f"(load {report['load_before']} before, {report['load_after']} after). Seed "
             f"{report['seed']}.", "",
             "## 1. Parametric: Q queries x R draws, values in [0, 1]", "",
             f"Values: logit y = mu + a_q + b_r + e_qr, sd {SD_QUERY} (query), {SD_DRAW} (draw), "
             f"{SD_RESID} (interaction); `continuous` y itself, `zero-inflated` 0 for "
             f"{ZERO_SHARE:.0%} of the queries in every draw, `P@10` Binomial(10, y) / 10. "
             f"{report['sets']:,} data sets a cell ({VALUES // 1000:,} at 1,000 queries) for the "
             f"t-based intervals, the first {report['boot_sets']:,} of them for the bootstraps; "
             "Monte Carlo error of a coverage near 95%: 0.3 to 0.5 points. Target: over "
             "queries and draws (R = 3, symmetric, logit, arcsine) the population mean; over "
             "queries alone (R = 1, and the bootstraps of each query's mean over the R draws, "
             "as the significance section averages repeats) the mean given the pools drawn. "
             "symmetric: the report's mean ± half before issue 71; **logit**: shipped for the "
             "judged means (intervals.bounded_interval); arcsine: the alternative measured; "
             "**bootstrap**: the significance section's percentile bootstrap (shipped, kept); "
             "BCa and logit-t boot (the studentised bootstrap on the logit scale): alternatives "
             "measured for it. A data set whose values all agree gets `agreeing_interval` "
             "under every interval (shipped).", "",
             "Summary over 25 to 1,000 queries (every family and mean), coverage %:", "",
             "| interval | R | coverage | lowest cell | symmetric: largest share outside [0, 1] |",
             "|---|---|---|---|---|"]
    for key, found in report["coverage_range"].items():
        name, draws = key.split(", R=")
        low, high = found["coverage"]
        where = found["lowest"]
        lines.append(f"| {name} | {draws} | {100 * low:.1f}-{100 * high:.1f} | "
                     f"{where['family']} {where['target']:g}, {where['queries']} queries | "
                     + (f"{100 * found['outside_range']:.1f}%" if name == "symmetric" else "")
                     + " |")
    lines += ["", "Every cell: coverage % (symmetric: the share of intervals leaving [0, 1], "
              "where any, and of data sets whose values all agree, where any).", ""]
    header = "| family | mean | Q | R | " + " | ".join(INTERVALS) + " |"
    lines += [header, "|" + "---|" * (4 + len(INTERVALS))]
    cells: dict[tuple, dict[str, dict]] = {}
    for row in report["parametric"]:
        key = (row["family"], row["target"], row["queries"], row["draws"])
        cells.setdefault(key, {})[row["interval"]] = row
    for (family, target, queries, draws), found in cells.items():
        parts = []
        for name in INTERVALS:
            row = found.get(name)
            if row is None:
                parts.append("-")
                continue
            text = f"{100 * row['coverage']:.1f}"
            if name == "symmetric" and row["outside_range"]:
                text += f" (out {100 * row['outside_range']:.1f}%)"
            if name == "symmetric" and row["agreeing"]:
                text += f" (agree {100 * row['agreeing']:.1f}%)"
            parts.append(text)
        lines.append(f"| {family} | {target:g} | {queries} | {draws} | " + " | ".join(parts)
                     + " |")
    lines += ["", "## 2. The judged estimators (tests/judging/simulation.py)", "",
              f"{report['judged_sets']} data sets a design (3 draws of nested pools of 150 and "
              "300 candidates, two models); coverage of the population mean (with the sample: "
              "the truth's, every frame candidate judged, so an estimator's bias lowers it; "
              "cited: the citations' own mean) by the symmetric interval before and the "
              "shipped one (intervals.bounded_interval); MC error about 1.1 points.", "",
              "| Q (SAMPLE) | pool | model | metric | kind | population mean | symmetric "
              "(share outside [0, 1]) | shipped |", "|---|---|---|---|---|---|---|---|"]
    pairs: dict[tuple, dict[str, dict]] = {}
    for row in report["judged"]:
        key = (row["queries"], row["sample"], row["size"], row["model"], row["metric"],
               row["kind"])
        pairs.setdefault(key, {})[row["interval"]] = row
    for (queries, sample, size, model, metric, kind), found in pairs.items():
        sym, logit = found["symmetric"], found["logit"]
        lines.append(f"| {queries} ({sample}) | {size} | {model} | {metric} | {kind} | "
                     f"{sym['truth']:.3f} | {100 * sym['coverage']:.1f} "
                     f"({100 * sym['outside_range']:.1f}%) | {100 * logit['coverage']:.1f} |")
    lines += ["", "## 3. The differences' interval below 30 queries", "",
              "False positives at a true difference of 0 of the queries-and-draws interval of "
              "a difference (the judged pairs', the variance section's), over "
              "benchmarks/interval_level.py's grid (the draw term's share of the mean's "
              "variance x the interaction's share of the rest), integrated over the mean "
              "squares' chi-squares (`variance.interval_power`); interval_level.md maps 30 to "
              "1,000 queries.", "", "| queries | draws | false positives (lowest-highest) |",
              "|---|---|---|"]
    lines += [f"| {r['queries']} | {r['draws']} | {r['lowest']:.3f}-{r['highest']:.3f} |"
              for r in report["difference_levels"]]
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=4000)
    parser.add_argument("--boot-sets", type=int, default=2000)
    parser.add_argument("--judged-sets", type=int, default=400)
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    before = [round(v, 2) for v in os.getloadavg()]
    start = time.perf_counter()
    rng = np.random.default_rng(SEED)
    rows = parametric(rng, args.sets, args.boot_sets)
    judged_rows = judged(args.judged_sets) if args.judged_sets else []
    levels = difference_levels()
    report = {"machine": machine(), "seed": SEED, "sets": args.sets,
              "boot_sets": args.boot_sets, "judged_sets": args.judged_sets,
              "seconds": time.perf_counter() - start, "load_before": before,
              "load_after": [round(v, 2) for v in os.getloadavg()],
              "components_logit_sd": [SD_QUERY, SD_DRAW, SD_RESID], "zero_share": ZERO_SHARE,
              "coverage_range": summary(rows), "parametric": rows, "judged": judged_rows,
              "difference_levels": levels}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bounded_intervals.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "bounded_intervals.md").write_text("\n".join(markdown(report)))
    print(json.dumps(report["coverage_range"], indent=1))


if __name__ == "__main__":
    main()
