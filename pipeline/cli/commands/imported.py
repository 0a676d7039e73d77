"""The command that brings in a run made elsewhere: import-run (pipeline/retrieval/imported.py)."""

from __future__ import annotations

import argparse
import logging

from pipeline.cli.registry import command, place_of
from pipeline.layout import IMPORT_RUN
from pipeline.options.checks import input_path, pool_name

log = logging.getLogger(__name__)


def _import_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", required=True, type=pool_name, help="the pool the run ranks")
    p.add_argument("--run", required=True, type=input_path,
                   help="the TREC run file (qid Q0 docid rank score tag per line)")
    p.add_argument("--model", required=True,
                   help="the name the run is scored and reported under (not a registered "
                   "model's)")
    p.add_argument("--drop-unknown", action="store_true", help="drop (and count) the lines "
                   "naming a query or paper the pool does not have, instead of refusing them")
    p.add_argument("--replace", action="store_true", help="replace a run imported under this "
                   "name from another source")


@command(IMPORT_RUN, "import a TREC run made elsewhere as a run of one pool, checked against "
         "it (unknown ids, duplicates, ties: refused or counted); eval then scores it",
         _import_run_arguments, writes=("runs", "times"))
def cmd_import_run(args: argparse.Namespace) -> None:
    from pipeline.retrieval.imported import import_run

    info = import_run(place_of(args), args.pool, args.run, args.model,
                      drop_unknown=args.drop_unknown, replace=args.replace)
    counts = ", ".join(f"{name} {value:,}" for name, value in info["counts"].items())
    log.info(f"[{IMPORT_RUN}] run {args.model} of pool {args.pool} (corpus {args.corpus}) from "
             f"{info['details']['source']} (sha256 {info['details']['source_sha256'][:12]}): "
             f"{counts}")
