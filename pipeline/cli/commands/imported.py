"""The command that brings in a run made elsewhere: import-run (pipeline/retrieval/imported.py)."""

from __future__ import annotations

import argparse

from pipeline.cli.registry import command, place_of
from pipeline.layout import IMPORT_RUN


@command(IMPORT_RUN, "import a TREC run made elsewhere as a run of one pool (no POOL: of "
         "every pool), checked against it (unknown ids, duplicates, ties: refused or counted)",
         writes=("runs", "times"))
def cmd_import_run(args: argparse.Namespace) -> None:
    from pipeline.retrieval.imported import import_run

    import_run(place_of(args), args.pool or None, args.run, args.model,
               drop_unknown=args.drop_unknown, replace=args.replace)
