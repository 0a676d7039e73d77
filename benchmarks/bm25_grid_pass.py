"""BM25's 30-pair (k1, b) tuning grid on one pool: one search per pair against the one pass over
each query's postings (`bm25_arrays.search_pass`, issue 32), 2 threads, and whether the runs of
the two are identical (every pair's frame, byte for byte).

The pool and its queries are papers of a synthetic corpus (the generator; about half of its
papers lack an abstract, so twice the papers needed are generated), queries whole title +
abstract as in MDCR, top k = 501 as tuning searches (TOP_K + 1). The index and the queries'
terms are built once, outside the timings; each way is timed --repeat times, alternating, and
its best time kept (this machine is shared and its speed drifts).
Writes benchmarks/results/bm25_grid_pass.md.

Usage: .venv/bin/python benchmarks/bm25_grid_pass.py [--size 50000] [--queries 150]
       [--repeat 3] [--work /tmp/bm25_grid_pass]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numba
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.retrieval.bm25 import analysis as bm25_analysis  # noqa: E402
from pipeline.retrieval.bm25 import arrays as bm25_arrays  # noqa: E402
from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
THREADS = 2


def papers_of(work: Path, n: int) -> pl.DataFrame:
    """n papers with a title and an abstract, from a synthetic corpus generated under work."""
    from pipeline.ingest import ingest
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    corpus = work / "corpus"
    if not (corpus / "papers.parquet").exists():
        generate(work / "raw", SyntheticConfig(n_papers=2 * n + n // 10, n_shards=1, seed=11),
                 workers=2)
        ingest(work / "raw", corpus, workers=2)
    papers = (pl.scan_parquet(corpus / "papers.parquet")
              .filter(pl.col("title").is_not_null() & pl.col("abstract").is_not_null())
              .select("corpusid", "title", "abstract").head(n).collect())
    if papers.height < n:
        raise SystemExit(f"{papers.height} papers: fewer than the {n} needed")
    return papers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--k", type=int, default=501)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bm25_grid_pass"))
    args = parser.parse_args()
    papers = papers_of(args.work, args.size + args.queries).sample(fraction=1.0, shuffle=True,
                                                                   seed=3)
    pool, queries = papers.head(args.size), papers.slice(args.size).sort("corpusid")
    bm25_arrays.warm_up()
    index = bm25_arrays.build(pool["corpusid"].to_numpy(),
                              bm25_analysis.paper_text(pool).to_list(), THREADS)
    terms = bm25_arrays.query_terms(bm25_analysis.paper_text(queries).to_list(), THREADS)
    postings = int(sum(index.ptr[t + 1] - index.ptr[t] for t in
                       bm25_arrays._query_terms(index, terms)[1]))

    def grid(one_pass: bool) -> dict:
        return bm25_arrays.grid_runs(index, terms, queries["corpusid"], pl.Int64, args.k,
                                     K1_GRID, B_GRID, THREADS, one_pass=one_pass)

    load = os.getloadavg()[0]
    best = {True: float("inf"), False: float("inf")}
    runs = {}
    for _ in range(args.repeat):
        for one_pass in (False, True):
            start = time.perf_counter()
            runs[one_pass] = grid(one_pass)
            best[one_pass] = min(best[one_pass], time.perf_counter() - start)
    identical = list(runs[True]) == list(runs[False]) and all(
        runs[True][p].write_ipc(None).getvalue() == runs[False][p].write_ipc(None).getvalue()
        for p in runs[False])
    rows = sum(r.height for r in runs[True].values())
    command = "benchmarks/bm25_grid_pass.py " + " ".join(sys.argv[1:])
    text = f"""# BM25's (k1, b) grid in one pass over the postings, {time.strftime("%Y-%m-%d")}

Machine: {machine()}; numba threads: {THREADS} (of {numba.config.NUMBA_NUM_THREADS}).

`{command.strip()}`: a pool of {index.doc_count:,} synthetic papers, {terms.n} whole
title+abstract queries ({postings:,} postings of their terms, {postings // max(terms.n, 1):,} a
query), top {args.k}, the {len(K1_GRID)} x {len(B_GRID)} = {len(runs[True])} pairs of the tuning
grid (k1 {list(K1_GRID)}, b {list(B_GRID)}). Timed: `grid_runs` whole (the kernels, Anserini's
order and the 30 run frames), with `one_pass=False` (one `search` per pair) and with the one
pass; the index and the queries' analysis are outside the timings. Best of {args.repeat} runs
each, alternating; the machine is shared (load average {load:.1f} before the timings,
{os.getloadavg()[0]:.1f} after).

| grid | seconds |
|---|---|
| one search per pair ({len(runs[True])} searches, pruned) | {best[False]:.2f} |
| one pass over each query's postings | {best[True]:.2f} |

**One pass: {best[False] / best[True]:.2f}x the {len(runs[True])} searches.** Runs identical
(every pair's frame, byte for byte; {rows:,} rows): {"yes" if identical else "NO"}.
"""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bm25_grid_pass.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
