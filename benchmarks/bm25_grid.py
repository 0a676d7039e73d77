"""BM25 across a scaled version of the paper's grid (issue 22), end to end, three ways in one run:

- the pipeline (arrays engine, the analysed-text store): `mdcr-pipeline index --model bm25`
  then `search` over the grid's test pools, k1 and b tuned on each group's validation pools;
- the pipeline's Lucene engine (`--bm25-engine lucene`): a Lucene index per pool (Anserini's
  IndexCollection), SearchCollection, the tuning grid in one SearchCollection run per
  validation pool;
- pyserini 1.6 doing the same work (its Python layer, in a side environment): each pool's
  papers written as a JsonCollection, Anserini's IndexCollection per pool (2 threads),
  `LuceneSearcher.batch_search` (2 threads) for every (k1, b) of the grid on every
  validation pool, MAP by pytrec_eval to choose each group's pair, then the test pools
  searched with it.

Every system is a child process timed end to end (Python and JVM start included), its peak RSS
read from wait4. Compared: every test pool's run file, byte for byte, between the two
pipeline engines; every list of the pipeline's runs against pyserini's documents and scores
(in trec_eval's order, scores to 6 decimals, the query itself left out: docs/retrieval.md);
each group's chosen (k1, b).

The second part: one pool of 1M papers with 1,000 queries, end to end (index + search), the
store empty, then filled (the same pool searched again, and its next repeat), against the
Lucene engine's index + search of the same pool; the two engines' run files compared.

The grid, the corpus and the sizes are arguments; the results say which were used. A corpus
missing under --data is first made by `mdcr-pipeline corpus --synth N` (--corpus-papers,
--big-corpus-papers: the committed runs used 1.2M and 2.4M synthetic papers, of which the
prefilter keeps about 46%).
Writes benchmarks/results/bm25_grid.json and .md.
Usage: .venv/bin/python benchmarks/bm25_grid.py --data /scratch/b22 --corpus grid
       [--corpus-papers 1.2M] [--sizes 20k 50k 100k] [--repeats 3] [--queries 1000]
       [--fields Medicine ...] [--field-size 20k] [--val-queries 100]
       [--big-corpus big --big-corpus-papers 2.4M --big-size 1M]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.layout import parse_size, run_paths  # noqa: E402
from pipeline.pools.build import PoolSpec, build_pool, load_pool  # noqa: E402
from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID  # noqa: E402
from tests.conftest import PYSERINI_IMPORT, PYSERINI_SIDE, side_packages  # noqa: E402
from tests.retrieval.test_bm25 import round_half_up  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
PY = str(ROOT / ".venv" / "bin" / "python")

PYSERINI = PYSERINI_IMPORT + """
import json, sys, time, pytrec_eval
from jnius import autoclass
job = json.load(open(sys.argv[1]))
index_collection = autoclass("io.anserini.index.IndexCollection")
seconds = {"write_docs": 0.0, "index": 0.0, "search": 0.0, "tune_search": 0.0}

def index(pool):
    start = time.perf_counter()
    folder = f"{job['work']}/{pool}/docs"
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/docs.jsonl", "w") as handle:
        for d, text in job["docs"][pool]:
            handle.write(json.dumps({"id": d, "contents": text}) + "\\n")
    seconds["write_docs"] += time.perf_counter() - start
    start = time.perf_counter()
    index_collection.main(["-collection", "JsonCollection", "-input", folder,
                           "-index", f"{job['work']}/{pool}/index", "-generator",
                           "DefaultLuceneDocumentGenerator", "-threads", "2"])
    seconds["index"] += time.perf_counter() - start
    return LuceneSearcher(f"{job['work']}/{pool}/index")

def top(hits, q):  # the top 500 without the query itself, as the pipeline scores a run
    return [(h.docid, h.score) for h in hits if h.docid != q][:500]

