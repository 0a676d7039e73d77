"""The commands about the house: make's variable check, its goals and tables, the model list,
the numba warm-up, verify and sweep."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from pipeline import api
from pipeline.cli.registry import arg, command, command_of, flag
from pipeline.core.errors import InputError
from pipeline.models import ModelEntry, family
from pipeline.options.checks import given_path
from pipeline.options.declared import RULES
from pipeline.retrieval.imported import check_model_name

log = logging.getLogger(__name__)


@command("check", "check the make variables given (make's command line, from MAKEFLAGS, and "
         "the environment): one line and exit status 2 if one is bad", corpus=False, writes=())
def cmd_check(args: argparse.Namespace) -> None:
    """`make check`, make setup's first step (the system Python, before the environment)."""
    checked_make()


def checked_make() -> argparse.Namespace:
    """make's variables, each checked, then together (RULES) and against what make's goals
    need: InputError on the first bad one."""
    from pipeline.cli.goals import check_goals
    from pipeline.cli.variables import model_spec, read_make, run_without_model

    args = read_make(os.environ)
    if args.MODEL is not None and not args.MODEL.split():
        check_goals(args)  # a goal that needs MODEL (make import-run) says so first
    imported = run_without_model(args)
    if imported:  # make import-run's new name, or a run imported already: no model to load
        check_goals(args)  # first: MODEL's default (minilm) is no name for an imported run
        check_model_name(args.MODEL)
    loaded = argparse.Namespace(**{**vars(args),
                                   "MODEL": None if imported else model_spec(args)})
    for rule in RULES:
        rule(loaded)
    check_goals(args)  # what make's goals need: their variables, a pool, this machine
    return args


@command("goal", "run a make target's chain of stages with make's variables (MAKEFLAGS, the "
         "environment), checked once first; with make -n, print their commands only",
         arg("goal", help="the make target whose stages to run (pipeline/cli/goals.py)"),
         corpus=False, writes=())
def cmd_goal(args: argparse.Namespace) -> None:
    """What the Makefile's recipes run (`make eval` is `python -m pipeline goal eval`): the
    variables checked once, then the target's chain of stages in this process."""
    from pipeline.cli.goals import run_goal

    run_goal(args, checked_make())


@command("variables", "the make variables: print their table, or write docs/variables.md "
         "again",
         flag("--write", "write the generated files that differ from the declaration "
              "(pipeline/options/declared.py)"),
         arg("--value", metavar="NAME", help="print the value of the variable NAME: the "
             "environment's (make's command line), else its default, checked"),
         corpus=False, writes=())
def cmd_variables(args: argparse.Namespace) -> None:
    from pipeline.cli.docs import markdown, write
    from pipeline.cli.variables import read_make
    from pipeline.options.declared import BY_NAME

    if args.value:
        if args.value not in BY_NAME:
            raise InputError(f"no make variable {args.value} (docs/variables.md)")
        print(getattr(read_make(os.environ), args.value))
    elif args.write:
        for path in write():
            log.info(f"[variables] wrote {path}")
    else:
        sys.stdout.write(markdown())


@command("targets", "the Makefile's targets, one line each (make help)", corpus=False, writes=())
def cmd_targets(args: argparse.Namespace) -> None:
    """`make help`: the variables given checked first, as by every goal."""
    from pipeline.cli.goals import help_text

    checked_make()
    sys.stdout.write(help_text())


def listed(entries: list[ModelEntry], data: object, values: Mapping[str, Any]) -> None:
    """The model registry, one line per model: name, kind, family, weights, similarity, in
    columns two spaces apart at least (a family may be two words: late interaction)."""
    rows = [(entry.name, entry.kind, family(entry), entry.hf_id or "-", entry.similarity)
            for entry in entries]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    for *cells, similarity in rows:
        print("  ".join(f"{cell:{width}}" for cell, width in zip(cells, widths, strict=True))
              + f"  {similarity}")


command_of(api.list_models, "models", "list the model registry", writes=(), show=listed)
command_of(api.warm, "warm", "compile the numba kernels and the pipeline's bytecode once, where "
           "later processes load them (make setup runs it; docs/cluster.md: on a new node)",
           writes=())  # its lines are api.warm's own log


def problems(lines: list[str], data: object, values: Mapping[str, Any]) -> None:
    """verify's lines, one per problem; exit status 1 when there is one."""
    for line in lines:
        print(line)
    if lines:
        raise SystemExit(1)


command_of(api.verify_data, "verify", "check checksums and completeness of every artifact; exit 1 "
           "when something is corrupt, partial or stale",
           arg("path", nargs="*", type=given_path,
               help="folders to check (default: corpora, indexes, runs)"),
           arg("--quick", dest="deep", action="store_false", help="sizes only, no checksums"),
           writes=(), show=problems, from_args={"folders": "path", "program": "program"})


command_of(api.sweep, "sweep", "remove temporaries left by stopped processes",
           writes=())  # its line is api.sweep's own log
