"""The assessor agreement's interval at CSFCube's size (issue 71): how often the 95% interval
of each kappa (pipeline/judging/agreement.py: the cluster bootstrap-t over query papers, and
the delete-one-paper jackknife-t it replaced) holds the population's kappa, with 16 query
papers (a CSFCube facet's count) and 34 (its papers over all facets), in each CSFCube-like
world of tests/judging/kappa_simulation.py (`WORLDS`): the tests' short lists, CSFCube's lists
of 100 or 250 candidates with grade mixes about equal or far apart from query to query, and
short and long lists mixed. Each (world, papers) runs in a process of its own (numpy on one
thread each).

Writes benchmarks/results/agreement_coverage.md and agreement_coverage.json.
Usage: .venv/bin/python -m benchmarks.agreement_coverage [--samples 4000] [--workers N]
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

SEED = 20270114
PAPERS = (16, 34)  # a facet's query papers; all facets' (the ALL row)
BAND = (0.94, 0.96)  # the must-show's band at 16 papers


def one(world: str, papers: int, samples: int) -> dict[str, Any]:
    """One world and count of papers: each method's coverage of each kappa, and the seconds."""
    from tests.judging.kappa_simulation import WORLDS, coverage

    start = time.perf_counter()
    seed = SEED + 100 * list(WORLDS).index(world) + papers
    got = coverage(WORLDS[world], papers, samples, seed)
    return {"world": world, "papers": papers, "seed": seed, "coverage": got,
            "seconds": time.perf_counter() - start}


def markdown(report: dict[str, Any]) -> list[str]:
    """The results as markdown: the machine, the range at 16 papers, a table."""
    from pipeline.judging.agreement import KAPPAS, RESAMPLES

    samples = report["samples"]
    error = 100 * (0.95 * 0.05 / samples) ** 0.5
    lines = ["# Assessor agreement: the kappas' interval coverage by simulation", "",
             f"Machine: {report['machine']}; load average before {report['load_before']}, "
             f"after {report['load_after']}; {report['workers']} processes, "
             f"{report['seconds']:.0f} s in all. {samples} samples per world and count of "
             "query papers; coverage: the share of samples whose 95% interval holds the "
             "population's kappa (that of 20,000 queries pooled), MC error "
             f"{error:.2f} points. Intervals: the agreement's cluster bootstrap-t over query "
             f"papers ({RESAMPLES} resamples, each studentized by its delete-one-paper "
             "jackknife error) and the jackknife-t it replaced (kappa +- t(papers - 1) x that "
             "error). Worlds (tests/judging/kappa_simulation.py): **tests**, 20-45 candidates a "
             "query (the tests' release); **csfcube**, 100 or 250 (CSFCube's lists), grade "
             "mixes about equal (Dirichlet 4, 2, 1.2, 0.8), error rates 10-50%; "
             "**heterogeneous**, the same lists, mixes far apart (Dirichlet 0.5, 0.25, 0.15, "
             "0.1), errors 10-60%; **mixed**, 20, 45, 100 or 250 candidates, Dirichlet 1, 0.5, "
             "0.3, 0.2, errors 5-70%. Made by `python -m benchmarks.agreement_coverage`.", ""]
    for method in ("bootstrap-t", "jackknife-t"):
        at16 = [r["coverage"][method][k] for r in report["runs"] if r["papers"] == 16
                for k in KAPPAS]
        inside = sum(BAND[0] <= v <= BAND[1] for v in at16)
        lines.append(f"- {method}, 16 query papers: {100 * min(at16):.1f}-{100 * max(at16):.1f}% "
                     f"over the worlds and kappas, {inside} of {len(at16)} within "
                     f"{100 * BAND[0]:.0f}-{100 * BAND[1]:.0f}%.")
    lines += ["", "| world | papers | method | " + " | ".join(f"kappa {k}" for k in KAPPAS)
              + " | s |", "|---|---|---|" + "---:|" * (len(KAPPAS) + 1)]
    for r in report["runs"]:
        for method, kinds in r["coverage"].items():
            lines.append(f"| {r['world']} | {r['papers']} | {method} | "
                         + " | ".join(f"{100 * kinds[k]:.1f}%" for k in KAPPAS)
                         + f" | {r['seconds']:.0f} |")
    return lines + [""]


def main() -> None:
    """Every world at 16 and 34 papers; the json and the markdown."""
    from tests.judging.kappa_simulation import WORLDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs, timing = in_parallel(one, [(world, papers, args.samples) for papers in PAPERS
                                     for world in WORLDS], args.workers)
    report = {"machine": machine(), **timing, "samples": args.samples, "seed": SEED,
              "runs": runs}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "agreement_coverage.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = markdown(report)
    (OUT / "agreement_coverage.md").write_text("\n".join(lines))
    for line in lines:
        if line.startswith("- "):
            log.info(line[2:])


if __name__ == "__main__":
    main()
