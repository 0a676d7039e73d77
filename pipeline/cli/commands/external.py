"""The commands that read outside collections: BEIR's layout, ir_datasets' collections and
the CSFCube release (each import logs what it kept and left out); write a pool or runs for
other tools: BEIR's layout, MTEB's results; and bring in a run made elsewhere (import-run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline import api
from pipeline.cli.registry import RUN, command, command_of, place_of
from pipeline.layout import IMPORT_RUN


@command("import-beir", "read a test collection in BEIR's layout (corpus.jsonl, queries.jsonl, "
         "qrels/<split>.tsv) into a corpus and one pool", writes=("corpora", "times"))
def cmd_import_beir(args: argparse.Namespace) -> None:
    from pipeline.external.beir import import_beir

    place = place_of(args)
    import_beir(Path(args.src), place.corpus_dir, args.split, args.replace, place.derived,
                args.judged)


@command("import-csfcube", "read the CSFCube release (test-pid2anns-csfcube-<facet>.json, "
         "abstracts-csfcube-preds.jsonl, queries-release.csv, evaluation_splits.json) into a "
         "corpus and one pool per facet", writes=("corpora", "times"))
def cmd_import_csfcube(args: argparse.Namespace) -> None:
    from pipeline.external.csfcube import import_csfcube

    place = place_of(args)
    import_csfcube(Path(args.src), place.corpus_dir, args.replace, place.derived)


command_of(api.import_collection, "import-irds", "read a test collection of the ir_datasets "
           "package (documents, queries, qrels) into a corpus and one pool, as import-beir "
           "does", writes=("corpora", "times"))
command_of(api.export_beir, "export-beir", "write a pool as a BEIR folder (corpus.jsonl, "
           "queries.jsonl, qrels/<split>.tsv, datasheet.json)", writes=())


@command("export-mteb", "write a model's run on each pool of the corpus as an MTEB TaskResult "
         "JSON file: OUT/<model>/no_revision_available/<corpus>.<pool>.json", RUN, writes=())
def cmd_export_mteb(args: argparse.Namespace) -> None:
    from pipeline.external.mteb_results import export_mteb

    export_mteb(place_of(args), args.model, Path(args.out))


command_of(api.import_run, IMPORT_RUN, "import a TREC run made elsewhere as a run of one pool "
           "(no POOL: of every pool), checked against it (unknown ids, duplicates, ties: "
           "refused or counted)", writes=("runs", "times"))
