"""BM25 with whole title+abstract queries: the pipeline's two engines (Lucene, arrays) side by
side with pyserini's `LuceneSearcher.batch_search` and with `bm25s`, in one run (issue 7).

Pools are random samples of a synthetic corpus written by the generator (100k and 1M papers
by default), queries are other papers of it (title + abstract, as in MDCR), top 500, k1=0.9,
b=0.4 for all three. Every search is timed --repeat times (default 3) and its best time kept,
for every system alike (this machine's timings vary from one minute to the next). Timed:
- the pipeline: `pipeline.retrieval.bm25.lucene.search` (Anserini's SearchCollection in the
  process's JVM,
  the run file written and read), 2 threads;
- the pipeline's arrays engine (`pipeline.retrieval.bm25.arrays`: Lucene's analysis and BM25 in
  numba),
  2 threads, the pool's analysis and postings as its index time; its lists against Lucene's;
  and the same engine scoring every posting (no pruning), to show what pruning gains;
- pyserini 1.6 (its Python layer, in a side environment): `batch_search` at 1 and 2 threads,
  the call alone (JVM start and index opening not counted: the peer's best case);
- bm25s (numba backend, Porter stemmer, Lucene's English stop words, method="lucene"):
  indexing and `retrieve`, 2 threads; its lists are compared with Lucene's (mean overlap of
  the top k, share of identical lists).
The report gives the arrays engine's speed over pyserini's best thread count, and what its
pruning left: the share of the query terms' postings scored, the documents finished from
their own term lists, the queries ranked again after a guess proved too high.
Writes benchmarks/results/search_bm25.json and .md.

Usage: .venv/bin/python benchmarks/search_bm25.py [--sizes 100000 1000000] [--queries 200]
       [--repeat 3] [--papers corpus.parquet]  (default: generate a synthetic corpus under --work)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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
from pipeline.retrieval.bm25 import jvm  # noqa: E402
from pipeline.retrieval.bm25 import lucene as bm25_lucene  # noqa: E402
from tests.conftest import PYSERINI_IMPORT, PYSERINI_SIDE, side_packages  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
SIDE = (*PYSERINI_SIDE, "bm25s==0.3.16", "pystemmer==3.1.0")
K1, B = 0.9, 0.4

PEER = """
import json, os, sys, time
job = json.load(open(sys.argv[1]))
if job["peer"] == "pyserini":
    exec(job["pyserini_import"])
    searcher = LuceneSearcher(job["index"])
    searcher.set_bm25(job["k1"], job["b"])
    out = {}
    for threads in (1, 2):
        seconds = float("inf")
        for _ in range(job["repeat"]):
            start = time.perf_counter()
            hits = searcher.batch_search(job["texts"], job["qids"], k=job["k"], threads=threads)
            seconds = min(seconds, time.perf_counter() - start)
        out[f"threads={threads}"] = {"seconds": seconds,
                                     "lists": {q: [h.docid for h in hits[q]] for q in job["qids"]}}
else:
    import Stemmer, bm25s, polars as pl
    papers = pl.read_parquet(job["docs"])
    texts = papers["text"].to_list()
    stemmer = Stemmer.Stemmer("porter")
    stop = job["stopwords"]
    start = time.perf_counter()
    model = bm25s.BM25(k1=job["k1"], b=job["b"], method="lucene", backend="numba")
    model.index(bm25s.tokenize(texts, stopwords=stop, stemmer=stemmer, show_progress=False),
                show_progress=False)
    index_s = time.perf_counter() - start
    warm = bm25s.tokenize(job["texts"][:2], stopwords=stop, stemmer=stemmer, show_progress=False)
    model.retrieve(warm, k=job["k"], n_threads=2, show_progress=False)  # numba compiles
    seconds = float("inf")
    for _ in range(job["repeat"]):
        start = time.perf_counter()
        tokens = bm25s.tokenize(job["texts"], stopwords=stop, stemmer=stemmer,
                                show_progress=False)
        found, _ = model.retrieve(tokens, k=job["k"], n_threads=2, show_progress=False)
        seconds = min(seconds, time.perf_counter() - start)
    ids = papers["id"].to_list()
    out = {"threads=2": {"seconds": seconds, "index_seconds": index_s,
                         "lists": {q: [ids[i] for i in row] for q, row
                                   in zip(job["qids"], found.tolist())}}}
