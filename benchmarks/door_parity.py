"""Issue 72's figures for a refactoring of the one door: what `make -n` prints for a list of
goal configurations, in a checkout of an earlier commit and in this one, compared byte for
byte; and the lines of the door (pipeline/cli plus pipeline/options), of pipeline/api.py, of
the command bodies (pipeline/cli/commands) and of pipeline/ in all, at each commit named.

    python -m benchmarks.door_parity --base b26cc09 --counts b26cc09 3726992 HEAD \
        --out benchmarks/results/door_parity.md

`make -n` runs no stage: the data folder needs only a corpus with one pool (a stub). Both
checkouts print with this environment's interpreter (PY), so the lines differ only by code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.machine import machine

ROOT = Path(__file__).resolve().parents[1]
GOALS = (  # the goals whose chains the door builds: each with the variables that shape it
    ("demo",), ("demo", "JUDGE=standin:1"), ("eval", "MODEL=bm25"), ("eval", "MODEL=minilm"),
    ("eval", "MODEL=minilm", "EXECUTOR=slurm"),
    ("eval", "MODEL=bm25", "QUERY_VARIANT=title", "BM25_ENGINE=lucene"),
    ("search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"), ("fuse", "MODELS=bm25,minilm"),
    ("mdcr",), ("mdcr-jaccard", "MODELS=bm25,minilm,random"),
    ("judge", "MODELS=bm25,minilm", "JUDGE=standin:1"), ("pool", "SIZE=2k", "FIELD=medicine"),
    ("corpus",), ("embed", "MODEL=minilm"), ("embed", "MODEL=minilm", "EXECUTOR=slurm", "SHARDS=4"),
    ("index", "MODEL=bm25"), ("report",), ("pools",), ("export-mteb", "MODEL=bm25", "OUT=out"),
    ("mdcr-scores", "MODEL=bm25", "OUT=out.json"),
)
DOOR = ("pipeline/cli", "pipeline/options")


def printed(checkout: Path, data: Path, goal: tuple[str, ...]) -> str:
    """What `make -n <goal>` prints (stdout and stderr) in `checkout` against `data`."""
    stamp = data / "installed"
    stamp.touch()
    done = subprocess.run(["make", "--no-print-directory", "-n", *goal, f"DATA={data}",
                           f"PY={sys.executable}", f"STAMP={stamp}"], cwd=checkout,
                          capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="door-") as tmp:
        base, data = Path(tmp) / "base", Path(tmp) / "data"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.base],
                       cwd=ROOT, check=True)
        try:
            pool = data / "corpora" / "demo" / "pools" / "all-1k-r0"
            pool.mkdir(parents=True)
            (pool / "manifest.json").write_text("{}")
            rows = []
            for goal in GOALS:
                before, now = printed(base, data, goal), printed(ROOT, data, goal)
                rows.append((" ".join(goal), now.count("\n"), before == now,
                             "error" in now.lower()))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           check=True)
    counts = [(short(c), lines(c, *DOOR), lines(c, "pipeline/api.py"),
               lines(c, "pipeline/cli/commands"), lines(c, "pipeline")) for c in args.counts]
    out = ["# The one door: make -n parity and line counts (issue 72)", "",
           f"`python -m benchmarks.door_parity --base {args.base} --counts "
           f"{' '.join(args.counts)}` on {machine()}.", "",
           f"## make -n: {short(args.base)} -> the working tree", "",
           "`make -n <goal>` against a data folder holding one pool (a stub: make -n runs no "
           "stage), compared byte for byte:", "",
           "| goal and variables | lines | identical | refused |", "|---|---|---|---|"]
    out += [f"| `make -n {goal}` | {n} | {'yes' if same else 'NO'} | {'yes' if bad else 'no'} |"
            for goal, n, same, bad in rows]
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
