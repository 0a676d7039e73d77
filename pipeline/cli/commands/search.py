"""The retrieval commands: index and search (a fused model's search fuses its models' runs)."""

from __future__ import annotations

import argparse

from pipeline import api
from pipeline.cli.commands.pools import repair_pools
from pipeline.cli.registry import (
    MODEL,
    command,
    command_of,
    place_of,
    pools_of,
    times_log,
)
from pipeline.models import get_model


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
