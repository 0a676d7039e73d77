"""Work over several pools of a corpus: the pools a stage may use, a grid of pools (fields x
sizes x repeats; make pool, make pools-paper) and the repair of every stale pool (make pools).
Each pool built is timed into the corpus's stage-times log."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError
from pipeline.core.repair import Repair, Where
from pipeline.core.timing import timed
from pipeline.layout import pool_names
from pipeline.pools.build import (
    POOL_OPTIONS,
    Named,
    NoQueriesError,
    PoolSpec,
    build_pool,
    changed_lists,
    check_sizes,
    pool_folders,
    rebuild_pool,
    retire_repair,
    with_exclusion,
)

log = logging.getLogger(__name__)


def usable_pools(corpus_dir: Path, names: list[str], stage: str, where: Where) -> list[str]:
    """`names` less the pools whose EXCLUDE list changed since they were drawn, which no stage
    can use or rebuild: each is named in one line of `stage` with the command that retires it
    (shown for the data `where` says), and counted, so one edited list never stops the others."""
    skipped = dict(changed_lists(corpus_dir, names))
    for name, why in skipped.items():
        log.warning(f"[{stage}] pool {name} skipped: {why}; repair: "
                    f"{retire_repair(corpus_dir, name).command(where)}")
    if skipped:
        log.warning(f"[{stage}] {len(skipped)} of {len(names)} pools skipped: their "
                    "EXCLUDE list changed since they were drawn")
    return [name for name in names if name not in skipped]


def stage_pools(corpus_dir: Path, named: list[str] | None, stage: str, where: Where
                ) -> list[str]:
    """The pools a stage works on: those `named`, else every usable pool of the corpus;
    refused when there is none."""
    if named:
        return named
    existing = pool_names(corpus_dir)
    pools = usable_pools(corpus_dir, existing, stage, where)
    if existing and not pools:
        raise InputError(f"every pool of {corpus_dir} was drawn without an EXCLUDE list that "
                         "has changed since: build the new list's pools (make pool "
                         "EXCLUDE=...), and retire the old ones (each named above with its "
                         "make retire-pool command)")
    if not pools:
        raise InputError(f"no pools under {corpus_dir}/pools: build one",
                         Repair("pool", corpus_dir.name))
    return pools


def rebuild_pools(corpus_dir: Path, names: list[str], times: Path) -> None:
    """Each of `names` built again from its recorded parameters (a no-op for a current one)."""
    for name in names:
        with timed("pool", times, pool=name):
            rebuild_pool(corpus_dir, name)


def repair_pools(corpus_dir: Path, times: Path, where: Where) -> None:
    """Every pool folder of the corpus that is stale, damaged or half-written, built again from
    its record (make pools); one whose EXCLUDE list changed is named and skipped."""
    rebuild_pools(corpus_dir, usable_pools(corpus_dir, pool_folders(corpus_dir), "pool", where),
                  times)


def build_grid(corpus_dir: Path, fields: list[str | None], sizes: list[int], repeats: int,
               times: Path, named: Named = POOL_OPTIONS, **settings: Any) -> list[str]:
    """A pool of each field (None: dataset-level) x size x repeat, with PoolSpec's other
    `settings` (queries, query_year, max_year, seed, split, exclude). MDCR §3: a field
    whose field-cited set a size exhausts gets one sample of it, not `repeats`. A field with
    no query candidates is skipped when there are several (FIELD=all on a small corpus).
    Returns the names of the grid's pools the corpus holds, in the grid's order."""
    base, _ = with_exclusion(PoolSpec(size=0, **settings))  # its ids' digest names the pools
    exhausted: set[tuple[str | None, int]] = set()
    built = []  # every size of each field checked before any pool is built
    for field in fields:
        try:
            check_sizes(corpus_dir, replace(base, field=field), sizes, named)
        except NoQueriesError as exc:
            if len(fields) == 1:
                raise
            log.info(f"[pool] skipped: {exc}")
            continue
        built.append(field)
    # lazily, one pool at a time (itertools.product would list range(repeats) first)
    grid = ((field, size, repeat) for field in built for size in sizes
            for repeat in range(repeats))
    names = []
    for field, size, repeat in grid:
        spec = replace(base, size=size, field=field, repeat=repeat)
        names.append(spec.name)
        if (field, size) in exhausted:
            log.info(f"[pool] {field}: field-cited set < {size}, so no repeat {repeat}")
            continue
        with timed("pool", times, pool=spec.name) as info:
            counts = build_pool(corpus_dir, spec, named)["counts"]
            info.update(queries=counts["queries"], candidates=counts["candidates"])
        if counts["exhausted"]:
            exhausted.add((field, size))
    held = set(pool_folders(corpus_dir))
    return [name for name in names if name in held]
