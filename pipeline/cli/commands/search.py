"""The retrieval commands: index and search (a fused model's search fuses its models' runs)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import command_of

command_of(api.index, "index", "build what a model searches (embeddings, BM25's analysed-text "
           "store, a Lucene index)", writes=("indexes", "times"),
           from_args={"program": "program"})
command_of(api.search, "search", "retrieve the top k per query, write TREC + parquet runs "
           "(several pools in one process)", writes=("indexes", "runs", "times"),
           from_args={"program": "program"})
