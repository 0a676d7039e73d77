"""What a fresh process pays before its first paper (issue 70): a no-op `make eval` (target
<= 1.0 s) and the eval stage of a 50-query pool with a run to score (target <= 3 s), each a
new Python process, side by side for the code before a change (`git archive` of --baseline,
default HEAD) and this working tree, each a copy of its own in a temporary folder, on copies
of one demo data root (20k papers, pools of 2k and 5k candidates, 50 queries; BM25, random
and MiniLM runs).

The cases (what the process finds on disk):
- warm: what `make setup` leaves: `python -m pipeline warm` ran, numba's caches and the
  bytecode in place (PYTHONDONTWRITEBYTECODE unset);
- no bytecode: PYTHONDONTWRITEBYTECODE=1 (a shell that sets it, as some clusters' do, or a
  checkout the user may not write), `python -m pipeline warm` run under it first;
- new machine: numba's cache empty (NUMBA_CACHE_DIR a new empty folder each run, HOME a new
  empty one): the first process on a node whose CPU the install's cache was not made for (the
  cache keys on the CPU's name and features), or after an install without `warm`;
- read-only, first / next: the venv's site-packages and HOME mounted read-only in a private
  mount namespace (`unshare -m`: root only; skipped elsewhere), TMPDIR a new folder: a shared
  or container install with no writable home; the first process, then the one after it.

The targets: `make eval MODEL=bm25`, `MODEL=random` and MODEL's default (minilm) with nothing
to do; `make eval MODEL=bm25` and the eval stage alone (`python -m pipeline eval`, what an
sbatch job runs) with one pool's BM25 scores removed (a run to score: 50 queries x 500).
Also the imports of that eval stage (`python -X importtime`), top-level packages >= 0.1 s.
Writes benchmarks/results/fresh_start.md and .json, naming the machine and its load.

Usage: .venv/bin/python benchmarks/fresh_start.py [--baseline REF] [--data DIR]
       [--repeats 5] [--cold-repeats 3]
(--data: a data root made before with the settings below, reused read-only: copied)
"""

from __future__ import annotations

import argparse
import hashlib
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
sys.path.insert(0, str(ROOT))
from benchmarks.machine import machine  # noqa: E402

SETTINGS = ["CORPUS=demo", "DEMO_PAPERS=20k", "QUERIES=50", "THREADS=2"]
POOL = "all-5k-r0"  # the pool whose BM25 scores are removed: a run to score
SITE = Path(next(p for p in sys.path if p.endswith("site-packages")))
CASES = ["warm", "no bytecode", "new machine", "read-only, first", "read-only, next"]
COLD = {"new machine", "read-only, first", "read-only, next"}
TARGETS = [  # label, make's arguments or None (the stage alone), scores a run
    ("`make eval MODEL=bm25`, nothing to do", ["eval", "MODEL=bm25"], False),
    ("`make eval MODEL=random`, nothing to do", ["eval", "MODEL=random"], False),
    ("`make eval` (minilm), nothing to do", ["eval"], False),
    ("`make eval MODEL=bm25`, one run to score", ["eval", "MODEL=bm25"], True),
    ("eval stage alone, one run to score", None, True),
]


def copy_code(dest: Path, ref: str | None) -> Path:
    """The code of git `ref` (an archive), or this working tree's files (tracked and untracked
    but not ignored: no bytecode, no numba cache), in `dest`."""
    dest.mkdir(parents=True)
    if ref is not None:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return dest
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "NUMBA_CACHE_DIR", "MAKEFLAGS",
                        "PYTHONPYCACHEPREFIX")}
    (tmp / "stamp").touch()
    return env


def command(code: Path, data: Path, tmp: Path, make_args: list[str] | None) -> list[str]:
    if make_args is None:
        return [sys.executable, "-m", "pipeline", "--corpora-root", str(data / "corpora"),
                "--index-root", str(data / "indexes"), "--runs-root", str(data / "runs"),
                "eval", "--corpus", "demo", "--model", "bm25", "--stale-only",
                "--metrics", "auto", "--collect"]
    return ["make", "--no-print-directory", f"DATA={data}", f"PY={sys.executable}",
            f"STAMP={tmp / 'stamp'}", *SETTINGS, *make_args]


def read_only(cmd: list[str], home: Path) -> list[str]:
    """`cmd` with site-packages and `home` mounted read-only, in a mount namespace of its own."""
    mounts = " && ".join(f"mount --bind '{p}' '{p}' && mount -o remount,ro,bind '{p}'"
                         for p in (SITE, home))
    return ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh", *cmd]


def can_unshare() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True).returncode == 0


def unscore(data: Path) -> None:
    for name in ("bm25.metrics.parquet", "bm25.eval.json"):
        (data / "runs" / "demo" / POOL / name).unlink(missing_ok=True)


