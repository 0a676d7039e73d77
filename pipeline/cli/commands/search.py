"""The retrieval commands: index, search, and fusion (each component searched and scored,
then the fused model)."""

from __future__ import annotations

import argparse

from pipeline.cli.commands.embed import embed_options
from pipeline.cli.commands.pools import repair_pools
from pipeline.cli.registry import (
    MODEL,
    POOLS,
    REPAIR_POOLS,
    STORE,
    arg,
    comma_list,
    command,
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
from pipeline.options.declared import kind_run_options

SEARCH_FIRST = flag("--search", "first search every pool with each model whose run is not "
                    "current (make search MODEL=..; make mdcr does)")


def search_and_eval(args: argparse.Namespace, model: str) -> None:
    """What `make eval MODEL=model` does after the corpus stage: search, then score, what is
    not current."""
    from pipeline.layout import run_name

    run_stage(args, "search", *search_argv(args.corpus, model, of_args(args)))
    run_stage(args, "eval", *eval_argv(args.corpus, run_name(model, args.query_variant),
                                       of_args(args)))


def _index_settings(args: argparse.Namespace, entry) -> dict:
    """The settings of index and search (IndexSettings's fields) from the arguments."""
    from pipeline.retrieval.search import retriever_options

    return {"threads": args.threads, "options": retriever_options(entry, vars(args)),
            "store": embed_options(args), "times": times_log(args)}


@command("index", "build what a model searches (embeddings, BM25's analysed-text store, a "
         "Lucene index)", REPAIR_POOLS, MODEL, POOLS, *STORE, writes=("indexes", "times"))
def cmd_index(args: argparse.Namespace) -> None:
    from pipeline.retrieval.search import IndexSettings, index_pools

    if args.repair_pools:
        repair_pools(args)
    entry = get_model(args.model)
    index_pools(place_of(args), entry, pools_of(args),
                IndexSettings(**_index_settings(args, entry)))


@command("search", "retrieve the top k per query, write TREC + parquet runs (several pools in "
         "one process)", MODEL,
         flag("--stale-only", "keep runs that are intact and made from their pool's current files"),
         flag("--index", "index the pools it searches first"),
         REPAIR_POOLS, POOLS, *STORE, writes=("indexes", "runs", "times"))
def cmd_search(args: argparse.Namespace) -> None:
    from pipeline.retrieval.search import SearchSettings, model_to_search, search_model

    place = place_of(args)
    entry = model_to_search(place, args.model, vars(args))
    if entry is None:
        return
    if args.repair_pools:
        repair_pools(args)
    settings = _index_settings(args, entry)
    search_model(place, entry, pools_of(args), SearchSettings(
        **settings, k=args.k, seed=args.seed, variant=args.query_variant,
        run_options=kind_run_options(entry, settings["options"]),
        index=args.index, stale_only=args.stale_only))


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
