"""The scoring commands: eval, collect and report."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import command, flag, like, place_of, pools_of, roots, times_log
from pipeline.layout import RESULTS_FILE

log = logging.getLogger(__name__)


@command("eval", "score runs with ranx's kernels, per query (default MAP, NDCG, R@30)",
         like("MODEL", help="a model, or <model>~<variant> for the runs of perturbed queries"),
         writes=("runs", "times"))
def cmd_eval(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import eval_pools

    eval_pools(place_of(args), args.model, pools_of(args), args.metrics, args.stale_only,
               times_log(args))
    if args.collect:
        cmd_collect(args)


@command("collect", "gather evaluated runs into runs/results.parquet", corpus=False,
         writes=("runs",))
def cmd_collect(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results

    results = collect_results(*roots(args))
    log.info(f"[collect] {results.height} rows in {Path(args.runs_root) / RESULTS_FILE}")


@command("report", "tables (md, tex), plots and the HTML page",
         flag("--times", "also print per-stage times"),
         writes=("runs", "times"))
def cmd_report(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results
    from pipeline.report.build import report, stage_times, training_lists

    collect_results(*roots(args))
    print(report(Path(args.runs_root), args.corpus, args.seed, Path(args.corpora_root),
                 args.exclude, training_lists(args.training_sets), Path(args.index_root)))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .html, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))
