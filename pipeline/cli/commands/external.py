"""The commands that read outside collections: BEIR's layout, ir_datasets' collections and
the CSFCube release (each import logs what it kept and left out); write a pool or runs for
other tools: BEIR's layout, MTEB's results; and bring in a run made elsewhere (import-run).
Each is the API function of its stage (command_of)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import command_of
from pipeline.layout import IMPORT_RUN

command_of(api.import_beir, "import-beir", "read a test collection in BEIR's layout "
           "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv) into a corpus and one pool",
           writes=("corpora", "times"))
command_of(api.import_csfcube, "import-csfcube", "read the CSFCube release "
           "(test-pid2anns-csfcube-<facet>.json, abstracts-csfcube-preds.jsonl, "
           "queries-release.csv, evaluation_splits.json) into a corpus and one pool per facet",
           writes=("corpora", "times"))
command_of(api.import_collection, "import-irds", "read a test collection of the ir_datasets "
           "package (documents, queries, qrels) into a corpus and one pool, as import-beir "
           "does", writes=("corpora", "times"))
command_of(api.export_beir, "export-beir", "write a pool as a BEIR folder (corpus.jsonl, "
           "queries.jsonl, qrels/<split>.tsv, datasheet.json)", writes=())
command_of(api.export_mteb, "export-mteb", "write a model's run on each pool of the corpus as "
           "an MTEB TaskResult JSON file: OUT/<name>/<revision>/<corpus>.<pool>.json, as MTEB's "
           "ResultCache files the model (a hub model by its hub id, org__name)",
           writes=())
command_of(api.import_run, IMPORT_RUN, "import a TREC run made elsewhere as a run of one pool "
           "(no POOL: of every pool), checked against it (unknown ids, duplicates, ties: "
           "refused or counted)", writes=("runs", "times"))
