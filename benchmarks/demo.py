"""Run `make demo` from scratch and record its results and per-stage times.

Writes benchmarks/results/demo.md (tables, stage times, machine), demo.json (raw figures) and
the report's plots (demo-*.png, shown in the README).
Usage: .venv/bin/python benchmarks/demo.py   (after `make setup`; deletes the demo's outputs)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.machine import machine  # noqa: E402
from pipeline.encoding.encoders import TOKEN_BUDGET  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"


def main() -> None:
    subprocess.run(["make", "--no-print-directory", "setup"], cwd=ROOT, check=True)
    subprocess.run(["make", "--no-print-directory", "clean-demo"], cwd=ROOT, check=True)
    start, load = time.perf_counter(), [os.getloadavg()[0]]
    done = subprocess.run(["make", "--no-print-directory", "demo"], cwd=ROOT,
                          capture_output=True, text=True)
    total = time.perf_counter() - start
    load.append(os.getloadavg()[0])
    if done.returncode != 0:
        raise SystemExit(f"make demo failed:\n{done.stderr[-3000:]}")
    times = [json.loads(line) for line in
             (ROOT / "runs" / "demo" / "stage-times.jsonl").read_text().splitlines()]
    embed = [t for t in times if t["stage"] == "embed" and t.get("papers_per_s")]
    report = (ROOT / "runs" / "reports" / "demo.md").read_text()
    stage_table = done.stdout.split("## Stage times", 1)[1].split("\n", 1)[1].strip()
    figures = {"machine": machine(), "wall_seconds_make_demo": round(total, 1),
               "stages": times, "date": time.strftime("%Y-%m-%d"), "load_average": load}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "demo.json").write_text(json.dumps(figures, indent=2) + "\n")
    (OUT / "demo.md").write_text(
        f"# `make demo` on {figures['date']}\n\nMachine: {figures['machine']}.\n"
        f"Wall time of `make demo` after the install: **{total / 60:.1f} min** "
        f"(target: under 15 min).\n"
        + f"Load average (1 min) at the start and the end: {load[0]:.2f}, {load[1]:.2f} "
          "(other processes on the machine slow the wall time and the throughput).\n"
        + (f"MiniLM embedding throughput: **{embed[0]['papers_per_s']} papers/s** "
           f"({embed[0]['embedded']} papers, max 256 tokens, batches of up to "
           f"{TOKEN_BUDGET['cpu']:,} padded tokens on a CPU, float32).\n"
           if embed else "")
        + "\n" + report.split("\n", 1)[1]
        + "\n## Stage times (seconds)\n\n" + stage_table + "\n"
    )
    for png in (ROOT / "runs" / "reports").glob("demo-*.png"):  # the README shows them
        (OUT / png.name).write_bytes(png.read_bytes())
    print((OUT / "demo.md").read_text())


if __name__ == "__main__":
    main()
