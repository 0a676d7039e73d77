"""`make demo` as one command: each stage in the order make ran them."""

from __future__ import annotations

import argparse

from pipeline.cli.commands.corpus import MADE
from pipeline.cli.commands.search import search_and_eval
from pipeline.cli.registry import (
    INGEST,
    PREFILTER,
    arg,
    argv_of,
    comma_list,
    command,
    declared_argv,
    like,
    of_args,
    place_of,
    run_stage,
    times_log,
)
from pipeline.layout import run_name
from pipeline.models import get_model
from pipeline.options.checks import non_negative, sizes


@command("demo", "the whole demo in one process: the synthetic corpus, its pools, the embed "
         "stage, each model searched and scored, with JUDGE a judged sample of their top "
         "ranks (JUDGE=standin:1: the stand-in), the report with the stage times (make demo)",
         *INGEST, PREFILTER,
         # besides the declared ones: those whose default differs from make's variable
         arg("--papers", type=sizes, help="papers of the synthetic corpus (DEMO_PAPERS; "
             f"default: {MADE.format('120k')})"),
         arg("--synth-seed", type=non_negative, help="the synthetic corpus's seed (DEMO_SEED; "
             f"default: {MADE.format(0)})"),
         like("QUERIES"), like("REPEATS"),
         writes=("corpora", "indexes", "runs", "times"))
def cmd_demo(args: argparse.Namespace) -> None:
    """The demo's stages in make's order, each deciding by content what is current; the
    stage-times log started afresh (the report's times are this run's); with JUDGE, the
    judged sample before the report (its "Beyond citations" section)."""
    from pipeline.corpus.manifest import written_whole

    times_log(args).unlink(missing_ok=True)
    corpus = argv_of(args, "corpus")
    if not written_whole(place_of(args).corpus_dir):
        run_stage(args, "corpus", *corpus, *argv_of(args, "source", "workers", "min_citations",
                                                    "synth_seed", "raw"),
                  *declared_argv("corpus", of_args(args)),
                  "--synth", *([args.papers] if args.papers else []))
    pools = (*corpus, *argv_of(args, "repeats", "seed"))
    run_stage(args, "pool", *pools, "--size", args.sizes, "--queries", str(args.queries))
    if args.fields.split():
        run_stage(args, "pool", *pools, "--field", args.fields, "--size", args.field_size,
                  "--queries", str(args.field_queries))
    run_stage(args, "pool", *corpus, "--repair")  # make pools, before make embed
    models = [get_model(model) for model in comma_list(args.models)]
    for entry in models:  # each encoder asked for, as a stage of its own (its throughput)
        if entry.embedded:
            run_stage(args, "embed", *corpus, "--model", entry.name,
                      *argv_of(args, "num_shards", "model_path", "device"))
    for entry in models:
        search_and_eval(args, entry.name)
    if args.judge:  # optional: the judged sample of the runs' top ranks (make judge)
        runs = [run_name(entry.name, args.query_variant) for entry in models]
        run_stage(args, "judge", *corpus, "--models", ",".join(runs),
                  *declared_argv("judge", of_args(args)))
    run_stage(args, "report", *corpus, *argv_of(args, "seed"), "--times")
