"""The commands about the house: make's variable check, its goals and tables, the model list,
the numba warm-up, verify and sweep."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from pipeline import api
from pipeline.cli.registry import arg, command, command_of, flag, roots
from pipeline.core.errors import InputError
from pipeline.models import REGISTRY
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
    from pipeline.cli.variables import read_make
    from pipeline.options.declared import BY_NAME, markdown, write

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


@command("models", "list the model registry", corpus=False, writes=())
def cmd_models(args: argparse.Namespace) -> None:
    for entry in REGISTRY.values():
        print(f"{entry.name:14} {entry.kind:12} {entry.hf_id or '-':52} {entry.similarity}")


@command("warm", "compile the numba kernels and the pipeline's bytecode once, where later "
         "processes load them (make setup runs it; docs/cluster.md: on a new node)",
         corpus=False, writes=())
def cmd_warm(args: argparse.Namespace) -> None:
    """Every kernel a BM25 search and an eval stage use, compiled or loaded from numba's cache
    (tests/evaluation/test_kernels.py: an eval stage after it compiles none), then the
    bytecode of the pipeline's modules (`compileall`: a process that may not write it,
    PYTHONDONTWRITEBYTECODE or a read-only checkout, compiles every module it imports
    otherwise). One line each: what was compiled, and where it is kept."""
    import time

    from pipeline import metrics
    from pipeline.retrieval.bm25 import store as bm25_store

    start = time.perf_counter()
    with metrics.compilations() as compiled:
        bm25_store.warm_up()
        metrics.warm_up()
    caches = metrics.kernel_caches()
    nowhere = caches.pop("", 0)
    kept = ", ".join(f"{folder} ({n})" for folder, n in sorted(caches.items()))
    log.info(f"[warm] numba: {sum(caches.values()) + nowhere} kernels ready in "
             f"{time.perf_counter() - start:.1f}s ({len(compiled)} functions compiled, the "
             f"others loaded from its cache); cached in {kept or 'no folder'}")
    if nowhere:
        log.warning(f"[warm] numba: {nowhere} kernels cached nowhere (no writable folder): "
                    "each process compiles them again; set NUMBA_CACHE_DIR to a folder you "
                    "can write (docs/cluster.md)")
    written = bytecode()
    log.info(f"[warm] bytecode: {written}")


def bytecode() -> str:
    """The pipeline's modules compiled to bytecode where Python looks for it (`__pycache__`
    beside each, or under PYTHONPYCACHEPREFIX), those current skipped; what was done, one
    phrase."""
    import compileall
    import io
    from contextlib import redirect_stdout
    from pathlib import Path

    import pipeline

    package = Path(pipeline.__file__).parent
    with redirect_stdout(io.StringIO()) as said:
        done = compileall.compile_dir(package, quiet=0, workers=1)
    compiled = said.getvalue().count("Compiling ")
    if not done:
        return (f"not every module of {package} could be written (a read-only checkout? "
                "PYTHONPYCACHEPREFIX names a folder to write it in)")
    return (f"{compiled} module{'' if compiled == 1 else 's'} of {package} compiled, the "
            "others current")


def problems(lines: list[str], args: argparse.Namespace) -> None:
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


@command("sweep", "remove temporaries left by stopped processes", corpus=False, writes=())
def cmd_sweep(args: argparse.Namespace) -> None:
    """The temporaries of stopped processes under the data roots (verify's DEBRIS)."""
    from pipeline.core.atomic import sweep

    removed = 0
    for root in roots(args):
        folders = {p.parent for p in root.rglob(".*.tmp")} if root.exists() else ()
        removed += sum(sweep(folder) for folder in folders)
    log.info(f"[sweep] {removed} temporaries of stopped processes removed")
