"""`make demo` as one command: each stage in the order make ran them."""

from __future__ import annotations

import argparse
import logging

from pipeline.cli.commands.search import search_and_eval
from pipeline.cli.registry import (
    comma_list,
    command,
    declared_argv,
    ingest_args,
    of_args,
    place_of,
    prefilter_args,
    run_stage,
    times_log,
)
from pipeline.layout import run_name
from pipeline.models import get_model
from pipeline.options.checks import non_negative, positive, sizes

log = logging.getLogger(__name__)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    """Besides the declared ones (DEMO_SIZES, DEMO_FIELDS, DEMO_FIELD_SIZE, DEMO_FIELD_QUERIES,
    DEMO_MODELS and the search's): those whose default differs from make's variable."""
    p.add_argument("--papers", type=sizes, help="papers of the synthetic corpus (DEMO_PAPERS; "
                   "default: as the corpus was made, 120k for a new one)")
    p.add_argument("--synth-seed", type=non_negative, help="the synthetic corpus's seed "
                   "(DEMO_SEED; default: as the corpus was made, 0 for a new one)")
    p.add_argument("--queries", type=positive, default=50,
                   help="queries per dataset-level pool (QUERIES)")
    p.add_argument("--repeats", type=positive, default=1, help="samples per size (REPEATS)")


@command("demo", "the whole demo in one process: the synthetic corpus, its pools, the embed "
         "stage, each model searched and scored, with JUDGE a judged sample of their top "
         "ranks (JUDGE=standin:1: the stand-in), the report with the stage times (make demo)",
         ingest_args, prefilter_args, _demo_arguments,
         writes=("corpora", "indexes", "runs", "times"))
def cmd_demo(args: argparse.Namespace) -> None:
    """The demo's stages in the order make ran them (each deciding by content what is
    current), with the stage-times log started afresh: the report's times are this run's.
    With JUDGE (make demo JUDGE=standin:1), after every model is scored and before the
    report, the judging stage samples the candidates the demo's models rank high and judges
    them, so that the report has its "Beyond citations" section (a stand-in's labelled so)."""
    from pipeline.corpus.manifest import written_whole

    times_log(args).unlink(missing_ok=True)
    corpus = ("--corpus", args.corpus)
    if not written_whole(place_of(args).corpus_dir):
        run_stage(args, "corpus", *corpus, "--source", args.source, "--workers",
                  str(args.workers), *declared_argv("corpus", of_args(args)),
                  "--min-citations", str(args.min_citations),
                  "--synth", *([args.papers] if args.papers else []),
                  *(["--synth-seed", str(args.synth_seed)] if args.synth_seed is not None
                    else []),
                  *(["--raw", args.raw] if args.raw else []))
    pools = (*corpus, "--repeats", str(args.repeats), "--seed", str(args.seed))
    run_stage(args, "pool", *pools, "--size", args.sizes, "--queries", str(args.queries))
    if args.fields.split():
        run_stage(args, "pool", *pools, "--field", args.fields, "--size", args.field_size,
                  "--queries", str(args.field_queries))
    run_stage(args, "pool", *corpus, "--repair")  # make pools, before make embed
    models = [get_model(model) for model in comma_list(args.models)]
    for entry in models:  # each encoder asked for, as a stage of its own (its throughput)
        if entry.embedded:
            run_stage(args, "embed", *corpus, "--model", entry.name,
                      "--num-shards", str(args.num_shards),
                      *(["--model-path", args.model_path] if args.model_path else []))
    for entry in models:
        search_and_eval(args, entry.name)
    if args.judge:  # optional: the judged sample of the runs' top ranks (make judge)
        runs = [run_name(entry.name, args.query_variant) for entry in models]
        run_stage(args, "judge", *corpus, "--models", ",".join(runs),
                  *declared_argv("judge", of_args(args)))
    run_stage(args, "report", *corpus, "--seed", str(args.seed), "--times")