def run_once(cmd: list[str], code: Path, env: dict[str, str]) -> dict:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    said = done.stdout + done.stderr
    scored = [int(n) for n in re.findall(r"(\d+) to score", said)]
    searched = [int(n) for n in re.findall(r"(\d+) to search", said)]
    error = next((line for line in reversed(said.splitlines())
                  if "Error" in line or line.startswith("error")), "")
    return {"seconds": seconds, "ok": done.returncode == 0, "scored": sum(scored),
            "searched": sum(searched), "error": error[-200:]}


def one_run(code: Path, data: Path, tmp: Path, case: str, make_args: list[str] | None,
            scores: bool, i: int) -> dict:
    """One new process of a target in `case` (its i-th repetition)."""
    env = base_env(tmp)
    if case == "no bytecode":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = command(code, data, tmp, make_args)
    if case == "new machine":
        env["NUMBA_CACHE_DIR"] = str(fresh(tmp / f"numba-{i}"))
        env["HOME"] = str(fresh(tmp / f"home-{i}"))
    if case.startswith("read-only"):
        home, temp = fresh(tmp / f"rohome-{i}"), fresh(tmp / f"tmpdir-{i}")
        env.update(HOME=str(home), TMPDIR=str(temp))
        env.pop("XDG_CACHE_HOME", None)
        cmd = read_only(cmd, home)
        if case.endswith("next"):  # the first process of this TMPDIR, untimed
            if scores:
                unscore(data)
            run_once(cmd, code, env)
            restore(code, data, tmp, make_args, scores)
    if scores:
        unscore(data)
    done = run_once(cmd, code, env)
    restore(code, data, tmp, make_args, scores)
    return done


def restore(code: Path, data: Path, tmp: Path, make_args: list[str] | None, scores: bool
            ) -> None:
    """The pool's BM25 scores made again where a run left them missing (one that failed), so
    that a no-op stays one."""
    if scores and not (data / "runs" / "demo" / POOL / "bm25.eval.json").exists():
        run_once(command(code, data, tmp, make_args), code, base_env(tmp))


def measure(codes: dict[str, tuple[Path, Path]], tmp: Path, case: str, repeats: int
            ) -> list[dict]:
    """Each target `repeats` times in `case`, the codes taking turns run by run (so that a
    changing load falls on both); one row per code and target."""
    rows = []
    for label, make_args, scores in TARGETS:
        runs: dict[str, list[dict]] = {name: [] for name in codes}
        for i in range(repeats):
            for name, (code, data) in codes.items():
                runs[name].append(one_run(code, data, tmp, case, make_args, scores, i))
        for name, done in runs.items():
            ok = [r for r in done if r["ok"]]
            seconds = [r["seconds"] for r in ok]
            rows.append({
                "code": name, "case": case, "target": label, "runs": len(done),
                "failed": len(done) - len(ok),
                "median_s": round(statistics.median(seconds), 3) if seconds else None,
                "min_s": round(min(seconds), 3) if seconds else None,
                "max_s": round(max(seconds), 3) if seconds else None,
                "scored_runs": max((r["scored"] for r in ok), default=0),
                "searched_runs": max((r["searched"] for r in ok), default=0),
                "error": next((r["error"] for r in done if not r["ok"]), "")})
            print(f"  {name:28} {case:17} {label:45} {rows[-1]['median_s']} s "
                  f"({rows[-1]['failed']} failed)", flush=True)
    return rows


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def imports(code: Path, data: Path, tmp: Path) -> list[dict]:
    """The eval stage's top-level imports of 0.1 s or more (`-X importtime`, warm caches)."""
    unscore(data)
    cmd = command(code, data, tmp, None)
    done = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=code,
                          env=base_env(tmp), capture_output=True, text=True)
    found = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)$", line)
        if match and not match.group(2) and int(match.group(1)) >= 100_000:
            found.append({"module": match.group(3), "s": round(int(match.group(1)) / 1e6, 2)})
    return sorted(found, key=lambda r: -r["s"])


def scores_digest(data: Path) -> str:
    return hashlib.sha256(
        (data / "runs" / "demo" / POOL / "bm25.metrics.parquet").read_bytes()).hexdigest()


def timed_warm(code: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline", "warm"], cwd=code, env=env, check=True,
                   capture_output=True)
    return round(time.perf_counter() - start, 1)


def prepare(name: str, ref: str | None, pristine: Path, tmp: Path) -> tuple[Path, Path, float]:
    """The code's copy and a copy of the data root of its own; `python -m pipeline warm` run
    there under PYTHONDONTWRITEBYTECODE=1, as `make setup` in such a shell runs it (its own
    kernels compiled in its folder; ranx's and numba's loaded from the venv). Its seconds."""
    code = copy_code(tmp / f"code-{name}", ref)
    data = tmp / f"data-{name}"
    shutil.copytree(pristine, data, symlinks=True)
    return code, data, timed_warm(code, {**base_env(tmp), "PYTHONDONTWRITEBYTECODE": "1"})


