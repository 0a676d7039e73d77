"""Score runs with ranx (SPEC.md §8): MAP, NDCG and R@30 over the top-500 list, per query.

ranx does not break score ties; trec_eval orders ties by docid descending. Runs are written in
trec_eval's order (pipeline.search.finalize_run), and ranx is given -rank as the score, so the
two tools rank identically and agree exactly. Queries with no relevant paper in the pool are
dropped and counted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import polars as pl
from ranx import Qrels, Run, evaluate

from pipeline.artifacts import (
    file_lock,
    fingerprints,
    manifest,
    outputs_intact,
    read_json,
    write_json,
    write_parquet,
)
from pipeline.errors import InputError
from pipeline.naming import parse_pool_name
from pipeline.pools import load_pool, made_from, output_shas, pool_manifest
from pipeline.search import load_run, run_paths

METRICS = ("map", "ndcg", "recall@30")
RESULTS_FILE = "results.parquet"


def _nested(df: pl.DataFrame, value: str) -> dict[str, dict[str, float]]:
    """{query: {doc: value}} with string ids, the input ranx expects."""
    grouped = df.group_by("query", maintain_order=True).agg("doc", value)
    return {str(q): dict(zip(map(str, docs), values, strict=True))
            for q, docs, values in grouped.iter_rows()}


def per_query_metrics(run: pl.DataFrame, qrels: pl.DataFrame, queries: pl.Series
                      ) -> tuple[pl.DataFrame, int]:
    """Metrics for each query of `queries` that has a relevant document; and how many had none.

    run: query, doc, rank (1 = best); qrels: query, doc, rel.
    """
    judged = qrels.filter(pl.col("rel") > 0, pl.col("query").is_in(queries.implode()))
    evaluated = judged["query"].unique().sort()
    dropped = queries.n_unique() - len(evaluated)
    if len(evaluated) == 0:
        return pl.DataFrame(schema={"query": pl.Int64, **dict.fromkeys(METRICS, pl.Float64)}), \
            dropped
    qrels_ranx = Qrels(_nested(judged, "rel"))
    kept = run.filter(pl.col("query").is_in(evaluated.implode()))
    run_ranx = Run(_nested(kept.with_columns(score=-pl.col("rank").cast(pl.Float64)), "score"))
    evaluate(qrels_ranx, run_ranx, list(METRICS), make_comparable=True)
    rows = {"query": evaluated.to_list()}
    for metric in METRICS:
        rows[metric] = [float(run_ranx.scores[metric].get(str(q), 0.0)) for q in rows["query"]]
    return pl.DataFrame(rows), dropped


def check_run_against_pool(run: pl.DataFrame, queries: pl.Series, candidates: pl.Series,
                           where: str) -> None:
    """Refuse a run that ranks papers outside the pool or answers other queries than the
    pool's: its numbers would be meaningless."""
    foreign_docs = run.filter(~pl.col("doc").is_in(candidates.implode()))["doc"].unique()
    if len(foreign_docs):
        raise InputError(f"{where} ranks {len(foreign_docs)} papers that are not candidates of "
                         f"the pool (e.g. {foreign_docs.sort()[0]}): it was made for another "
                         "pool; rerun the search stage")
    foreign_queries = run.filter(~pl.col("query").is_in(queries.implode()))["query"].unique()
    if len(foreign_queries):
        raise InputError(f"{where} answers {len(foreign_queries)} queries that the pool's "
                         f"qrels do not have (e.g. {foreign_queries.sort()[0]}): it was made for "
                         "another pool; rerun the search stage")


def eval_is_current(corpus_dir: Path, runs_root: Path, pool: str, model: str) -> bool:
    """True when the evaluation is intact and made from the pool's current files and the run
    as it is now (then `eval --stale-only` keeps it; touched if older than the run, for make)."""
    paths = run_paths(runs_root, corpus_dir.name, pool, model)
    pool_path = corpus_dir / "pools" / pool / "manifest.json"
    if not all(p.exists() for p in (paths["eval.json"], paths["manifest.json"], pool_path)):
        return False
    info = read_json(paths["eval.json"])
    run_outputs = read_json(paths["manifest.json"]).get("outputs", {})
    run_sha = run_outputs.get(paths["parquet"].name, {}).get("sha256")
    if (info.get("parameters") != {"pool": pool, "model": model, "metrics": list(METRICS)}
            or info.get("inputs", {}).get(paths["parquet"].name) != run_sha
            or not made_from(info.get("inputs", {}), read_json(pool_path))
            or not outputs_intact(paths["trec"].parent, info)):
        return False
    if paths["parquet"].exists() and (paths["eval.json"].stat().st_mtime
                                      < paths["parquet"].stat().st_mtime):
        for name in ("metrics.parquet", "eval.json"):
            os.utime(paths[name])
    return True


