"""The pool commands: one pool or a grid of them, the paper's grid, and pool repair."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import arg, command, flag, like, place_of, times_log, where_of
from pipeline.core.errors import OptionError
from pipeline.fields import resolve_fields
from pipeline.layout import parse_size
from pipeline.options.checks import non_negative, pool_name

log = logging.getLogger(__name__)


def repair_pools(args: argparse.Namespace) -> None:
    """make pools (also search's and index's --repair-pools)."""
    from pipeline.pools.grid import repair_pools as repair

    repair(place_of(args).corpus_dir, times_log(args), where_of(args))


@command("pool", "build dataset-level or field-level pools",
         # besides the declared ones (SIZE, FIELD, REPEATS, QUERIES, SEED, EXCLUDE)
         arg("--query-year", type=non_negative, help="the queries' year (default: PoolSpec's)"),
         like("SPLIT", help="validation: queries disjoint from the test pool's (BM25 tuning)"),
         arg("--rebuild", action="append", metavar="POOL", type=pool_name,
             help="rebuild an existing pool from its recorded parameters (if stale)"),
         flag("--repair", "rebuild every pool of the corpus that is stale, damaged or "
              "half-written, from its recorded parameters (make pools)"),
         writes=("corpora", "times"))
def cmd_pool(args: argparse.Namespace) -> None:
    from pipeline.pools.grid import build_grid, rebuild_pools

    if args.repair:
        return repair_pools(args)
    if args.rebuild:
        return rebuild_pools(place_of(args).corpus_dir, args.rebuild, times_log(args))
    if not args.size:
        raise OptionError("pool: give {SIZE} (e.g. 20k) or --rebuild <pool>")
    year = args.query_year
    build_grid(place_of(args).corpus_dir, resolve_fields(args.field) if args.field else [None],
               [parse_size(text) for text in args.size.split()], args.repeats, times_log(args),
               n_queries=args.queries, seed=args.seed, split=args.split, exclude=args.exclude,
               **({} if year is None else {"query_year": year, "max_year": year}))


@command("pools-paper", "the paper's grid: dataset-level and field-level pools of the test "
         "and the validation split, each split in turn (make pools-paper)",
         writes=("corpora", "times"))
def cmd_pools_paper(args: argparse.Namespace) -> None:
    """Its errors name its own options (PAPER_QUERIES under make, not QUERIES)."""
    from pipeline.pools.build import Named
    from pipeline.pools.grid import build_grid

    corpus_dir, times = place_of(args).corpus_dir, times_log(args)
    for split in ("test", "validation"):
        common = {"seed": args.seed, "split": split, "exclude": args.exclude or None}
        build_grid(corpus_dir, [None], [parse_size(t) for t in args.paper_sizes.split()],
                   args.paper_repeats, times, Named("PAPER_SIZES", "PAPER_QUERIES"),
                   n_queries=args.paper_queries, **common)
        build_grid(corpus_dir, resolve_fields("all"),
                   [parse_size(t) for t in args.paper_field_size.split()], args.paper_repeats,
                   times, Named("PAPER_FIELD_SIZE", "PAPER_FIELD_QUERIES"),
                   n_queries=args.paper_field_queries, **common)


@command("retire-pool", "move a pool, its Lucene index and its runs into the corpus's "
         "retired/ folders: no stage reads them again, no number is lost",
         writes=("corpora", "indexes", "runs", "times"))
def cmd_retire_pool(args: argparse.Namespace) -> None:
    from pipeline.pools.retire import retire_pool

    moves = retire_pool(place_of(args), args.pool)
    log.info(f"[retire-pool] {args.pool}: {len(moves)} folders moved into retired/ (its files"
             ", its Lucene index and its runs, where it had them)")


@command("training-ids", "a list of training papers named by S2 SHA (SPECTER's) as CorpusIDs, "
         "for EXCLUDE and TRAINING_SETS", corpus=False, writes=())
def cmd_training_ids(args: argparse.Namespace) -> None:
    from pipeline.ingest.training_ids import convert

    counts = convert(Path(args.src), Path(args.paper_ids), Path(args.out))
    log.info(f"[training-ids] {args.out}: {counts['corpus_ids']} CorpusIDs of {counts['shas']} "
             f"SHAs ({counts['shas_not_found']} not found)")
