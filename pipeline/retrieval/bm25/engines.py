"""The BM25 engines by BM25_ENGINE's values: the module that runs each (docs/retrieval.md).

Every engine module gives the same four functions, with the same signatures: `index_pool`
(the index stage: what a pool's search reads, made), `ready_pool` (what tuning needs before
it searches a validation pool), `searched_files` (the files a search reads, for the run's
inputs) and `search_grid` (every (k1, b) of a grid on a pool: the runs, the ids of the queries
cut to Lucene's clause limit, the store's counts). A new engine is such a module plus one line
here; it is imported only when chosen (Lucene's builds indexes, the arrays engine reads the
analysed-text store).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from pipeline.core.errors import InputError

ENGINES: dict[str, str] = {
    "arrays": "pipeline.retrieval.bm25.store",  # arrays.py's scoring over the analysed-text store
    "lucene": "pipeline.retrieval.bm25.lucene",  # Anserini's IndexCollection, SearchCollection
}


def engine(name: str) -> ModuleType:
    """The module of the engine `name` (imported now), or a one-line InputError."""
    if name not in ENGINES:
        raise InputError(f"unknown BM25_ENGINE {name!r}: use one of {', '.join(ENGINES)}")
    return import_module(ENGINES[name])
