"""What every retriever is given and what it provides (pipeline/retrieval/registry.py).

`search` (pipeline/retrieval/search.py) loads a pool, builds a `Query` and asks the model's
retriever for hits; the run store (pipeline/retrieval/runs.py) does the rest (self hits,
rounding, trec_eval's order, the top k, the files and the manifest), the same for every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.encoding.models import ModelEntry


@dataclass
class Query:
    """One pool searched by one model: the pool's queries and candidates, the query texts
    when they are not papers of the corpus (a collection's queries, a QUERY_VARIANT), how
    deep to go, the options of the search, and `read`, which records each input file before
    the retriever reads it (its sha256 goes into the run's manifest: the staleness rule)."""

    corpus_dir: Path
    index_root: Path
    runs_root: Path
    pool: str
    entry: ModelEntry
    queries: pl.DataFrame
    candidates: pl.DataFrame
    texts: pl.DataFrame | None
    depth: int
    threads: int = 2
    seed: int = 0
    backend: str = "auto"
    bm25_engine: str = "arrays"
    model_path: str | None = None
    read: Callable[[list[Path]], None] = field(default=lambda paths: None)


class Retriever:
    """A retrieval kind. Subclasses override what they need; the defaults do nothing."""

    #: whether queries given as texts (collections, QUERY_VARIANT) can be searched
    searches_texts: bool = True
    #: whether perturbed queries (QUERY_VARIANT) can be searched
    searches_variants: bool = True

    def searches(self, queries: pl.DataFrame) -> bool:
        """Whether these queries, given as texts (a collection's), can be searched: by default
        `searches_texts`; a kind may accept some text queries (multi-vector models: CSFCube's
        facet queries, which name stored sentences)."""
        return self.searches_texts

    def check(self, backend: str) -> None:
        """Before any work: refuse what cannot run here (a missing Java, a GPU backend)."""

    def index(self, corpus_dir: Path, index_root: Path, pool: str, entry: ModelEntry,
              threads: int = 2, bm25_engine: str = "arrays", **options) -> dict:
        """Build what the model searches for `pool` (a no-op when it is current)."""
        return {"model": entry.name, "pool": pool, "note": "nothing to index"}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """(query, doc, score) rows, at most `query.depth` per query, and the run details."""
        raise NotImplementedError
