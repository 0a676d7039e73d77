"""The command that brings in a run made elsewhere: import-run, the API's import_run
(pipeline/retrieval/imported.py)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import command_of
from pipeline.layout import IMPORT_RUN

command_of(api.import_run, IMPORT_RUN, "import a TREC run made elsewhere as a run of one pool "
           "(no POOL: of every pool), checked against it (unknown ids, duplicates, ties: "
           "refused or counted)", writes=("runs", "times"))