def eval_run(corpus_dir: Path, runs_root: Path, pool: str, model: str) -> dict:
    """Write `<model>.metrics.parquet` (per query) and `<model>.eval.json` (means, counts)."""
    start = time.perf_counter()
    paths = run_paths(runs_root, corpus_dir.name, pool, model)
    run = load_run(corpus_dir, runs_root, pool, model)
    queries, candidates, qrels = load_pool(corpus_dir, pool)
    check_run_against_pool(run, queries["corpusid"], candidates["corpusid"],
                           f"run {paths['parquet']}")
    in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
    metrics, dropped = per_query_metrics(run, in_pool, queries["corpusid"])
    means = {m: float(metrics[m].mean()) if metrics.height else None for m in METRICS}
    run_sha = read_json(paths["manifest.json"])["outputs"][paths["parquet"].name]["sha256"]
    inputs = {**output_shas(pool_manifest(corpus_dir, pool)), paths["parquet"].name: run_sha}
    with file_lock(paths["trec"].parent / f".{model}.lock"):
        paths["eval.json"].unlink(missing_ok=True)
        write_parquet(metrics.to_arrow(), paths["metrics.parquet"])
        info = manifest("eval", {"pool": pool, "model": model, "metrics": list(METRICS)},
                        means=means, counts={"queries": metrics.height,
                                             "dropped_no_relevant": dropped},
                        inputs=inputs,
                        outputs=fingerprints(paths["trec"].parent,
                                             [paths["metrics.parquet"].name]),
                        seconds=round(time.perf_counter() - start, 2))
        write_json(info, paths["eval.json"])
    return info


def collect_results(corpora_root: Path, runs_root: Path) -> pl.DataFrame:
    """Gather every evaluated run into `runs/results.parquet` (one row per run and metric).

    Evaluations of a pool that changed since (stale) are left out and counted, never mixed in.
    """
    rows, stale = [], []
    for path in sorted(runs_root.glob("*/*/*.eval.json")):
        info = read_json(path)
        corpus, pool, model = path.parts[-3], path.parts[-2], path.name[: -len(".eval.json")]
        pool_manifest = corpora_root / corpus / "pools" / pool / "manifest.json"
        if not pool_manifest.exists():
            continue  # the pool was deleted; its old runs are not results any more
        pool_info = read_json(pool_manifest)
        if not made_from(info.get("inputs", {}), pool_info):
            stale.append(f"{corpus}/{pool}/{model}")
            continue
        scope, size, repeat, seed, split = parse_pool_name(pool)
        for metric, value in info["means"].items():
            rows.append({
                "corpus": corpus, "pool": pool, "level": pool_info["level"], "scope": scope,
                "field": pool_info["parameters"]["field"], "size": size, "repeat": repeat,
                "seed": seed, "split": split,
                "candidates": pool_info["counts"]["candidates"], "model": model,
                "metric": metric, "value": value, "queries": info["counts"]["queries"],
                "dropped_queries": info["counts"]["dropped_no_relevant"],
            })
    results = pl.DataFrame(rows, schema={
        "corpus": pl.String, "pool": pl.String, "level": pl.String, "scope": pl.String,
        "field": pl.String, "size": pl.Int64, "repeat": pl.Int64, "seed": pl.Int64,
        "split": pl.String, "candidates": pl.Int64,
        "model": pl.String, "metric": pl.String, "value": pl.Float64, "queries": pl.Int64,
        "dropped_queries": pl.Int64})
    if stale:
        print(f"[collect] left out {len(stale)} stale evaluations (their pool changed; rerun "
              f"make eval): {', '.join(stale[:5])}", file=sys.stderr)
    write_parquet(results.to_arrow(), runs_root / RESULTS_FILE)
    write_json(manifest("collect", {}, counts={"rows": results.height, "stale_left_out":
                                               len(stale)}, stale=stale,
                        outputs=fingerprints(runs_root, [RESULTS_FILE])),
               runs_root / "results.manifest.json")
    return results
