"""BM25 tuned on a BEIR dev split (issue 21): a SciFact-sized collection in BEIR's layout, made
from the synthetic corpus, imported with its test and dev splits through make; the pipeline's
chosen (k1, b) and validation MAP against an independent grid search with pyserini (Anserini's
IndexCollection, `LuceneSearcher.batch_search` for every pair, MAP by pytrec_eval), and the test
split's nDCG@10 with pyserini's defaults and with the tuned pair.

The collection: 5,183 documents (SciFact's count), 300 test and 100 dev queries. A query is the
title of a paper outside the documents; its relevant documents (grade 1) are the papers it
cites among them. Writes benchmarks/results/beir_tuning.md and .json.
Usage: .venv/bin/python -m benchmarks.beir_tuning
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.demo import OUT, ROOT, machine
from pipeline.ingest.prefilter import prefilter
from pipeline.ingest.stage import ingest
from pipeline.ingest.synthetic import SyntheticConfig, generate
from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID
from tests.conftest import PYSERINI_SIDE, side_packages
from tests.external.test_beir import PYSERINI_GRID, grid_maps

DOCUMENTS, TEST_QUERIES, DEV_QUERIES = 5183, 300, 100


def collection(folder: Path, papers: pl.DataFrame, citations: pl.DataFrame) -> dict:
    """Write the BEIR-layout collection into `folder`; its counts."""
    docs = papers.head(DOCUMENTS)
    cited = (citations.join(docs.select(cited="corpusid"), on="cited", how="semi")
             .join(docs.select(citing="corpusid"), on="citing", how="anti")
             .join(papers.select(citing="corpusid"), on="citing", how="semi"))
    askers = cited["citing"].unique().sort().head(TEST_QUERIES + DEV_QUERIES)
    asking = papers.filter(pl.col("corpusid").is_in(askers.implode())).sort("corpusid")
    with (folder / "corpus.jsonl").open("w") as handle:
        for d, t, a in docs.select("corpusid", "title", "abstract").iter_rows():
            handle.write(json.dumps({"_id": f"d{d}", "title": t, "text": a}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for q, t in asking.select("corpusid", "title").iter_rows():
            handle.write(json.dumps({"_id": f"q{q}", "text": t}) + "\n")
    (folder / "qrels").mkdir()
    splits = {"test": askers.head(TEST_QUERIES), "dev": askers.tail(DEV_QUERIES)}
    for split, ids in splits.items():
        rows = cited.filter(pl.col("citing").is_in(ids.implode())).sort("citing", "cited")
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
            f"q{q}\td{d}\t1\n" for q, d in rows.select("citing", "cited").iter_rows()))
    return {"documents": docs.height, **{f"{s}_queries": len(ids) for s, ids in splits.items()}}


def make(*args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(["make", "--silent", "--no-print-directory", *args], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"make {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return round(time.perf_counter() - start, 1)


def pyserini_grid(data: Path, corpus: str, work: Path) -> tuple[dict, float]:
    """MAP of every (k1, b) on the dev pool, by pyserini and pytrec_eval; the seconds taken."""
    from pipeline.layout import pool_names
    from pipeline.pools.build import load_pool

    val_pool = [p for p in pool_names(data / "corpora" / corpus) if p.endswith("-val")][0]
    queries, _, qrels = load_pool(data / "corpora" / corpus, val_pool)
    docs = work / "docs"
    docs.mkdir()
    with (docs / "docs.jsonl").open("w") as handle:
        for d, t, a in pl.read_parquet(data / "corpora" / corpus / "prefiltered.parquet").select(
                "corpusid", "title", "abstract").iter_rows():
            handle.write(json.dumps({"id": d, "contents": f"{t} {a}"}) + "\n")
    job = {"docs": str(docs), "index": str(work / "index"), "k": 501,
           "grid": [[k1, b] for k1 in K1_GRID for b in B_GRID],
           "texts": queries["title"].to_list(), "qids": queries["corpusid"].to_list(),
           "out": str(work / "runs.json")}
    (work / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": f"{side_packages('pyserini-env', PYSERINI_SIDE)}"
                                       f"{os.pathsep}{ROOT}"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", PYSERINI_GRID, str(work / "job.json")], env=env,
                   check=True, capture_output=True, cwd=work)
    seconds = round(time.perf_counter() - start, 1)
    maps = grid_maps(work / "runs.json", qrels)
    return maps, seconds


def test_ndcg(data: Path, corpus: str) -> tuple[float, dict]:
    from pipeline.layout import pool_names, run_paths

    test_pool = [p for p in pool_names(data / "corpora" / corpus) if not p.endswith("-val")][0]
    paths = run_paths(data / "runs", corpus, test_pool, "bm25")
    evaluation = json.loads(paths.evaluation.read_text())
    details = json.loads(paths.manifest.read_text())["details"]
    return evaluation["means"]["ndcg@10"], details


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        generate(tmp / "raw", SyntheticConfig(n_papers=20_000, n_shards=1))
        ingest(tmp / "raw", tmp / "source")
        prefilter(tmp / "source")
        papers = pl.read_parquet(tmp / "source" / "prefiltered.parquet").sort("corpusid")
        citations = pl.read_parquet(tmp / "source" / "citations.parquet")
        (tmp / "beir").mkdir()
        counts = collection(tmp / "beir", papers, citations)
        data, corpus = tmp / "data", "scifact-like"
        common = [f"DATA={data}", f"CORPUS={corpus}", f"SRC={tmp / 'beir'}"]
        seconds = {"import test": make("import-beir", *common)}
        seconds["eval bm25 (defaults)"] = make("eval", *common[:2], "MODEL=bm25")
        default_ndcg, default_details = test_ndcg(data, corpus)
        seconds["import dev"] = make("import-beir", *common, "SPLIT=dev")
        seconds["eval bm25 (tuned on dev)"] = make("eval", *common[:2], "MODEL=bm25")
        tuned_ndcg, details = test_ndcg(data, corpus)
        tuning = json.loads(next((data / "indexes" / corpus / "bm25-tuning").glob("*.json"))
                            .read_text())
        (tmp / "pyserini").mkdir()
        maps, pyserini_seconds = pyserini_grid(data, corpus, tmp / "pyserini")
    best = max(maps, key=lambda p: maps[p])
    chosen = f"{details['k1']} {details['b']}"
    figures = {
        "machine": machine(), "date": time.strftime("%Y-%m-%d"), "collection": counts,
        "pipeline": {"k1": details["k1"], "b": details["b"],
                     "validation_map": details["validation_map"], "note": details["note"],
                     "tuning_seconds": tuning["seconds"]},
        "pyserini": {"best": best, "validation_map": round(maps[best], 6),
                     "grid_seconds_with_index": pyserini_seconds,
                     "pairs_with_other_map": sum(v != maps[best] for v in maps.values())},
        "identical": chosen == best and abs(details["validation_map"] - maps[best]) < 1e-6,
        "test_ndcg@10": {"defaults (0.9, 0.4)": round(default_ndcg, 4),
                         f"tuned ({details['k1']}, {details['b']})": round(tuned_ndcg, 4)},
        "defaults_note": default_details["note"], "make_seconds": seconds}
    (OUT / "beir_tuning.json").write_text(json.dumps(figures, indent=2) + "\n")
    (OUT / "beir_tuning.md").write_text(
        f"# BM25 tuned on a BEIR dev split, {figures['date']}\n\n"
        f"Machine: {figures['machine']}.\n\n"
        f"**Tuned pair identical to pyserini's grid search: {figures['identical']}** "
        f"(pipeline: k1 {details['k1']}, b {details['b']}, validation MAP "
        f"{details['validation_map']}; pyserini + pytrec_eval: {best.replace(' ', ', ')}, MAP "
        f"{maps[best]:.6f}; {figures['pyserini']['pairs_with_other_map']} of {len(maps)} pairs "
        "score another MAP, so the grid matters).\n\n"
        f"A SciFact-sized collection in BEIR's layout from the synthetic corpus: {counts}. "
        "Queries are titles of papers outside the documents; relevant: the documents they "
        "cite.\n\n| test split | nDCG@10 |\n|---|---|\n" + "".join(
            f"| {k} | {v} |\n" for k, v in figures["test_ndcg@10"].items())
        + f"\nSeconds: the pipeline's grid of {len(maps)} pairs (arrays engine) "
        f"{tuning['seconds']}; pyserini's (IndexCollection + {len(maps)} batch_search calls, "
        f"one JVM start) {pyserini_seconds}. make: "
        + ", ".join(f"{k} {v}" for k, v in seconds.items()) + ".\n")
    print((OUT / "beir_tuning.md").read_text())


if __name__ == "__main__":
    main()
