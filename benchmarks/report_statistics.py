"""The cost of the report's statistics sections at the paper's whole grid (issue 42).

The synthetic results of benchmarks/report_html.py (19 fields x 4 field-level pool sizes and
dataset-level pools of 200k to 2M, 3 repeats, 5 models, 3 metrics: 1,368,000 rows of
results.parquet), then each statistics section built alone from the loaded results, timed:
where the curves cross (`crossover_section`), and where the variance comes from
(`variance_section`) when the report has it. Writes benchmarks/results/report_statistics.json
and .md.

Usage: .venv/bin/python benchmarks/report_statistics.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from benchmarks.report_html import CORPUS, grid  # noqa: E402
from pipeline.report import build  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
# the report's statistics sections, by name -> the function of pipeline/report/build.py
SECTION_FUNCTIONS = {"crossover": "crossover_section", "variance": "variance_section"}


def timed(section: Callable, data: build.Results, repeats: int) -> tuple[float, int, int]:
    """The median seconds of building the section `repeats` times; its tables and rows."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        made = section(data)
        seconds.append(time.perf_counter() - start)
    return (statistics.median(seconds), len(made.tables),
            sum(len(t.rows) for t in made.tables))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="report-statistics-"))
    try:
        rows = grid(work)
        start = time.perf_counter()
        data = build.load_results(work / "runs", CORPUS, 0, work / "corpora")
        _ = data.full_queries
        load_s = time.perf_counter() - start
        sections = {}
        for name, function in SECTION_FUNCTIONS.items():
            if hasattr(build, function):
                seconds, tables, table_rows = timed(getattr(build, function), data,
                                                    args.repeats)
                sections[name] = {"seconds": round(seconds, 2), "tables": tables,
                                  "rows": table_rows}
    finally:
        shutil.rmtree(work)
    figures = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "result_rows": rows,
               "load_s": round(load_s, 1), "repeats": args.repeats, "sections": sections}
    (OUT / "report_statistics.json").write_text(json.dumps(figures, indent=1) + "\n")
    (OUT / "report_statistics.md").write_text(markdown(figures))
    print(markdown(figures))


def markdown(f: dict) -> str:
    lines = "\n".join(f"| {name} | {s['seconds']:.2f} s | {s['tables']} | {s['rows']:,} |"
                      for name, s in f["sections"].items())
    return f"""# The report's statistics sections at the paper's whole grid

{f['date']}, {f['machine']}. `python benchmarks/report_statistics.py`: the synthetic results of
`benchmarks/report_html.py` (19 fields x 4 field-level pool sizes, 200 queries; dataset-level
pools of 200k, 500k, 1M, 2M, 3,800 queries; 3 repeats each, 5 models, 3 metrics:
{f['result_rows']:,} rows of results.parquet), loaded as `make report` loads them
({f['load_s']:.1f} s), then each section built alone from them (median of {f['repeats']}).

| section | seconds | tables | rows |
|---|---|---|---|
{lines}

crossover: per scope (the dataset level and 19 fields) each model paired with BM25 on MAP,
the gap's queries-and-draws interval checked at 4,001 log sizes and the line's departures
tested (no resampling; before issue 47, 1,000 bootstrap resamples each).
"""


if __name__ == "__main__":
    main()
