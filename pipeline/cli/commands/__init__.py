"""The commands of `python -m pipeline`, a module per stage, each registered in
`registry.COMMANDS` when imported: here in the data flow's order, `--help`'s. Heavy modules
are imported inside the command that needs them, so `check` and a no-op stage start fast."""
# ruff: noqa: I001  (the order of these imports is the order of the commands)

from pipeline.cli.commands import house  # noqa: F401  check, variables, targets, models, ...
from pipeline.cli.commands import corpus  # noqa: F401  synth, ingest, prefilter, corpus
from pipeline.cli.commands import download  # noqa: F401  download (S2AG)
from pipeline.cli.commands import pools  # noqa: F401  pool, pools-paper
from pipeline.cli.commands import embed  # noqa: F401  embed, submit-embed, after-embed
from pipeline.cli.commands import search  # noqa: F401  index, search
from pipeline.cli.commands import evaluate  # noqa: F401  eval, collect, report
from pipeline.cli.commands import mdcr  # noqa: F401  mdcr, mdcr-jaccard, the official files
from pipeline.cli.commands import external  # noqa: F401  import-*, export-*, import-run
from pipeline.cli.commands import judging  # noqa: F401  judge, judge-page, judge-agreement
from pipeline.cli.registry import COMMANDS, error_line

__all__ = ["COMMANDS", "error_line"]
