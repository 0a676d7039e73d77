"""The command registry of `python -m pipeline` and what the commands share: the options
several take, and the data place, pools and repair line made from a command's arguments."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.cli.variables import OneLineParser
from pipeline.core.errors import InputError, OptionError
from pipeline.core.repair import PIPELINE_COMMAND, Where
from pipeline.layout import (
    Place,
    corpus_path,
    stage_times_path,
)
from pipeline.options.checks import (
    DTYPES,
    choice,
    corpus_name,
    cpus_per_task,
    device,
    given_path,
    non_negative,
    pool_name,
    positive,
    worker_count,
)
from pipeline.options.declared import BY_NAME, VARIABLES, Variable, worded
from pipeline.readers import SOURCES
from pipeline.roots import where


# ---- the registry: each command with its help and its options, next to its function --------
@dataclass(frozen=True)
class Command:
    """A sub-command of `python -m pipeline`: main.build_parser adds one per entry of COMMANDS
    (in this order), each with --corpus (unless corpus=False) and the options `arguments` add.
    writes: what it writes into (WRITES' kinds: a data root, or "times", its stage-times log
    under runs/<corpus>/), checked before any work (main.check_roots), so that a read-only
    folder is one line, not a traceback later."""

    name: str
    help: str
    func: Callable[[argparse.Namespace], None]
    arguments: tuple[Callable[[argparse.ArgumentParser], None], ...]
    writes: tuple[str, ...]
    corpus: bool = True

    def add_to(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.set_defaults(func=self.func, stage=self.name)
        if self.corpus:
            parser.add_argument("--corpus", default=BY_NAME["CORPUS"].default, type=corpus_name,
                                help="folder under corpora/")
        for add in self.arguments:
            add(parser)
        for var in VARIABLES:  # the declared options of this stage
            if self.name in var.stages:
                add_declared(parser, var, self.name)
        return parser


COMMANDS: dict[str, Command] = {}
# What a command may write into (Command.writes): the data roots, and "times", the corpus's
# stage-times log (runs/<corpus>/).
WRITES = ("corpora", "indexes", "runs", "times")


def command(name: str, help_text: str, *arguments: Callable[[argparse.ArgumentParser], None],
            writes: tuple[str, ...], corpus: bool = True):
    """Register the decorated function as the command `name`, with the options `arguments`
    add (functions of an ArgumentParser) and what it writes into (`writes`, every command
    declares it: () for none)."""
    unknown = set(writes) - set(WRITES)
    if unknown:
        raise ValueError(f"command {name}: writes {sorted(unknown)}, not one of {WRITES}")

    def register(func):
        COMMANDS[name] = Command(name, help_text, func, arguments, writes, corpus)
        return func
    return register


def check_writes(args: argparse.Namespace) -> None:
    """Each folder the command writes into (its declaration, Command.writes) is writable,
    before any work."""
    from pipeline.core.atomic import check_writable

    roots = {"corpora": args.corpora_root, "indexes": args.index_root, "runs": args.runs_root}
    corpus = getattr(args, "corpus", None)
    if corpus:
        roots["times"] = str(Path(args.runs_root) / corpus)
    for kind in COMMANDS[args.stage].writes:
        if kind in roots:
            check_writable(Path(roots[kind]))


def stage_args(args: argparse.Namespace, name: str, *argv: str) -> argparse.Namespace:
    """The options of the command `name` given `argv` (every other option its default), with
    the data roots and the manner of `args`: one command running another in this process."""
    parser = COMMANDS[name].add_to(OneLineParser(prog=f"{getattr(args, 'program', '')} {name}"))
    stage = parser.parse_args(list(argv))
    for key in ("corpora_root", "index_root", "runs_root", "program", "verbosity"):
        if hasattr(args, key):
            setattr(stage, key, getattr(args, key))
    return stage


def run_stage(args: argparse.Namespace, name: str, *argv: str) -> None:
    """Run the command `name` in this process, as `python -m pipeline name argv...` would."""
    stage = stage_args(args, name, *argv)
    stage.func(stage)


# ---- the declared options (pipeline/options/declared.py): each stage's, and their argv -------
def add_declared(parser: argparse.ArgumentParser, var: Variable, stage: str) -> None:
    """The option of the declared `var` in the command `stage`: its flag, check, default and
    help (argparse checks a default given as text with the option's check, as make's); a
    switch is a bare option; required or with no default where the declaration says so."""
    text = var.help.replace("%", "%%")
    if var.switch:
        parser.add_argument(var.option, action="store_true", help=text)
        return
    required = stage in var.required
    bare = required or stage in var.no_default or callable(var.default) or var.default == ""
    parser.add_argument(var.option, type=var.check, default=None if bare else var.default,
                        required=required, help=text)


def opt(option: str, value: object) -> list[str]:
    """`option value`, or nothing when the value is empty (an optional variable not given)."""
    return [option, str(value)] if value not in (None, "") else []


def declared_argv(stage: str, value: Callable[[Variable], object]) -> list[str]:
    """The declared options of the command `stage`, each with its value (`value`: of make's
    variables, by name, or of a command's arguments, by dest: `of_make`, `of_args`)."""
    return [word for var in VARIABLES if stage in var.stages
            for word in (switch(var.option, value(var)) if var.switch
                         else opt(var.option, value(var)))]


def switch(option: str, value: object) -> list[str]:
    """`option` when a switch is on: its make variable 1 (STRICT=1), or the option given."""
    return [option] if value in ("1", True) else []


def of_make(variables: argparse.Namespace) -> Callable[[Variable], object]:
    """The value of a declared option among make's checked variables."""
    return lambda var: getattr(variables, var.name)


def of_args(args: argparse.Namespace) -> Callable[[Variable], object]:
    """The value of a declared option among a command's arguments."""
    return lambda var: getattr(args, var.dest)


def search_argv(corpus: str, model: str, value: Callable[[Variable], object]) -> list[str]:
    """The options of `make search` for `model`, with make search's settings (`value` of each
    declared option of the search: `of_make`, `of_args`): index first, keep current runs,
    repair stale pools."""
    return ["--corpus", corpus, "--model", model,
            *declared_argv("search", value), "--index", "--stale-only",
            "--repair-pools"]


def eval_argv(corpus: str, run: str, value: Callable[[Variable], object]) -> list[str]:
    """The options of `make eval` for the runs `run`, with its settings (`value` of each
    declared option of eval): score every run whose evaluation is not current, collect."""
    return ["--corpus", corpus, "--model", run, "--stale-only", *declared_argv("eval", value),
            "--collect"]


# The options several commands share.
def pool_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", action="append", type=pool_name,
                   help="pool name (repeatable; default all)")


