"""jkAP's thin-sample flag measured (issue 71): the bias of jkAP (pipeline/judging/inferred.py)
and the coverage of the report's interval, by simulation (tests/judging/simulation.py: 30
queries, nested pools of 150 and 300 random candidates beside the citations drawn three times,
two models), in each world of WORLDS (dense; sparse; flat: relevance as rare as in sparse and
no more likely high in the models' ranks than low), at the designs of FLAG_DESIGNS: 2%, 5%,
10% and 20% of every stratum (2 pairs at least) and SAMPLE 4 to 40 pairs per query spread as
sample.py spreads them. Per cell (world, design, pool size, model): the bias (mean over data
sets of the estimate's mean less the truth's, every frame candidate judged) with its Monte Carlo
error, the report's interval's coverage of the population mean, and how often the report's
flag fires (inferred.thin_mask: a pool draw's mean judged pairs per query short of what jkAP
needs in some stratum). Then what the flag says, checked: the bias range of the flagged
designs (bias -+ 2 MC errors, over every world), against inferred.JK_BIAS, and the smallest
SAMPLE from which every world's cells are within 0.01 (|bias| + 2 MC), against
inferred.JK_WITHIN_SAMPLE. Each (world, design) runs in a process of its own (numpy on one
thread each).

Writes benchmarks/results/jkap_flag.md and jkap_flag.json.
Usage: .venv/bin/python -m benchmarks.jkap_flag [--sets 400] [--workers N] [--markdown-only]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Any

from benchmarks.demo import OUT
from benchmarks.machine import in_parallel, machine

log = logging.getLogger(__name__)

WITHIN = 0.01  # the bias the flag's SAMPLE keeps jkAP within, in every world
FLAGGED = 0.5  # a design counts as flagged where the flag fires on this share of data sets


def one(world: str, name: str, sets: int) -> dict[str, Any]:
    """One world and design: its cells (pool size x model), the judged pairs per query by
    stratum and how often the flag fires on each, and its seconds."""
    import numpy as np

    from tests.judging.simulation import SIZES, coverages, flag_design, run

    design, seed = flag_design(world, name)
    start = time.perf_counter()
    result = run(seed, sets, design, metrics=("jkAP",))
    cells, judged, thin = [], {}, {}
    for size in SIZES:
        flags = result[size, -1, "thin", ""]  # (sets, draws, strata)
        flagged = flags.any(axis=(1, 2))  # a data set: its draws, as the report's pools
        judged[str(size)] = [round(float(v), 2) for v in
                             result[size, -1, "drawn", ""].mean(axis=0)]
        thin[str(size)] = [round(float(v), 3) for v in flags.mean(axis=(0, 1))]
        for model in (0, 1):
            truth, est = (result[size, model, kind, "jkAP"] for kind in ("truth", "inferred"))
            error = (est - truth).mean(axis=(1, 2))
            target = float(truth.mean())
            got = coverages(est, target)
            shown = coverages(est[flagged], target) if flagged.any() else None
            cells.append({"size": size, "model": model + 1, "sets": sets, "truth": target,
                          "bias": float(error.mean()),
                          "mc_error": float(error.std(ddof=1) / np.sqrt(sets)),
                          "coverage": got["covered"], "expected_coverage": got["expected"],
                          "known_coverage": got["known"], "flagged": float(flagged.mean()),
                          "flagged_coverage": None if shown is None else shown["covered"]})
    return {"world": world, "design": name, "seed": seed, "cells": cells, "judged": judged,
            "thin": thin, "seconds": time.perf_counter() - start}


def budget(name: str) -> int | None:
    """The SAMPLE of a design's name ("SAMPLE 20": 20), None for a rate."""
    return int(name.split()[1]) if name.startswith("SAMPLE") else None


