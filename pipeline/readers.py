"""The reader registry: SOURCE names the module that reads a raw release into the merge's
scratch parts. A reader module holds `WHAT` (what its raw folder is, for error messages),
`SETTINGS` (the ingest options it takes beyond `strict`), `MADE_BY` (how a raw folder that
does not exist is made; `{corpus}` stands for the corpus's name), `raw_shards(raw_dir)` (the
folder shard names are relative to, and the shards) and `stage(raw_dir, work, strict, workers,
**settings)` (the shards read, the merge's bucket count, one result per shard). A new reader
is that module plus one line below. Standard library only: the Makefile checks SOURCE with it.
"""

from __future__ import annotations

from importlib import import_module

READERS: dict[str, str] = {
    "s2orc": "pipeline.ingest.s2orc",  # the S2ORC 2020 release: metadata/*.jsonl[.gz]
    "s2ag": "pipeline.ingest.s2ag",  # the S2AG datasets: papers/, abstracts/, citations/
}
SOURCES = tuple(READERS)


def reader(source: str):
    """The reader module of `source` (imported now)."""
    from pipeline.core.errors import InputError

    if source not in READERS:
        raise InputError(f"unknown corpus source {source!r}: use one of {', '.join(SOURCES)}")
    return import_module(READERS[source])
