"""The pool commands: one pool or a grid of them, the paper's grid, and pool repair."""

from __future__ import annotations

import argparse
import itertools
import logging
import re
from pathlib import Path

from pipeline.cli.registry import (
    command,
    place_of,
    run_stage,
    times_log,
    usable_pools,
)
from pipeline.core.errors import InputError
from pipeline.fields import resolve_fields
from pipeline.layout import (
    parse_size,
    pool_split,
)
from pipeline.options.checks import (
    checked,
    non_negative,
    pool_name,
)

log = logging.getLogger(__name__)


def repair_pools(args: argparse.Namespace) -> None:
    """Every pool of the corpus that is stale, damaged or half-written, built again from its
    recorded parameters (a no-op for current ones, and for a benchmark's or collection's).
    A pool whose EXCLUDE list changed cannot be: it is named and skipped (usable_pools)."""
    from pipeline.core.timing import timed
    from pipeline.pools.build import pool_folders, rebuild_pool

    corpus_dir = place_of(args).corpus_dir
    for name in usable_pools(args, pool_folders(corpus_dir), "pool"):
        with timed("pool", times_log(args), pool=name):
            rebuild_pool(corpus_dir, name)


def _pool_arguments(p: argparse.ArgumentParser) -> None:
    """Besides the declared ones (SIZE, FIELD, REPEATS, QUERIES, SEED, EXCLUDE)."""
    p.add_argument("--query-year", type=non_negative, default=2019)
    p.add_argument("--split", default="test", type=checked(pool_split),
                   help="validation: queries disjoint from the test pool's (BM25 tuning)")
    p.add_argument("--rebuild", action="append", metavar="POOL", type=pool_name,
                   help="rebuild an existing pool from its recorded parameters (if stale)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild every pool of the corpus that is stale, damaged or "
                   "half-written, from its recorded parameters (make pools)")


@command("pool", "build dataset-level or field-level pools", _pool_arguments,
         writes=("corpora", "times"))
def cmd_pool(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.pools.build import NoQueriesError, PoolSpec, build_pool, rebuild_pool
    from pipeline.pools.exclusions import NO_LIST, read_list

    if args.repair:
        return repair_pools(args)
    if args.rebuild:
        for name in args.rebuild:
            with timed("pool", times_log(args), pool=name):
                rebuild_pool(place_of(args).corpus_dir, name)
        return
    if not args.size:
        raise InputError("pool: give --size (e.g. 20k) or --rebuild <pool>")
    fields = resolve_fields(args.field) if args.field else [None]
    sizes = [parse_size(text) for text in args.size.split()]
    excluded = (read_list(args.exclude) if args.exclude not in (None, NO_LIST)
                else None)  # its ids' digest names the pools
    exhausted: set[tuple[str | None, int]] = set()
    for field, size, repeat in itertools.product(fields, sizes, range(args.repeats)):
        if (field, size) in exhausted:  # MDCR §3: one sample where the field-cited set is small
            log.info(f"[pool] {field}: field-cited set < {size}, so no repeat {repeat}")
            continue
        spec = PoolSpec(size=size, field=field, repeat=repeat, n_queries=args.queries,
                        query_year=args.query_year, max_year=args.query_year, seed=args.seed,
                        split=args.split, exclude=excluded and excluded.path,
                        exclusion=excluded.digest if excluded else "")
        try:
            with timed("pool", times_log(args), pool=spec.name) as info:
                counts = build_pool(place_of(args).corpus_dir, spec)["counts"]
                info.update(queries=counts["queries"], candidates=counts["candidates"])
        except NoQueriesError as exc:
            if len(fields) == 1:
                raise
            log.info(f"[pool] skipped: {exc}")  # FIELD=all on a small corpus
            exhausted.add((field, size))
            continue
        if counts["exhausted"]:
            exhausted.add((field, size))


PAPER_SPLITS = ("test", "validation")
# The pool stage's options as pools-paper sets them, per level of the grid: its errors are
# shown in pools-paper's words (and so, under make, as PAPER_QUERIES, not QUERIES). Its own
# options are declared (PAPER_SIZES, ..., SEED, EXCLUDE).
PAPER_OPTIONS = {
    "dataset": {"--size": "--paper-sizes", "--queries": "--paper-queries"},
    "field": {"--size": "--paper-field-size", "--queries": "--paper-field-queries"},
}


def _paper_stage(args: argparse.Namespace, level: str, *argv: str) -> None:
    """The pool stage for one level of the grid; its error names pools-paper's options."""
    try:
        run_stage(args, "pool", *argv)
    except InputError as exc:
        words = PAPER_OPTIONS[level]
        message = re.sub(r"--[a-z-]+\b", lambda m: words.get(m.group(0), m.group(0)),
                         exc.message)
        raise type(exc)(message, exc.repair) from None


@command("pools-paper", "the paper's grid: dataset-level and field-level pools of the test "
         "and the validation split, each split in turn (make pools-paper)",
         writes=("corpora", "times"))
def cmd_pools_paper(args: argparse.Namespace) -> None:
    common = ("--corpus", args.corpus, "--repeats", str(args.paper_repeats), "--seed",
              str(args.seed), *(("--exclude", args.exclude) if args.exclude else ()))
    for split in PAPER_SPLITS:
        _paper_stage(args, "dataset", *common, "--split", split, "--size", args.paper_sizes,
                     "--queries", str(args.paper_queries))
        _paper_stage(args, "field", *common, "--split", split, "--field", "all",
                     "--size", args.paper_field_size, "--queries",
                     str(args.paper_field_queries))


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