chosen = {}
for group, pools in job["validation"].items():
    maps = {}
    for pool in pools:
        searcher = index(pool)
        texts, qids = job["queries"][pool]
        judged = job["qrels"][pool]
        for k1, b in job["grid"]:
            searcher.set_bm25(k1, b)
            start = time.perf_counter()
            hits = searcher.batch_search(texts, qids, k=501, threads=2)
            seconds["tune_search"] += time.perf_counter() - start
            run = {q: dict(top(hits[q], q)) for q in qids}
            values = pytrec_eval.RelevanceEvaluator(judged, {"map"}).evaluate(run)
            maps.setdefault(f"{k1} {b}", []).append(
                sum(values[q]["map"] if q in values else 0.0 for q in qids) / len(qids))
    means = {pair: sum(v) / len(v) for pair, v in maps.items()}
    chosen[group] = max(means, key=lambda p: means[p])  # the first of the grid among ties
runs = {}
for pool, group in job["tests"].items():
    searcher = index(pool)
    k1, b = map(float, chosen.get(group, "0.9 0.4").split())
    searcher.set_bm25(k1, b)
    texts, qids = job["queries"][pool]
    start = time.perf_counter()
    hits = searcher.batch_search(texts, qids, k=501, threads=2)
    seconds["search"] += time.perf_counter() - start
    runs[pool] = {q: top(hits[q], q) for q in qids}
json.dump({"seconds": seconds, "chosen": chosen, "runs": runs}, open(job["out"], "w"))
"""


def timed(command: list[str], env: dict | None = None, log: Path | None = None) -> dict:
    """Run a child process; its wall seconds and peak RSS (GiB, from wait4)."""
    start = time.perf_counter()
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        tail = log.read_text()[-3000:] if log else ""
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}):\n{tail}")
    return {"seconds": round(seconds, 1), "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2)}


def pipeline(data: Path, root: str, corpus: str, stage: str, pools: list[str], *extra: str,
             log: Path) -> dict:
    """One `mdcr-pipeline <stage> --model bm25` over `pools`, index and runs under `root`."""
    return timed([PY, "-m", "pipeline", "--corpora-root", str(data / "corpora"),
                  "--index-root", str(data / root / "indexes"), "--runs-root",
                  str(data / root / "runs"), stage, "--corpus", corpus, "--model", "bm25",
                  "--threads", "2", *extra, *[a for p in pools for a in ("--pool", p)]], log=log)


def make_corpus(data: Path, corpus: str, papers: str | None, log: Path) -> None:
    """The synthetic corpus `corpus` of `papers` papers, made (synth, ingest, prefilter) unless
    it is there; without `papers`, it must be there."""
    if (data / "corpora" / corpus / "prefiltered.parquet").exists():
        return
    if not papers:
        raise SystemExit(f"{data / 'corpora' / corpus} has no prefiltered.parquet: give its "
                         "size to make it (--corpus-papers / --big-corpus-papers)")
    timed([PY, "-m", "pipeline", "--corpora-root", str(data / "corpora"), "corpus",
           "--corpus", corpus, "--synth", papers], log=log)


def build_grid(corpus_dir: Path, args) -> tuple[list[str], dict[str, list[str]]]:
    """The grid's pools (built once, the input of every system): test pools, and per tuning
    group its validation pools."""
    tests, groups = [], {}
    specs = [(None, parse_size(s), args.queries) for s in args.sizes] + \
            [(f, parse_size(args.field_size), args.field_queries) for f in args.fields]
    for field, size, n in specs:
        val = PoolSpec(size=size, field=field, queries=args.val_queries, split="validation",
                       seed=args.seed)
        build_pool(corpus_dir, val)
        for repeat in range(args.repeats):
            test = PoolSpec(size=size, field=field, queries=n, repeat=repeat, seed=args.seed)
            build_pool(corpus_dir, test)
            tests.append(test.name)
            groups.setdefault(val.name, []).append(test.name)
    return tests, groups


def run_lists(data: Path, root: str, corpus: str, pool: str) -> dict[str, list]:
    run = pl.read_parquet(run_paths(data / root / "runs", corpus, pool, "bm25").parquet)
    return {str(q[0]): list(zip(map(str, g["doc"]), g["score"], strict=True))
            for q, g in run.group_by("query", maintain_order=True)}


def equal_to_pyserini(ours: dict[str, list], theirs: dict[str, list]) -> tuple[int, int]:
    """(lists equal, lists) of a run against pyserini's hits in trec_eval's order."""
    equal = 0
    for query, hits in theirs.items():
        expected = sorted(((d, round_half_up(s)) for d, s in hits),
                          key=lambda h: (-h[1], [-ord(c) for c in h[0]]))
        equal += ours.get(query, []) == expected
    return equal, len(theirs)


def same_runs(data: Path, corpus: str, tests: list[str], pyserini: dict) -> tuple[str, str]:
    """(test pools whose run files are byte-identical between the two engines, lists of the
    pipeline's runs equal to pyserini's), each as "n/total"."""
    identical = sum(run_paths(data / "arrays" / "runs", corpus, p, "bm25").trec.read_bytes()
                    == run_paths(data / "lucene" / "runs", corpus, p, "bm25").trec.read_bytes()
                    for p in tests)
    equal = [equal_to_pyserini(run_lists(data, "arrays", corpus, p), pyserini["runs"][p])
             for p in tests]
    return (f"{identical}/{len(tests)}",
            f"{sum(e for e, _ in equal)}/{sum(n for _, n in equal)}")


def recheck_part(args, data: Path, log: Path, grid: dict) -> dict:
    """The grid's test pools searched again by both engines (the tuning and Lucene indexes
    kept), after a change to the runs' output: their runs compared again."""
    tests = grid["test_pools"]
    seconds = {"arrays": pipeline(data, "arrays", args.corpus, "search", tests, log=log),
               "lucene": pipeline(data, "lucene", args.corpus, "search", tests,
                                  "--bm25-engine", "lucene", log=log)}
    identical, equal = same_runs(data, args.corpus, tests,
                                 json.loads((data / "pyserini.json").read_text()))
    return {"runs_identical_to_lucene_engine": identical, "lists_equal_to_pyserini": equal,
            "search_seconds": seconds}


