"""What every retriever is given and what it provides (pipeline/retrieval/registry.py).

`search_pool` (pipeline/retrieval/search.py) loads a pool, builds a `Query` and asks the model's
retriever for hits; the run store (pipeline/retrieval/runs.py) does the rest (self hits,
rounding, trec_eval's order, the top k, the files and the manifest), the same for every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.layout import Place
from pipeline.models import ModelEntry


@dataclass
class Query:
    """One pool searched by one model: the pool's queries and candidates, the query texts
    when they are not papers of the corpus (a collection's queries, a QUERY_VARIANT), how
    deep to go, the retriever's own options (`Retriever.OPTIONS`: BM25's engine, an encoder's
    backend), and `read`, which records each input file before the retriever reads it (its
    sha256 goes into the run's manifest: the staleness rule)."""

    place: Place
    pool: str
    entry: ModelEntry
    queries: pl.DataFrame
    candidates: pl.DataFrame
    texts: pl.DataFrame | None
    depth: int
    threads: int = 2
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    read: Callable[[list[Path]], None] = field(default=lambda paths: None)


class Retriever:
    """A retrieval kind. Subclasses override what they need; the defaults do nothing."""

    #: whether queries given as texts (collections, QUERY_VARIANT) can be searched
    searches_texts: bool = True
    #: whether perturbed queries (QUERY_VARIANT) can be searched
    searches_variants: bool = True
    #: whether it ranks a pool alone (a cross-encoder only reranks: make rerank)
    ranks_alone: bool = True
    #: whether the seed changes its hits (the random model's order): then it is one of the
    #: run's parameters, and a run of another seed is not current
    seeded: bool = False
    #: this kind's own options and their defaults; `search_pool` and `index` give each kind only
    #: its own (an option of another kind, as the command line passes them all, is not its)
    OPTIONS: dict[str, Any] = {}

    def options(self, given: dict[str, Any]) -> dict[str, Any]:
        """This kind's options: each one as given, or its default where given as None."""
        return {name: default if given.get(name) is None else given[name]
                for name, default in self.OPTIONS.items()}

    def searches(self, queries: pl.DataFrame) -> bool:
        """Whether these queries, given as texts (a collection's), can be searched: by default
        `searches_texts`; a kind may accept some text queries (multi-vector models: CSFCube's
        facet queries, which name stored sentences)."""
        return self.searches_texts

    def check(self, options: dict[str, Any]) -> None:
        """Before any work: refuse what cannot run here with these options (`options()`: a
        missing Java, a GPU backend without a GPU)."""

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict[str, Any] | None = None, **stage) -> dict:
        """Build what the model searches for `pool` (a no-op when it is current), with this
        kind's `options` and the index stage's own settings (`stage`: a part size, ...)."""
        return {"model": entry.name, "pool": pool, "note": "nothing to index"}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """(query, doc, score) rows, at most `query.depth` per query, and the run details."""
        raise NotImplementedError
