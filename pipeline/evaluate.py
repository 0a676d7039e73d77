"""Score runs with ranx (SPEC.md §8): MAP, NDCG and R@30 over the top-500 list, per query.

ranx does not break score ties; trec_eval orders ties by docid descending. Runs are written in
trec_eval's order (pipeline.search.finalize_run), and ranx is given -rank as the score, so the
two tools rank identically and agree exactly. Queries with no relevant paper in the pool are
dropped and counted.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
from ranx import Qrels, Run, evaluate

from pipeline.artifacts import manifest, read_json, write_json, write_parquet
from pipeline.errors import InputError
from pipeline.naming import parse_pool_name
from pipeline.pools import load_pool
from pipeline.search import run_paths

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


def eval_run(corpus_dir: Path, runs_root: Path, pool: str, model: str) -> dict:
    """Write `<model>.metrics.parquet` (per query) and `<model>.eval.json` (means, counts)."""
    start = time.perf_counter()
    paths = run_paths(runs_root, corpus_dir.name, pool, model)
    if not paths["parquet"].exists():
        raise InputError(f"no run {paths['parquet']}: run the search stage for "
                         f"MODEL={model} on pool {pool} first")
    queries, candidates, qrels = load_pool(corpus_dir, pool)
    in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
    metrics, dropped = per_query_metrics(pl.read_parquet(paths["parquet"]), in_pool,
                                         queries["corpusid"])
    write_parquet(metrics.to_arrow(), paths["metrics.parquet"])
    means = {m: float(metrics[m].mean()) if metrics.height else None for m in METRICS}
    info = manifest("eval", {"pool": pool, "model": model, "metrics": list(METRICS)},
                    means=means, counts={"queries": metrics.height,
                                         "dropped_no_relevant": dropped},
                    seconds=round(time.perf_counter() - start, 2))
    write_json(info, paths["eval.json"])
    return info


def collect_results(corpora_root: Path, runs_root: Path) -> pl.DataFrame:
    """Gather every evaluated run into `runs/results.parquet` (one row per run and metric)."""
    rows = []
    for path in sorted(runs_root.glob("*/*/*.eval.json")):
        info = read_json(path)
        corpus, pool, model = path.parts[-3], path.parts[-2], path.name[: -len(".eval.json")]
        pool_manifest = corpora_root / corpus / "pools" / pool / "manifest.json"
        if not pool_manifest.exists():
            continue  # the pool was deleted; its old runs are not results any more
        pool_info = read_json(pool_manifest)
        scope, size, repeat = parse_pool_name(pool)
        for metric, value in info["means"].items():
            rows.append({
                "corpus": corpus, "pool": pool, "level": pool_info["level"], "scope": scope,
                "field": pool_info["parameters"]["field"], "size": size, "repeat": repeat,
                "candidates": pool_info["counts"]["candidates"], "model": model,
                "metric": metric, "value": value, "queries": info["counts"]["queries"],
                "dropped_queries": info["counts"]["dropped_no_relevant"],
            })
    results = pl.DataFrame(rows, schema={
        "corpus": pl.String, "pool": pl.String, "level": pl.String, "scope": pl.String,
        "field": pl.String, "size": pl.Int64, "repeat": pl.Int64, "candidates": pl.Int64,
        "model": pl.String, "metric": pl.String, "value": pl.Float64, "queries": pl.Int64,
        "dropped_queries": pl.Int64})
    write_parquet(results.to_arrow(), runs_root / RESULTS_FILE)
    return results