def grid_part(args, data: Path, log: Path) -> dict:
    corpus_dir = data / "corpora" / args.corpus
    tests, groups = build_grid(corpus_dir, args)
    vals = list(groups)
    figures: dict = {"test_pools": tests, "validation_pools": vals}
    # the pipeline, arrays engine and its store, from an empty store
    arrays = {"index": pipeline(data, "arrays", args.corpus, "index", tests, log=log),
              "search": pipeline(data, "arrays", args.corpus, "search", tests, log=log)}
    lucene = {"index": pipeline(data, "lucene", args.corpus, "index", tests,
                                "--bm25-engine", "lucene", log=log),
              "search": pipeline(data, "lucene", args.corpus, "search", tests,
                                 "--bm25-engine", "lucene", log=log)}
    # pyserini: the same pools, queries (title + abstract) and grid
    from pipeline.corpus.files import paper_texts
    from pipeline.retrieval.bm25.analysis import paper_text

    job: dict = {"work": str(data / "pyserini"), "grid": [[k1, b] for k1 in K1_GRID
                                                          for b in B_GRID],
                 "docs": {}, "queries": {}, "qrels": {}, "out": str(data / "pyserini.json"),
                 "validation": {v: [v] for v in vals},
                 "tests": {t: v for v, ts in groups.items() for t in ts}}
    for pool in tests + vals:
        queries, candidates, qrels = load_pool(corpus_dir, pool)
        docs = paper_texts(corpus_dir, candidates["corpusid"])
        job["docs"][pool] = list(zip(map(str, docs["corpusid"]), paper_text(docs), strict=True))
        papers = paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid")
        job["queries"][pool] = [paper_text(papers).to_list(), [str(q) for q in papers["corpusid"]]]
        judged: dict = {}  # the pool's relevant papers, as the pipeline's tuning scores MAP
        in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
        for q, d, r in in_pool.select("query", "doc", "rel").iter_rows():
            judged.setdefault(str(q), {})[str(d)] = int(r)
        job["qrels"][pool] = judged
    (data / "pyserini-job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": f"{side_packages('pyserini-env', PYSERINI_SIDE)}"
                                       f"{os.pathsep}{ROOT}"}
    peer = timed([sys.executable, "-c", PYSERINI, str(data / "pyserini-job.json")], env=env,
                 log=log)
    result = json.loads((data / "pyserini.json").read_text())
    identical, equal = same_runs(data, args.corpus, tests, result)
    chosen = {}
    for val, ts in groups.items():
        details = json.loads(run_paths(data / "arrays" / "runs", args.corpus, ts[0], "bm25")
                             .manifest.read_text())["details"]
        lucene_details = json.loads(run_paths(data / "lucene" / "runs", args.corpus, ts[0],
                                              "bm25").manifest.read_text())["details"]
        chosen[val] = {"pipeline": f"{details['k1']} {details['b']}",
                       "lucene_engine": f"{lucene_details['k1']} {lucene_details['b']}",
                       "pyserini": result["chosen"][val]}
    stores = [json.loads(run_paths(data / "arrays" / "runs", args.corpus, p, "bm25")
                         .manifest.read_text())["details"]["analysed_text_store"]
              for p in tests]
    store_manifest = json.loads((data / "arrays" / "indexes" / args.corpus / "bm25-analysed" /
                                 "anserini-english" / "manifest.json").read_text())
    distinct = sum(p["rows"] for p in store_manifest["parts"])
    # analyses without the store: every search analyses its pool and queries again, and each
    # group's tuning its validation pools once
    sizes = {p: sum(load_pool(corpus_dir, p)[i].height for i in (0, 1)) for p in tests + vals}
    without = sum(sizes[p] for p in tests) + sum(sizes[v] for v in vals)
    end = {"pipeline (arrays engine + store)": arrays, "pipeline (Lucene engine)": lucene,
           "pyserini (IndexCollection + batch_search)": peer}
    totals = {k: round(sum(x["seconds"] for x in v.values()) if "index" in v
                       else v["seconds"], 1) for k, v in end.items()}
    figures.update(
        seconds=end, totals=totals, pyserini_breakdown={k: round(v, 1) for k, v in
                                                        result["seconds"].items()},
        speedup_over_pyserini=round(totals["pyserini (IndexCollection + batch_search)"] /
                                    totals["pipeline (arrays engine + store)"], 2),
        speedup_over_lucene_engine=round(totals["pipeline (Lucene engine)"] /
                                         totals["pipeline (arrays engine + store)"], 2),
        runs_identical_to_lucene_engine=identical, lists_equal_to_pyserini=equal,
        chosen=chosen, store={"papers_analysed": distinct, "analyses_without_store": without,
                              "share_saved": round(1 - distinct / without, 3),
                              "first_search_store": stores[0]})
    return figures


