"""The command line: `python -m pipeline <stage>` (what the Makefile runs)."""

from pipeline.cli.main import main

__all__ = ["main"]
