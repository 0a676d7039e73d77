"""The demo's judged sample (issue 60): the judging stage with the deterministic stand-in
assessor (standin:1, NOT a judgment of relevance: it exercises the section only) on the demo's
pools, and the report's "Beyond citations" figures: per pool size and model, infAP (and
infNDCG@10, infP@10) from the citations alone and with the judged sample; the relevant papers
the citations miss per query; per pair of models, whether the ranking is kept or reversed.

On an existing demo DATA (`--data .` after `make demo`: the pools of CORPUS with runs of every
model of --models), or, without --data, on a small synthetic corpus built in a scratch folder
through the API (nested pools, 3 draws of each size, like the demo's on a smaller scale). Each
model's infAP with the sample is checked against `pipeline.inferred` on the same files.

Writes benchmarks/results/judged_demo.md and judged_demo.json.
Usage: .venv/bin/python -m benchmarks.judged_demo [--data DIR] [--models bm25,random]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import polars as pl

import pipeline
from benchmarks.demo import OUT
from benchmarks.machine import machine
from pipeline.judging.assessor import StandinAssessor
from pipeline.judging.stage import sampling
from pipeline.layout import judgments_path, pool_names, run_paths, sample_path

log = logging.getLogger(__name__)

STANDIN = StandinAssessor(1)
SAMPLE = 20  # pairs per query, make's default
# The synthetic corpus without --data: papers, pool sizes, draws, queries per pool
PAPERS, SIZES, DRAWS, QUERIES = 12_000, (1000, 2000, 4000), 3, 30


def synthetic(root: Path, models: list[str]) -> tuple[pipeline.Data, str]:
    """A small synthetic corpus in `root`: nested pools of SIZES, DRAWS draws each, every
    model searched and scored (through the API, as make demo would)."""
    data = pipeline.Data(root)
    pipeline.build_corpus(data, "judged", synthetic=PAPERS, shards=2, seed=0)
    for size in SIZES:
        for repeat in range(DRAWS):
            pool = pipeline.build_pool(data, "judged", size=size, repeat=repeat,
                                       queries=QUERIES)
            for model in models:
                pipeline.search(data, "judged", pool, model, threads=2)
                pipeline.evaluate(data, "judged", pool, model)
    return data, "judged"


def checked_against_inferred(data: pipeline.Data, corpus: str, models: list[str],
                             means: pl.DataFrame, sample: int) -> float:
    """The largest difference (x100) between the report's infAP with the sample and
    `pipeline.inferred` on the same files: per dataset-level pool size and model, the mean of
    the per-query values over the size's draws (the report rounds to 0.1); `sample`: SAMPLE,
    which with the models names the sample's folder."""
    folder = sampling(models, sample).name
    per_size: dict[tuple[str, str], list[pl.DataFrame]] = {}
    for pool in pool_names(data.corpus(corpus)):
        path = sample_path(data.runs, corpus, pool, folder)
        if not path.exists() or not pool.startswith("all-"):
            continue
        judgments = pl.read_parquet(judgments_path(data.runs, corpus, pool, STANDIN.file_name,
                                                   folder))
        qrels = pl.read_parquet(data.corpus(corpus) / "pools" / pool / "qrels.parquet")
        for model in models:
            run = pl.read_parquet(run_paths(data.runs, corpus, pool, model).parquet)
            values = pipeline.inferred(qrels, run.select("query", "doc", "score"), judgments,
                                       path, per_query=True)
            per_size.setdefault((pool.split("-")[1], model), []).append(values)
    worst = 0.0
    for (size, model), parts in per_size.items():
        theirs = 100 * float(pl.concat(parts)["infAP"].mean())
        row = means.filter(pl.col("model") == model, pl.col("metric") == "infAP",
                           pl.col("pools") == f"all {size}")
        shown = float(row["with the sample"][0].split(" [")[0])
        worst = max(worst, abs(shown - theirs))
    return worst


