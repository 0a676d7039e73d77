"""How long an unchanged target takes to rerun (target: a no-op `make eval` in at most 1.0 s),
and how many Python processes it starts (one: the goal's, issue 59).

make keeps no timestamps of its own: every stage is run and checks by content (parameters,
input checksums kept beside each file's stat, outputs against their manifests) that it has
nothing to do. This measures what that costs. Builds a small demo corpus (20k papers, pools
of 2k and 5k, BM25, random and MiniLM runs) in a temporary data root with the Makefile, then times
each make target again five times, when there is nothing to do, counting the Python starts
(a sitecustomize on PYTHONPATH writes a line per start). With --baseline REF, the same in a
temporary git worktree of REF (the code before a change), on the same data and machine.
Writes benchmarks/results/noop.md and noop.json.
Usage: .venv/bin/python benchmarks/noop.py [--baseline REF]   (after `make setup`)
"""

from __future__ import annotations

import argparse
import json
import os
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
    ("make eval", ["eval"]),  # MODEL's default, minilm: an encoder and its store
    ("make embed", ["embed"]),  # minilm's store: every pool's papers in it
]


# Each Python start appends a line to NOOP_STARTS (site imports it at start-up)
COUNTER = "import os\nopen(os.environ['NOOP_STARTS'], 'a').write('start\\n')\n"


def make(checkout: Path, data: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """make in `checkout` on `data`, with this Python as the environment's."""
    (tmp / "stamp").touch()
    cmd = ["make", "--no-print-directory", f"DATA={data}", f"PY={sys.executable}",
           f"STAMP={tmp / 'stamp'}", *SETTINGS, *args]
    env = {**os.environ, "MAKEFLAGS": "", "NOOP_STARTS": str(tmp / "starts"),
           "PYTHONPATH": str(tmp / "site")}
    return subprocess.run(cmd, cwd=checkout, check=True, capture_output=True, text=True,
                          env=env)


def measure(checkout: Path, data: Path, tmp: Path) -> list[dict]:
    """Five no-op reruns of each target in `checkout`: median and max seconds, the stage
    commands run and the Python processes started (per rerun)."""
    rows = []
    for label, args in TARGETS:
        seconds, starts = [], []
        for _ in range(5):
            (tmp / "starts").unlink(missing_ok=True)
            start = time.perf_counter()
            done = make(checkout, data, tmp, *args)
            seconds.append(time.perf_counter() - start)
            starts.append(len((tmp / "starts").read_text().splitlines()))
        ran = re.findall(r"--runs-root \S+ (\w+)", done.stdout)
        rows.append({"target": label, "median_s": round(statistics.median(seconds), 3),
                     "max_s": round(max(seconds), 3), "stages_run": ran,
                     "python_starts": max(starts)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="a git ref measured the same way beside this code")
    args = parser.parse_args()
    measured = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        data = tmp / "data"
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(COUNTER)
        make(ROOT, data, tmp, "pool", "SIZE=2k 5k")
        for _, target in TARGETS[2:]:
            make(ROOT, data, tmp, *target)
        measured["this code"] = measure(ROOT, data, tmp)
        if args.baseline:
            old = tmp / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old),
                            args.baseline], cwd=ROOT, check=True)
            try:
                measured[f"before ({args.baseline})"] = measure(old, data, tmp)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                               check=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "noop.json").write_text(json.dumps({"machine": machine(), "code": measured},
                                              indent=2) + "\n")
    lines = [f"# No-op reruns ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {machine()}. Five reruns each of an unchanged target on a 20k-paper "
             "demo corpus (pools of 2k and 5k, 50 queries). Target: a no-op `make eval` in at "
             "most 1.0 s, one Python process. Every stage runs and finds by content that it "
             "has nothing to do (make keeps no timestamps: a damaged or stale file is redone "
             "by the same commands); since issue 59 a target's stages run in its one goal "
             "process.", "",
             "| code | target | median (s) | max (s) | Python processes | stages run (each a "
             "no-op) |", "|---|---|---|---|---|---|"]
    for code, rows in measured.items():
        for row in rows:
            what = ", ".join(row["stages_run"]) or "none"
            lines.append(f"| {code} | `{row['target']}` | {row['median_s']} | {row['max_s']} "
                         f"| {row['python_starts']} | {what} |")
    (OUT / "noop.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
