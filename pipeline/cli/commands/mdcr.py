"""The MDCR-style benchmark commands: build, Jaccard of negatives, the official release's
files (export, import, scores file) and its evaluator."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline import api
from pipeline.cli.registry import (
    RUN,
    arg,
    comma_list,
    command,
    command_of,
    given,
    place_of,
    times_log,
    where_of,
)
from pipeline.options.checks import corpus_name, given_path, positive

log = logging.getLogger(__name__)


@command("mdcr", "build an MDCR-style benchmark (MDCR §4) from the corpus's field-level test "
         "pools and the models' runs, as the corpus --out",
         arg("--models", required=True, help="models whose top-ranked papers give the "
             "model-based negatives, separated by commas (paper: bm25,specter,scincl)"),
         arg("--out", required=True, type=corpus_name, help="the benchmark's corpus name"),
         arg("--positives", type=positive, help="positives per query (default: build_mdcr's)"),
         arg("--per-type", type=positive, help="negatives of each type"),
         arg("--top", type=positive,
             help="model-based negatives from the top N; most cited: the field's top N"),
         writes=("corpora", "runs", "times"))
def cmd_mdcr(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.mdcr.build import build_mdcr, built_summary

    place, out = place_of(args), Path(args.corpora_root) / args.out
    with timed("mdcr", times_log(args), out=args.out) as info:
        built = build_mdcr(place, out, comma_list(args.models), args.seed, replace=args.replace,
                           **given(args, "positives", "per_type", "top"))
        info.update(built["benchmark"]["counts"])
    log.info(built_summary(out, built, where_of(args)))


@command("mdcr-jaccard", "average Jaccard index between models' highest-ranked negatives on "
         "the field-level pools (picks MDCR_MODELS)",
         arg("--models", required=True, help="two or more models, separated by commas"),
         arg("--depth", type=positive, help="negatives compared per query (default: "
             "pipeline/mdcr/build.py's JACCARD_DEPTH)"),
         writes=("runs", "times"))
def cmd_mdcr_jaccard(args: argparse.Namespace) -> None:
    from pipeline.mdcr.build import JACCARD_DEPTH, negative_jaccard
    from pipeline.report.build import jaccard_report

    place, depth = place_of(args), args.depth or JACCARD_DEPTH
    table = negative_jaccard(place, comma_list(args.models), args.seed, depth)
    print(jaccard_report(table, place.runs_root, args.corpus, depth))


command_of(api.export_mdcr, "export-mdcr", "write a benchmark corpus in the official layout: "
           "mdcr_<split>.json and mdcr_<split>_data.jsonl", writes=())
command_of(api.import_mdcr, "import-mdcr", "read the official mdcr_<split>.json and "
           "mdcr_<split>_data.jsonl into a benchmark corpus", writes=("corpora", "times"))


@command("mdcr-scores", "write the official scores file {\"<query>_<candidate>\": score} of a "
         "model's runs on a benchmark corpus", RUN, writes=())
def cmd_mdcr_scores(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import model_scores_file

    model_scores_file(place_of(args), args.model, args.split, Path(args.out))


@command("mdcr-evaluate", "the official evaluator's numbers for a scores file against an "
         "mdcr_<split>.json (per field, x100, macro average)",
         arg("--benchmark", required=True, type=given_path,
             help="mdcr_test.json or mdcr_val.json"),
         arg("--scores", required=True, type=given_path,
             help='{"<query>_<candidate>": score} JSON'),
         corpus=False, writes=())
def cmd_mdcr_evaluate(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import evaluate_files, official_table

    print(official_table(*evaluate_files(Path(args.benchmark), Path(args.scores))))
