"""How long an unchanged target takes to rerun (target: a no-op `make eval` in at most 1.0 s),
and how many Python processes it starts (one: the goal's, issue 59).

make keeps no timestamps of its own: every stage is run and checks by content (parameters,
input checksums kept beside each file's stat, outputs against their manifests) that it has
nothing to do. This measures what that costs, on the FULL demo's data (`make demo`: 120k papers,
18 pools, BM25, MiniLM and random: 54 evaluations) and on a copy of it with ten times the
evaluations (27 more models' runs of every pool: the random floor under other names, 540 in
all), where a no-op must not take longer by more than 10% (issue 78: collect gathers from what
changed). Each target is run once, then timed five times, counting the Python starts (a
sitecustomize on PYTHONPATH writes a line per start), with the load average beside it. With
--baseline REF, the same in a temporary git worktree of REF (the code before a change), on the
same data and machine. --small: the earlier measurement instead (a 20k-paper demo built in a
temporary folder; every no-op target). Writes benchmarks/results/noop.md and noop.json (the
runs before kept below) and prints where.
Usage: .venv/bin/python benchmarks/noop.py [--baseline REF] [--data DIR] [--small]
  (after `make setup`; --data: where the full demo's data is, or is built with
  `make demo DATA=DIR` when it has none, 15-30 min on 2 cores; its 10x copy is DIR-10x.
  Without --data both are built in a temporary folder and removed after.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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

SETTINGS = ["CORPUS=demo", "DEMO_PAPERS=20k", "QUERIES=50", "THREADS=2"]  # --small's demo
TARGETS = [
    ("make corpus", ["corpus"]),
    ("make pool SIZE='2k 5k'", ["pool", "SIZE=2k 5k"]),
    ("make eval MODEL=bm25", ["eval", "MODEL=bm25"]),
    ("make eval MODEL=random", ["eval", "MODEL=random"]),
    ("make eval", ["eval"]),  # MODEL's default, minilm: an encoder and its store
    ("make embed", ["embed"]),  # minilm's store: every pool's papers in it
]
# the full demo's data (make demo's defaults) and its copy with ten times the evaluations
FULL_TARGETS = [("make eval", ["eval"]), ("make eval MODEL=bm25", ["eval", "MODEL=bm25"])]
EXTRA_MODELS = 27  # random's runs under 27 more names: 54 + 27 * 18 = 540 evaluations
EXTRA_NAME = "random-x{:02d}"


# Each Python start appends a line to NOOP_STARTS (site imports it at start-up)
COUNTER = "import os\nopen(os.environ['NOOP_STARTS'], 'a').write('start\\n')\n"


def make(checkout: Path, data: Path, tmp: Path, *args: str, settings: list[str] = SETTINGS
         ) -> subprocess.CompletedProcess:
    """make in `checkout` on `data`, with this Python as the environment's."""
    (tmp / "stamp").touch()
    cmd = ["make", "--no-print-directory", f"DATA={data}", f"PY={sys.executable}",
           f"STAMP={tmp / 'stamp'}", *settings, *args]
    env = {**os.environ, "MAKEFLAGS": "", "NOOP_STARTS": str(tmp / "starts"),
           "PYTHONPATH": str(tmp / "site")}
    return subprocess.run(cmd, cwd=checkout, check=True, capture_output=True, text=True,
                          env=env)


def measure(checkout: Path, data: Path, tmp: Path, targets: list = TARGETS,
            settings: list[str] = SETTINGS, warm: bool = False) -> list[dict]:
    """Five no-op reruns of each target in `checkout` (`warm`: after one untimed run): median
    and max seconds, the stage commands run, the Python processes started (per rerun) and the
    1-minute load average before and after."""
    rows = []
    for label, args in targets:
        if warm:
            make(checkout, data, tmp, *args, settings=settings)
        seconds, starts, load = [], [], [round(os.getloadavg()[0], 2)]
        for _ in range(5):
            (tmp / "starts").unlink(missing_ok=True)
            start = time.perf_counter()
            done = make(checkout, data, tmp, *args, settings=settings)
            seconds.append(time.perf_counter() - start)
            starts.append(len((tmp / "starts").read_text().splitlines()))
        load.append(round(os.getloadavg()[0], 2))
        ran = re.findall(r"--runs-root \S+ (\w+)", done.stdout)
        rows.append({"target": label, "median_s": round(statistics.median(seconds), 3),
                     "max_s": round(max(seconds), 3), "stages_run": ran,
                     "python_starts": max(starts), "load_1min": load})
    return rows


def evaluations(data: Path) -> int:
    """The evaluations under a data folder's runs/ (every model's, every pool's)."""
    return len(list((data / "runs").glob("*/*/*.eval.json")))


def full_demo(data: Path, tmp: Path) -> None:
    """The full demo's data in `data` (`make demo DATA=data`), unless it is there already."""
    if not (data / "runs" / "results.parquet").exists():
        print(f"building the full demo's data in {data} (make demo: 15-30 min on 2 cores)",
              flush=True)
        make(ROOT, data, tmp, "demo", settings=[])


def ten_times(data: Path, copy: Path) -> None:
    """`copy`: the full demo's data with EXTRA_MODELS more models' runs of every pool, searched
    and scored (random's ranking under other names), unless it has them already."""
    if copy.exists() and evaluations(copy) >= 10 * evaluations(data):
        return
    print(f"copying {data} to {copy} with {EXTRA_MODELS} more models' runs", flush=True)
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(data, copy, symlinks=True)
    code = f"""
import dataclasses, sys
from pathlib import Path
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import Place, pool_names
from pipeline.models import get_model
from pipeline.retrieval.search import search_pool
root = Path(sys.argv[1])
place = Place(root / "corpora" / "demo", root / "indexes", root / "runs")
for n in range({EXTRA_MODELS}):
    entry = dataclasses.replace(get_model("random"), name={EXTRA_NAME!r}.format(n + 1))
    for pool in pool_names(place.corpus_dir):
        search_pool(place, pool, entry, threads=1)
        eval_run(place, pool, entry.name)
collect_results(root / "corpora", root / "indexes", root / "runs")
"""
    subprocess.run([sys.executable, "-c", code, str(copy)], cwd=ROOT, check=True)


