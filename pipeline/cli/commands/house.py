"""The commands about the house: make's variable check, its goals and tables, the model list,
the numba warm-up, verify, sweep and the corpus manifest."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from pipeline.cli.registry import command, place_of, where_of
from pipeline.core.errors import InputError
from pipeline.layout import (
    MANIFEST,
)
from pipeline.models import HF_PREFIX, REGISTRY, VECTORS_PREFIX, get_model
from pipeline.options.checks import given_path
from pipeline.options.declared import RULES
from pipeline.retrieval.imported import check_model_name

log = logging.getLogger(__name__)


@command("check", "check the make variables (make passes them in the environment): exit "
         "status 2 and one line naming the variable if one is bad (every make target runs it "
         "first)", corpus=False, writes=())
def cmd_check(args: argparse.Namespace) -> None:
    """The Makefile's check (once per make): it hands the token of what it checked to the
    recipes (MDCR_CHECKED), whose goals then do not check the same variables again."""
    from pipeline.cli.variables import OVERRIDES_ENV, checked_token, read

    variables = read(os.environ)
    check_variables(variables)
    if OVERRIDES_ENV in os.environ:  # the Makefile's $(shell): it reads the token
        print(f"checked={checked_token(variables)}")


def checked_variables(environ: Mapping[str, str]) -> argparse.Namespace:
    """The make variables of `environ` (pipeline/cli/variables.py: read), checked as the
    Makefile's check checked them, unless it did (the token it handed make's recipes,
    MDCR_CHECKED, is that of these values): one check per make."""
    from pipeline.cli.variables import CHECKED_ENV, checked_token, read

    variables = read(environ)
    if environ.get(CHECKED_ENV) != checked_token(variables):
        check_variables(variables)
    return variables


def check_variables(args: argparse.Namespace) -> None:
    """The make variables read (pipeline/cli/variables.py: read, whose checks did most of it),
    each checked with those it depends on and with what make's goals need; writes nothing.
    InputError on the first bad one."""
    from pipeline.cli.goals import check_goals
    from pipeline.cli.variables import VARIABLES, model_spec, run_without_model

    if args.MODEL is not None:
        names = args.MODEL.split()
        if len(names) > 1:
            raise InputError(f"MODEL={args.MODEL!r} names {len(names)} models: run one model at "
                             f"a time (make eval MODEL={shlex.quote(names[0])}), or use "
                             "DEMO_MODELS or MODELS (make fuse) for several")
        if not names:
            check_goals(args)  # a goal that needs MODEL (make import-run) says so
            raise InputError("MODEL is empty: give one model name (make models lists them)")
        if names[0] != args.MODEL:
            raise InputError(f"MODEL={args.MODEL!r} holds a space or a line break: give one "
                             "model name without spaces")
    # variables holding one value (a path, a name): a space in one is a mistake
    for var in (v for v in VARIABLES if v.one_word):
        for name in filter(None, (var.name, var.alias)):
            value = getattr(args, name, None)
            if isinstance(value, str) and re.search(r"\s", value):
                raise InputError(f"{name}={value!r} holds a space or a line break: give one "
                                 "value without spaces")
    imported = run_without_model(args)
    if imported:  # make import-run's new name, or a run imported already: no model to load
        check_goals(args)  # first: MODEL's default (minilm) is no name for an imported run
        check_model_name(args.MODEL)
    for name in f"{'' if imported else model_spec(args)} {args.DEMO_MODELS or ''}".split():
        if name.startswith(HF_PREFIX):  # validates the id and the pooling
            get_model(f"{name}@{args.POOLING or 'mean'}")
            continue
        if name.startswith(VECTORS_PREFIX):  # validates the name (files: vectors--<name>)
            get_model(name)
            continue
        entry = get_model(name)
        if entry.name != name:
            raise InputError(f"MODEL {name!r}: write it as registered, {entry.name!r}")
    for rule in RULES:  # the rules that relate several options, beside their declarations
        rule(args)
    check_goals(args)  # what make's goals need: their variables, a pool, this machine


def _goal_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("goal", help="the make target whose stages to run (pipeline/cli/goals.py)")


@command("goal", "run the stages of one make target with the make variables of the "
         "environment (each checked first); with make -n, print their commands only",
         _goal_arguments, corpus=False, writes=())
def cmd_goal(args: argparse.Namespace) -> None:
    """What the Makefile's recipes run: `make pool SIZE=20k` is `python -m pipeline goal pool`
    with SIZE=20k in the environment (make puts it there). Each stage runs as
    `python -m pipeline <stage>` would, in this process; a failing one stops the goal."""
    from pipeline.cli.goals import run_goal
    from pipeline.cli.variables import derived

    variables = checked_variables(os.environ)
    run_goal(args, variables, derived(variables))




def _variables_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--write", action="store_true", help="write the generated files that differ "
                   "from the declaration (pipeline/cli/variables.py)")
    p.add_argument("--value", metavar="NAME", help="print the value of the variable NAME: the "
                   "environment's (make's command line), else its default, checked")


@command("variables", "the make variables: print their table, or write docs/variables.md "
         "again",
         _variables_arguments, corpus=False, writes=())
def cmd_variables(args: argparse.Namespace) -> None:
    from pipeline.cli.variables import BY_NAME, markdown, read, write

    if args.value:
        if args.value not in BY_NAME:
            raise InputError(f"no make variable {args.value} (docs/variables.md)")
        print(getattr(read(os.environ), args.value))
        return
    if not args.write:
        sys.stdout.write(markdown())
        return
    for path in write():
        log.info(f"[variables] wrote {path}")


@command("targets", "the Makefile's targets, one line each (make help)", corpus=False, writes=())
def cmd_targets(args: argparse.Namespace) -> None:
    from pipeline.cli.goals import help_text

    sys.stdout.write(help_text())


@command("models", "list the model registry", corpus=False, writes=())
def cmd_models(args: argparse.Namespace) -> None:
    for entry in REGISTRY.values():
        print(f"{entry.name:14} {entry.kind:12} {entry.hf_id or '-':52} {entry.similarity}")


@command("warm", "compile the numba kernels once (make setup runs it)", corpus=False, writes=())
def cmd_warm(args: argparse.Namespace) -> None:
    """Compile the numba kernels of BM25 and of the metrics into numba's cache (make setup)."""
    from pipeline import metrics
    from pipeline.retrieval.bm25 import store as bm25_store

    bm25_store.warm_up()
    metrics.warm_up()


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="*", type=given_path,
                   help="folders to check (default: corpora, indexes, runs)")
    p.add_argument("--quick", action="store_true", help="sizes only, no checksums")


