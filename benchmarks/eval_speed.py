"""Evaluation speed: the pipeline's metrics (ranx's kernels fed from columns,
pipeline/metrics.py)
side by side with pytrec_eval in one run (issue 8).

A run of 3,800 queries x 500 documents (scores with ties) and qrels of about 29 relevant
papers per query (the paper's mean), 5 metrics: MAP, NDCG, R@30, R@5, nDCG@10. Timed:
- warm: the call alone in a process that has evaluated before (median of 5); for
  pytrec_eval both its `evaluate()` alone and with the dicts it needs built from the run's
  columns (what a pipeline holding parquet runs pays);
- whole process: a fresh `python` that imports the tool, reads the run and qrels parquet files
  and writes per-query values (median of 3), with numba's cache warm;
- first use: the same whole process with an empty numba cache (the JIT compile after an
  install), reported apart;
- `make eval` over 60 runs: the demo corpus (under --work), 60 dataset-level pools (sizes 5k,
  10k, 20k x 20 repeats, 200 queries), searched beforehand with the random model (top 500);
  the timed call scores all 60 runs and collects results.parquet.
Writes benchmarks/results/eval_speed.json and .md.

Usage: .venv/bin/python benchmarks/eval_speed.py [--queries 3800] [--depth 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.metrics import per_query  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
METRICS = ["map", "ndcg", "recall@30", "recall@5", "ndcg@10"]
TREC = {"map": "map", "ndcg": "ndcg", "recall@30": "recall.30", "recall@5": "recall.5",
        "ndcg@10": "ndcg_cut.10"}

OURS = """
import sys, polars as pl
sys.path.insert(0, {root!r})
from pipeline.metrics import per_query
run, qrels = pl.read_parquet({run!r}), pl.read_parquet({qrels!r})
values, _ = per_query(run, qrels, qrels["query"].unique(), {metrics!r})
values.write_parquet({out!r})
"""
PYTREC = """
import polars as pl, pytrec_eval
run, qrels = pl.read_parquet({run!r}), pl.read_parquet({qrels!r})
def nested(df, value):
    return {{str(q): dict(zip(map(str, g["doc"]), g[value])) for (q,), g in df.group_by("query")}}
