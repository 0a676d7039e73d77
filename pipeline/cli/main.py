"""`python -m pipeline <stage>`: a thin command line over the stage functions, each importing
its module when it runs (standard library only at the top: `python3 -m pipeline check` runs
before the environment exists). Bad input: one line, exit status 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.cli.commands import COMMANDS, error_line
from pipeline.cli.variables import FROM_MAKE, OneLineParser
from pipeline.core import logs
from pipeline.core.errors import InputError, ToolError
from pipeline.core.numba_cache import numba_cache
from pipeline.core.repair import PIPELINE_COMMAND
from pipeline.layout import DATA_FOLDERS
from pipeline.options.checks import safe_path
from pipeline.roots import ROOT_OPTIONS

CONSOLE_SCRIPT = "mdcr-pipeline"  # pyproject.toml's [project.scripts]


def program() -> str:
    """How the user called us, for messages: the console script, or python -m pipeline."""
    name = Path(sys.argv[0]).name
    return CONSOLE_SCRIPT if name == CONSOLE_SCRIPT else PIPELINE_COMMAND


def build_parser(prog: str = PIPELINE_COMMAND) -> argparse.ArgumentParser:
    """The global options, then one sub-command per entry of the registry (COMMANDS)."""
    parser = OneLineParser(
        prog=prog,
        description="MDCR-style large-scale evaluation of scientific document encoders: "
                    "one command per stage (the Makefile chains them).")
    parser.set_defaults(program=prog)  # how a repair command names us (pipeline.core.repair)
    for kind, option in ROOT_OPTIONS.items():  # the data folders, as make's DATA holds them
        parser.add_argument(option, default=DATA_FOLDERS[kind], type=safe_path)
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      default=0, help="warnings and errors only (no progress)")
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                      help="debug messages too")
    sub = parser.add_subparsers(dest="command", required=True)
    for entry in COMMANDS.values():
        entry.add_to(sub.add_parser(entry.name, help=entry.help, description=entry.help))
    return parser


INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C, as a shell's


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error is one line in the caller's words: make's variables when
    make ran it (BACKEND=..., not --backend ...), a repair as the command to type."""
    args = build_parser(program()).parse_args(argv)
    logs.setup(args.verbosity)
    numba_cache()  # before numba is imported: a private cache where numba would keep none
    from_make = args.command == "goal" or bool(os.environ.get(FROM_MAKE))
    try:
        args.func(args)
    except InputError as exc:
        print(f"error: {error_line(exc, args, from_make)}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of wherever it fell
        print("error: stopped by Ctrl-C: what the stage finished is kept, nothing half-written "
              "counts as made; run the same command again to go on", file=sys.stderr)
        return INTERRUPTED
    return 0
