"""The scoring commands: eval, collect and report."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import command, place_of, pool_arg, pools_of, times_log
from pipeline.layout import (
    RESULTS_FILE,
    Place,
)
from pipeline.models import get_model

log = logging.getLogger(__name__)


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm", help="a model, or <model>~<variant> for the "
                   "runs of perturbed queries")
    p.add_argument("--stale-only", action="store_true",
                   help="keep evaluations made from the current pool and run")
    p.add_argument("--collect", action="store_true",
                   help="then gather every evaluation into runs/results.parquet (as collect)")


@command("eval", "score runs with ranx's kernels, per query (default MAP, NDCG, R@30)",
         _eval_arguments, pool_arg, writes=("runs", "times"))
def cmd_eval(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.evaluation.evaluate import eval_is_current, eval_run, pool_metrics
    from pipeline.layout import run_name, split_run_name
    from pipeline.retrieval.imported import imported_pools

    place = place_of(args)
    pools = pools_of(args)
    imported = imported_pools(place.runs_root, place.corpus, args.model)
    if imported:  # a run made elsewhere (make import-run): scored where it was imported
        name = args.model
        refuse_damaged_runs(place, [p for p in pools if p not in imported], name)
        log.info(f"[eval] {name} is a run imported into {len(imported)} pools: "
                 f"{len([p for p in pools if p not in imported])} pools without it left out")
        pools = [p for p in pools if p in imported]
    else:
        model, variant = split_run_name(args.model)
        name = run_name(get_model(model).name, variant)
    metrics = {p: pool_metrics(place.corpus_dir, p, args.metrics) for p in pools}
    if args.stale_only:
        kept = [p for p in pools
                if eval_is_current(place, p, name, metrics[p])]
        pools = [p for p in pools if p not in kept]
        log.info(f"[eval] {name}: {len(kept)} current evaluations kept, {len(pools)} to "
                 "score")
    for pool in pools:
        with timed("eval", times_log(args), model=name, pool=pool) as info:
            out = eval_run(place, pool, name, metrics[pool])
            info.update({k: round(v, 4) for k, v in out["means"].items() if v is not None})
    if args.collect:
        cmd_collect(args)


def refuse_damaged_runs(place: Place, pools: list[str], name: str) -> None:
    """A pool whose run `name` has a manifest that cannot be read is not a pool without the
    run: refused, with the command that makes the run whole again (never left out unsaid)."""
    from pipeline.core.files import read_json
    from pipeline.layout import run_paths
    from pipeline.retrieval.runs import recorded_run_repair

    for pool in pools:
        manifest = run_paths(place.runs_root, place.corpus, pool, name).manifest
        if manifest.exists():
            read_json(manifest, recorded_run_repair(place.runs_root, place.corpus, pool, name,
                                                    place.index_root))


@command("collect", "gather evaluated runs into runs/results.parquet", corpus=False,
         writes=("runs",))
def cmd_collect(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results

    results = collect_results(Path(args.corpora_root), Path(args.index_root),
                              Path(args.runs_root))
    log.info(f"[collect] {results.height} rows in {Path(args.runs_root) / RESULTS_FILE}")


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--times", action="store_true", help="also print per-stage times")


@command("report", "tables (md, tex), plots and the HTML page", _report_arguments,
         writes=("runs", "times"))
def cmd_report(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results
    from pipeline.report.build import report, stage_times

    collect_results(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    lists = dict(word.split("=", 1) for word in (args.training_sets or "").replace(
        ",", " ").split())
    print(report(Path(args.runs_root), args.corpus, args.seed, Path(args.corpora_root),
                 args.exclude, lists))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .html, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))