evaluator = pytrec_eval.RelevanceEvaluator(nested(qrels, "rel"), {trec!r})
scores = evaluator.evaluate(nested(run, "score"))
pl.DataFrame([{{"query": q, **v}} for q, v in scores.items()]).write_parquet({out!r})
"""


def make_data(n_queries: int, depth: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    queries = np.repeat(np.arange(n_queries), depth)
    docs = rng.integers(0, 2_000_000, size=n_queries * depth)
    scores = np.round(rng.random(n_queries * depth) * 50, 1)  # ties
    run = (pl.DataFrame({"query": queries, "doc": docs, "score": scores})
           .unique(["query", "doc"], keep="first", maintain_order=True)
           .sort(["query", "score", pl.col("doc").cast(pl.String)],
                 descending=[False, True, True])
           .with_columns(rank=pl.int_range(1, pl.len() + 1).over("query")))
    positives = rng.poisson(29, size=n_queries).clip(1)
    picked = run.filter(pl.int_range(pl.len()).over("query") % 9 == 0)  # some retrieved
    qrels = pl.concat([
        picked.group_by("query").head(10).select("query", "doc"),
        pl.DataFrame({"query": np.repeat(np.arange(n_queries), positives),
                      "doc": rng.integers(0, 2_000_000, size=int(positives.sum()))}),
    ]).unique(["query", "doc"]).with_columns(rel=pl.lit(1, pl.Int64))
    return run, qrels


def timed_process(code: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, **(env or {})})
    return time.perf_counter() - start


def make_eval_60(work: Path) -> dict:
    """Seconds of `make eval MODEL=random` scoring 60 searched runs (search not timed)."""
    base = ["make", "--no-print-directory", "-C", str(ROOT), "CORPUS=demo", f"DATA={work}"]
    subprocess.run([*base, "pool", "SIZE=5k 10k 20k", "REPEATS=20", "QUERIES=200"], check=True,
                   capture_output=True)
    subprocess.run([*base, "search", "MODEL=random"], check=True, capture_output=True)
    start = time.perf_counter()
    done = subprocess.run([*base, "eval", "MODEL=random"], check=True, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    runs = len(list((work / "runs" / "demo").glob("*/random.eval.json")))
    return {"runs": runs, "seconds": seconds, "processes": done.stdout.count("-m pipeline")}


def main() -> None:
    import pytrec_eval

    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=3800)
    parser.add_argument("--depth", type=int, default=500)
    parser.add_argument("--work", type=Path, default=Path("/tmp/eval-speed-demo"))
    args = parser.parse_args()
    run, qrels = make_data(args.queries, args.depth)
    work = Path(tempfile.mkdtemp(prefix="eval-speed-"))
    run.write_parquet(work / "run.parquet")
    qrels.write_parquet(work / "qrels.parquet")
    queries = qrels["query"].unique()

    ours_values, _ = per_query(run, qrels, queries, METRICS)  # numba compiles or loads cache
    ours = []
    for _ in range(5):
        start = time.perf_counter()
        ours_values, _ = per_query(run, qrels, queries, METRICS)
        ours.append(time.perf_counter() - start)

    def nested(df: pl.DataFrame, value: str) -> dict:
        return {str(q): dict(zip(map(str, g["doc"]), g[value], strict=True))
                for (q,), g in df.group_by("query")}

    trec_alone, trec_columns = [], []
    for _ in range(5):
        start = time.perf_counter()
        qrels_dict, run_dict = nested(qrels, "rel"), nested(run, "score")
        built = time.perf_counter()
        scores = pytrec_eval.RelevanceEvaluator(qrels_dict, set(TREC.values())).evaluate(run_dict)
        done = time.perf_counter()
        trec_alone.append(done - built)
        trec_columns.append(done - start)
    # the same numbers, query for query
    keyed = {row["query"]: row for row in ours_values.iter_rows(named=True)}
    worst = max(abs(keyed[int(q)][m] - v[TREC[m].replace(".", "_")])
                for q, v in scores.items() for m in METRICS)

    fmt = {"root": str(ROOT), "run": str(work / "run.parquet"),
           "qrels": str(work / "qrels.parquet"), "metrics": METRICS,
           "trec": set(TREC.values()), "out": str(work / "out.parquet")}
    ours_process = [timed_process(OURS.format(**fmt)) for _ in range(3)]
    trec_process = [timed_process(PYTREC.format(**fmt)) for _ in range(3)]
    first_use = timed_process(OURS.format(**fmt),
                              {"NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-cold-")})

    make_60 = make_eval_60(args.work)
    med = statistics.median
    entry = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "queries": args.queries, "depth": args.depth, "run_rows": run.height,
        "qrels_rows": qrels.height, "metrics": METRICS, "max_abs_difference": worst,
        "warm_seconds": {"pipeline": med(ours), "pytrec_eval evaluate()": med(trec_alone),
                         "pytrec_eval from columns": med(trec_columns)},
        "process_seconds": {"pipeline": med(ours_process), "pytrec_eval": med(trec_process)},
        "pipeline_first_use_seconds": first_use, "make_eval_60_runs": make_60,
    }
    (OUT / "eval_speed.json").write_text(json.dumps(entry, indent=2) + "\n")
    warm, proc = entry["warm_seconds"], entry["process_seconds"]
    lines = [
        "# Evaluation speed: the pipeline (ranx's kernels from columns) against pytrec_eval", "",
        f"{entry['date']}, {entry['machine']}. {args.queries:,} queries x {args.depth} "
        f"documents ({run.height:,} rows, ties), {qrels.height:,} qrels, "
        f"{len(METRICS)} metrics ({', '.join(METRICS)}). Largest difference between the two "
        f"tools on any query and metric: {worst:.2e}.", "",
        "| measurement | pipeline (s) | pytrec_eval (s) | speed-up |", "|---|---|---|---|",
        f"| warm call, against `evaluate()` alone | {warm['pipeline']:.3f} | "
        f"{warm['pytrec_eval evaluate()']:.3f} | "
        f"{warm['pytrec_eval evaluate()'] / warm['pipeline']:.1f}x |",
        f"| warm call, from the run's columns | {warm['pipeline']:.3f} | "
        f"{warm['pytrec_eval from columns']:.3f} | "
        f"{warm['pytrec_eval from columns'] / warm['pipeline']:.1f}x |",
        f"| whole process (import, read, evaluate, write) | {proc['pipeline']:.2f} | "
        f"{proc['pytrec_eval']:.2f} | {proc['pytrec_eval'] / proc['pipeline']:.1f}x |",
        "", f"First use after an install (numba compiles ranx's kernels and ours; a "
        f"whole process with an empty cache): {first_use:.1f} s. `make setup` pays it "
        "once, so a user's first `make eval` does not.", "",
        f"`make eval MODEL=random` over {make_60['runs']} searched runs of the demo corpus "
        f"(60 pools of 5k, 10k, 20k x 20 repeats, 200 queries, top 500): "
        f"{make_60['seconds']:.1f} s, in {make_60['processes']} pipeline processes "
        "(one scores every run, one collects; target: under 60 s).", ""]
    (OUT / "eval_speed.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
