"""The report's leakage table: for each model whose training papers are given (TRAINING_SETS),
the share of each pool's queries and of its positives that the model was trained on.

MDCR leaves SPECTER's and SciNCL's training papers out of its queries (EXCLUDE) but could not
do so for ASPIRE, whose training set was not public; this table measures what is left: a query
or a positive seen in training flatters that model. Counts are over distinct papers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.pools.build import load_pool
from pipeline.pools.exclusions import PaperList, share_in

HEADER = ["pool", "queries", "positives"]


def _cell(hit: int, total: int) -> str:
    return f"{hit} ({100 * hit / total:.1f}%)" if total else "-"


def leakage_rows(corpus_dir: Path, pools: list[str], lists: dict[str, PaperList]
                 ) -> tuple[list[str], list[list[str]]]:
    """The table: a row per pool (in the order given) and one for all of them together,
    with, per model (sorted by name), the queries and the positives in its training set."""
    models = sorted(lists)
    header = HEADER + [f"{m}: {what} in training" for m in models
                       for what in ("queries", "positives")]
    rows, all_queries, all_positives = [], [], []
    for pool in pools:
        queries, _, qrels = load_pool(corpus_dir, pool)
        ids = (queries["corpusid"].to_numpy(), qrels["doc"].unique().to_numpy())
        all_queries.append(ids[0])
        all_positives.append(ids[1])
        rows.append(_row(pool, ids, lists, models))
    if len(pools) > 1:
        rows.append(_row("all pools", (np.concatenate(all_queries),
                                       np.concatenate(all_positives)), lists, models))
    return header, rows


def _row(label: str, ids: tuple[np.ndarray, np.ndarray], lists: dict[str, PaperList],
         models: list[str]) -> list[str]:
    queries, positives = (np.unique(a) for a in ids)
    cells = [label, str(queries.size), str(positives.size)]
    for model in models:
        cells += [_cell(*share_in(queries, lists[model])), _cell(*share_in(positives,
                                                                             lists[model]))]
    return cells


def list_summary(lists: dict[str, PaperList]) -> tuple[str, ...]:
    """One note per list: what the table was computed from (path, ids, digest)."""
    return tuple(f"{m}: {p.path} ({p.ids.size} papers, ids sha256 {p.digest[:12]})."
                 for m, p in sorted(lists.items()))


def reported_pools(rows: pl.DataFrame) -> list[str]:
    """The distinct pools of the report's rows, by level, scope, size and repeat."""
    return (rows.select("level", "scope", "size", "repeat", "pool").unique()
            .sort("level", "scope", "size", "repeat", "pool")["pool"].to_list())