def findings(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the flag may say: the flagged designs' bias range (bias -+ 2 MC errors, every
    world), the coverage of their intervals, the unflagged designs' largest |bias| + 2 MC, and
    per world the smallest SAMPLE from which every larger simulated SAMPLE keeps every cell
    within WITHIN (then the largest of those over the worlds)."""
    flagged = [(r, c) for r in runs for c in r["cells"] if c["flagged"] >= FLAGGED]
    clear = [(r, c) for r in runs for c in r["cells"] if c["flagged"] < FLAGGED]
    within: dict[str, int | None] = {}
    for world in dict.fromkeys(r["world"] for r in runs):
        sizes = sorted((budget(r["design"]), r) for r in runs
                       if r["world"] == world and budget(r["design"]) is not None)
        good = [all(abs(c["bias"]) + 2 * c["mc_error"] < WITHIN for c in r["cells"])
                for _, r in sizes]
        first = next((i for i in range(len(good)) if all(good[i:])), None)
        within[world] = None if first is None else sizes[first][0]
    reached = [v for v in within.values() if v is not None]
    return {
        "flagged_low": min(c["bias"] - 2 * c["mc_error"] for _, c in flagged),
        "flagged_high": max(c["bias"] + 2 * c["mc_error"] for _, c in flagged),
        "flagged_coverage": [min(c["coverage"] for _, c in flagged),
                             max(c["coverage"] for _, c in flagged)],
        "flagged_designs": sorted({(r["world"], r["design"]) for r, _ in flagged}),
        "clear_largest": max((abs(c["bias"]) + 2 * c["mc_error"] for _, c in clear),
                             default=None),
        "within": within,
        "within_all": max(reached) if len(reached) == len(within) else None}


def _range(values: list[float], digits: int = 4, sign: bool = True) -> str:
    low, high = min(values), max(values)
    form = f"{{:{'+' if sign else ''}.{digits}f}}"
    return form.format(low) if low == high else f"{form.format(low)} to {form.format(high)}"


def markdown(report: dict[str, Any]) -> list[str]:
    """The results as markdown: the machine, what the flag may say, then a table per world."""
    from pipeline.judging.inferred import JK_BIAS, JK_NEEDED, JK_NEEDED_DEEPEST, JK_WITHIN_SAMPLE

    found = report["findings"]
    lines = ["# jkAP's thin-sample flag: its bias bound and coverage by simulation", "",
             f"Machine: {report['machine']}; load average before {report['load_before']}, "
             f"after {report['load_after']}; {report['workers']} processes, "
             f"{report['seconds']:.0f} s in all. {report['sets']} data sets per world and "
             "design, each 30 queries x 3 pool draws, two pool sizes (150 and 300 random "
             "candidates beside the citations), two models (2 favours cited papers): "
             "tests/judging/simulation.py. Worlds (`WORLDS`): **dense**, relevance planted "
             "among the uncited candidates at 40/20/8/2% by topicality band, 2 + Poisson(4) "
             "citations a query; **sparse**, a quarter of those rates, 1 + Poisson(1) "
             "citations; **flat**, 1% at every topicality (the models' ranks say nothing of "
             "the uncited relevant), 1 + Poisson(1) citations. Bias: mean over data sets of "
             "(jkAP - truth), each a mean over its queries and draws, the truth with every "
             "frame candidate judged; MC: its Monte Carlo error. Coverage: the share of data "
             "sets whose 95% queries-and-draws interval (the report's) holds the population "
             "mean (MC error "
             f"{100 * (0.95 * 0.05 / report['sets']) ** 0.5:.1f} points); expected: the level "
             "that interval has at the estimate's variance components (above 95%: it is "
             "conservative where the draws share no effect). Flagged: the share of data sets "
             "on whose pool draws the report flags jkAP (`inferred.thin_mask`: fewer judged "
             f"pairs per query than {JK_NEEDED} in a stratum above the deepest or "
             f"{JK_NEEDED_DEEPEST} in the deepest, the mean over the pool's queries); a design "
             f"counts as flagged from {FLAGGED:.0%}. Made by `python -m benchmarks.jkap_flag`.",
             ""]
    within = ", ".join(f"{world} {'none' if n is None else f'SAMPLE {n}'}"
                       for world, n in found["within"].items())
    stated_low, stated_high = JK_BIAS
    holds = stated_low <= found["flagged_low"] and found["flagged_high"] <= stated_high
    lines += [
        "## What the flag says, measured", "",
        f"- Flagged designs: jkAP's bias -+ 2 MC errors spans {found['flagged_low']:+.4f} to "
        f"{found['flagged_high']:+.4f} over every world; the flag states {stated_low:+.3f} to "
        f"{stated_high:+.3f} (`inferred.JK_BIAS`): {'holds' if holds else 'DOES NOT HOLD'}.",
        f"- Coverage of the flagged designs' intervals: {100 * found['flagged_coverage'][0]:.1f}"
        f"-{100 * found['flagged_coverage'][1]:.1f}% (each cell below, with its expected "
        "level).",
        f"- Designs not flagged: the largest |bias| + 2 MC errors "
        f"{found['clear_largest']:.4f}" + (" (within 0.01)."
                                           if found["clear_largest"] < WITHIN else "."),
        f"- The smallest SAMPLE from which every cell of every larger simulated SAMPLE is within "
        f"{WITHIN} (|bias| + 2 MC errors): {within}; in every world SAMPLE "
        f"{found['within_all']}. The flag names SAMPLE {JK_WITHIN_SAMPLE} "
        f"(`inferred.JK_WITHIN_SAMPLE`): "
        f"{'the same' if found['within_all'] == JK_WITHIN_SAMPLE else 'DIFFERENT'}.", ""]
    for world in dict.fromkeys(r["world"] for r in report["runs"]):
        lines += [f"## {world}", "",
                  "| design | judged per query (1-10, 11-30, 31-100), pool 150; 300 | flagged "
                  "| bias (4 cells) | largest \\|bias\\| / MC | coverage | expected | s |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in (r for r in report["runs"] if r["world"] == world):
            cells = r["cells"]
            judged = "; ".join(", ".join(f"{v:.1f}" for v in values)
                               for values in r["judged"].values())
            worst = max(cells, key=lambda c: abs(c["bias"]) / c["mc_error"])
            lines.append(
                f"| {r['design']} | {judged} | "
                f"{_range([100 * c['flagged'] for c in cells], 0, False)}% | "
                f"{_range([c['bias'] for c in cells])} | "
                f"{abs(worst['bias']) / worst['mc_error']:.1f} | "
                f"{_range([100 * c['coverage'] for c in cells], 1, False)}% | "
                f"{_range([100 * c['expected_coverage'] for c in cells], 1, False)}% | "
                f"{r['seconds']:.0f} |")
        lines.append("")
    lines += ["## Every cell", "",
              "| world | design | pool | model | truth | bias | MC | coverage | expected | "
              "known | flagged | coverage, flagged sets |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        for c in r["cells"]:
            shown = ("n/a" if c["flagged_coverage"] is None
                     else f"{100 * c['flagged_coverage']:.1f}%")
            lines.append(
                f"| {r['world']} | {r['design']} | {c['size']} | {c['model']} | "
                f"{c['truth']:.4f} | {c['bias']:+.4f} | {c['mc_error']:.4f} | "
                f"{100 * c['coverage']:.1f}% | {100 * c['expected_coverage']:.1f}% | "
                f"{100 * c['known_coverage']:.1f}% | {100 * c['flagged']:.0f}% | {shown} |")
    return lines + [""]


def main() -> None:
    """Run every world and design, write the json and the markdown."""
    from tests.judging.simulation import FLAG_DESIGNS, FLAG_SEED, WORLDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=400)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite the markdown from the json (the flag's constants changed)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.markdown_only:
        report = json.loads((OUT / "jkap_flag.json").read_text())
        (OUT / "jkap_flag.md").write_text("\n".join(markdown(report)))
        return
    runs, timing = in_parallel(one, [(world, name, args.sets) for world in WORLDS
                                     for name in FLAG_DESIGNS], args.workers)
    report = {"machine": machine(), **timing, "sets": args.sets, "seed": FLAG_SEED,
              "within": WITHIN,
              "flagged_from": FLAGGED, "worlds": WORLDS, "runs": runs,
              "findings": findings(runs)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "jkap_flag.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "jkap_flag.md").write_text("\n".join(markdown(report)))
    found = report["findings"]
    log.info(f"flagged: bias {found['flagged_low']:+.4f} to {found['flagged_high']:+.4f}, "
             f"coverage {found['flagged_coverage']}; within {WITHIN} from "
             f"{found['within']} (all: SAMPLE {found['within_all']}); not flagged: largest "
             f"{found['clear_largest']}")


if __name__ == "__main__":
    main()