def markdown_table(frame: pl.DataFrame) -> list[str]:
    rows = [" | ".join(frame.columns), " | ".join("---" for _ in frame.columns)]
    rows += [" | ".join(str(v) for v in row) for row in frame.iter_rows()]
    return [f"| {row} |" for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="an existing DATA holding CORPUS with runs "
                        "of every model (after make demo: .); default: a small synthetic "
                        "corpus in a scratch folder")
    parser.add_argument("--corpus", default="demo", help="the corpus under --data (demo)")
    parser.add_argument("--models", default="bm25,random", help="the models whose runs are "
                        "sampled, separated by commas (bm25,random; the demo's: "
                        "bm25,minilm,random)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="pairs per query (SAMPLE)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = args.models.replace(",", " ").split()
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        if args.data:
            data, corpus = pipeline.Data(args.data), args.corpus
            source = f"the demo DATA {args.data} (corpus {corpus})"
        else:
            data, corpus = synthetic(Path(scratch), models)
            source = (f"a synthetic corpus of {PAPERS:,} papers built through the API: "
                      f"dataset-level pools of {', '.join(f'{s:,}' for s in SIZES)} "
                      f"candidates, {DRAWS} draws each, {QUERIES} queries")
        built = time.perf_counter() - start
        start = time.perf_counter()
        counts = pipeline.judge(data, corpus, models, STANDIN.name, sample=args.sample)
        judged = time.perf_counter() - start
        report = pipeline.build_report(data, corpus)
        stem = STANDIN.file_name
        tables = {part: report.tables[f"judged-{stem}-{part}"]
                  for part in ("means", "missed", "pairs")}
        frames = {part: table.frame() for part, table in tables.items()}
        worst = checked_against_inferred(data, corpus, models, frames["means"], args.sample)
    pairs = frames["pairs"]
    kept = int(pairs["order"].str.starts_with("kept").sum())
    reversed_ = int(pairs["order"].str.starts_with("reversed").sum())
    drawn, graded = int(counts["drawn"].sum()), int(counts["graded"].sum())
    facts = {"machine": machine(), "source": source, "models": models, "assessor": STANDIN.name,
             "stand_in": True, "sample": args.sample, "pools": counts.height,
             "pairs_drawn": drawn, "pairs_graded": graded,
             "pairs_kept": kept, "pairs_reversed": reversed_,
             "inferred_recomputed_max_difference": worst,
             "seconds": {"corpus, pools, runs": round(built, 1), "judge": round(judged, 1)},
             "judged_per_pool": counts.to_dicts(),
             **{part: frame.to_dicts() for part, frame in frames.items()}}
    (OUT / "judged_demo.json").write_text(json.dumps(facts, indent=1) + "\n")
    lines = ["# The demo's judged sample (stand-in assessor)", "",
             f"Measured with `benchmarks/judged_demo.py` on {machine()}.", "",
             f"**Assessor: {STANDIN.name}, a deterministic stand-in, NOT a judgment of "
             "relevance**: its grade is the word overlap of the two papers, moved one grade for "
             "10% of the pairs (docs/judging.md). These figures show the judging stage and the "
             "report's Beyond citations section working end to end; they say nothing about "
             "whether real assessors would change the ranking.", "",
             f"Data: {source}. Models sampled: {', '.join(models)}; SAMPLE={args.sample} pairs "
             f"per query from their top 100 ranks. {counts.height} pools, {drawn:,} pairs drawn "
             f"over them, {graded:,} graded. Seconds: corpus, pools and runs "
             f"{built:.1f}; the judging stage {judged:.1f}. The report's infAP with the sample "
             "against `pipeline.inferred` on the same files (the mean of its per-query values "
             f"over each size's draws): at most {worst:.3f} apart (x100; the report rounds to "
             "0.1).", "",
             f"## {tables['means'].caption}", "", *markdown_table(frames["means"]), "",
             f"## {tables['missed'].caption}", "", *markdown_table(frames["missed"]), "",
             f"## {tables['pairs'].caption}", "", *markdown_table(frames["pairs"]), "",
             f"Ranking of the pairs with the sample: {kept} kept, {reversed_} reversed "
             f"(of {pairs.height} pair, metric and pool size rows)."]
    (OUT / "judged_demo.md").write_text("\n".join(lines) + "\n")
    log.info(f"wrote {OUT / 'judged_demo.md'} and judged_demo.json")


if __name__ == "__main__":
    main()
