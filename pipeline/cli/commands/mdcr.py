"""The MDCR-style benchmark commands: build, Jaccard of negatives, the official release's
files (export, import, scores file) and its evaluator."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.commands.search import first_search_arguments, search_first
from pipeline.cli.registry import (
    comma_list,
    command,
    place_of,
    times_log,
    where_of,
)
from pipeline.core.errors import InputError
from pipeline.core.repair import Placeholder, Repair
from pipeline.options.checks import (
    corpus_name,
    given_path,
    positive,
)

log = logging.getLogger(__name__)


def _mdcr_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="models whose top-ranked papers give the "
                   "model-based negatives, separated by commas (paper: bm25,specter,scincl)")
    p.add_argument("--out", required=True, type=corpus_name, help="the benchmark's corpus name")
    p.add_argument("--positives", type=positive, default=5)
    p.add_argument("--per-type", type=positive, default=10, help="negatives of each type")
    p.add_argument("--top", type=positive, default=200,
                   help="model-based negatives from the top N; most cited: the field's top N")


@command("mdcr", "build an MDCR-style benchmark (MDCR §4) from the corpus's field-level test "
         "pools and the models' runs, as the corpus --out", _mdcr_arguments,
         first_search_arguments, writes=("corpora", "runs", "times"))
def cmd_mdcr(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.mdcr.build import build_mdcr

    place = place_of(args)
    out = Path(args.corpora_root) / args.out
    if out == place.corpus_dir:
        raise InputError(f"MDCR={args.out} names the source corpus itself: give the benchmark "
                         "another corpus name (default <corpus>-mdcr)")
    search_first(args, comma_list(args.models))
    with timed("mdcr", times_log(args), out=args.out) as info:
        built = build_mdcr(place, out, comma_list(args.models),
                           args.seed, args.positives, args.per_type, args.top,
                           replace=args.replace)
        info.update(built["benchmark"]["counts"])
    counts = built["benchmark"]["counts"]
    log.info(f"[mdcr] {out}: {counts['fields']} fields, {counts['queries']} queries, "
             f"{counts['pairs']} query-candidate pairs; by type {counts['by_type']} "
             f"({built['installed']}); evaluate with "
             f"{Repair('eval', args.out, Placeholder('model')).command(where_of(args))}")


def _jaccard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="two or more models, separated by commas")
    p.add_argument("--depth", type=positive, default=10, help="negatives compared per query")


@command("mdcr-jaccard", "average Jaccard index between models' highest-ranked negatives on "
         "the field-level pools (picks MDCR_MODELS)", _jaccard_arguments,
         first_search_arguments, writes=("runs", "times"))
def cmd_mdcr_jaccard(args: argparse.Namespace) -> None:
    from pipeline.mdcr.build import negative_jaccard
    from pipeline.report.build import jaccard_report

    search_first(args, comma_list(args.models))
    place = place_of(args)
    table = negative_jaccard(place, comma_list(args.models),
                             args.seed, args.depth)
    print(jaccard_report(table, place.runs_root, args.corpus, args.depth))


@command("export-mdcr", "write a benchmark corpus in the official layout: mdcr_<split>.json "
         "and mdcr_<split>_data.jsonl", writes=())
def cmd_export_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import export_benchmark

    info = export_benchmark(place_of(args).corpus_dir, Path(args.out), args.split)
    log.info(f"[export-mdcr] {info['files']}: "
             f"{info['fields']} fields, {info['queries']} queries, {info['papers']} papers")
    if info["ignored_by_official_evaluator"]:
        log.info(f"[export-mdcr] note: types the official evaluator does not read (it knows "
                 f"bm25, specter, scincl, graph, most_cited, random): "
                 f"{info['ignored_by_official_evaluator']}")


@command("import-mdcr", "read the official mdcr_<split>.json and mdcr_<split>_data.jsonl into "
         "a benchmark corpus", writes=("corpora", "times"))
def cmd_import_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import import_benchmark

    info = import_benchmark(Path(args.src), place_of(args).corpus_dir, args.split, args.replace,
                            place_of(args).derived)
    counts = info["benchmark"]["counts"]
    log.info(f"[import-mdcr] corpus {args.corpus} ({info['installed']}): {counts['fields']} "
             f"fields, {counts['queries']} queries, {counts['papers']} papers, {counts['pairs']} "
             f"pairs; {info['duplicate_paper_records_dropped']} duplicate paper records dropped")


def _scores_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True)


@command("mdcr-scores", "write the official scores file {\"<query>_<candidate>\": score} of a "
         "model's runs on a benchmark corpus", _scores_arguments, writes=())
def cmd_mdcr_scores(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import model_scores_file

    n = model_scores_file(place_of(args), args.model, args.split, Path(args.out))
    log.info(f"[mdcr-scores] {args.out}: {n} query-candidate scores of {args.model}")


def _mdcr_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True, type=given_path,
                   help="mdcr_test.json or mdcr_val.json")
    p.add_argument("--scores", required=True, type=given_path,
                   help='{"<query>_<candidate>": score} JSON')


@command("mdcr-evaluate", "the official evaluator's numbers for a scores file against an "
         "mdcr_<split>.json (per field, x100, macro average)", _mdcr_evaluate_arguments,
         corpus=False, writes=())
def cmd_mdcr_evaluate(args: argparse.Namespace) -> None:
    """Per field, then the average: the metrics in one fixed order (OFFICIAL_METRICS's)."""
    from pipeline.mdcr.official import OFFICIAL_METRICS, evaluate_files

    fields, averages = evaluate_files(Path(args.benchmark), Path(args.scores))
    for row in fields.iter_rows(named=True):
        print("\t".join([row["field"], *(f"{m}: {row[m]}" for m in OFFICIAL_METRICS
                                          if m in row)]))
    print("\nAVG\t" + "\t".join(f"{m}: {averages[m]}" for m in OFFICIAL_METRICS
                                 if m in averages))
