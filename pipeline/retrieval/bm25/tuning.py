"""BM25's k1 and b tuned on the validation pools (MDCR §3: "tuned on separate validation sets
built the same way as the test sets"; docs/pools.md).

A test pool `<scope>-<size>[-s<seed>][-x<tag>]-r<repeat>` is searched with the (k1, b) of the
grid that gives the best mean MAP over its validation pools
`<scope>-<size>[-s<seed>][-x<tag>]-r*-val` (same scope, size, seed and exclusion list; `make
pools-paper` builds them). The whole grid runs on one analysis of
each validation pool (arrays engine) or in one SearchCollection run per validation pool
(Lucene: Anserini searches every pair in one pass, in the process's JVM). The result is kept in
`indexes/<corpus>/bm25-tuning/<scope>-<size>[-s<seed>][-x<tag>].json` with the fingerprints of the
validation pools, so every repeat of the test pool reuses it and a rebuilt validation pool
is tuned again. Without a validation pool, and for validation pools themselves, pyserini's
defaults (k1 0.9, b 0.4) are used; the run manifest says which.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.layout import Place, parse_pool_name, tuning_path
from pipeline.models import ModelEntry
from pipeline.pools.build import check_pool, load_pool, pool_files, validation_pools
from pipeline.retrieval.bm25.engines import engine as bm25_engine

K1_GRID = (0.6, 0.9, 1.2, 1.5, 2.0)
B_GRID = (0.3, 0.4, 0.5, 0.6, 0.75, 0.9)


def bm25_params(place: Place, pool: str, entry: ModelEntry, threads: int = 2,
                k1s: tuple[float, ...] | None = None, bs: tuple[float, ...] | None = None,
                engine: str = "arrays") -> dict:
    """{k1, b, tuned_on, ...} for searching `pool`: tuned on its validation pools (and kept),
    or the entry's defaults when it has none. The grid: K1_GRID x B_GRID unless given; it is
    searched with `engine` (lucene or arrays), which is kept with the choice."""
    k1s, bs = k1s or K1_GRID, bs or B_GRID
    defaults = {"k1": entry.params["k1"], "b": entry.params["b"]}
    pools = validation_pools(place.corpus_dir, pool)
    if not pools:
        why = ("a validation pool" if parse_pool_name(pool).split == "validation"
               else "no validation pool")
        return {**defaults, "tuned_on": [], "note": f"pyserini defaults ({why})"}
    for p in pools:
        check_pool(place.corpus_dir, p)
    inputs = record(place.roots,
                    [f for p in pools for f in pool_files(place.corpus_dir, p)])
    grid = {"k1": list(k1s), "b": list(bs), "engine": engine}
    path = tuning_path(place.index_root, place.corpus, pool)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        if path.exists():
            try:
                kept = read_json(path)
            except InputError:  # damaged: tuned again
                kept = {}
            if (kept.get("inputs") == inputs and kept.get("parameters") == grid
                    and kept["chosen"].get("validation_map") != 0):  # 0: chosen on nothing
                return kept["chosen"]
        chosen = _tune(place, pools, entry, threads, k1s, bs, inputs, grid,
                       path, engine)
    return chosen


def _tune(place: Place, pools: list[str], entry: ModelEntry, threads: int, k1s: tuple[float, ...],
          bs: tuple[float, ...], inputs: dict, grid: dict, path: Path, engine: str) -> dict:
    """Every (k1, b) on every validation pool, MAP over the top 500 as `eval` scores it. The
    queries are searched as `search` searches them (a collection's queries by their own text,
    an MDCR-style pool's queries in their own lists)."""
    from pipeline.metrics import per_query
    from pipeline.pools.queries import own_text, query_texts
    from pipeline.retrieval.runs import TOP_K, finalize_run, keep_own_lists, own_lists

    start = time.perf_counter()
    rows = []
    for pool in pools:
        queries, candidates, qrels = load_pool(place.corpus_dir, pool)
        texts = query_texts(place.corpus_dir, queries)
        pairs, candidates = own_lists(candidates)
        depth = TOP_K if pairs is None else candidates.height
        bm25 = bm25_engine(engine)
        bm25.ready_pool(place, pool, threads)
        runs, _, _ = bm25.search_grid(place, pool, texts, not own_text(queries),
                                      candidates["corpusid"], depth + 1, k1s, bs, threads,
                                      work_dir=path.parent)
        in_pool = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))
        for (k1, b), hits in runs.items():
            keep = TOP_K
            if pairs is not None:
                hits, _, keep = keep_own_lists(hits, pairs, TOP_K)
            run, _ = finalize_run(hits, keep)
            metrics, _ = per_query(run, in_pool, queries["corpusid"], ("map",))
            if metrics.is_empty():  # no query has a relevant paper: MAP is undefined
                raise InputError(f"BM25 tuning on validation pool {pool}: MAP is undefined, "
                                 "none of its queries has a relevant paper in the pool (every "
                                 "grade 0, or no judgment kept), so no (k1, b) can be chosen; "
                                 "give a split with relevant judgments, or import it again")
            rows.append({"pool": pool, "k1": k1, "b": b, "map": float(metrics["map"].mean())})
    table = (pl.DataFrame(rows).group_by("k1", "b", maintain_order=True)
             .agg(pl.col("map").mean()))
    chosen = choose(table, entry, pools)
    write_json(manifest("bm25-tuning", grid, inputs=inputs, chosen=chosen, map=table.to_dicts(),
                        seconds=round(time.perf_counter() - start, 2)), path)
    return chosen


def choose(table: pl.DataFrame, entry: ModelEntry, pools: list[str]) -> dict:
    """The pair of the grid (k1, b, map) with the best mean MAP (the first of the grid among
    ties). A grid that scored nothing (every MAP zero, or one not a number) is an error: the
    validation pools' queries found none of their relevant papers, which tunes nothing. A
    grid of several pairs that all score the same keeps the entry's defaults, and says so."""
    maps = table["map"]
    where = f"validation pool(s) {', '.join(pools)}"
    if not maps.is_finite().all() or (maps == 0).all():
        bad = "not a number" if not maps.is_finite().all() else "0 for every (k1, b)"
        raise InputError(f"BM25 tuning on {where}: MAP is {bad}, so no pair can be chosen; "
                         "check their queries and qrels (make verify), or rebuild them "
                         "(make pools-paper) or import them again")
    if table.height > 1 and maps.n_unique() == 1:
        return {"k1": entry.params["k1"], "b": entry.params["b"], "tuned_on": pools,
                "validation_map": round(maps[0], 6),
                "note": f"every (k1, b) scored MAP {maps[0]:.6f} on {len(pools)} validation "
                        "pool(s): pyserini defaults kept"}
    best = table.row(int(maps.arg_max()), named=True)  # first of the grid among ties
    return {"k1": best["k1"], "b": best["b"], "tuned_on": pools,
            "validation_map": round(best["map"], 6),
            "note": f"tuned on {len(pools)} validation pool(s), mean MAP over the grid"}