def model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=BY_NAME["MODEL"].default)


def run_arg(p: argparse.ArgumentParser) -> None:  # the model whose saved runs a command reads
    p.add_argument("--model", required=True)


def embed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=positive)
    p.add_argument("--dtype", default="float32", type=choice(DTYPES))
    p.add_argument("--device", type=device, help="cpu | cuda (default: cuda if available)")
    p.add_argument("--part-size", type=positive,
                   help="papers per store part, the work a kill can lose (default: 4,096 "
                   "for embeddings, 50,000 for BM25's analysed-text store)")


def slurm_args(p: argparse.ArgumentParser) -> None:
    """--cpus-per-task of each SLURM job (the jobs' other options: their declaration)."""
    p.add_argument("--cpus-per-task", type=cpus_per_task)


def repair_pools_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repair-pools", action="store_true", help="first rebuild every pool "
                   "that is stale, damaged or half-written (as make pools)")


def ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", type=given_path, help="S2ORC folder holding metadata/, or S2AG "
                   "folder holding papers/, abstracts/, citations/ (default "
                   "corpora/<corpus>/<source>)")
    p.add_argument("--source", default="s2orc", type=choice(SOURCES),
                   help="s2orc (2020 release) or s2ag (Semantic Scholar Datasets)")
    p.add_argument("--workers", type=worker_count, default=BY_NAME["THREADS"].default,
                   help="processes reading shards in parallel (the output does not change)")


def prefilter_args(p: argparse.ArgumentParser) -> None:
    """Besides CITATIONS, declared."""
    p.add_argument("--min-citations", type=non_negative, default=3)


def where_of(args: argparse.Namespace) -> Where:
    """Where this command's data lies, as a repair command names it (DATA=..., or each root;
    nothing for the checkout's own data folder)."""
    return where(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root),
                 getattr(args, "program", PIPELINE_COMMAND))


def error_line(exc: InputError, args: argparse.Namespace, from_make: bool = False) -> str:
    """The one line of an InputError: its message (a refusal naming declared options in
    make's words when make ran us, else in the command line's: OptionError) and its repair as
    the command to type for the data this command was given: the one place a repair is shown
    to a user."""
    message = exc.message
    if isinstance(exc, OptionError):
        message = worded(exc, "make" if from_make else "command")
    return message + (f"; repair: {exc.repair.command(where_of(args))}" if exc.repair else "")


def place_of(args: argparse.Namespace, corpus: str | None = None) -> Place:
    """Where the data of the command's corpus (or of `corpus`) lives."""
    return Place(corpus_path(Path(args.corpora_root), corpus or args.corpus),
                 Path(args.index_root), Path(args.runs_root))


def times_log(args: argparse.Namespace) -> Path:
    return stage_times_path(Path(args.runs_root), args.corpus)


def pools_of(args: argparse.Namespace) -> list[str]:
    """The pools a command works on: those named (--pool), else every usable pool of the
    corpus (pipeline.pools.grid.stage_pools)."""
    from pipeline.pools.grid import stage_pools

    return stage_pools(place_of(args).corpus_dir, args.pool, args.stage, where_of(args))


def comma_list(text: str) -> list[str]:
    return [m for m in text.replace(",", " ").split() if m]
