"""Issue 72's figures for a refactoring of the one door: what `make -n` prints for a list of
goal configurations, in a checkout of an earlier commit and in this one, compared byte for
byte; and the lines of the door (pipeline/cli plus pipeline/options), of pipeline/api.py, of
the command bodies (pipeline/cli/commands) and of pipeline/ in all, at each commit named.

    python -m benchmarks.door_parity --base b26cc09 --counts b26cc09 3726992 HEAD \
        --out benchmarks/results/door_parity.md

`make -n` runs no stage: the data folder needs only a corpus with one pool (a stub). Both
checkouts print with this environment's interpreter (PY), each importing its own `pipeline`
(PYTHONPATH), so the lines differ only by code; the report shows the lines that differ.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.machine import machine

ROOT = Path(__file__).resolve().parents[1]
GOALS = (  # the goals whose chains the door builds, each with the variables that shape it: the
    # 21 configurations of issue 81's parity table (benchmarks/results/parity81_make_n.md)
    ("demo",), ("demo", "JUDGE=standin:1"), ("eval", "MODEL=bm25"), ("eval", "MODEL=minilm"),
    ("eval", "MODEL=minilm", "EXECUTOR=slurm", "SHARDS=4", "SLURM_TIME=90"),
    ("eval", "MODEL=bm25", "QUERY_VARIANT=title", "BM25_ENGINE=lucene"),
    ("search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"), ("fuse", "MODELS=bm25,minilm"),
    ("mdcr",), ("mdcr-jaccard", "MODELS=bm25,minilm,random"),
    ("judge", "MODELS=bm25,minilm", "JUDGE=standin:1", "SAMPLE=5", "JUDGE_DEPTH=50",
     "JUDGE_CONCURRENCY=2"),
    ("judge-page", "MODELS=bm25", "SAMPLE=3"), ("pool", "SIZE=2k", "FIELD=medicine", "QUERIES=7"),
    ("corpus", "THREADS=1"), ("embed", "MODEL=minilm"),
    ("embed", "MODEL=minilm", "EXECUTOR=slurm", "SHARDS=4", "SLURM_TIME=4:00:00"),
    ("index", "MODEL=bm25", "THREADS=1"), ("report",), ("pools",),
    ("export-mteb", "MODEL=bm25", "OUT=out"), ("mdcr-scores", "MODEL=bm25", "OUT=out.json"),
)
DOOR = ("pipeline/cli", "pipeline/options")


def printed(checkout: Path, data: Path, goal: tuple[str, ...]) -> str:
    """What `make -n <goal>` prints (stdout and stderr) in `checkout` against `data`."""
    stamp = data / "installed"
    stamp.touch()
    done = subprocess.run(["make", "--no-print-directory", "-n", *goal, f"DATA={data}",
                           f"PY={sys.executable}", f"STAMP={stamp}"], cwd=checkout,
                          env={**os.environ, "PYTHONPATH": str(checkout)},  # its own pipeline
                          capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def differing(before: str, now: str, data: Path) -> list[str]:
    """The lines of two printings that differ (difflib's `-`/`+` lines), the data folder
    written DATA so that the report is the same on every run."""
    return [line.replace(str(data), "DATA") for line in difflib.unified_diff(
        before.splitlines(), now.splitlines(), lineterm="", n=0)
        if line[:1] in "-+" and line[:3] not in ("---", "+++")]


def lines(commit: str, *folders: str) -> int:
    """The lines of the Python files under `folders` at `commit` (`wc -l`'s count)."""
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, *folders], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return sum(subprocess.run(["git", "show", f"{commit}:{name}"], cwd=ROOT, capture_output=True,
                              check=True).stdout.count(b"\n")
               for name in names if name.endswith(".py"))


def short(commit: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit make -n is compared with")
    parser.add_argument("--counts", nargs="+", default=["HEAD"], help="commits to count lines at")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="issue 72", help="what the report's heading names")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="door-") as tmp:
        base, data = Path(tmp) / "base", Path(tmp) / "data"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.base],
                       cwd=ROOT, check=True)
        try:
            pool = data / "corpora" / "demo" / "pools" / "all-1k-r0"
            pool.mkdir(parents=True)
            (pool / "manifest.json").write_text("{}")
            rows, diffs = [], []
            for goal in GOALS:
                before, now = printed(base, data, goal), printed(ROOT, data, goal)
                rows.append((" ".join(goal), now.count("\n"), before == now,
                             "error" in now.lower()))
                if before != now:
                    diffs.append((" ".join(goal), differing(before, now, data)))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           check=True)
    counts = [(short(c), lines(c, *DOOR), lines(c, "pipeline/api.py"),
               lines(c, "pipeline/cli/commands"), lines(c, "pipeline")) for c in args.counts]
    out = [f"# The one door: make -n parity and line counts ({args.title})", "",
           f"`python -m benchmarks.door_parity --base {args.base} --counts "
           f"{' '.join(args.counts)} --title '{args.title}'` on {machine()}.", "",
           f"## make -n: {short(args.base)} -> the working tree", "",
           "`make -n <goal>` against a data folder holding one pool (a stub: make -n runs no "
           "stage), compared byte for byte:", "",
           "| goal and variables | lines | identical | refused |", "|---|---|---|---|"]
    out += [f"| `make -n {goal}` | {n} | {'yes' if same else 'NO'} | {'yes' if bad else 'no'} |"
            for goal, n, same, bad in rows]
    for goal, changed in diffs:
        out += ["", f"`make -n {goal}`: the lines that differ (- {short(args.base)}, + now)", "",
                "```diff", *changed, "```"]
    out += ["", "## Lines (`wc -l` of the committed Python files)", "",
            "| commit | pipeline/cli + pipeline/options | pipeline/api.py | pipeline/cli/commands "
            "| pipeline/ |", "|---|---|---|---|---|"]
    out += [f"| {c} | {door:,} | {api:,} | {commands:,} | {total:,} |"
            for c, door, api, commands, total in counts]
    args.out.write_text("\n".join(out) + "\n")
    print("\n".join(out))
    return 0 if all(same for _, _, same, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
