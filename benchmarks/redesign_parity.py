"""Byte parity of the pipeline's outputs across a refactoring: run `make demo` and
`make mdcr` (then score the benchmark) in a fresh data folder, hash every pool, run, TREC and
metrics file, and either record the hashes or compare them with a recorded set.

    python benchmarks/redesign_parity.py record  benchmarks/results/parity_before.json
    python benchmarks/redesign_parity.py compare benchmarks/results/parity_before.json
    python benchmarks/redesign_parity.py diff BEFORE.json AFTER.json   # two records, no run

Manifests are left out (they hold times, absolute paths and the code's commit), and so are the
evaluations' `.eval.json` (an evaluation's manifest: the same, plus the means of its
`.metrics.parquet`, which is compared); everything they vouch for is in.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HASHED = (".parquet", ".trec", ".tsv")


def produce(data: Path, papers: str, settings: list[str]) -> float:
    """make demo and make mdcr into `data` (`settings`: more NAME=VALUE for every make call);
    the wall time in seconds."""
    start = time.perf_counter()
    common = [f"DATA={data}"] + ([f"DEMO_PAPERS={papers}"] if papers else []) + settings
    for goal in (["demo"], ["mdcr", "CORPUS=demo"],
                 ["eval", "CORPUS=demo-mdcr", "MODEL=bm25"],
                 ["eval", "CORPUS=demo-mdcr", "MODEL=minilm"]):
        subprocess.run(["make", "--no-print-directory", *goal, *common], cwd=ROOT, check=True)
    return time.perf_counter() - start


def hashes(data: Path) -> dict[str, str]:
    """sha256 of every pool, run, TREC and metrics file under data/corpora/*/pools and runs/."""
    found = [p for p in (data / "corpora").glob("*/pools/**/*") if p.suffix in HASHED]
    found += [p for p in (data / "runs").rglob("*")
              if p.suffix in HASHED and "reports" not in p.parts]
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(found) if p.is_file()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("record", "compare", "diff"))
    parser.add_argument("file", type=Path)
    parser.add_argument("after", type=Path, nargs="?", help="diff: the second record")
    parser.add_argument("--papers", default="", help="DEMO_PAPERS (default: the Makefile's)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="another make variable for every call (e.g. DEMO_SIZES='1k 2k')")
    args = parser.parse_args()
    if args.mode == "diff":
        after = json.loads(args.after.read_text())
        found, commit = after["files"], after["commit"]
    else:
        with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
            seconds = produce(Path(tmp), args.papers, args.set)
            found = hashes(Path(tmp))
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
    if args.mode == "record":
        args.file.write_text(json.dumps({"commit": commit, "papers": args.papers,
                                         "settings": args.set,
                                         "seconds": round(seconds), "files": found},
                                        indent=1) + "\n")
        print(f"{len(found)} files recorded in {args.file}")
        return 0
    before = json.loads(args.file.read_text())
    old = {k: v for k, v in before["files"].items() if not k.endswith(".eval.json")}
    found = {k: v for k, v in found.items() if not k.endswith(".eval.json")}
    differ = sorted(k for k in old.keys() & found.keys() if old[k] != found[k])
    lost, new = sorted(old.keys() - found.keys()), sorted(found.keys() - old.keys())
    demo_settings = ([f"DEMO_PAPERS={args.papers}"] if args.papers else []) + args.set
    report = args.file.with_name(args.file.stem.replace("_before", "") + "_compare.md")
    lines = [f"# Byte parity: {before['commit']} -> {commit}", "",
             f"`make demo {' '.join(demo_settings)}`, `make mdcr`, "
             "`make eval CORPUS=demo-mdcr`"
             " (bm25, minilm), in a fresh data folder each time.", "",
             f"- files compared: {len(old.keys() & found.keys())}",
             f"- identical bytes: {len(old.keys() & found.keys()) - len(differ)}",
             f"- different: {len(differ)}", f"- missing now: {len(lost)}",
             f"- new now: {len(new)}", ""]
    lines += [f"  - differs: `{k}`" for k in differ] + [f"  - missing: `{k}`" for k in lost]
    lines += [f"  - new: `{k}`" for k in new]
    report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if not (differ or lost or new) else 1


if __name__ == "__main__":
    sys.exit(main())
