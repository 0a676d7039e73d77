"""Which papers of the pools a store needs (`pool_ids`), lacks (`missing_ids`) and covers: a
pool whose papers are all stored has its marker `pools/<pool>.json` (`mark_covered`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.core.files import read_json, write_json
from pipeline.encoding.store import id_array, not_stored, store_parts, stored_ids
from pipeline.layout import coverage_path
from pipeline.pools.build import load_pool
from pipeline.pools.queries import own_text


def pool_ids(corpus_dir: Path, pool: str) -> np.ndarray:
    """Ids a dense search of the pool needs: candidates and queries (queries that are texts
    of their own, a collection's, are encoded when searched: `encode_texts`; those that name
    the paper they are part of, CSFCube's facet queries, need that paper's vectors too)."""
    queries, candidates, _ = load_pool(corpus_dir, pool)
    if own_text(queries) and "paper" not in queries.columns:
        return np.unique(id_array(candidates["corpusid"].to_numpy()))
    if own_text(queries):
        return np.union1d(id_array(candidates["corpusid"].to_numpy()),
                          id_array(queries["paper"].to_numpy()))
    return np.union1d(id_array(candidates["corpusid"].to_numpy()),
                      id_array(queries["corpusid"].to_numpy()))


def missing_ids(corpus_dir: Path, store: Path, pools: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(needed, missing): sorted ids of the pools' papers, and those not yet in the store.
    Shard i of n embeds the missing ids with id % n == i (embed; slurm.missing_per_shard)."""
    needed = np.unique(np.concatenate([pool_ids(corpus_dir, p) for p in pools]))
    return needed, not_stored(store, needed)


def mark_covered(corpus_dir: Path, store: Path, pools: list[str]) -> list[str]:
    """Write `pools/<pool>.json` for each pool whose papers are all stored; return them."""
    have = stored_ids(store)
    covered = []
    for pool in pools:
        needed = pool_ids(corpus_dir, pool)
        if np.isin(needed, have).all():
            marker = coverage_path(store, pool)
            record = {"pool": pool, "papers": len(needed),
                      "parts": [p["file"] for p in store_parts(store)]}
            if not marker.exists() or read_json(marker) != record:  # keep mtime when unchanged
                write_json(record, marker)
            covered.append(pool)
    return covered