def big_part(args, data: Path, log: Path) -> dict:
    corpus_dir = data / "corpora" / args.big_corpus
    size = parse_size(args.big_size)
    specs = [PoolSpec(size=size, queries=args.queries, repeat=r, seed=args.seed)
             for r in (0, 1)]
    for spec in specs:
        build_pool(corpus_dir, spec)
    pools = [spec.name for spec in specs]
    root = "big-arrays"
    first = {"index": pipeline(data, root, args.big_corpus, "index", pools[:1], log=log),
             "search": pipeline(data, root, args.big_corpus, "search", pools[:1], log=log)}
    again = {"search": pipeline(data, root, args.big_corpus, "search", pools[:1], log=log)}
    repeat = {"index": pipeline(data, root, args.big_corpus, "index", pools[1:], log=log),
              "search": pipeline(data, root, args.big_corpus, "search", pools[1:], log=log)}
    lucene = {"index": pipeline(data, "big-lucene", args.big_corpus, "index", pools[:1],
                                "--bm25-engine", "lucene", log=log),
              "search": pipeline(data, "big-lucene", args.big_corpus, "search", pools[:1],
                                 "--bm25-engine", "lucene", log=log)}
    same = run_paths(data / root / "runs", args.big_corpus, pools[0], "bm25").trec \
        .read_bytes() == run_paths(data / "big-lucene" / "runs", args.big_corpus, pools[0],
                                   "bm25").trec.read_bytes()
    store = json.loads(run_paths(data / root / "runs", args.big_corpus, pools[1], "bm25")
                       .manifest.read_text())["details"]["analysed_text_store"]
    rows = {"pipeline, store empty (index + search)": first,
            "pipeline, store filled: the same pool again (search)": again,
            "pipeline, store filled: the next repeat (index + search)": repeat,
            "Lucene engine (index + search)": lucene}
    totals = {k: round(sum(x["seconds"] for x in v.values()), 1) for k, v in rows.items()}
    lucene_total = totals["Lucene engine (index + search)"]
    return {"pools": pools, "seconds": rows, "totals": totals,
            "peak_rss_gib": {k: max(x["peak_rss_gib"] for x in v.values())
                             for k, v in rows.items()},
            "over_lucene": {k: round(lucene_total / v, 2) for k, v in totals.items()},
            "runs_identical_to_lucene_engine": same, "next_repeat_store": store}


