"""Ingest: raw shards (S2ORC 2020 metadata or the S2AG datasets) -> `papers.parquet`,
`citations.parquet`, `quarantine.jsonl`; then the MDCR prefilter (docs/ingest.md).

Shards are read in parallel, one worker process per shard (`workers`), each streaming its
shard in bounded blocks into scratch parts; the merge then keeps one record per paper id (the
first by shard and line order), flags dangling citations bucket by bucket and writes the corpus
files. The output does not depend on the number of workers, and memory does not grow with the
corpus, the number of shards or the size of one shard. Every line is accounted for:
`lines_read = papers + quarantined + duplicate_records`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# (the function `prefilter` is bound here, over the submodule of the same name)
from pipeline.corpus.manifest import corpus_section, update_corpus_manifest
from pipeline.ingest.prefilter import DROP_REASONS, drop_reason, prefilter, reconcile

# The readers' stage, imported on first use: `import pipeline.ingest` stays free of the
# readers' heavy imports.
_EXPORTS = {"ingest": "stage", "ingest_is_current": "stage", "raw_shards": "stage",
            "find_shards": "shards"}
__all__ = ["DROP_REASONS", "corpus_section", "drop_reason", "prefilter", "reconcile",
           "update_corpus_manifest", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"pipeline.ingest.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'pipeline.ingest' has no attribute {name!r}")
