"""The retrieval commands: index, search, and fusion (each component searched and scored,
then the fused model)."""

from __future__ import annotations

import argparse

from pipeline import api
from pipeline.cli.commands.pools import repair_pools
from pipeline.cli.registry import (
    MODEL,
    arg,
    comma_list,
    command,
    command_of,
    eval_argv,
    flag,
    like,
    of_args,
    place_of,
    pools_of,
    run_stage,
    search_argv,
    times_log,
)
from pipeline.models import fused_name, get_model

SEARCH_FIRST = flag("--search", "first search every pool with each model whose run is not "
                    "current (make search MODEL=..; make mdcr does)")


def search_and_eval(args: argparse.Namespace, model: str) -> None:
    """What `make eval MODEL=model` does after the corpus stage: search, then score, what is
    not current."""
    from pipeline.layout import run_name

    run_stage(args, "search", *search_argv(args.corpus, model, of_args(args)))
    run_stage(args, "eval", *eval_argv(args.corpus, run_name(model, args.query_variant),
                                       of_args(args)))


@command("index", "build what a model searches (embeddings, BM25's analysed-text store, a "
         "Lucene index)", MODEL, writes=("indexes", "times"))
def cmd_index(args: argparse.Namespace) -> None:
    from pipeline.retrieval.search import IndexSettings, index_pools, retriever_options

    if args.repair_pools:
        repair_pools(args)
    entry = get_model(args.model)
    index_pools(place_of(args), entry, pools_of(args), IndexSettings(
        args.threads, retriever_options(entry, vars(args)), api.store_options(
            args.batch_size, args.dtype, args.part_size, args.model_path, args.device,
            bool(args.replace)), times_log(args)))


command_of(api.search, "search", "retrieve the top k per query, write TREC + parquet runs "
           "(several pools in one process)", MODEL, writes=("indexes", "runs", "times"),
           from_args={"program": "program"})


def search_first(args: argparse.Namespace, models: list[str]) -> None:
    """--search: each model's runs that are not current made first (make search MODEL=..)."""
    if args.search:
        for model in models:
            run_stage(args, "search", *search_argv(args.corpus, get_model(model).name,
                                                   of_args(args)))


@command("fuse", "search and score each model of --models, then their fusion (make fuse): "
         "each only where its run or evaluation is not current, in this process",
         arg("--models", required=True, help="the models fused, separated by commas (an hf: "
             "model's pooling as hf:<org>/<name>@cls)"),
         like("METHOD"), writes=("indexes", "runs", "times"))
def cmd_fuse(args: argparse.Namespace) -> None:
    """Each component, then the fused model (made from their runs), as `make eval` does."""
    parts = comma_list(args.models)
    for model in [get_model(m).name for m in parts] + [fused_name(args.method, parts)]:
        search_and_eval(args, model)