# where a search's seconds go: (label, module file, function), cumulative seconds of each
PROFILED = (
    ("the search stage (search_pool())", "retrieval/search.py", "search_pool"),
    ("pool files read and checked (load_pool)", "pools/build.py", "load_pool"),
    ("inputs recorded (checksums)", "core/inputs.py", "record"),
    ("k1 and b (bm25_params)", "bm25/tuning.py", "bm25_params"),
    ("query papers' texts (paper_texts)", "corpus/files.py", "paper_texts"),
    ("store: what it lacks (fill)", "bm25/store.py", "fill"),
    ("store: the pool's index assembled (pool_index)", "bm25/store.py", "pool_index"),
    ("  of which the parts' rows found (_selections)", "bm25/store.py", "_selections"),
    ("  of which the papers' terms copied (_copy_terms)", "bm25/store.py", "_copy_terms"),
    ("  of which the lists by term (_by_term)", "bm25/arrays.py", "_by_term"),
    ("  of which the score bounds (_frontiers)", "bm25/arrays.py", "_frontiers"),
    ("store: the queries' terms (stored_query_terms)", "bm25/store.py", "stored_query_terms"),
    ("search kernel (arrays.search)", "bm25/arrays.py", "search"),
    ("Anserini's order and ties (anserini_order)", "bm25/arrays.py", "anserini_order"),
    ("run cut, self hits removed (finalize_run)", "retrieval/runs.py", "finalize_run"),
    ("run written (write_run)", "retrieval/runs.py", "write_run"),
)


def profile_part(args, data: Path, log: Path) -> dict:
    """The 1M pool searched again (store filled, as the 'same pool again' row) under cProfile:
    the process's wall seconds and the cumulative seconds of each step (PROFILED)."""
    import pstats

    big = json.loads((OUT / "bm25_grid.json").read_text())["big"]
    pool, root = big["pools"][0], "big-arrays"
    out = data / "search.prof"
    wall = timed([PY, "-m", "cProfile", "-o", str(out), "-m", "pipeline", "--corpora-root",
                  str(data / "corpora"), "--index-root", str(data / root / "indexes"),
                  "--runs-root", str(data / root / "runs"), "search", "--corpus",
                  args.big_corpus, "--model", "bm25", "--threads", "2", "--pool", pool],
                 log=log)
    stats = pstats.Stats(str(out)).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    steps = {}
    for label, file, name in PROFILED:
        found = [v[3] for (f, _, n), v in stats.items() if f.endswith(file) and n == name]
        steps[label] = round(sum(found), 2)
    return {"pool": pool, "wall": wall, "steps": steps,
            "float_sums": float_sums(data, root, args.big_corpus, pool)}


