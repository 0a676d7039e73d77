"""`python -m pipeline <stage>`: a thin command line over the stage functions. Standard
library only at the top, so `python3 -m pipeline check` runs before the environment exists;
each stage imports its module when it runs. Bad input: one line, exit status 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.cli.commands import COMMANDS, error_line
from pipeline.cli.registry import check_writes
from pipeline.cli.variables import OneLineParser
from pipeline.core import logs
from pipeline.core.errors import InputError, ToolError
from pipeline.options.checks import safe_path

CONSOLE_SCRIPT = "mdcr-pipeline"  # pyproject.toml's [project.scripts]


def program() -> str:
    """How the user called us, for messages: the console script, or python -m pipeline."""
    name = Path(sys.argv[0]).name
    return CONSOLE_SCRIPT if name == CONSOLE_SCRIPT else "python -m pipeline"


def build_parser(prog: str = "python -m pipeline") -> argparse.ArgumentParser:
    """The global options, then one sub-command per entry of the registry (COMMANDS)."""
    parser = OneLineParser(
        prog=prog,
        description="MDCR-style large-scale evaluation of scientific document encoders: "
                    "one command per stage (the Makefile chains them).")
    parser.set_defaults(program=prog)  # how a repair command names us (pipeline.core.repair)
    parser.add_argument("--corpora-root", default="corpora", type=safe_path)
    parser.add_argument("--index-root", default="indexes", type=safe_path)
    parser.add_argument("--runs-root", default="runs", type=safe_path)
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      default=0, help="warnings and errors only (no progress)")
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                      help="debug messages too")
    sub = parser.add_subparsers(dest="command", required=True)
    for entry in COMMANDS.values():
        entry.add_to(sub.add_parser(entry.name, help=entry.help, description=entry.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error is one line in the caller's words: make's variables when
    make ran it (a refusal naming BACKEND=..., not --backend ...), a repair as the command to
    type."""
    from pipeline.cli.variables import FROM_MAKE

    args = build_parser(program()).parse_args(argv)
    logs.setup(args.verbosity)
    from_make = args.command == "goal" or bool(os.environ.get(FROM_MAKE))
    try:
        check_writes(args)
        args.func(args)
    except InputError as exc:
        print(f"error: {error_line(exc, args, from_make)}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
