"""A real BEIR collection against its published numbers: `make import-beir` of a BEIR dataset
folder (corpus.jsonl, queries.jsonl, qrels/test.tsv), `make eval` for each model, and the
test split's nDCG@10 beside the number its community publishes (PUBLISHED).

The data cannot be downloaded on the machines this project is built on, so the figure is
measured where a user has the folder (for SciFact: the BEIR library's scifact.zip, unzipped):
    .venv/bin/python -m benchmarks.beir_published --src ~/beir/scifact --name scifact
Writes benchmarks/results/beir_published.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import polars as pl

from benchmarks.demo import OUT, ROOT, machine
from benchmarks.mdcr_demo import make

# (collection, model) -> (nDCG@10, where it is published)
PUBLISHED = {
    ("scifact", "minilm"): (0.6451, "MTEB leaderboard, all-MiniLM-L6-v2, SciFact test"),
    ("scifact", "bm25"): (0.665, "BEIR paper (Thakur et al. 2021), Table 2, BM25"),
    ("scidocs", "minilm"): (0.2164, "MTEB leaderboard, all-MiniLM-L6-v2, SCIDOCS test"),
    ("scidocs", "bm25"): (0.158, "BEIR paper (Thakur et al. 2021), Table 2, BM25"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", required=True, type=Path, help="the BEIR dataset folder")
    parser.add_argument("--name", required=True, help="the collection's name: scifact, ...")
    parser.add_argument("--models", default="bm25,minilm")
    args = parser.parse_args()
    corpus = f"{args.name}-bench"
    seconds = {}
    *_, seconds["import"] = make("import-beir", f"SRC={args.src}", f"CORPUS={corpus}",
                                 "REPLACE=1")
    rows = []
    for model in args.models.split(","):
        *_, seconds[model] = make("eval", f"CORPUS={corpus}", f"MODEL={model}")
        results = pl.read_parquet(ROOT / "runs" / "results.parquet").filter(
            pl.col("corpus") == corpus, pl.col("model") == model,
            pl.col("metric") == "ndcg@10")
        measured = results.group_by("pool").agg(pl.col("value").mean()).sort("pool")
        published, source = PUBLISHED.get((args.name, model), (None, ""))
        for pool, value in measured.iter_rows():
            rows.append({"model": model, "pool": pool, "ndcg@10": round(value, 4),
                         "published": published, "source": source,
                         "difference": None if published is None
                         else round(value - published, 4)})
    figures = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "src": str(args.src),
               "collection": args.name, "seconds": seconds, "rows": rows}
    (OUT / "beir_published.json").write_text(json.dumps(figures, indent=2) + "\n")
    lines = [f"# {args.name}: the pipeline against published nDCG@10, {figures['date']}", "",
             f"Machine: {figures['machine']}. Written by benchmarks/beir_published.py.", "",
             "| model | pool | nDCG@10 | published | difference | source |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        published = "" if r["published"] is None else f"{r['published']:.4f}"
        difference = "" if r["difference"] is None else f"{r['difference']:+.4f}"
        lines.append(f"| {r['model']} | {r['pool']} | {r['ndcg@10']:.4f} | {published} | "
                     f"{difference} | {r['source']} |")
    (OUT / "beir_published.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