def float_sums(data: Path, root: str, corpus: str, pool: str) -> dict:
    """Whether a float64 sum of the pool's float32 term scores is exact, so that the order in
    which terms are added (which pruning and the one-pass grid change) cannot change a score:
    it is when every term's score is at least 2^-29 of the largest sum (24 significant bits
    per term, 53 per sum). A lower bound of the smallest term score any query can add: the
    most common term's idf (as Lucene computes it, float32), once in the query and once (tf 1)
    in the longest document, at the grid's (k1, b) that makes it smallest; the largest sum:
    the run's best score."""
    import numpy as np

    from pipeline.retrieval.bm25 import arrays as bm25_arrays
    from pipeline.retrieval.bm25 import store as bm25_store

    ids = load_pool(data / "corpora" / corpus, pool)[1]["corpusid"].to_numpy()
    index = bm25_store.pool_index(bm25_store.store_path(data / root / "indexes", corpus), ids)
    n, df = float(index.doc_count), int(np.diff(index.ptr).max())
    idf = np.float32(np.log(1 + (n - df + 0.5) / (df + 0.5)))
    longest = np.float32(bm25_arrays.decode_length(index.norms.max()))
    avgdl = np.float32(index.sum_length / n)
    one = np.float32(1)
    smallest = min(idf - idf / (one + one / (np.float32(k1) * ((one - np.float32(b))
                                                              + np.float32(b) * longest / avgdl)))
                   for k1 in K1_GRID for b in B_GRID)
    best = float(pl.read_parquet(run_paths(data / root / "runs", corpus, pool, "bm25").parquet)
                 ["score"].max())
    return {"documents": int(n), "most_common_term_share": round(df / n, 4),
            "smallest_idf": float(idf), "smallest_term_score": float(smallest),
            "largest_score": best, "margin": round(float(smallest) / (best * 2.0**-29), 1)}


def saved_part(args, data: Path, root: str, corpus: str, pool: str) -> dict:
    """A pool's index assembled from the store against one saved to disk and loaded again
    (numpy files, read from the page cache: the saved index's best case), and its size."""
    import tempfile

    import numpy as np

    from pipeline.retrieval.bm25 import store as bm25_store

    store = bm25_store.store_path(data / root / "indexes", corpus)
    ids = load_pool(data / "corpora" / corpus, pool)[1]["corpusid"].to_numpy()
    bm25_store.pool_index(store, ids[:1000])  # numba compiles (or loads its cache)
    start = time.perf_counter()
    index = bm25_store.pool_index(store, ids)
    assemble = time.perf_counter() - start
    names = ("ids", "ptr", "docs", "tfs", "norms", "fptr", "fterms", "ftfs")
    with tempfile.TemporaryDirectory(dir=data) as tmp:
        start = time.perf_counter()
        for name in names:
            np.save(Path(tmp) / f"{name}.npy", getattr(index, name))
        for i, array in enumerate(index.frontier):
            np.save(Path(tmp) / f"frontier{i}.npy", array)
        index.vocab.write_parquet(Path(tmp) / "vocab.parquet")
        save = time.perf_counter() - start
        size = sum(f.stat().st_size for f in Path(tmp).iterdir())
        start = time.perf_counter()
        loaded = {f.stem: np.load(f) for f in Path(tmp).glob("*.npy")}
        vocab = pl.read_parquet(Path(tmp) / "vocab.parquet")
        load = time.perf_counter() - start
    same = all(np.array_equal(loaded[n], getattr(index, n)) for n in names) and \
        vocab.equals(index.vocab)
    return {"pool": pool, "papers": len(ids), "assemble_seconds": round(assemble, 2),
            "save_seconds": round(save, 2), "load_seconds": round(load, 2),
            "saved_gib": round(size / 2**30, 2), "loaded_equal": same}


