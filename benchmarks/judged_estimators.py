"""The judged-sample estimators under the pipeline's design (issue 60): the simulation of
tests/judging/simulation.py (30 queries, nested pools of two sizes drawn three times, two
models, relevance planted with rank dependence) at sampling rates of 2%, 5%, 10% and 20% of
every stratum (at least 2 pairs each) and at SAMPLE 8 and 20 pairs per query (sample.py's
allocation): per pool size, model and metric, the bias with its Monte Carlo error, and how often
the report's queries-and-draws interval holds the population mean, with the sample and with
every candidate judged, beside the level that interval should have at the estimate's variance
components (it is conservative where the draws share no effect) and the coverage of an
interval from the known spread over data sets (which only bias lowers). Each design runs in a
process of its own (numpy on one thread each).

Writes benchmarks/results/judged_estimators.md and judged_estimators.json.
Usage: .venv/bin/python -m benchmarks.judged_estimators [--sets 400] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from benchmarks.demo import OUT
from benchmarks.machine import in_parallel, machine

log = logging.getLogger(__name__)

HEADLINE = ("jkAP", "infP@10")  # the must-show's metrics


def one(name: str, sets: int) -> tuple[str, list[dict], float, dict]:
    """One design's summary rows, its seconds and its strata's mean sampling rates."""
    import numpy as np

    from tests.judging.simulation import DESIGNS, SIZES, design_seed, run, summarise

    start = time.perf_counter()
    result = run(design_seed(name), sets, DESIGNS[name])
    rows = summarise(result)
    rates = {str(size): [round(float(v), 4) for v in
                         np.mean(result[size, -1, "rates", ""], axis=0)] for size in SIZES}
    return name, rows, time.perf_counter() - start, rates


def markdown(report: dict) -> list[str]:
    """The results as markdown: the machine, then one table per design."""
    lines = ["# Judged-sample estimators: bias and interval coverage by simulation", "",
             f"Machine: {report['machine']}; load average before {report['load_before']}, "
             f"after {report['load_after']}; {report['workers']} processes, "
             f"{report['seconds']:.0f} s in all. {report['sets']} data sets per design, each "
             "30 queries x 3 pool draws, two pool sizes (150 and 300 random candidates beside "
             "the citations), two models (2 favours cited papers). Bias: mean over data sets "
             "of (estimate - truth), each a mean over its queries and draws; MC: its Monte "
             "Carlo error; z = bias / MC. Coverage: the share of data sets whose 95% "
             "queries-and-draws interval holds the population mean (MC error "
             f"{100 * (0.95 * 0.05 / report['sets']) ** 0.5:.1f} points), with the sample and "
             "with every candidate judged; expected: the level that interval has under the "
             "crossed normal model at the variance components of the mean squares averaged "
             "over the data sets (1 - variance.interval_power at a difference of 0), above 95% "
             "where the draws share no effect but queries and draws interact (the interval's "
             "draw part, t(2) x MS_R, is wide then); known: the share of data sets whose mean "
             "lies within 1.96 x the SD of the means over the data sets of the population "
             "mean, an interval from the known spread, so 95% less what bias costs. Range: the "
             "smallest and largest single-query estimate. "
             "Made by `python -m benchmarks.judged_estimators`.", ""]
    off = [f"{name}, pool {row['size']}, model {row['model']}, {row['metric']} "
           f"{row['bias']:+.4f} ({row['bias'] / row['mc_error']:+.1f} MC)"
           for name, design in report["designs"].items() for row in design["rows"]
           if row["metric"] in HEADLINE and abs(row["bias"]) > 3 * row["mc_error"]]
    lines += [f"Not met: {', '.join(HEADLINE)} off by more than 3 MC errors in "
              f"{len(off)} cells: {'; '.join(off) if off else 'none'}.", ""]
    cells = [(name, row) for name, design in report["designs"].items()
             for row in design["rows"] if row["metric"] in HEADLINE]
    away = [f"{name}, pool {row['size']}, model {row['model']}, {row['metric']} "
            f"{100 * row['coverage']:.1f}% against {100 * row['expected_coverage']:.1f}%"
            for name, row in cells if abs(row["coverage"] - row["expected_coverage"])
            > 3 * (row["expected_coverage"] * (1 - row["expected_coverage"]) / row["sets"]) ** 0.5]
    outside = [f"{name}, pool {row['size']}, model {row['model']}, {row['metric']} "
               f"{100 * row['known_coverage']:.1f}%"
               for name, row in cells if not 0.93 <= row["known_coverage"] <= 0.97]
    lines += [f"Coverage of {', '.join(HEADLINE)} more than 3 MC errors from its expected level "
              f"in {len(away)} of {len(cells)} cells: {'; '.join(away) if away else 'none'}. "
              f"Known-spread coverage outside 93-97% in {len(outside)} cells: "
              f"{'; '.join(outside) if outside else 'none'}.", ""]
    for name, design in report["designs"].items():
        rates = "; ".join(f"pool {size}: {', '.join(f'{100 * r:.1f}%' for r in values)}"
                          for size, values in design["rates"].items())
        lines += [f"## {name}", "", f"Mean sampling rate by stratum (1-10, 11-30, 31-100): "
                  f"{rates}. {design['seconds']:.0f} s.", "",
                  "| pool | model | metric | truth | citations | bias | MC | z | coverage | "
                  "expected | known | coverage, all judged | expected, all judged | range |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in design["rows"]:
            lines.append(
                f"| {row['size']} | {row['model']} | {row['metric']} | {row['truth']:.4f} | "
                f"{row['cited']:.4f} | {row['bias']:+.4f} | {row['mc_error']:.4f} | "
                f"{row['bias'] / row['mc_error']:+.1f} | {100 * row['coverage']:.1f}% | "
                f"{100 * row['expected_coverage']:.1f}% | {100 * row['known_coverage']:.1f}% | "
                f"{100 * row['truth_coverage']:.1f}% | "
                f"{100 * row['truth_expected_coverage']:.1f}% | {row['smallest']:.2f} to "
                f"{row['largest']:.2f} |")
        lines.append("")
    return lines


def main() -> None:
    """Run every design, write the json and the markdown."""
    from tests.judging.simulation import DESIGNS, SEED

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=400)
    parser.add_argument("--workers", type=int, default=min(len(DESIGNS), os.cpu_count() or 1))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    done, timing = in_parallel(one, [(name, args.sets) for name in sorted(DESIGNS)],
                               args.workers)
    found = {name: {"rows": rows, "seconds": took, "rates": rates}
             for name, rows, took, rates in done}
    report = {"machine": machine(), **timing, "sets": args.sets, "seed": SEED,
              "designs": {name: found[name] for name in DESIGNS}}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "judged_estimators.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "judged_estimators.md").write_text("\n".join(markdown(report)))
    for name, design in report["designs"].items():
        for row in design["rows"]:
            if row["metric"] in HEADLINE:
                log.info(f"{name} pool {row['size']} model {row['model']} {row['metric']}: "
                         f"bias {row['bias']:+.4f} ({row['bias'] / row['mc_error']:+.1f} MC), "
                         f"coverage {100 * row['coverage']:.1f}% (expected "
                         f"{100 * row['expected_coverage']:.1f}%, known "
                         f"{100 * row['known_coverage']:.1f}%)")


if __name__ == "__main__":
    main()
