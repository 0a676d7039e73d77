"""The retrieval commands: index, search, and fusion (each component searched and scored,
then the fused model)."""

from __future__ import annotations

import argparse
import logging

from pipeline.cli.commands.embed import embed_options
from pipeline.cli.commands.pools import repair_pools
from pipeline.cli.registry import (
    comma_list,
    command,
    embed_args,
    eval_argv,
    model_arg,
    of_args,
    place_of,
    pool_arg,
    pools_of,
    repair_pools_arg,
    run_stage,
    search_argv,
    times_log,
)
from pipeline.models import fused_name, get_model
from pipeline.options.checks import (
    given_path,
    positive,
)

log = logging.getLogger(__name__)


def search_and_eval(args: argparse.Namespace, model: str) -> None:
    """What `make eval MODEL=model` does after the corpus stage: search every pool whose run
    is not current (with its index), then score every run whose evaluation is not."""
    from pipeline.layout import run_name

    run_stage(args, "search", *search_argv(args.corpus, model, of_args(args), args.model_path))
    run_stage(args, "eval", *eval_argv(args.corpus, run_name(model, args.query_variant),
                                       of_args(args)))


def _index_pools(args: argparse.Namespace, entry, pools: list[str]) -> None:
    """Build what `entry` searches for each pool; an encoder is loaded once for all of them."""
    if args.device:
        from pipeline.encoding.encoders import check_device

        check_device(args.device)  # a GPU asked for and absent: refused even with no work
    from pipeline.core.timing import timed
    from pipeline.encoding.embed import embed
    from pipeline.retrieval.search import index

    place = place_of(args)
    if entry.embedded:
        with timed("index", times_log(args), model=entry.name, pools=len(pools)):
            embed(place, entry, pools, **embed_options(args))
        return
    for pool in pools:
        with timed("index", times_log(args), model=entry.name, pool=pool):
            index(place, pool, entry, args.threads, part_size=args.part_size,
                  **retriever_options(args, entry))


def retriever_options(args: argparse.Namespace, entry) -> dict:
    """The options of `entry`'s retriever (Retriever.OPTIONS) as the command line gives them."""
    from pipeline.retrieval.registry import retriever

    return {name: getattr(args, name, None) for name in retriever(entry.kind).OPTIONS}


@command("index", "build what a model searches (embeddings, BM25's analysed-text store, a "
         "Lucene index)", repair_pools_arg, model_arg, pool_arg,
         embed_args, writes=("indexes", "times"))
def cmd_index(args: argparse.Namespace) -> None:
    if args.repair_pools:
        repair_pools(args)
    _index_pools(args, get_model(args.model), pools_of(args))


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=positive, default=500)
    p.add_argument("--stale-only", action="store_true",
                   help="keep runs that are intact and made from their pool's current files")
    p.add_argument("--index", action="store_true", help="index the pools it searches first")
    repair_pools_arg(p)


@command("search", "retrieve the top k per query, write TREC + parquet runs (several pools in "
         "one process)", model_arg, _search_arguments, pool_arg, embed_args,
         writes=("indexes", "runs", "times"))
def cmd_search(args: argparse.Namespace) -> None:
    """Search pools one after another in this process: one JVM (BM25) or one model and device
    set-up for all of them. With --stale-only, pools whose run is current are kept as they
    are; with --index, what they search is built first (what `make search` does)."""
    from pipeline.core.timing import timed
    from pipeline.layout import run_name
    from pipeline.retrieval.imported import imported_pools
    from pipeline.retrieval.registry import retriever
    from pipeline.retrieval.search import current_run, search_pool

    place = place_of(args)
    imported = imported_pools(place.runs_root, place.corpus, args.model)
    if imported:  # a run made elsewhere (make import-run): eval scores it as it is
        log.info(f"[search] {args.model} is a run imported into {len(imported)} pools "
                 f"({', '.join(imported)}), not a model: nothing to search")
        return
    entry = get_model(args.model)
    name = run_name(entry.name, args.query_variant)
    kind = retriever(entry.kind)
    # a GPU backend absent: refused before any work
    kind.check(kind.options(retriever_options(args, entry)))
    if args.repair_pools:
        repair_pools(args)
    pools = pools_of(args)
    # a Lucene index is checked for every pool first (a no-op when intact): a damaged one is
    # built again (verify's repair for it), and the runs made from the old one are then stale
    lucene = entry.kind == "bm25" and args.bm25_engine == "lucene"
    if args.index and lucene:
        _index_pools(args, entry, pools)
    if args.stale_only:
        kept = [p for p in pools
                if current_run(place, p, entry, args.k, args.seed, args.query_variant)]
        pools = [p for p in pools if p not in kept]
        log.info(f"[search] {name}: {len(kept)} current runs kept, {len(pools)} to search")
    if args.index and pools and not lucene:
        _index_pools(args, entry, pools)
    for pool in pools:
        with timed("search", times_log(args), model=name, pool=pool) as info:
            out = search_pool(place, pool, entry, args.k, args.threads,
                         args.seed, args.query_variant, **retriever_options(args, entry))
            info.update(queries_per_s=out["queries_per_s"])


def search_first(args: argparse.Namespace, models: list[str]) -> None:
    """--search: each model's runs that are not current made first (make search MODEL=..)."""
    if args.search:
        for model in models:
            run_stage(args, "search", *search_argv(args.corpus, get_model(model).name,
                                                   of_args(args), args.model_path))


def _fuse_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="the models fused, separated by commas "
                   "(an hf: model's pooling as hf:<org>/<name>@cls)")
    p.add_argument("--method", default="rrf", help="ranx's fusion method (rrf, wsum, ...)")
    p.add_argument("--model-path", type=given_path, help="load the weights from this local folder")


@command("fuse", "search and score each model of --models, then their fusion (make fuse): "
         "each only where its run or evaluation is not current, in this process",
         _fuse_arguments, writes=("indexes", "runs", "times"))
def cmd_fuse(args: argparse.Namespace) -> None:
    """What `make eval MODEL=..` does after the corpus stage, for every component and then for
    the fused model, whose runs are made from the components' (pipeline/retrieval/fusion.py)."""
    parts = comma_list(args.models)
    fused = fused_name(args.method, parts)
    for model in [get_model(m).name for m in parts] + [fused]:
        search_and_eval(args, model)


def first_search_arguments(p: argparse.ArgumentParser) -> None:
    """--search: the models' runs made first (as make search does for each), with the search
    settings."""
    p.add_argument("--search", action="store_true", help="first search every pool with each "
                   "model whose run is not current (make search MODEL=..; make mdcr does)")
    p.add_argument("--model-path", type=given_path, help="load the weights from this local folder")
