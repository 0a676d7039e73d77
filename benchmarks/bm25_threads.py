"""How BM25's arrays engine scales with THREADS (issue 32): on one pool of a corpus, for 1, 2 and
up to --max-threads threads, the seconds of
- analysis: the pool's papers analysed into an empty analysed-text store (`bm25_store.fill`:
  the JVM analyses `threads` batches at a time), capped at --analyse papers;
- search: the pool's test queries (whole title + abstract) at one (k1, b), top 501
  (`grid_runs`: one query per numba thread);
- grid: the validation pool's queries over the 30-pair tuning grid in one pass;
and, once (it runs on one thread), the pool's index assembled from the store. Each timing is
the best of --repeat runs, thread counts alternating; every thread count's runs must be
byte-identical to one thread's (the benchmark stops otherwise).

The corpus is one `make corpus` built (bm25_grid.py builds one with --corpus-papers); the
pools are built here if missing. Writes benchmarks/results/bm25_threads.{json,md}.
Usage: .venv/bin/python benchmarks/bm25_threads.py --data /tmp/b22 --corpus grid
       [--size 200k] [--queries 1000] [--val-queries 100] [--analyse 50000] [--repeat 2]
       [--index-root /tmp/b22/arrays/indexes]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.layout import Place, parse_size  # noqa: E402
from pipeline.pools.build import PoolSpec, build_pool, load_pool  # noqa: E402
from pipeline.retrieval.bm25 import store as bm25_store  # noqa: E402
from pipeline.retrieval.bm25.arrays import grid_runs  # noqa: E402
from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
K = 501  # the top 500 and the query itself, as the search stage asks


def best_of(repeat: int, counts: list[int], work) -> tuple[dict[int, float], dict[int, object]]:
    """Best seconds of `work(threads)` per thread count, counts alternating; its last result."""
    best, result = dict.fromkeys(counts, float("inf")), {}
    for _ in range(repeat):
        for threads in counts:
            start = time.perf_counter()
            result[threads] = work(threads)
            best[threads] = min(best[threads], time.perf_counter() - start)
    return {t: round(s, 2) for t, s in best.items()}, result


def same_bytes(runs: dict) -> bool:
    """Whether every thread count's runs equal the first's, frame by frame, byte for byte."""
    first, *others = runs.values()
    return all(list(o) == list(first) and all(
        o[p].write_ipc(None).getvalue() == first[p].write_ipc(None).getvalue() for p in first)
        for o in others)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--corpus", default="grid")
    parser.add_argument("--size", default="200k")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--val-queries", type=int, default=100)
    parser.add_argument("--analyse", type=int, default=50_000)
    parser.add_argument("--max-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--index-root", type=Path, default=None,
                        help="an index root whose analysed-text store already holds the pools "
                        "(bm25_grid.py's <data>/arrays/indexes); default: filled here")
    args = parser.parse_args()
    counts = sorted({1, 2, args.max_threads} & set(range(1, args.max_threads + 1)))
    corpus_dir = args.data / "corpora" / args.corpus
    size = parse_size(args.size)
    test = PoolSpec(size=size, queries=args.queries, seed=args.seed)
    val = PoolSpec(size=size, queries=args.val_queries, split="validation", seed=args.seed)
    for spec in (test, val):
        build_pool(corpus_dir, spec)
    queries, candidates, _ = load_pool(corpus_dir, test.name)
    val_queries, val_candidates, _ = load_pool(corpus_dir, val.name)
    work = args.data / "bm25-threads"
    shutil.rmtree(work, ignore_errors=True)
    bm25_store.warm_up()

    def place(name: str) -> Place:
        return Place(corpus_dir, work / name / "indexes", work / name / "runs")

    bm25_store.fill(place("warm"), candidates["corpusid"].head(2000), 2)  # the JVM starts
    analysed = candidates["corpusid"].head(args.analyse)
    fresh = iter(range(10**6))
    analyse, _ = best_of(args.repeat, counts, lambda t: bm25_store.fill(
        place(f"analyse-{next(fresh)}"), analysed, t))
    ready = (Place(corpus_dir, args.index_root, work / "runs") if args.index_root
             else place("pool"))
    bm25_store.fill(ready, pl.concat([candidates["corpusid"], queries["corpusid"],
                                      val_candidates["corpusid"], val_queries["corpusid"]]), 2)
    store = bm25_store.store_path(ready.index_root, ready.corpus)
    assemble, indexes = best_of(args.repeat, [1], lambda _: bm25_store.pool_index(
        store, candidates["corpusid"].to_numpy()))
    index = indexes[1]
    terms = bm25_store.stored_query_terms(store, queries["corpusid"].to_numpy())
    search, search_runs = best_of(args.repeat, counts, lambda t: grid_runs(
        index, terms, queries["corpusid"], pl.Int64, K, [0.9], [0.4], t))
    val_index = bm25_store.pool_index(store, val_candidates["corpusid"].to_numpy())
    val_terms = bm25_store.stored_query_terms(store, val_queries["corpusid"].to_numpy())
    grid, grid_runs_by = best_of(args.repeat, counts, lambda t: grid_runs(
        val_index, val_terms, val_queries["corpusid"], pl.Int64, K, K1_GRID, B_GRID, t))
    if not (same_bytes(search_runs) and same_bytes(grid_runs_by)):
        raise SystemExit("runs differ between thread counts")
    postings = int(np.diff(index.ptr).sum())
    figures = {"date": time.strftime("%Y-%m-%d"), "machine": machine(),
               "arguments": " ".join(sys.argv[1:]), "pool": test.name,
               "validation_pool": val.name, "papers": len(index.ids), "postings": postings,
               "analysed_papers": len(analysed), "threads": counts,
               "seconds": {"analyse": analyse, "search": search, "grid": grid},
               "assemble_seconds": assemble[1],
               "runs_identical_across_threads": True}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bm25_threads.json").write_text(json.dumps(figures, indent=2) + "\n")
    rows = [("analysis into an empty store", f"{len(analysed):,} papers", analyse),
            ("search, k1 0.9 b 0.4", f"{queries.height:,} queries", search),
            ("tuning grid, one pass", f"{val_queries.height} queries x "
             f"{len(K1_GRID) * len(B_GRID)} pairs", grid)]
    lines = [f"# BM25's arrays engine against THREADS, {figures['date']}", "",
             f"Machine: {figures['machine']}.", "",
             f"`benchmarks/bm25_threads.py {figures['arguments']}`: pool {test.name} "
             f"({len(index.ids):,} papers, {postings:,} postings), validation pool {val.name}; "
             f"best of {args.repeat} runs, thread counts alternating. The runs of every "
             "thread count are byte-identical to one thread's.", "",
             "| stage | work | " + " | ".join(f"{t} thread{'s' * (t > 1)} (s)" for t in counts)
             + " | speed-up at " + str(counts[-1]) + " |",
             "|---|---|" + "---|" * (len(counts) + 1)]
    for name, amount, seconds in rows:
        lines.append(f"| {name} | {amount} | " + " | ".join(str(seconds[t]) for t in counts)
                     + f" | {seconds[counts[0]] / seconds[counts[-1]]:.2f}x |")
    lines += ["", f"The pool's index assembled from the store (one thread): {assemble[1]} s. "
              "Copying its papers' lists in parallel was tried and was slower (0.41 s on one "
              "thread, 0.50 s on two, 2026-11-25): the copy is bound by memory.", ""]
    (OUT / "bm25_threads.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
