"""The scoring commands: eval, collect and report."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import command, place_of, pool_arg, pools_of, times_log
from pipeline.layout import RESULTS_FILE

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
    from pipeline.evaluation.evaluate import eval_pools

    eval_pools(place_of(args), args.model, pools_of(args), args.metrics, args.stale_only,
               times_log(args))
    if args.collect:
        cmd_collect(args)


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
    from pipeline.report.build import report, stage_times, training_lists

    collect_results(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    print(report(Path(args.runs_root), args.corpus, args.seed, Path(args.corpora_root),
                 args.exclude, training_lists(args.training_sets)))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .html, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))
