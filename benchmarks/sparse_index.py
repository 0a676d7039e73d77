"""Learned sparse search of a pool: the pipeline's arrays engine (pipeline/retrieval/sparse/
impact.py: scipy's inverted index and products) and its Lucene engine (sparse/lucene.py:
Anserini's impact index and SearchCollection in the process's JVM) side by side with
pyserini's own impact search (its Python layer, in the side environment the tests use:
`python -m pyserini.index.lucene --collection JsonVectorCollection --impact --pretokenized`,
then `LuceneImpactSearcher(index, None, min_idf=-1).batch_search` on the queries as pyserini
writes encoded queries, each term repeated by its impact; min_idf=-1 keeps every query term,
where its default 0 drops those every candidate has, idf = log(N/df) = 0, which Anserini's
SearchCollection and the dot product keep), on the same quantised weights, in one run.
pyserini's searcher reads every term's df when it opens an index (`open s`), timed apart.

The vectors are synthetic, of SPLADE-like statistics on BERT's vocabulary (30,522 terms):
a paper's terms drawn with Zipf-like term frequencies (exponent 1.1), ~250 per candidate and
per query paper (whole abstracts: SPLADE++ gives title+abstract inputs a few hundred terms),
weights log-normal around 0.45 (max ~3), quantised x 100 as pyserini does. Each system runs
in a fresh process of its own, timed from its inputs (arrays in memory, or the JSONL files) to
its runs; its peak memory is that process's own peak resident set as Linux reports it (VmHWM
in /proc/self/status; the in-process JVM's included for Lucene and pyserini), not ru_maxrss,
which a spawned process inherits from its parent (this script, holding the pool's vectors).
The runs are compared as lists: (doc, score) of each query in rank order. Seconds are kept
to the millisecond, and queries per second divide by at least 1 ms (a search faster than that
reads as 1 ms: a lower bound).
The side-by-side pool is 100,000 candidates by default (about 20 minutes on a busy 2-core
machine, most of it the Lucene systems indexing and this script writing their JSONL); where
the Lucene systems cannot index the size at hand, `--arrays-docs` adds a larger pool that the
arrays engine searches alone, and the finding compares it with the Lucene systems at the
smaller size only where that holds as worded (their time and memory do not fall as a pool
grows).
Writes benchmarks/results/sparse_index.json and .md.

Usage: .venv/bin/python benchmarks/sparse_index.py [--docs 100000] [--arrays-docs 0]
       [--queries 100] [--k 500]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from tests.conftest import PYSERINI_SIDE, side_packages  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
VOCAB = 30522

# the peak resident set of the process that runs it: VmHWM, the high-water mark of its own
# memory (ru_maxrss would start at its parent's resident set: Linux keeps it across exec)
PEAK = """
def peak_mib():
    status = open("/proc/self/status").read().split("VmHWM:")[1]
    return int(status.split()[0]) / 1024
"""

# the pipeline's engines, in a process of their own: arrays (the index built from CSR
# arrays) or lucene (its impact index built from the same arrays, then searched)
OURS = PEAK + """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
job = json.load(open(sys.argv[1]))
data = np.load(job["data"])
docs = (data["doc_offsets"], data["doc_terms"], data["doc_weights"])
queries = (data["q_offsets"], data["q_terms"], data["q_weights"])
doc_ids, query_ids = data["doc_ids"], data["query_ids"]
from pathlib import Path
import polars as pl
from pipeline.retrieval.sparse import lucene
from pipeline.retrieval.sparse.impact import impact_search, inverted_index
start = time.perf_counter()  # the libraries imported: data to runs
if sys.argv[2] == "arrays":
    index = inverted_index(docs, job["vocab"], True)
    built = time.perf_counter()
    rows, positions, scores = impact_search(queries, index, job["k"], True)
    done = time.perf_counter()
    lists = {}
    for q, p, s in zip(rows.tolist(), positions.tolist(), scores.tolist()):
        lists.setdefault(str(query_ids[q]), []).append([str(doc_ids[p]), float(s)])
else:
    work = Path(job["work"]) / "ours-lucene"
    lucene.build_index(doc_ids, docs, work / "index", {}, {})
    built = time.perf_counter()
    hits = lucene.search(query_ids, queries, work / "index", job["k"], 2, work, pl.Int64)
    done = time.perf_counter()
    lists = {}
    for q, d, s in hits.iter_rows():
        lists.setdefault(str(q), []).append([str(d), float(s)])
print(json.dumps({"index_seconds": built - start, "search_seconds": done - built,
                  "peak_mib": peak_mib(),
                  "lists": lists}))
