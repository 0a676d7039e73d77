"""The command line: `python -m pipeline <stage>` (what the Makefile runs)."""

from pipeline.cli.main import main as main  # the console script (pyproject.toml)