def measure_all(codes: dict[str, tuple[Path, Path]], tmp: Path, args, unshare: bool
                ) -> list[dict]:
    """Every case, in the order that leaves each case's disk as it describes: no bytecode
    first, then the bytecode written (any process writes it) and warm, then the cold ones."""
    rows = measure(codes, tmp, "no bytecode", args.repeats)
    for code, data in codes.values():
        for _, make_args, scores in TARGETS:
            if scores:
                unscore(data)
            run_once(command(code, data, tmp, make_args), code, base_env(tmp))
    rows += measure(codes, tmp, "warm", args.repeats)
    cases = ["new machine"] + (["read-only, first", "read-only, next"] if unshare else [])
    for case in cases:
        rows += measure(codes, tmp, case, args.cold_repeats)
    return rows


def build_data(data: Path, tmp: Path) -> None:
    """The demo data root: pools of 2k and 5k, BM25, random and MiniLM runs scored."""
    env = base_env(tmp)
    for args in (["pool", "SIZE=2k 5k"], ["eval", "MODEL=bm25"], ["eval", "MODEL=random"],
                 ["eval"]):
        subprocess.run(command(ROOT, data, tmp, args), cwd=ROOT, env=env, check=True,
                       capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="HEAD", help="the git ref of the code before")
    parser.add_argument("--data", type=Path, help="a data root made before (copied)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold-repeats", type=int, default=3)
    args = parser.parse_args()
    unshare = can_unshare()
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    baseline = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout.strip()
    labels = {f"before ({baseline})": args.baseline, "after (this working tree)": None}
    measured: dict[str, dict] = {label: {} for label in labels}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        pristine = tmp / "data"
        if args.data:
            shutil.copytree(args.data, pristine, symlinks=True)
        else:
            build_data(pristine, tmp)
        codes = {}
        for i, (label, ref) in enumerate(labels.items()):
            code, data, seconds = prepare(str(i), ref, pristine, tmp)
            codes[label] = (code, data)
            measured[label]["setup_warm_s"] = seconds
        rows = measure_all(codes, tmp, args, unshare)
        for label, (code, data) in codes.items():
            measured[label]["rows"] = [r for r in rows if r["code"] == label]
            measured[label]["scores_sha256"] = scores_digest(data)
            measured[label]["imports"] = imports(code, data, tmp)
            cold = {**base_env(tmp), "NUMBA_CACHE_DIR": str(fresh(tmp / "numba-warm")),
                    "HOME": str(fresh(tmp / "home-warm"))}
            measured[label]["warm_on_empty_cache_s"] = timed_warm(code, cold)
    digests = {m["scores_sha256"] for m in measured.values()}
    result = {"machine": machine(), "started": started, "commit": commit,
              "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()],
              "read_only_cases": unshare, "scores_identical": len(digests) == 1,
              "code": measured}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fresh_start.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / "fresh_start.md").write_text(report(result) + "\n")
    print(report(result))


def report(result: dict) -> str:
    codes = list(result["code"])
    lines = [f"# What a fresh process pays before its first paper ({result['started']})", "",
             f"Machine: {result['machine']}; load average {result['load_average_before']} "
             f"before, {result['load_average_after']} after (1, 5, 15 min). Code: "
             f"{' and '.join(codes)}, at {result['commit']}. Each cell: the median seconds of a "
             "new process (min-max), the runs that failed named. Targets: a no-op `make eval` "
             "<= 1.0 s, the eval stage of a 50-query pool <= 3 s. Cases and targets: "
             "benchmarks/fresh_start.py's docstring. BM25's per-query scores of the pool "
             f"byte-identical between the codes: {result['scores_identical']}.", "",
             "| case | target | " + " | ".join(codes) + " |",
             "|---|---|" + "---|" * len(codes)]
    rows = {}
    for code in codes:
        for row in result["code"][code]["rows"]:
            rows.setdefault((row["case"], row["target"]), {})[code] = row
    for (case, target), by_code in rows.items():
        cells = []
        for code in codes:
            row = by_code.get(code)
            if row is None:
                cells.append("-")
            elif row["median_s"] is None:
                cells.append(f"fails: `{row['error']}`")
            else:
                cell = f"{row['median_s']} ({row['min_s']}-{row['max_s']})"
                if row["failed"]:
                    cell += f", {row['failed']} of {row['runs']} failed"
                cells.append(cell)
        lines.append(f"| {case} | {target} | " + " | ".join(cells) + " |")
    lines += ["", "`python -m pipeline warm`: " + "; ".join(
        f"{code}: {m['setup_warm_s']} s after the copy (the pipeline's own kernels compiled, "
        f"ranx's loaded), {m['warm_on_empty_cache_s']} s on an empty numba cache"
        for code, m in result["code"].items()) + ".", "",
        "The eval stage's top-level imports of 0.1 s or more (`-X importtime`, warm case):", ""]
    for code, m in result["code"].items():
        lines.append(f"- {code}: " + ", ".join(f"{i['module']} {i['s']} s"
                                                for i in m["imports"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
