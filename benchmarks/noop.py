"""How long an unchanged target takes to rerun (target: a no-op in under 2 s).

make keeps no timestamps of its own: every stage is run and checks by content (parameters,
input checksums kept beside each file's stat, outputs against their manifests) that it has
nothing to do. This measures what that costs. Builds a small demo corpus (20k papers, pools
of 2k and 5k, BM25 and random runs) in a temporary data root with the Makefile, then times
each make target again five times, when there is nothing to do. Writes
benchmarks/results/noop.md and noop.json.
Usage: .venv/bin/python benchmarks/noop.py   (after `make setup`)
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo import machine  # noqa: E402

SETTINGS = ["CORPUS=demo", "DEMO_PAPERS=20k", "QUERIES=50", "THREADS=2"]
TARGETS = [
    ("make corpus", ["corpus"]),
    ("make pool SIZE='2k 5k'", ["pool", "SIZE=2k 5k"]),
    ("make eval MODEL=bm25", ["eval", "MODEL=bm25"]),
    ("make eval MODEL=random", ["eval", "MODEL=random"]),
]


def make(data: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = ["make", "--no-print-directory", f"DATA={data}", *SETTINGS, *args]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        make(data, "pool", "SIZE=2k 5k")
        for _, args in TARGETS[2:]:
            make(data, *args)
        for label, args in TARGETS:
            seconds = []
            for _ in range(5):
                start = time.perf_counter()
                done = make(data, *args)
                seconds.append(time.perf_counter() - start)
            ran = re.findall(r"--runs-root \S+ (\w+)", done.stdout)
            rows.append({"target": label, "median_s": round(statistics.median(seconds), 3),
                         "max_s": round(max(seconds), 3), "stages_run": ran})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "noop.json").write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2)
                                   + "\n")
    lines = [f"# No-op reruns ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Five reruns each of an unchanged target on a 20k-paper "
             "demo corpus (pools of 2k and 5k, 50 queries). Target: under 2 s. Every stage "
             "command runs and finds by content that it has nothing to do (make keeps no "
             "timestamps: a damaged or stale file is redone by the same commands).", "",
             "| target | median (s) | max (s) | stage commands run (each a no-op) |",
             "|---|---|---|---|"]
    for row in rows:
        what = ", ".join(row["stages_run"]) or "none"
        lines.append(f"| `{row['target']}` | {row['median_s']} | {row['max_s']} | {what} |")
    (OUT / "noop.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