@command("verify", "check checksums and completeness of every artifact; exit 1 when something "
         "is corrupt, partial or stale", _verify_arguments, corpus=False, writes=())
def cmd_verify(args: argparse.Namespace) -> None:
    from pipeline.core.inputs import Roots
    from pipeline.verify import verify

    data = Roots(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    problems = verify(data, [Path(p) for p in args.path] or None, deep=not args.quick,
                      named=where_of(args))
    for line in problems:
        print(line)
    if problems:
        raise SystemExit(1)


@command("sweep", "remove temporaries left by stopped processes", corpus=False, writes=())
def cmd_sweep(args: argparse.Namespace) -> None:
    """Remove the temporaries of stopped processes under the data roots (verify's DEBRIS)."""
    from pipeline.core.atomic import sweep

    removed = 0
    for root in (args.corpora_root, args.index_root, args.runs_root):
        folders = {p.parent for p in Path(root).rglob(".*.tmp")} if Path(root).exists() else ()
        removed += sum(sweep(folder) for folder in folders)
    log.info(f"[sweep] {removed} temporaries of stopped processes removed")


@command("manifest", "print the corpus manifest (ingest, prefilter counts)", writes=())
def cmd_manifest(args: argparse.Namespace) -> None:
    from pipeline.core.files import read_json

    path = place_of(args).corpus_dir / MANIFEST
    print(json.dumps(read_json(path), indent=2) if path.exists() else "{}")