"""

# pyserini's own indexer and LuceneImpactSearcher, in the side environment
PEER = PEAK + """
import json, subprocess, sys, time
job = json.load(open(sys.argv[1]))
exec(job["pyserini_import"].replace("LuceneSearcher", "LuceneImpactSearcher"))
from jnius import autoclass
start = time.perf_counter()
args = ["-collection", "JsonVectorCollection", "-input", job["docs"], "-index", job["index"],
        "-generator", "DefaultLuceneDocumentGenerator", "-impact", "-pretokenized",
        "-threads", "1", "-quiet"]
autoclass("io.anserini.index.IndexCollection").main(args)  # as python -m pyserini.index.lucene
built = time.perf_counter()
# min_idf=-1: every query term (the default, 0, drops the terms every candidate has)
searcher = LuceneImpactSearcher(job["index"], None, min_idf=-1)
topics = [line.rstrip("\\n").split("\\t") for line in open(job["topics"])]
opened = time.perf_counter()
hits = searcher.batch_search([t for _, t in topics], [q for q, _ in topics], k=job["k"],
                             threads=2)
done = time.perf_counter()
lists = {q: [[h.docid, float(h.score)] for h in hits[q]] for q, _ in topics}
print(json.dumps({"index_seconds": built - start, "open_seconds": opened - built,
                  "search_seconds": done - opened, "peak_mib": peak_mib(),
                  "lists": lists}))
"""


def synthetic(n: int, terms: int, rng: np.random.Generator, popularity: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays of `n` sparse vectors, about `terms` distinct terms each (drawn by
    `popularity`), weights log-normal (median 0.45, capped at 3)."""
    cdf = np.cumsum(popularity)
    lengths = np.clip(rng.normal(terms, terms / 4, n).astype(np.int64), 20, 4 * terms)
    rows_terms, rows_weights = [], []
    for length in lengths:
        drawn = np.unique(np.minimum(np.searchsorted(cdf, rng.random(int(length) * 3)),
                                     VOCAB - 1))
        chosen = np.sort(rng.permutation(drawn)[:length])
        rows_terms.append(chosen.astype(np.int32))
        rows_weights.append(np.minimum(rng.lognormal(np.log(0.45), 0.6, len(chosen)),
                                       3.0).astype(np.float32))
    offsets = np.r_[0, np.cumsum([len(t) for t in rows_terms])].astype(np.int64)
    return offsets, np.concatenate(rows_terms), np.concatenate(rows_weights)


