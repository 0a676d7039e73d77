"""Score runs (docs/evaluation.md): MAP, NDCG and R@30 over the top-500 list by default, per query,
with ranx's kernels (`pipeline/metrics.py`); any metric set or list (METRICS).

ranx does not break score ties; trec_eval orders ties by docid descending. Runs are written in
trec_eval's order (pipeline.retrieval.runs.finalize_run), and ranx is given -rank as the score, so
the two tools rank identically and agree exactly. Queries with no relevant paper in the pool are
dropped and counted; a query the run does not answer scores 0 (trec_eval -c) and is counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import file_problem, fingerprints, stat_key
from pipeline.core.current import INPUTS, stale
from pipeline.core.errors import InputError
from pipeline.core.files import SELF_SHA, read_json, read_parquet, write_json, write_parquet
from pipeline.core.inputs import KINDS, Roots, changed, input_sha256, record
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.core.repair import PIPELINE, Repair, Where
from pipeline.core.timing import timed
from pipeline.glossary import DEFAULT_METRICS, parse_metrics
from pipeline.layout import (
    DATA_FOLDERS,
    EMBEDDINGS,
    MANIFEST,
    RESULTS_COLLECTED,
    RESULTS_FILE,
    RESULTS_MANIFEST,
    RUN_EVALUATION,
    Place,
    parse_pool_name,
    pool_dir,
    run_file_parts,
    run_files,
    run_name,
    run_paths,
    split_run_name,
)
from pipeline.models import get_model
from pipeline.pools.build import load_pool, pool_files, pool_manifest, validation_pools
from pipeline.retrieval.imported import imported_pools
from pipeline.retrieval.runs import (
    load_run,
    model_problem,
    recorded_run_problem,
    recorded_run_repair,
    run_cut,
    run_repair,
)
from pipeline.roots import data_roots, where

log = logging.getLogger(__name__)
POSITIVE_TYPE = "cited"  # the candidate type of a pool's positives (MDCR's "true")
# The negative types the official MDCR evaluator reads (github.com/zoranmedic/mdcr, its
# evaluate.py): metrics "as the official evaluator computes them" rank only these lists and the
# positives, whatever other types a benchmark built here holds (MDCR_MODELS=bm25,minilm).
OFFICIAL_TYPES = ("bm25", "graph", "most_cited", "random", "scincl", "specter")
ALL_LISTS, OFFICIAL_LISTS = "all", "official"  # `negatives` of every list, of the official ones
# A query of the pool that the run does not answer scores 0 (trec_eval -c), never skipped.
MISSING_QUERIES = "scored-0"


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


def pool_metrics(corpus_dir: Path, pool: str, metrics: str = "auto") -> tuple[str, ...]:
    """The metrics a pool is scored with: `metrics` (a set's name or metric names), or with
    "auto" the pool's own set (large-scale pools: MAP, NDCG, R@30; MDCR-style: MAP, NDCG, R@5)."""
    if metrics == "auto":
        metrics = pool_manifest(corpus_dir, pool).get("metrics", "large-scale")
    return parse_metrics(metrics)


def eval_problem(place: Place, pool: str, model: str,
                 metrics: Sequence[str] = DEFAULT_METRICS) -> str | None:
    """Why `eval` would score this run again (None when its evaluation is current): no
    evaluation, a damaged file, other parameters, a metric of `metrics` it has no scores of
    (an evaluation is current for the metrics it has: METRICS adds the others), or an input
    that changed since (the run, or anything the run was made from)."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    problem = stale(paths.evaluation, None, files=paths.trec.parent,
                    own=lambda info: _metrics_problem(info, pool, model, metrics),
                    roots=place.roots)
    return problem.reason if problem else None


def _metrics_problem(info: dict, pool: str, model: str, metrics: Sequence[str]) -> str | None:
    """What an evaluation lacks for `metrics`: other parameters than its metrics, or a metric
    it has no scores of; None when it has them all (and maybe others)."""
    made, wanted = info.get("parameters"), _parameters(pool, model, metrics)
    if not isinstance(made, dict):
        return "made with other parameters (none recorded)"
    if differ := sorted(name for name in {*made, *wanted} - {"metrics"}
                        if made.get(name) != wanted.get(name)):
        return f"made with other parameters ({', '.join(differ)})"
    if missing := [m for m in metrics if m not in made.get("metrics", [])]:
        return f"it has no scores of {', '.join(missing)} yet"
    return None


def eval_is_current(place: Place, pool: str, model: str,
                    metrics: Sequence[str] = DEFAULT_METRICS) -> bool:
    """True when the evaluation is intact, has every metric of `metrics` and was made from the
    run and its inputs as they are now (then `eval --stale-only` keeps it)."""
    return eval_problem(place, pool, model, metrics) is None


def _parameters(pool: str, model: str, metrics: Sequence[str]) -> dict:
    return {"pool": pool, "model": model, "metrics": list(metrics),
            "missing_queries": MISSING_QUERIES, "official_types": list(OFFICIAL_TYPES)}


def _scored_before(place: Place, pool: str, model: str) -> tuple[list[str], pl.DataFrame | None]:
    """The metrics the run's evaluation records, and its values where the evaluation is
    current for them (intact, the same parameters, the same inputs: then only the metrics it
    lacks are scored); ([], None) without a readable evaluation."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    try:
        made = read_json(paths.evaluation).get("parameters", {}) \
            if paths.evaluation.exists() else {}
    except InputError:
        return [], None
    metrics = [m for m in made.get("metrics", []) if isinstance(m, str)] \
        if isinstance(made, dict) else []
    if not metrics or eval_problem(place, pool, model, metrics) is not None:
        return metrics, None
    return metrics, read_parquet(paths.metrics)


def eval_run(place: Place, pool: str, model: str, metrics: Sequence[str] = DEFAULT_METRICS) -> dict:
    """Write `<model>.metrics.parquet` (per query) and `<model>.eval.json` (means, counts) with
    `metrics` added to those the run's evaluation has (METRICS adds rows: the others are kept;
    those it has, current, are not scored again). The evaluation records what its run was
    made from and the run itself, so it goes stale with any of them."""
    start = time.perf_counter()
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    before, values_before = _scored_before(place, pool, model)
    every = [*before, *(m for m in metrics if m not in before)]
    new = [m for m in every if values_before is None or m not in before]
    if not new:  # current for every metric asked, from a run that is whole (else refused)
        load_run(place, pool, model)
        return read_json(paths.evaluation)
    values, scored = score_run(place, pool, model, new)
    keys = ["query", "negatives"]
    if values_before is not None and values_before.select(keys).equals(values.select(keys)):
        values = pl.concat([values_before, values.drop(keys)], how="horizontal")
        old = read_json(paths.evaluation)
        scored["means"] = {**old["means"], **scored["means"]}
        scored["means_by_negatives"] = {
            kind: {**old.get("means_by_negatives", {}).get(kind, {}), **means}
            for kind, means in scored["means_by_negatives"].items()}
        if "means_over_queries" in scored:
            scored["means_over_queries"] = {**old.get("means_over_queries", {}),
                                            **scored["means_over_queries"]}
    elif values_before is not None:  # rows of another order: every metric scored again
        values, scored = score_run(place, pool, model, every)
    with file_lock(paths.trec.parent / model):  # the run
        paths.evaluation.unlink(missing_ok=True)
        write_parquet(values.to_arrow(), paths.metrics)
        info = manifest("eval", _parameters(pool, model, every), **scored,
                        outputs=fingerprints(paths.trec.parent,
                                             [paths.metrics.name]),
                        seconds=round(time.perf_counter() - start, 2))
        write_json(info, paths.evaluation)
    return info


def score_run(place: Place, pool: str, model: str, metrics: Sequence[str] = DEFAULT_METRICS
              ) -> tuple[pl.DataFrame, dict]:
    """A saved run scored on its pool, nothing written: (the values per query and candidate
    set, as `<model>.metrics.parquet` holds them; what `<model>.eval.json` records of them:
    means, means_by_negatives, counts, folds, inputs)."""
    from pipeline.metrics import per_query  # numba: loaded only to score

    paths = run_paths(place.runs_root, place.corpus, pool, model)
    run = load_run(place, pool, model)
    run_inputs = read_json(paths.manifest).get("inputs", {})
    roots = place.roots
    inputs = {**run_inputs, **record(roots, [paths.parquet, *pool_files(place.corpus_dir, pool)])}
    queries, candidates, qrels = load_pool(place.corpus_dir, pool)
    check_run_against_pool(run, queries["corpusid"], candidates["corpusid"],
                           f"run {paths.parquet}")
    in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
    values, dropped = per_query(run, in_pool, queries["corpusid"], metrics)
    means = {m: float(values[m].mean()) if values.height else None for m in metrics}
    folds = query_folds(queries)
    extra = {}
    if folds:  # cross-validation folds (CSFCube): the mean of the folds' means
        extra = {"folds": {f: sorted(q) for f, q in folds.items()},
                 "means_over_queries": means}
        means = fold_means(values, folds, metrics)
    missing = values.height - run.filter(pl.col("query").is_in(values["query"].implode()))[
        "query"].n_unique()
    counts = {"queries": values.height, "dropped_no_relevant": dropped,
              "missing_from_run_scored_0": missing}
    by_type = per_negative_type(run, in_pool, queries["corpusid"], candidates, metrics)
    type_means = {t: {m: float(g[m].mean()) for m in metrics}
                  for (t,), g in by_type.group_by("negatives", maintain_order=True)}
    values = pl.concat([values.with_columns(negatives=pl.lit(ALL_LISTS)).select(by_type.columns),
                        by_type], how="vertical_relaxed")
    return values, {"means": means, "means_by_negatives": type_means, "counts": counts,
                    **extra, "inputs": inputs}


FOLD = "fold"  # a pool's queries column naming each query's test fold (CSFCube)


def eval_pools(place: Place, model: str, pools: list[str], metrics: str = "auto",
               stale_only: bool = False, times: Path | None = None) -> None:
    """Score the runs of `model` (a model, `<model>~<variant>`, or a run imported under its
    name: scored on the pools it was imported into) on `pools`, each timed into `times` with
    its means; `stale_only`: evaluations current for their pool and run kept (`make eval`)."""
    imported = imported_pools(place.runs_root, place.corpus, model)
    if imported:  # a run made elsewhere (make import-run): scored where it was imported
        name, left_out = model, [p for p in pools if p not in imported]
        refuse_damaged_runs(place, left_out, name)
        log.info(f"[eval] {name} is a run imported into {len(imported)} pools: "
                 f"{len(left_out)} pools without it left out")
        pools = [p for p in pools if p in imported]
    else:
        base, variant = split_run_name(model)
        name = run_name(get_model(base).name, variant)
    wanted = {p: pool_metrics(place.corpus_dir, p, metrics) for p in pools}
    if stale_only:
        kept = [p for p in pools if eval_is_current(place, p, name, wanted[p])]
        pools = [p for p in pools if p not in kept]
        log.info(f"[eval] {name}: {len(kept)} current evaluations kept, {len(pools)} to score")
    for pool in pools:
        with timed("eval", times, model=name, pool=pool) as info:
            out = eval_run(place, pool, name, wanted[pool])
            info.update(done_means(out))


def done_means(evaluation: dict) -> dict[str, float]:
    """An evaluation's means as its done line and the stage-times log show them, named as what
    they are: on a pool of test folds (CSFCube) each is the mean of the folds' means, not the
    mean over queries that trec_eval's name would say (`2-fold-mean:map=0.4456`)."""
    folds = evaluation.get("folds")
    prefix = f"{len(folds)}-fold-mean:" if folds else ""
    return {f"{prefix}{k}": round(v, 4) for k, v in evaluation["means"].items() if v is not None}


def metrics_table(place: Place, runs: list[dict[str, str]], wanted: dict[str, list[str]], *,
                  saved: bool, means: bool, one: bool) -> pl.DataFrame:
    """The metrics `wanted` (pool -> names) of each model's runs (pool -> run name), read from
    its saved evaluation (`saved`) or scored in memory: a row per query and candidate set, or
    per run with `means`; a `pool` column unless `one` pool was named (the API's evaluate)."""
    frames = []
    for names in runs:
        for each, name in names.items():
            paths = run_paths(place.runs_root, place.corpus, each, name)
            values, info = (pl.read_parquet(paths.metrics), read_json(paths.evaluation)) \
                if saved else score_run(place, each, name, wanted[each])
            keys = {"model": name} if one else {"model": name, "pool": each}
            if means:
                frames.append(pl.DataFrame(
                    [{**keys, **{m: info["means"][m] for m in wanted[each]}}],
                    schema={**dict.fromkeys(keys, pl.String),
                            **dict.fromkeys(wanted[each], pl.Float64)}))
            else:  # the metrics asked, of those saved
                frames.append(values.select(
                    *(pl.lit(value).alias(key) for key, value in keys.items()),
                    pl.exclude(set(values.columns) - {"query", "negatives", *wanted[each]})))
    if not frames:  # an imported run in none of the pools
        return pl.DataFrame(schema={"model": pl.String, "pool": pl.String})
    return pl.concat(frames, how="vertical_relaxed" if one else "diagonal_relaxed")


def refuse_damaged_runs(place: Place, pools: list[str], name: str) -> None:
    """A pool whose run `name` has a manifest that cannot be read is not a pool without the
    run: refused, with the command that makes the run whole again (never left out unsaid)."""
    for pool in pools:
        manifest = run_paths(place.runs_root, place.corpus, pool, name).manifest
        if manifest.exists():
            read_json(manifest, recorded_run_repair(place.runs_root, place.corpus, pool, name,
                                                    place.index_root))


def query_folds(queries: pl.DataFrame) -> dict[str, list]:
    """{fold: its query ids} for a pool whose queries name a test fold (column `fold`: CSFCube's
    two-fold cross-validation); {} for every other pool."""
    if FOLD not in queries.columns:
        return {}
    return {fold: group["corpusid"].to_list()
            for (fold,), group in queries.sort(FOLD, "corpusid").group_by(
                FOLD, maintain_order=True)}


def fold_means(values: pl.DataFrame, folds: dict[str, list], metrics: Sequence[str]
               ) -> dict[str, float | None]:
    """Each metric as CSFCube's evaluation averages a split over its folds: the mean over each
    fold's queries (those of `values`, one row per query), then the mean of the folds' means,
    so folds of 8 and 9 queries weigh the same. None for a metric no fold has a value of."""
    out: dict[str, float | None] = {}
    for metric in metrics:
        per_fold = [values.filter(pl.col("query").is_in(pl.Series(ids, dtype=values["query"]
                                                                  .dtype).implode()))[metric]
                    for ids in folds.values()]
        fold_values = [float(v.mean()) for v in per_fold if len(v) and v.mean() is not None]
        out[metric] = sum(fold_values) / len(fold_values) if fold_values else None
    return out


def per_negative_type(run: pl.DataFrame, qrels: pl.DataFrame, queries: pl.Series,
                      candidates: pl.DataFrame, metrics: Sequence[str]) -> pl.DataFrame:
    """For an MDCR-style pool (candidates typed per query), each query's metrics over some of
    its lists, column `negatives` naming which: "official", the positives and the negative
    types the official evaluator reads (OFFICIAL_TYPES; MDCR Table 3), and each negative type
    alone with the positives (MDCR Table 4). Empty for other pools. The run's order is kept:
    dropping the other candidates only closes the gaps between ranks."""
    from pipeline.metrics import per_query  # numba: loaded only to score

    columns = {"query": run["query"].dtype, "negatives": pl.String,
               **{m: pl.Float64 for m in metrics}}
    if (not {"query", "type"} <= set(candidates.columns)
            or not (candidates["type"] == POSITIVE_TYPE).any()):
        return pl.DataFrame(schema=columns)
    kinds = sorted(candidates.filter(pl.col("type") != POSITIVE_TYPE)["type"].unique())
    frames = []
    for name, types in [(OFFICIAL_LISTS, OFFICIAL_TYPES), *((k, (k,)) for k in kinds)]:
        listed = candidates.filter(pl.col("type").is_in([*types, POSITIVE_TYPE])).select(
            "query", doc="corpusid")
        values, _ = per_query(run.join(listed, on=["query", "doc"], how="semi"), qrels,
                              queries, metrics)
        frames.append(values.with_columns(negatives=pl.lit(name)))
    return pl.concat([pl.DataFrame(schema=columns), *frames], how="diagonal_relaxed").select(
        list(columns))


def collect_results(corpora_root: Path, index_root: Path, runs_root: Path) -> pl.DataFrame:
    """Gather every evaluated run into `runs/results.parquet`: one tidy row per run, query and
    metric (corpus, pool, level, scope, field, size, repeat, seed, split, candidates, model,
    depth, query, negatives, metric, value), query ids as strings so that every corpus fits one
    column, rows sorted by RESULTS_ORDER. `depth`, `shortest` and `complete` are where the run
    cut its lists (cut_columns), so that no table puts runs of two depths under one label.
    `negatives` is "all"; for MDCR-style pools also "official" (the lists the official
    evaluator reads) and each negative type (MDCR Table 4).

    An evaluation that is not current (`not_current`: what verify calls STALE of it, of its
    pool or of the run it scored, the model's weights included) is left out, never mixed in:
    each is logged and recorded in the manifest with why and the command that makes it
    current (`left_out`), which the report shows; so is a run of no evaluation (NOT_SCORED:
    an eval killed before it wrote one, a run only searched or imported), after them. A
    damaged evaluation is an error naming it.

    Gathered from what changed (`Collected`): an evaluation gathered last time whose files
    (`decided_by`) all have the stat key they had then, whose BM25 validation pools are the
    same and whose stores' models did not change keeps its rows of the table written last,
    unread and unchecked; every other one is checked and read whole. The table is the one a
    collect of everything gives, byte for byte (tests/evaluation/test_collect.py).
    """
    frames, left_out, inputs, kept = [], [], {}, []
    roots = Roots(corpora_root, index_root, runs_root)
    shown = where(corpora_root, index_root, runs_root)
    record_path = runs_root / RESULTS_MANIFEST
    parameters = {"missing_queries": MISSING_QUERIES, "columns": list(RESULTS_SCHEMA)}
    before = Collected.load(roots, parameters)
    after = Collected(roots, parameters, before)
    for corpus, pool, model in evaluations(runs_root):
        key = f"{corpus}/{pool}/{model}"
        place = Place(corpora_root / corpus, index_root, runs_root)
        if before is not None and before.unchanged(key, place, pool):
            kept.append(key)
            after.keep(before, key)
            continue
        pool_manifest = pool_dir(place.corpus_dir, pool) / MANIFEST
        if not pool_manifest.exists():
            continue  # the pool was deleted; its old runs are not results any more
        watched = decided_by(place, pool, model)  # their stat keys taken before the check
        found = not_current(place, pool, model)
        if found is not None:
            why, repair = found
            left_out.append({"run": key, "why": why, "repair": repair.command(shown)})
            continue
        pool_info = read_json(pool_manifest)
        scope, size, repeat, seed, split, exclusion = parse_pool_name(pool)
        paths = run_paths(runs_root, corpus, pool, model)
        values = read_parquet(paths.metrics)
        # the run: among the evaluation's inputs; its manifest: where it cut its lists
        used = [paths.evaluation, paths.metrics, pool_manifest,
                *([paths.manifest] if paths.manifest.is_file() else [])]
        inputs.update(record(roots, used))
        if watched is not None:
            after.add(key, watched, [roots.label(p) for p in used])
        if "negatives" not in values.columns:  # written before per-type scores existed
            values = values.with_columns(negatives=pl.lit("all"))
        frames.append(
            values.with_columns(pl.col("query").cast(pl.String))
            .unpivot(index=["query", "negatives"], variable_name="metric", value_name="value")
            .select(corpus=pl.lit(corpus), pool=pl.lit(pool), level=pl.lit(pool_info["level"]),
                    scope=pl.lit(scope), field=pl.lit(pool_info["parameters"]["field"],
                                                      pl.String),
                    size=pl.lit(size, pl.Int64), repeat=pl.lit(repeat, pl.Int64),
                    seed=pl.lit(seed, pl.Int64), exclusion=pl.lit(exclusion), split=pl.lit(split),
                    candidates=pl.lit(pool_info["counts"]["candidates"], pl.Int64),
                    model=pl.lit(model), **cut_columns(paths.manifest),
                    query="query", negatives="negatives", metric="metric",
                    value=pl.col("value").cast(pl.Float64)))
    unscored = unscored_runs(corpora_root, runs_root, shown)
    left_out += unscored
    for item in left_out:
        why = item["why"] if item["why"] == NOT_SCORED else f"not current ({item['why']})"
        log.warning(f"[collect] left out {item['run']}: {why}; repair: {item['repair']}")
    written = runs_root / RESULTS_FILE
    if before is not None and not frames and set(kept) == set(before.entries):
        results = read_parquet(written)  # every row as gathered last time (intact: load)
        if left_out == before.left_out:  # and the same left out: the manifest holds
            return results
    else:
        # one row order whatever the order of the evaluations' files and of their rows
        old = before.rows(written, kept) if before is not None and kept else None
        results = pl.concat([pl.DataFrame(schema=RESULTS_SCHEMA),
                             *([old] if old is not None else []), *frames]
                            ).sort(RESULTS_ORDER).rechunk()
    for key in kept:
        inputs.update(before.inputs(key))
    # the same evaluations as last time, the same rows and an intact file: nothing to write
    if stale(record_path, parameters, files=runs_root, inputs=inputs,
             own=lambda info: None if info.get("left_out") == left_out else "left out others"
             ) is None and (not frames or results.equals(read_parquet(written))):
        if before is None or after.differs(before):
            after.save()
        return results
    write_parquet(results.to_arrow(), written)
    write_json(manifest("collect", parameters,
                        counts={"rows": results.height, "runs": len(kept) + len(frames),
                                "stale_left_out": len(left_out) - len(unscored),
                                **({"unscored": len(unscored)} if unscored else {})},
                        left_out=left_out,
                        inputs=dict(sorted(inputs.items())),
                        outputs=fingerprints(runs_root, [RESULTS_FILE])),
               record_path)
    after.save()
    return results


# why collect leaves out a run of no evaluation (the report's left-out table says it as such)
NOT_SCORED = ("not scored: the run has no evaluation (its make eval stopped before writing "
              "one, or it was only searched or imported)")


def unscored_runs(corpora_root: Path, runs_root: Path, shown: Where) -> list[dict[str, str]]:
    """A left-out entry (run, why: NOT_SCORED, repair) for each complete run (its manifest
    written last) of an existing pool that has no evaluation, in run_files' order: a number
    never made is said, never silently missing from the results."""
    found = []
    for path in run_files(runs_root, MANIFEST):
        corpus, pool, model, _ = run_file_parts(path)
        if (run_paths(runs_root, corpus, pool, model).evaluation.exists()
                or not (pool_dir(corpora_root / corpus, pool) / MANIFEST).is_file()):
            continue
        repair = run_repair(corpus, model, runs_root, pool)
        found.append({"run": f"{corpus}/{pool}/{model}", "why": NOT_SCORED,
                      "repair": repair.command(shown)})
    return found


def evaluations(runs_root: Path) -> list[tuple[str, str, str]]:
    """(corpus, pool, model) of every evaluation under the runs root
    (`<corpus>/<pool>/<model>.eval.json`), in the order of their paths (run_files')."""
    suffix, found = f".{RUN_EVALUATION}", []  # no other run suffix ends with this one
    for corpus, top in _folders(str(runs_root)):
        for pool, middle in _folders(top):
            found += [(corpus, pool, name) for name in _names(middle) if name.endswith(suffix)]
    return [(corpus, pool, name[: -len(suffix)]) for corpus, pool, name in sorted(found)]


def _names(path: str) -> list[str]:
    """The names in folder `path`; none when it is gone (or no folder)."""
    try:
        return os.listdir(path)
    except (NotADirectoryError, FileNotFoundError):
        return []


def _folders(path: str) -> list[tuple[str, str]]:
    """(name, path) of the folders in `path` (links to folders too, as glob follows them);
    none when it is not a folder."""
    try:
        with os.scandir(path) as entries:
            return [(entry.name, entry.path) for entry in entries if entry.is_dir()]
    except (NotADirectoryError, FileNotFoundError):
        return []


def decided_by(place: Place, pool: str, model: str) -> tuple[list[str], list[str] | None,
                                                           list[str]] | None:
    """What decides whether the evaluation of `model`'s run in `pool` is current (not_current)
    and what its rows are, as its manifests record it now: (the labels of the files read:
    the evaluation, its outputs and inputs, the pool's manifest and inputs, the run's manifest,
    outputs and inputs; the run's BM25 validation pools when its k1 and b depend on them, else
    None; one input label of each store it searched, whose model is checked apart). None when
    a manifest cannot be read (then the evaluation is never kept unchecked)."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    roots, own = place.roots, Roots(place.corpus_dir.parent, place.index_root, place.runs_root)
    pool_manifest = pool_dir(place.corpus_dir, pool) / MANIFEST
    try:
        evaluation, run = read_json(paths.evaluation), read_json(paths.manifest)
        pool_info = read_json(pool_manifest)
        files = [paths.evaluation, pool_manifest, paths.manifest,
                 *(paths.evaluation.parent / name for name in evaluation.get("outputs", {})),
                 *(paths.manifest.parent / name for name in run.get("outputs", {}))]
        for info in (evaluation, pool_info, run):
            files += [roots.path(label) for label in info.get("inputs", {})]
        if any(path is None for path in files):
            return None
        labels = sorted({own.label(path) for path in files})
    except (InputError, ValueError, AttributeError, TypeError):
        return None
    details = run.get("details", {})
    tuned = validation_pools(place.corpus_dir, pool) if "k1" in details else None
    stores = {label.split("/")[3]: label for label in run.get("inputs", {})
              if label.startswith(f"indexes/@/{EMBEDDINGS}/")}
    return labels, tuned, sorted(stores.values())


class Collected:
    """collect's record of the current evaluations it gathered (runs/.results.collected.json):
    for each, the files that decided it (`decided_by`) with their stat keys
    (checksums.stat_key: size, mtime, ctime, inode, the rule the sha256 cache trusts), its
    validation pools, its stores and the labels of its files among the manifest's inputs; and
    what was left out. It is trusted only beside the results table and manifest it was
    written with (their checksums, and their stat keys then), for the same data roots and
    parameters, and whole (its first line is the sha256 of the rest): else everything is
    checked. A cache: removing it costs one full collect."""

    def __init__(self, roots: Roots, parameters: dict, before: Collected | None = None) -> None:
        self.roots = {kind: os.path.abspath(path) for kind in KINDS
                      if (path := getattr(roots, kind)) is not None}
        self.parameters = parameters
        # the files' labels and stat keys (shared with `before`: only ever appended to)
        self.labels: list[str] = before.labels if before else []
        self.stats: list[list[int] | None] = before.stats if before else []
        self.index: dict[str, int] = before.index if before else {}
        self.entries: dict[str, list] = {}  # key -> [file indexes, tuned, stores, used indexes]
        self.left_out: list[dict] | None = None  # what the manifest records as left out
        self._info: dict | None = None  # the manifest, read when its inputs are wanted
        self._now: dict[int, list[int] | None] = {}
        self._tuned: dict[tuple[str, str], list[str]] = {}
        self._models: dict[tuple[str, tuple[str, ...]], bool] = {}

    def _path(self, label: str) -> str:
        kind, _, rest = label.partition("/")
        return f"{self.roots[kind]}/{rest}"

    def add(self, key: str, watched: tuple[list[str], list[str] | None, list[str]],
            used: list[str]) -> None:
        """Record a current evaluation just checked: the stat keys of the files that decided it,
        as `decided_by` took them before the check."""
        labels, tuned, stores = watched
        files = [self._add(label, stat_key(self._path(label))) for label in labels]
        if any(self.stats[i] is None for i in files):
            return  # a file gone while it was checked: checked again next time
        self.entries[key] = [files, tuned, stores,
                             [self._add(label, stat_key(self._path(label))) for label in used]]

    def _add(self, label: str, stat: list[int] | None) -> int:
        """The index of `label` with `stat` as its key now (a new index when a kept one has
        another: the tables are shared with the record before)."""
        i = self.index.get(label)
        if i is not None and self.stats[i] == stat:
            return i
        self.index[label] = len(self.labels)
        self.labels.append(label)
        self.stats.append(stat)
        return self.index[label]

    def keep(self, before: Collected, key: str) -> None:
        """Carry `before`'s record of an evaluation kept unchanged."""
        self.entries[key] = before.entries[key]

    def differs(self, other: Collected) -> bool:
        return self._content() != other._content()

    def _content(self) -> dict:
        return {key: [[(self.labels[i], self.stats[i]) for i in files], tuned, stores,
                      [self.labels[i] for i in used]]
                for key, (files, tuned, stores, used) in self.entries.items()}

    def unchanged(self, key: str, place: Place, pool: str) -> bool:
        """Whether evaluation `key` is kept unchecked: gathered last time, every file that
        decided it as it was then, the same validation pools, no store whose model changed."""
        entry = self.entries.get(key)
        if entry is None:
            return False
        files, tuned, stores, _ = entry
        now, stats = self._now, self.stats
        for i in files:
            if i not in now:
                now[i] = stat_key(self._path(self.labels[i]))
            if now[i] != stats[i]:
                return False
        if tuned is not None:
            if (place.corpus, pool) not in self._tuned:
                self._tuned[place.corpus, pool] = validation_pools(place.corpus_dir, pool)
            if self._tuned[place.corpus, pool] != tuned:
                return False
        return not stores or self._models_same(place, stores)

    def inputs(self, key: str) -> dict[str, str]:
        """The manifest's inputs of a kept evaluation (label -> sha256, as last written; hashed
        again, by the stat cache, where the manifest lacks one)."""
        if self._info is None:
            try:
                self._info = read_json(Path(self.roots["runs"]) / RESULTS_MANIFEST)
            except InputError:  # gone or damaged since it was loaded: hashed again
                self._info = {}
        recorded = self._info.get("inputs", {})
        return {(label := self.labels[i]): recorded.get(label) or input_sha256(
            Path(self._path(label))) for i in self.entries[key][3]}

    def _models_same(self, place: Place, stores: list[str]) -> bool:
        """Whether no store these labels name was embedded by a model that changed since
        (runs.model_problem, once per corpus and stores in a collect)."""
        memo = (place.corpus, tuple(stores))
        if memo not in self._models:
            self._models[memo] = model_problem({"inputs": dict.fromkeys(stores, "")},
                                               place.index_root, place.corpus) is None
        return self._models[memo]

    def rows(self, written: Path, kept: list[str]) -> pl.DataFrame:
        """The rows of the kept evaluations in the table written last."""
        keys = pl.DataFrame([key.split("/", 2) for key in kept], orient="row",
                            schema={"corpus": pl.String, "pool": pl.String, "model": pl.String})
        return read_parquet(written).join(keys, on=["corpus", "pool", "model"], how="semi")

    @classmethod
    def load(cls, roots: Roots, parameters: dict) -> Collected | None:
        """The record written with the results table and manifest that are there now, whole,
        for these roots and parameters; None when there is none such. The manifest is read
        only where its stat key or the table's differs from the record's."""
        runs = roots.runs
        try:
            text = (runs / RESULTS_COLLECTED).read_text()
            head, _, body = text.partition("\n")
            if hashlib.sha256(body.encode()).hexdigest() != head:
                return None
            found = json.loads(body)
            record = cls(roots, parameters)
            if found["roots"] != record.roots or found["parameters"] != parameters:
                return None
            written = [stat_key(runs / RESULTS_MANIFEST), stat_key(runs / RESULTS_FILE)]
            if None in written:
                return None
            if written != found["written"]:  # rewritten since, or touched: by its checksums
                info = read_json(runs / RESULTS_MANIFEST)
                if (found["manifest"] != info.get(SELF_SHA)
                        or found["results"] != info["outputs"][RESULTS_FILE]["sha256"]
                        or file_problem(runs / RESULTS_FILE, info["outputs"][RESULTS_FILE],
                                        deep=False)):
                    return None
                record._info = info
            record.labels, record.stats = found["labels"], found["stats"]
            record.index = {label: i for i, label in enumerate(record.labels)}
            record.entries, record.left_out = found["entries"], found["left_out"]
            return record
        except (OSError, ValueError, KeyError, TypeError, InputError):
            return None

    def save(self, info: dict | None = None) -> None:
        """Write the record beside the results manifest (`info`, as just written; else the one
        there, read), atomically."""
        runs = Path(self.roots["runs"])
        if info is None:
            info = read_json(runs / RESULTS_MANIFEST)
        used = sorted({i for files, _, _, own in self.entries.values() for i in (*files, *own)})
        renumber = {old: new for new, old in enumerate(used)}
        body = json.dumps({
            "roots": self.roots, "parameters": self.parameters,
            "manifest": info.get(SELF_SHA),
            "results": info.get("outputs", {}).get(RESULTS_FILE, {}).get("sha256"),
            "written": [stat_key(runs / RESULTS_MANIFEST), stat_key(runs / RESULTS_FILE)],
            "left_out": info.get("left_out"),
            "labels": [self.labels[i] for i in used], "stats": [self.stats[i] for i in used],
            "entries": {key: [[renumber[i] for i in files], tuned, stores,
                              [renumber[i] for i in own]]
                        for key, (files, tuned, stores, own) in self.entries.items()}},
            separators=(",", ":"))
        try:
            with atomic_path(runs / RESULTS_COLLECTED) as tmp:
                tmp.write_text(f"{hashlib.sha256(body.encode()).hexdigest()}\n{body}")
        except (OSError, InputError) as exc:  # a cache: the next collect checks everything
            log.info(f"[collect] its record of what it gathered was not written ({exc})")


def not_current(place: Place, pool: str, model: str) -> tuple[str, Repair] | None:
    """Why the evaluation of `model`'s run in `pool` is not current, and the command that makes
    it current (None when it is): what verify calls it, in the order a user repairs it: the
    evaluation damaged or made from other inputs, the pool's own inputs changed since, then the
    run it scored (runs.recorded_run_problem: its files, its inputs, BM25's validation pools,
    the model of the store it searched). Only the damaged evaluation is an error. collect
    keeps an evaluation unchecked while what decided it is unchanged: a check added here reads
    only files `decided_by` names (or is added to `Collected.unchanged`)."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    repair = run_repair(place.corpus, model, place.runs_root, pool)
    problem = stale(paths.evaluation, None, files=paths.evaluation.parent, roots=place.roots)
    if problem is not None and problem.check != INPUTS:
        raise InputError(problem.reason, repair)  # a damaged score is never reported
    if problem is not None:
        return problem.reason, repair
    pool_info = read_json(pool_dir(place.corpus_dir, pool) / MANIFEST)
    if reasons := changed(place.roots, pool_info.get("inputs", {})):
        return reasons[0], repair
    return recorded_run_problem(place, pool, model)


def cut_columns(manifest_path: Path) -> dict[str, pl.Expr]:
    """The results' columns of a run's cut (runs.RunCut, from its manifest): `depth` (its K,
    an imported run's longest list), `shortest` (an imported run's shortest list; null for a
    searched run) and `complete` (it ranks every candidate of its pool: comparable with any
    depth at or above the pool's size)."""
    cut = run_cut(read_json(manifest_path)) if manifest_path.is_file() else None
    return {"depth": pl.lit(cut and cut.depth, pl.Int64),
            "shortest": pl.lit(cut and cut.shortest, pl.Int64),
            "complete": pl.lit(bool(cut and cut.complete), pl.Boolean)}


RESULTS_REPAIR = Repair("collect", program=PIPELINE)  # gathers runs/results.parquet again


def _results_error(message: str, path: Path, roots: Roots | None) -> InputError:
    """A refusal of the collected results at `path`, its repair (RESULTS_REPAIR) naming the
    data they lie in: `roots`, else the data folder of the runs folder holding them."""
    error = InputError(message, RESULTS_REPAIR)
    if roots is not None:
        error.where = where(roots.corpora, roots.indexes, roots.runs)
    elif path.parent.name == DATA_FOLDERS["runs"]:
        error.where = where(*data_roots(path.parent.parent).values())
    else:
        error.where = where(None, None, path.parent)
    return error


def read_results(path: Path, roots: Roots | None = None) -> pl.DataFrame:
    """The rows of a results table, checked first as every stage checks its inputs. A
    `results.parquet` beside a results manifest is collect's: it must match the fingerprint
    the manifest records and, with `roots`, have been collected from the evaluations as they
    are now (`core.current.stale`); else an InputError naming it and the command that collects
    it again (RESULTS_REPAIR, on the data they lie in). Any other file (no manifest beside
    it) is the user's own table: read as it is, with a warning that nothing vouches for it."""
    record = path.parent / RESULTS_MANIFEST
    if path.name != RESULTS_FILE or not record.exists():
        log.warning(f"{path}: no {RESULTS_MANIFEST} beside it vouches for it (`make eval` "
                    "or `make report` did not collect it): read as your own results, "
                    "unverified")
        return read_parquet(path)
    problem = stale(record, None, files=path.parent, roots=roots)
    if problem is not None:
        why = (f"collected from evaluations that changed since ({problem.reason})"
               if problem.check == INPUTS else
               f"it does not match its manifest ({problem.reason})")
        raise _results_error(f"results {path}: {why}", path, roots)
    known = roots is not None and roots.indexes is not None and roots.corpora is not None
    if known and (why := _collected_not_current(read_json(record), roots)):
        raise _results_error(f"results {path}: collected from an evaluation not current now "
                             f"({why})", path, roots)
    return read_parquet(path)


def _collected_not_current(info: dict, roots: Roots) -> str | None:
    """Why a run whose evaluation a results table was collected from is not current now,
    though none of the files collect recorded changed (runs.recorded_run_problem: an input of
    the run, BM25's validation pools, the model of the store it searched), in words; None when
    every one is current (a run without a manifest: its evaluation's own inputs vouch)."""
    suffix = f".{RUN_EVALUATION}"
    for label in sorted(info.get("inputs", {})):
        kind, corpus, pool, name = (label.split("/") + ["", "", ""])[:4]
        if kind != "runs" or not name.endswith(suffix):
            continue
        model = name.removesuffix(suffix)
        place = Place(roots.corpora / corpus, roots.indexes, roots.runs)
        if not run_paths(roots.runs, corpus, pool, model).manifest.exists():
            continue
        if found := recorded_run_problem(place, pool, model):
            return f"{corpus}/{pool}/{model}: {found[0]}"
    return None


RESULTS_SCHEMA = {
    "corpus": pl.String, "pool": pl.String, "level": pl.String, "scope": pl.String,
    "field": pl.String, "size": pl.Int64, "repeat": pl.Int64, "seed": pl.Int64,
    "exclusion": pl.String, "split": pl.String, "candidates": pl.Int64, "model": pl.String,
    "depth": pl.Int64, "shortest": pl.Int64, "complete": pl.Boolean, "query": pl.String,
    "negatives": pl.String, "metric": pl.String, "value": pl.Float64}
RESULTS_ORDER = ["corpus", "pool", "model", "negatives", "metric", "query"]  # a row's key