print(json.dumps(out))
"""


def corpus_papers(args: argparse.Namespace, n: int) -> Path:
    """A parquet of (corpusid, title, abstract): --papers, or a synthetic corpus of `n`."""
    if args.papers:
        return Path(args.papers)
    from pipeline.ingest import ingest
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    corpus = args.work / "corpus"
    if not (corpus / "papers.parquet").exists():
        raw = args.work / "raw"
        generate(raw, SyntheticConfig(n_papers=n, n_shards=max(1, n // 250_000), seed=11),
                 workers=2)
        ingest(raw, corpus, workers=2)
    return corpus / "papers.parquet"


def peer(name: str, job: dict, tmp: Path, env_path: Path) -> dict:
    (tmp / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": f"{env_path}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-c", PEER, str(tmp / "job.json")], env=env,
                          capture_output=True, text=True, cwd=tmp)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(lists: dict[str, list[str]], reference: dict[str, list[str]], k: int) -> dict:
    overlap = [len(set(lists[q]) & set(ref)) / max(1, min(k, len(ref)))
               for q, ref in reference.items()]
    same = [lists[q] == ref for q, ref in reference.items()]
    return {"mean_overlap": round(sum(overlap) / len(overlap), 4),
            "identical_lists": round(sum(same) / len(same), 4)}


def best_of(repeat: int, call):
    """(the result of the last call, the best time of `repeat` calls)."""
    seconds = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        seconds = min(seconds, time.perf_counter() - start)
    return result, seconds


def run_size(papers: pl.DataFrame, size: int, n_queries: int, k: int, repeat: int,
             work: Path, env_path: Path) -> dict:
    shuffled = papers.sample(fraction=1.0, shuffle=True, seed=size)
    pool, queries = shuffled.head(size), shuffled.slice(size, n_queries).sort("corpusid")
    tmp = work / f"pool-{size}"
    tmp.mkdir(parents=True, exist_ok=True)
    index_dir = tmp / "bm25"
    start = time.perf_counter()  # built afresh every run, so that its time is measured
    bm25_lucene.build_index(pool, index_dir, threads=2, parameters={"size": size, "threads": 2})
    index_s = time.perf_counter() - start
    (hits, capped), ours_s = best_of(repeat, lambda: bm25_lucene.search(
        queries, index_dir, k, K1, B, threads=2, work_dir=tmp, pool_papers=lambda: pool))
    reference = {str(q): [str(d) for d in g["doc"]]
                 for (q,), g in hits.group_by("query", maintain_order=True)}
    qids = [str(q) for q in queries["corpusid"]]
    reference = {q: reference.get(q, []) for q in qids}
    job = {"index": str(bm25_lucene.lucene_dir(index_dir)), "k1": K1, "b": B, "k": k, "qids": qids,
           "texts": bm25_analysis.paper_text(queries).to_list(),
           "stopwords": sorted(bm25_analysis.STOPWORDS),
           "pyserini_import": PYSERINI_IMPORT, "repeat": repeat}
    rows = {"pipeline (Anserini SearchCollection, 2 threads)": {
        "seconds": round(ours_s, 2), "queries_per_s": round(n_queries / ours_s, 2),
        "index_seconds": round(index_s, 1), "capped_queries": len(capped)}}
    start = time.perf_counter()
    arrays = bm25_arrays.build(pool["corpusid"].to_numpy(),
                               bm25_analysis.paper_text(pool).to_list())
    build_s = time.perf_counter() - start
    numba.set_num_threads(2)
    bm25_arrays.search(arrays, job["texts"][:2], k, K1, B)  # numba compiles (or loads its cache)
    work_done: dict = {}
    found, arrays_s = best_of(repeat, lambda: bm25_arrays.anserini_order(
        *bm25_arrays.search(arrays, job["texts"], k, K1, B, stats=work_done), k))
    lists = {qids[row]: [str(d) for d in g["doc"]]
             for (row,), g in found.group_by("row", maintain_order=True)}
    rows["pipeline arrays engine (bm25_fast, 2 threads)"] = {
        "seconds": round(arrays_s, 2), "queries_per_s": round(n_queries / arrays_s, 2),
        "index_seconds": round(build_s, 1),
        **compare({q: lists.get(q, []) for q in qids}, reference, k)}
    pruning = {"postings_per_query": work_done["postings"] // n_queries,
               "share_scored": round(work_done["postings_scored"] / work_done["postings"], 4),
               "finished_per_query": work_done["finished"] // n_queries,
               "ranked_again": work_done["ranked_again"]}
    every, exhaustive_s = best_of(repeat, lambda: bm25_arrays.anserini_order(
        *bm25_arrays.search(arrays, job["texts"], k, K1, B, prune=False), k))
    lists = {qids[row]: [str(d) for d in g["doc"]]
             for (row,), g in every.group_by("row", maintain_order=True)}
    rows["arrays engine without pruning (every posting scored)"] = {
        "seconds": round(exhaustive_s, 2), "queries_per_s": round(n_queries / exhaustive_s, 2),
        **compare({q: lists.get(q, []) for q in qids}, reference, k)}
    arrays = None  # its memory back before the peers run
    for threads, row in peer("pyserini", {**job, "peer": "pyserini"}, tmp, env_path).items():
        rows[f"pyserini batch_search, {threads}"] = {
            "seconds": round(row["seconds"], 2),
            "queries_per_s": round(n_queries / row["seconds"], 2),
            **compare(row["lists"], reference, k)}
    pool.select(id=pl.col("corpusid").cast(pl.String), text=bm25_analysis.paper_text(pool)) \
        .write_parquet(tmp / "docs.parquet")
    for threads, row in peer("bm25s", {**job, "peer": "bm25s", "docs": str(tmp / "docs.parquet")},
                             tmp, env_path).items():
        rows[f"bm25s (numba), {threads}"] = {
            "seconds": round(row["seconds"], 2),
            "queries_per_s": round(n_queries / row["seconds"], 2),
            "index_seconds": round(row["index_seconds"], 1),
            **compare(row["lists"], reference, k)}
    for name, row in rows.items():
        print(size, name, {k_: v for k_, v in row.items()}, flush=True)
    best_peer = max(row["queries_per_s"] for name, row in rows.items()
                    if name.startswith("pyserini"))
    speedup = round(rows["pipeline arrays engine (bm25_fast, 2 threads)"]["queries_per_s"]
                    / best_peer, 2)
    # end to end: what a user waits for, the index (or the arrays engine's analysis) included;
    # pyserini searches the Lucene index the pipeline built, so its index time is Lucene's
    pyserini_best = min(row["seconds"] for name, row in rows.items()
                        if name.startswith("pyserini"))
    end_to_end = {"arrays engine (analysis + search)": round(build_s + arrays_s, 1),
                  "pyserini (IndexCollection + best batch_search)": round(index_s + pyserini_best,
                                                                         1)}
    return {"pool": size, "queries": n_queries, "k": k, "repeat": repeat, "systems": rows,
            "arrays_over_pyserini_best": speedup, "arrays_pruning": pruning,
            "end_to_end_seconds": end_to_end,
            "end_to_end_over_pyserini": round(end_to_end[
                "pyserini (IndexCollection + best batch_search)"] / end_to_end[
                "arrays engine (analysis + search)"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per search (best)")
    parser.add_argument("--papers", default="", help="parquet with corpusid, title, abstract")
    parser.add_argument("--work", type=Path, default=Path("/tmp/search_bm25"))
    args = parser.parse_args()
    n = max(args.sizes) + args.queries
    # about half the generator's papers lack an abstract (as in S2ORC): generate twice n
    papers = (pl.scan_parquet(corpus_papers(args, 2 * n + n // 10))
              .filter(pl.col("title").is_not_null() & pl.col("abstract").is_not_null())
              .select("corpusid", "title", "abstract").head(n).collect())
    if papers.height < n:
        raise SystemExit(f"{papers.height} papers: fewer than the {n} needed")
    env_path = side_packages("bench-bm25-env", SIDE)
    results = [run_size(papers, size, args.queries, args.k, args.repeat, args.work, env_path)
               for size in args.sizes]
    entry = {"date": time.strftime("%Y-%m-%d"), "k1": K1, "b": B,
             "machine": machine(),
             "anserini_jar": jvm.anserini_jar().name, "results": results}
    (OUT / "search_bm25.json").write_text(json.dumps(entry, indent=2) + "\n")
    (OUT / "search_bm25.md").write_text(report(entry))
    print(report(entry))


def report(entry: dict) -> str:
    lines = ["# BM25 with whole title+abstract queries: Lucene, pyserini and bm25s", "",
             f"{entry['date']}, {entry['machine']}; k1={entry['k1']}, b={entry['b']}; "
             f"{entry['anserini_jar']}. Pools and queries are papers of a synthetic corpus "
             "(the generator). `overlap`: mean share of the pipeline's top k that a peer also "
             "returns; `identical`: share of queries whose whole ranked list is the same; "
             "`reference`: the list every other row is compared with. Every search is timed "
             f"{entry['results'][0]['repeat']} times, its best kept.", "",
             "**End to end (index + search)**: " + "; ".join(
                 f"{r['pool']:,} papers: arrays engine {r['end_to_end_over_pyserini']}x "
                 f"pyserini (" + ", ".join(f"{k} {v} s" for k, v in
                                           r["end_to_end_seconds"].items()) + ")"
                 for r in entry["results"] if "end_to_end_seconds" in r) + ". The arrays "
             "engine here analyses the pool afresh; with the analysed-text store a pool whose "
             "papers are stored is assembled instead ([bm25_grid.md](bm25_grid.md)).", ""]
    for result in entry["results"]:
        lines += [f"## Pool of {result['pool']:,} papers, {result['queries']} queries, "
                  f"top {result['k']}", "",
                  "| system | seconds | queries/s | index seconds | overlap | identical |",
                  "|---|---|---|---|---|---|"]
        for name, row in result["systems"].items():
            lines.append(f"| {name} | {row['seconds']} | {row['queries_per_s']} | "
                         f"{row.get('index_seconds', '')} | "
                         f"{row.get('mean_overlap', 'reference')} | "
                         f"{row.get('identical_lists', 'reference')} |")
        pruning = result["arrays_pruning"]
        lines += ["", f"Search alone, arrays engine over pyserini's best: "
                  f"{result['arrays_over_pyserini_best']}x (best of {result['repeat']} runs "
                  "each). Its pruning scored "
                  f"{pruning['share_scored']:.1%} of the {pruning['postings_per_query']:,} "
                  f"postings of a query's terms, finished {pruning['finished_per_query']:,} "
                  f"documents per query from their own term lists, and ranked "
                  f"{pruning['ranked_again']} queries again (a guessed bound too high).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
