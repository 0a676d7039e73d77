"""`make retire-pool`: a pool that is no longer wanted (its EXCLUDE list changed, say) moved
aside with what was made from it, so that no stage reads it again and no number is lost.

A pool built by `make pool` lives in three places: its files (corpora/<c>/pools/<pool>/), its
Lucene index (indexes/<c>/<pool>/) and its runs and evaluations (runs/<c>/<pool>/). Retiring
moves each into the `retired/` folder of the same corpus and root (layout.retired_dir): the
runs keep their numbers, verify and every stage skip them, and putting the three folders back
by hand restores the pool. Nothing is deleted. Only a pool the pipeline built is retired; a
benchmark's or an imported collection's pools belong to their corpus.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.core.locks import file_lock
from pipeline.layout import Place, parse_pool_name, pool_dir, pool_names, retired_dir
from pipeline.pools.build import BUILT, recorded

log = logging.getLogger(__name__)


def retire_pool(place: Place, name: str) -> list[tuple[Path, Path]]:
    """Move pool `name` of the corpus at `place`, its Lucene index and its runs into their
    corpus's retired/ folders; return the (from, to) moves made. Refused: a name that is not
    a pool's, a pool that does not exist or that the pipeline did not build, and a retired
    folder of that name that exists already (a pool retired before: nothing is replaced).
    Killed half-way, it is run again: the pool's own folder moves last."""
    parse_pool_name(name)
    if Path(name).name != name or name in (".", ".."):
        raise InputError(f"pool {name!r}: a pool's name, not a path (make pool names them "
                         "<scope>-<size>-r<repeat>)")
    folder = pool_dir(place.corpus_dir, name)
    if not folder.is_dir():
        known = ", ".join(pool_names(place.corpus_dir)) or "none"
        raise InputError(f"pool {name!r} does not exist under {folder.parent} (existing: "
                         f"{known}); give one of them as POOL")
    with file_lock(folder):
        info = recorded(place.corpus_dir, name)
        if info is None or info.get("stage") not in BUILT:
            raise InputError(f"pool {name} of {place.corpus_dir} was not built by make pool "
                             "(a benchmark's or an imported collection's pool, or a folder "
                             "the pipeline did not write): retire-pool moves only the pools "
                             "it built")
        moves = [(source, retired_dir(base, name))
                 for source, base in ((place.runs_dir / name, place.runs_dir),
                                      (place.index_dir / name, place.index_dir),
                                      (folder, place.corpus_dir))
                 if source.exists()]
        taken = [target for _, target in moves if target.exists()]
        if taken:
            raise InputError(f"{taken[0]} exists already (a pool of that name retired before): "
                             f"move it away, then retire {name} again (nothing was moved)")
        for source, target in moves:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, target)
            log.info(f"[retire-pool] {source} -> {target}")
    return moves