def write(figures: dict) -> None:
    (OUT / "bm25_grid.json").write_text(json.dumps(figures, indent=2) + "\n")
    grid, big = figures.get("grid"), figures.get("big")
    lines = [f"# BM25 across a scaled grid: analysed-text store against pyserini and Lucene, "
             f"{figures['date']}", "", f"Machine: {figures['machine']}.", ""]
    if grid:
        final = grid.get("recheck", grid)  # the comparison after the last change to the runs
        lines += [
            f"**End to end over the grid: the pipeline {grid['speedup_over_pyserini']}x "
            f"pyserini, {grid['speedup_over_lucene_engine']}x its Lucene engine** "
            f"({' / '.join(f'{k} {v} s' for k, v in grid['totals'].items())}). Runs identical "
            f"to the Lucene engine's: {final['runs_identical_to_lucene_engine']} pools; lists "
            f"equal to pyserini's (documents and scores): {final['lists_equal_to_pyserini']}. "
            "pyserini's peak RSS includes this harness's job (every pool's texts in memory).",
            "", f"`benchmarks/bm25_grid.py {grid['arguments']}`. Test pools: "
            f"{', '.join(grid['test_pools'])}; validation pools (one per "
            f"group, the {len(K1_GRID) * len(B_GRID)}-pair grid): "
            f"{', '.join(grid['validation_pools'])}.", "",
            "| system | stage | seconds | peak RSS (GiB) |", "|---|---|---|---|"]
        for system, stages in grid["seconds"].items():
            for stage, v in (stages.items() if "index" in stages else [("all", stages)]):
                lines.append(f"| {system} | {stage} | {v['seconds']} | {v['peak_rss_gib']} |")
        lines += ["", f"pyserini's seconds by step: {grid['pyserini_breakdown']}.", "",
                  "Chosen (k1, b) per tuning group: " + "; ".join(
                      f"{g}: {c}" for g, c in grid["chosen"].items()) + ".", "",
                  f"Analysed-text store: {grid['store']['papers_analysed']} papers analysed "
                  f"once, against {grid['store']['analyses_without_store']} analyses without "
                  f"it (every search and each group's tuning analysing its pools again): "
                  f"**{grid['store']['share_saved']:.1%} of analyses saved** (reruns and "
                  "query variants would add to the saving).", ""]
    recheck = (grid or {}).get("recheck")
    if recheck:
        lines += [f"Searched again after run scores were made to round halves away from zero "
                  f"as Anserini does (`{recheck['arguments']}`; the timings above are the first "
                  f"run's): runs identical to the Lucene engine's: "
                  f"{recheck['runs_identical_to_lucene_engine']} pools (first run: "
                  f"{grid['runs_identical_to_lucene_engine']}, differing by 1e-6 in a few "
                  f"scores); lists equal to pyserini's: {recheck['lists_equal_to_pyserini']} "
                  "(the others differ only in which of the papers tied at the 500th score is "
                  "kept: Lucene keeps those it indexed first, and pyserini's index was "
                  "written in another order).", ""]
    if big:
        lines += [f"## One pool of {big['pools'][0]} with the store empty and filled", "",
                  f"`benchmarks/bm25_grid.py {big['arguments']}`.", "",
                  "| run | seconds | over Lucene engine | peak RSS (GiB) |", "|---|---|---|---|"]
        for k, v in big["totals"].items():
            ratio = "reference" if k.startswith("Lucene") else f"{big['over_lucene'][k]}x"
            lines.append(f"| {k} | {v} | {ratio} | {big['peak_rss_gib'][k]} |")
        lines += ["", f"Runs identical to the Lucene engine's: "
                  f"{big['runs_identical_to_lucene_engine']}. Stages: " + "; ".join(
                      f"{k}: " + ", ".join(f"{s} {x['seconds']} s" for s, x in v.items())
                      for k, v in big["seconds"].items()) + ". The next repeat's store: "
                  f"{big['next_repeat_store']}.", ""]
    profile = figures.get("profile")
    if profile:
        lines += [f"## Where the same pool's search again spends its time ({profile['pool']})",
                  "", f"`benchmarks/bm25_grid.py {profile['arguments']}`: the search of the "
                  "row 'the same pool again' once more, under cProfile (which adds its own "
                  f"overhead): {profile['wall']['seconds']} s wall, peak RSS "
                  f"{profile['wall']['peak_rss_gib']} GiB; the rest of the wall time is the "
                  "process's start and imports, the JVM's start, and the run's manifest.", "",
                  "| step (cumulative) | seconds |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in profile["steps"].items()] + [""]
        sums = profile["float_sums"]
        lines += [f"Float sums on this pool: the most common term is in "
                  f"{sums['most_common_term_share']:.1%} of its {sums['documents']:,} "
                  f"documents (idf {sums['smallest_idf']:.3g}); the smallest score a term can "
                  f"add is {sums['smallest_term_score']:.3g}, the best score "
                  f"{sums['largest_score']}: float64 sums of float32 term scores are exact "
                  f"(and so independent of the order of terms) while every term adds at least "
                  f"2^-29 of the sum, here {sums['margin']}x that bound.", ""]
    saved = figures.get("saved")
    if saved:
        lines += ["## A pool's index: assembled from the store, or saved and loaded", "",
                  f"Pool {saved['pool']} ({saved['papers']:,} papers): assembled from the store "
                  f"in {saved['assemble_seconds']} s; saved in {saved['save_seconds']} s "
                  f"({saved['saved_gib']} GiB per pool) and loaded again in "
                  f"{saved['load_seconds']} s from the page cache (equal arrays: "
                  f"{saved['loaded_equal']}).", ""]
    (OUT / "bm25_grid.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--corpus", default="grid")
    parser.add_argument("--corpus-papers", default=None)
    parser.add_argument("--big-corpus-papers", default=None)
    parser.add_argument("--sizes", nargs="+", default=["20k", "50k", "100k"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--fields", nargs="*", default=["Medicine", "Biology", "Physics"])
    parser.add_argument("--field-size", default="20k")
    parser.add_argument("--field-queries", type=int, default=200)
    parser.add_argument("--val-queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--big-corpus", default=None)
    parser.add_argument("--big-size", default="1M")
    parser.add_argument("--parts", nargs="+", default=["grid", "big"])
    args = parser.parse_args()
    log = args.data / "bm25_grid.log"
    previous = json.loads((OUT / "bm25_grid.json").read_text()) \
        if (OUT / "bm25_grid.json").exists() else {}
    figures = {**previous, "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    arguments = " ".join(sys.argv[1:])
    args.data.mkdir(parents=True, exist_ok=True)
    has_big = "big" in previous or ("big" in args.parts and args.big_corpus)
    if {"grid", "recheck"} & set(args.parts) or ("saved" in args.parts and not has_big):
        make_corpus(args.data, args.corpus, args.corpus_papers, log)
    if "big" in args.parts and args.big_corpus:
        make_corpus(args.data, args.big_corpus, args.big_corpus_papers, log)
    if "grid" in args.parts:
        figures["grid"] = {"arguments": arguments, **grid_part(args, args.data, log)}
        write(figures)
    if "recheck" in args.parts:
        figures["grid"]["recheck"] = {"arguments": arguments,
                                      **recheck_part(args, args.data, log, figures["grid"])}
        write(figures)
    if "big" in args.parts and args.big_corpus:
        figures["big"] = {"arguments": arguments, **big_part(args, args.data, log)}
        write(figures)
    if "profile" in args.parts:  # after "big": its pool, its store
        figures["profile"] = {"arguments": arguments, **profile_part(args, args.data, log)}
        write(figures)
    if "saved" in args.parts:  # after "big": its 1M pool, else the grid's largest pool
        big = figures.get("big")
        figures["saved"] = saved_part(args, args.data, "big-arrays" if big else "arrays",
                                      args.big_corpus if big else args.corpus,
                                      big["pools"][0] if big else figures["grid"]["test_pools"]
                                      [len(args.sizes) * args.repeats - 1])
        write(figures)
    print((OUT / "bm25_grid.md").read_text())


if __name__ == "__main__":
    main()