def run(code: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    """A process of its own: its JSON answer (with its own peak memory, MiB: PEAK, the
    in-process JVM's included) and its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env or dict(os.environ))
    if done.returncode != 0:
        raise SystemExit(f"{args}: failed\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    answer["wall_seconds"] = time.perf_counter() - start
    return answer


def prepare(work: Path, n_docs: int, args: argparse.Namespace, rng: np.random.Generator,
            popularity: np.ndarray, lucene: bool) -> tuple[Path, dict]:
    """A pool's vectors (vectors.npz) and, for the Lucene systems (`lucene`), pyserini's
    inputs: the same impacts as the pipeline's Lucene engine writes them; the job and facts."""
    from pipeline.retrieval.sparse.lucene import impacts
    from tests.conftest import PYSERINI_IMPORT

    work.mkdir(parents=True, exist_ok=True)
    docs = synthetic(n_docs, args.terms, rng, popularity)
    queries = synthetic(args.queries, args.terms, rng, popularity)
    doc_ids = np.arange(10_000_000, 10_000_000 + n_docs)
    doc_ids = doc_ids[np.argsort(doc_ids.astype(str), kind="stable")]  # as the retriever orders
    query_ids = np.arange(1, args.queries + 1)
    np.savez(work / "vectors.npz", doc_offsets=docs[0], doc_terms=docs[1],
             doc_weights=docs[2], q_offsets=queries[0], q_terms=queries[1],
             q_weights=queries[2], doc_ids=doc_ids, query_ids=query_ids)
    if lucene:
        for old in ("pyserini-index", "ours-lucene", "docs"):
            shutil.rmtree(work / old, ignore_errors=True)
        (work / "docs").mkdir()
        with (work / "docs" / "docs.jsonl").open("w") as handle:
            for row, doc in enumerate(doc_ids):
                handle.write(json.dumps({"id": str(doc), "contents": "",
                                         "vector": impacts(docs, row)}) + "\n")
        with (work / "topics.tsv").open("w") as handle:
            for row, query in enumerate(query_ids):
                words = " ".join(" ".join([t] * n) for t, n in impacts(queries, row).items())
                handle.write(f"{query}\t{words}\n")
    job = {"data": str(work / "vectors.npz"), "vocab": VOCAB, "k": args.k, "work": str(work),
           "docs": str(work / "docs"), "index": str(work / "pyserini-index"),
           "topics": str(work / "topics.tsv"), "pyserini_import": PYSERINI_IMPORT}
    (work / "job.json").write_text(json.dumps(job))
    facts = {"docs": n_docs, "postings": int(len(docs[1])),
             "query_terms_mean": round(float(np.diff(queries[0]).mean()), 1),
             "impacts_per_candidate_mean": round(float(
                 np.rint(docs[2].astype(np.float64) * 100).sum() / n_docs), 1)}
    return work / "job.json", facts


# seconds are kept to the millisecond; a rate divides by at least that (a faster step reads as
# 1 ms, so its rate is a lower bound, never a division by 0)
DECIMALS = 3
RESOLUTION = 1e-3


def rounded(result: dict) -> dict:
    """A system's measures as reported: seconds to the millisecond, MiB to a tenth."""
    return {k: round(v, 1 if k == "peak_mib" else DECIMALS) if isinstance(v, float) else v
            for k, v in result.items()}


def per_second(queries: int, seconds: float) -> float:
    """Queries per second of a search that took `seconds` (at least RESOLUTION)."""
    return queries / max(seconds, RESOLUTION)


def total(row: dict) -> float:
    """A system's seconds from its inputs to its runs: index, open (pyserini) and search."""
    return row["index_seconds"] + row.get("open_seconds", 0.0) + row["search_seconds"]


NAMES = {"arrays": "pipeline arrays engine (scipy, SPARSE_QUANTIZE=1)",
         "lucene": "pipeline Lucene engine (Anserini in-process, 2 search threads)",
         "pyserini": "pyserini LuceneImpactSearcher.batch_search (2 threads)"}


def table(rows: dict[str, dict], queries: int) -> list[str]:
    lines = ["| system | index s | open s | search s | queries/s | peak MiB | hits "
             "| runs equal pyserini's |", "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {NAMES[name]} | {row['index_seconds']} | "
                     f"{row.get('open_seconds', '')} | {row['search_seconds']} | "
                     f"{per_second(queries, row['search_seconds']):.1f} | "
                     f"{row['peak_mib']:.0f} | {row['hits']:,} | "
                     f"{row.get('runs_equal_pyserini', 'not run')} |")
    return lines


def finding(report: dict) -> str:
    """The result in words, computed from the measures: whether the runs are equal, whether
    the arrays engine is ahead of pyserini (inputs to runs) and its peak memory below the
    Lucene systems'; at the arrays engine's larger pool, only what the measures show."""
    side, queries = report["side_by_side"], report["queries"]
    arrays, lucene, peer = (side["systems"][n] for n in ("arrays", "lucene", "pyserini"))
    differ = [NAMES[n] for n in ("arrays", "lucene") if not side["systems"][n][
        "runs_equal_pyserini"]]
    fastest = min(total(lucene), total(peer))
    lightest = min(lucene["peak_mib"], peer["peak_mib"])
    mine = max(total(arrays), RESOLUTION)
    lines = [f"At {side['docs']:,} candidates, " + (
        "the runs are equal: both pipeline engines return pyserini's documents with its "
        "scores, in its order, for every query." if not differ else
        f"the runs are NOT equal: {' and '.join(differ)} differ from pyserini's."),
        f"From inputs to runs the arrays engine took {total(arrays):.3f} s, pyserini "
        f"{total(peer):.3f} s (index, open, search) and the pipeline's Lucene engine "
        f"{total(lucene):.3f} s: the arrays engine is " + (
            f"ahead, {total(peer) / mine:.1f}x faster than pyserini."
            if mine < total(peer) else
            f"NOT ahead: {mine / max(total(peer), RESOLUTION):.1f}x pyserini's time."),
        f"Its peak memory, {arrays['peak_mib']:.0f} MiB, is "
        f"{'below' if arrays['peak_mib'] < peer['peak_mib'] else 'NOT below'} pyserini's "
        f"({peer['peak_mib']:.0f} MiB) and "
        f"{'below' if arrays['peak_mib'] < lucene['peak_mib'] else 'NOT below'} the "
        f"pipeline's Lucene engine's ({lucene['peak_mib']:.0f} MiB).",
        f"Search alone: the arrays engine {per_second(queries, arrays['search_seconds']):.1f} "
        f"queries/s, pyserini {per_second(queries, peer['search_seconds']):.1f}, the "
        f"pipeline's Lucene engine {per_second(queries, lucene['search_seconds']):.1f}."]
    if "arrays_alone" in report:
        large = report["arrays_alone"]
        alone = large["systems"]["arrays"]
        small, big = f"{side['docs']:,}", f"{large['docs']:,}"

        def against(measure: str, ours: float, theirs: float) -> str:
            """Ours at the larger pool against the Lucene systems' best at the smaller."""
            if ours < theirs:
                return (f"less {measure} than either Lucene system took at {small}, so less "
                        f"than theirs at {big} too, as long as theirs does not fall as the "
                        "pool grows")
            return (f"not less {measure} than the better Lucene system took at {small}: "
                    f"how they compare at {big} is not measured")

        lines.append(
            f"At {big} candidates the arrays engine alone took {total(alone):.3f} s and "
            f"{alone['peak_mib']:.0f} MiB (the Lucene systems were not run at that size): "
            f"{against('time', total(alone), fastest)}; "
            f"{against('memory', alone['peak_mib'], lightest)}.")
    return " ".join(lines)


def markdown(report: dict) -> str:
    """The results page of a report (benchmarks/results/sparse_index.md)."""
    side, queries = report["side_by_side"], report["queries"]
    lines = [
        "# Learned sparse search of a pool: the pipeline's engines and pyserini's impact search",
        "",
        f"{time.strftime('%Y-%m-%d')}, {report['machine']}. {queries} query papers, top "
        f"{report['k']}; synthetic SPLADE-like vectors on a 30,522-term vocabulary, quantised "
        "x 100 (benchmarks/sparse_index.py, its docstring for the statistics). Each system in a "
        "fresh process; `index s` from its inputs: the arrays in memory for the pipeline's "
        "engines (the Lucene engine's includes writing its JSONL), the JSONL files for "
        "pyserini; `peak MiB` is its own peak resident set (VmHWM); `open s`: "
        "pyserini's searcher reading every term's df as it opens the index. Load average "
        "(1, 5, 15 minutes) "
        f"{report['load_average']['before']} before the run and "
        f"{report['load_average']['after']} after it: other jobs shared the cores, so every "
        "time is longer than on an idle machine.", "", "## Finding", "", finding(report), "",
        f"## Side by side: {side['docs']:,} candidates ({side['postings']:,} postings, "
        f"{side['impacts_per_candidate_mean']:,} impacts per candidate), queries of "
        f"{side['query_terms_mean']} terms", "", *table(side["systems"], queries)]
    if "arrays_alone" in report:
        large = report["arrays_alone"]
        lines += ["", f"## The arrays engine alone: {large['docs']:,} candidates "
                  f"({large['postings']:,} postings), queries of {large['query_terms_mean']} "
                  "terms", "", *table(large["systems"], queries)]
    return "\n".join(lines) + "\n"



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000,
                        help="candidates of the side-by-side pool (all three systems)")
    parser.add_argument("--arrays-docs", type=int, default=0,
                        help="candidates of a second pool searched by the arrays engine alone "
                             "(0: none)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--terms", type=int, default=250)
    parser.add_argument("--k", type=int, default=500)
    parser.add_argument("--work", type=Path, default=Path("/tmp/sparse_index_bench"))
    args = parser.parse_args()
    load_before = [round(v, 2) for v in os.getloadavg()]
    rng = np.random.default_rng(90)
    popularity = 1.0 / np.arange(1, VOCAB + 1) ** 1.1
    popularity = rng.permutation(popularity / popularity.sum())
    job, facts = prepare(args.work / "side-by-side", args.docs, args, rng, popularity, True)
    results = {"arrays": run(OURS, [str(job), "arrays", str(ROOT)]),
               "lucene": run(OURS, [str(job), "lucene", str(ROOT)])}
    packages = side_packages("pyserini-env", PYSERINI_SIDE)
    env = {**os.environ, "PYTHONPATH": f"{packages}{os.pathsep}{ROOT}"}
    results["pyserini"] = run(PEER, [str(job)], env)
    reference = results["pyserini"]["lists"]
    rows = {}
    for name, result in results.items():
        lists = result.pop("lists")
        result["runs_equal_pyserini"] = lists == reference
        result["hits"] = sum(len(hits) for hits in lists.values())
        rows[name] = rounded(result)
    report = {"machine": machine(), "queries": args.queries, "k": args.k, "vocabulary": VOCAB,
              "side_by_side": {**facts, "systems": rows}}
    if args.arrays_docs:
        job, facts = prepare(args.work / "arrays-alone", args.arrays_docs, args, rng,
                             popularity, False)
        alone = run(OURS, [str(job), "arrays", str(ROOT)])
        alone["hits"] = sum(len(hits) for hits in alone.pop("lists").values())
        report["arrays_alone"] = {**facts, "systems": {"arrays": rounded(alone)}}
    report["load_average"] = {"before": load_before,
                              "after": [round(v, 2) for v in os.getloadavg()]}
    OUT.mkdir(exist_ok=True)
    (OUT / "sparse_index.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "sparse_index.md").write_text(markdown(report))
    print(markdown(report), end="")

if __name__ == "__main__":
    main()
