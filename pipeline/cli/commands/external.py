"""The commands that read outside collections: BEIR's layout, ir_datasets' collections and
the CSFCube release."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import command, place_of

log = logging.getLogger(__name__)


@command("import-beir", "read a test collection in BEIR's layout (corpus.jsonl, queries.jsonl, "
         "qrels/<split>.tsv) into a corpus and one pool", writes=("corpora", "times"))
def cmd_import_beir(args: argparse.Namespace) -> None:
    from pipeline.external.beir import import_beir

    info = import_beir(Path(args.src), place_of(args).corpus_dir, args.split, args.replace,
                       place_of(args).derived)["collection"]
    log_counts("import-beir", args.corpus, info)


def log_counts(command: str, corpus: str, info: dict) -> None:
    """Log what an import of a BEIR-style collection kept and left out: each count of what
    was read adds up, read = kept + each reason (docs/collections.md)."""
    counts = info["counts"]
    log.info(f"[{command}] corpus {corpus} ({info['installed']}), pool "
             f"{info['pools'][0]}: {counts['candidates']} documents of "
             f"{counts['documents_read']} read ({counts['duplicate_documents_dropped']} exact "
             f"repeats), {counts['queries']} queries of {counts['queries_read']} read "
             f"({counts['duplicate_queries_dropped']} exact repeats, "
             f"{counts['queries_without_text_left_out']} without text, "
             f"{counts['queries_without_qrels_left_out']} without judgments in this split), "
             f"{counts['qrels']} judgments of {counts['qrels_read']} read "
             f"({counts['qrels_duplicate_pairs_dropped']} repeated, "
             f"{counts['qrels_of_queries_without_text_dropped']} of queries without text, "
             f"{counts['qrels_dropped_unknown_document_or_query']} naming an unknown document "
             f"or query, {counts['qrels_of_the_query_itself_left_out']} of the query itself)")


@command("import-csfcube", "read the CSFCube release (test-pid2anns-csfcube-<facet>.json, "
         "abstracts-csfcube-preds.jsonl, queries-release.csv, evaluation_splits.json) into a "
         "corpus and one pool per facet", writes=("corpora", "times"))
def cmd_import_csfcube(args: argparse.Namespace) -> None:
    from pipeline.external.csfcube import FACETS, import_csfcube

    info = import_csfcube(Path(args.src), place_of(args).corpus_dir, args.replace,
                          place_of(args).derived)["collection"]
    counts = info["counts"]
    per_facet = ", ".join(f"{f} {counts[f'{f}_queries']} queries / {counts[f'{f}_candidates']} "
                          "candidates" for f in FACETS)
    log.info(f"[import-csfcube] corpus {args.corpus} ({info['installed']}), pools "
             f"{', '.join(info['pools'])}: {per_facet}; {counts['papers']} papers "
             f"({counts['papers_in_no_pool_left_out']} records naming no pool's paper left out, "
             f"{counts['paper_records_repeated']} records and {counts['query_rows_repeated']} "
             f"query rows repeated exactly, read once)")


@command("import-irds", "read a test collection of the ir_datasets package (documents, "
         "queries, qrels) into a corpus and one pool, as import-beir does",
         writes=("corpora", "times"))
def cmd_import_irds(args: argparse.Namespace) -> None:
    from pipeline.external.irds import COMMAND, import_irds

    info = import_irds(args.dataset, place_of(args).corpus_dir, args.split, args.replace,
                       place_of(args).derived)["collection"]
    log_counts(COMMAND, args.corpus, info)