def with_baseline(ref: str | None, tmp: Path, measure_at) -> dict[str, list[dict]]:
    """{code: rows} of this checkout and, with `ref`, of a temporary worktree of it."""
    measured = {"this code": measure_at(ROOT)}
    if ref:
        old = tmp / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), ref], cwd=ROOT,
                       check=True)
        try:
            measured[f"before ({ref})"] = measure_at(old)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                           check=True)
    return measured


def small(tmp: Path, ref: str | None) -> tuple[dict, list[str]]:
    """The earlier measurement: every no-op target on a 20k-paper demo."""
    data = tmp / "data"
    make(ROOT, data, tmp, "pool", "SIZE=2k 5k")
    for _, target in TARGETS[2:]:
        make(ROOT, data, tmp, *target)
    measured = with_baseline(ref, tmp, lambda checkout: measure(checkout, data, tmp))
    lines = [f"Machine: {machine()}. Five reruns each of an unchanged target on a 20k-paper "
             "demo corpus (pools of 2k and 5k, 50 queries). Target: a no-op `make eval` in at "
             "most 1.0 s, one Python process. Every stage runs and finds by content that it "
             "has nothing to do (make keeps no timestamps: a damaged or stale file is redone "
             "by the same commands); since issue 59 a target's stages run in its one goal "
             "process.", "", *table(measured, False)]
    return measured, lines


def full(tmp: Path, data: Path, ref: str | None) -> tuple[dict, list[str]]:
    """A no-op make eval on the full demo's data and on its 10x copy."""
    full_demo(data, tmp)
    copy = data.parent / f"{data.name}-10x"
    ten_times(data, copy)
    folders = {f"full demo ({evaluations(data)} evaluations)": data,
               f"10x ({evaluations(copy)} evaluations)": copy}
    measured: dict[str, list[dict]] = {}
    for name, folder in folders.items():
        found = with_baseline(ref, tmp, lambda checkout, folder=folder: measure(
            checkout, folder, tmp, FULL_TARGETS, [], warm=True))
        if ref:  # left as this code collects it
            make(ROOT, folder, tmp, "eval", settings=[])
        for code, rows in found.items():
            measured[f"{code}, {name}"] = rows
    lines = [f"Machine: {machine()}. A no-op `make eval` (MODEL's default, minilm) and `make "
             "eval MODEL=bm25` on the full demo's data (`make demo`: 120k papers, 18 pools, "
             "BM25, MiniLM and random) and on a copy with ten times the evaluations (27 more "
             "models' runs of every pool: random's ranking under other names), each run once "
             "and then timed five times. Targets: at most 1.0 s on the full demo, and the 10x "
             "copy within 10% of it. Load: the 1-minute load average before and after the five "
             "reruns.", "", *table(measured, True)]
    return measured, lines


def table(measured: dict[str, list[dict]], load: bool) -> list[str]:
    lines = ["| code | target | median (s) | max (s) | Python processes | stages run (each a "
             f"no-op) |{' load |' if load else ''}",
             f"|---|---|---|---|---|---|{'---|' if load else ''}"]
    for code, rows in measured.items():
        for row in rows:
            what = ", ".join(row["stages_run"]) or "none"
            extra = f" {row['load_1min'][0]} -> {row['load_1min'][1]} |" if load else ""
            lines.append(f"| {code} | `{row['target']}` | {row['median_s']} | {row['max_s']} "
                         f"| {row['python_starts']} | {what} |{extra}")
    return lines


def earlier(text: str) -> list[str]:
    """The results file written before, as the "Earlier runs" below the new one: its own
    first table under its date, then its earlier runs."""
    if not text.strip():
        return []
    lines = text.rstrip("\n").splitlines()
    title = re.fullmatch(r"# No-op reruns \((.*)\)", lines[0])
    first = [f"### {title.group(1) if title else 'Before'}", *lines[1:]]
    return ["", "## Earlier runs", "", *(line for line in first if line != "## Earlier runs")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="a git ref measured the same way beside this code")
    parser.add_argument("--data", type=Path, help="the full demo's data folder (built there "
                        "with make demo when it has none; its 10x copy beside it)")
    parser.add_argument("--small", action="store_true",
                        help="the earlier measurement: every target on a 20k-paper demo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(COUNTER)
        if args.small:
            measured, lines = small(tmp, args.baseline)
        else:
            data = args.data.resolve() if args.data else tmp / "demo-data"
            measured, lines = full(tmp, data, args.baseline)
    OUT.mkdir(parents=True, exist_ok=True)
    before = (OUT / "noop.md").read_text() if (OUT / "noop.md").exists() else ""
    (OUT / "noop.json").write_text(json.dumps({"machine": machine(), "code": measured},
                                              indent=2) + "\n")
    command = " ".join(["benchmarks/noop.py", *sys.argv[1:]])
    new = [f"# No-op reruns ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
           *lines, "", f"`{command}`", *earlier(before)]
    (OUT / "noop.md").write_text("\n".join(new) + "\n")
    print("\n".join(lines))
    print(f"written: {OUT / 'noop.md'} and {OUT / 'noop.json'}")


if __name__ == "__main__":
    main()
