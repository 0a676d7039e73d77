"""The command registry of `python -m pipeline` and what the commands share: their options
(the declared ones from pipeline/options/declared.py), and the data place, pools and repair
line made from a command's arguments."""

from __future__ import annotations

import argparse
import inspect
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError, OptionError
from pipeline.core.repair import PIPELINE_COMMAND, Where
from pipeline.options.arguments import command_options
from pipeline.options.declared import (
    BY_NAME,
    VARIABLES,
    Variable,
    worded,
)
from pipeline.roots import where

log = logging.getLogger(__name__)

Option = Callable[[argparse.ArgumentParser], object]  # adds one option to a command's parser


def arg(*flags: str, **settings: Any) -> Option:
    """An option of a command, as argparse's add_argument; its `type` is its check, whose one
    line argparse reports naming the option (`--k: ...`, as make's `K: ...`), and which reads
    a default given as text only when the command runs without the option (argparse's way):
    once, on the one command run."""
    return lambda parser: parser.add_argument(*flags, **settings)


def flag(option: str, help_text: str) -> Option:
    """A bare option of a command: True when given."""
    return arg(option, action="store_true", help=help_text)


def like(var: str | Variable, stage: str = "", **settings: Any) -> Option:
    """The option of the declared variable `var` (or its name) as the command `stage` takes it:
    the declaration's check (its form for `stage`: Variable.check_for), default (a derived one:
    from the others' defaults) and help, unless `settings` say otherwise."""
    var = BY_NAME[var] if isinstance(var, str) else var
    default = var.text({v.name: v.text() for v in VARIABLES if not callable(v.default)})
    check = var.check_for(stage)
    option = arg(var.option, **{"type": check, "default": default or None,
                                "help": var.help.replace("%", "%%"), **settings})
    return option


def add_declared(parser: argparse.ArgumentParser, var: Variable, stage: str) -> None:
    """The option of the declared `var` in the command `stage`, its value at its keyword (the
    API parameter of that name): a switch is a bare option; required, or with no default,
    where the declaration says so."""
    if var.repeats:
        return like(var, stage, action="append")(parser)
    if var.switch:
        return arg(var.option, action="store_true", help=var.help.replace("%", "%%"))(parser)
    bare = stage in var.required or stage in var.no_default or callable(var.default)
    like(var, stage, required=stage in var.required,
         **({"default": None} if bare else {}))(parser)


@dataclass(frozen=True)
class Command:
    """A command of `python -m pipeline` (main.build_parser adds COMMANDS in order): --corpus
    unless corpus=False, its `arguments` and its declared options (those naming it among their
    stages: an API function's, `api`, are those of its parameters, but those `from_args`
    gives: parameter -> the argument holding its value); `writes`, the folders (WRITES)
    checked writable before any work, so a read-only one is one line."""

    name: str
    help: str
    func: Callable[[argparse.Namespace], None]
    arguments: tuple[Option, ...]
    writes: tuple[str, ...]
    corpus: bool = True
    api: Callable[..., Any] | None = None
    from_args: Mapping[str, str] = field(default_factory=dict)
    show: Show | None = None

    def add_to(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.set_defaults(func=self.func, stage=self.name)
        for add in ((like("CORPUS"),) if self.corpus else ()) + self.arguments:
            add(parser)
        if self.api:  # --corpus and the registration's own options: its arguments'
            own = {action.dest for action in parser._actions} | set(self.from_args)
            check_parameters(self.api, self.name, own)
        for var in staged(self.name):  # in the declarations' order
            add_declared(parser, var, self.name)
        return parser


def staged(stage: str) -> list[Variable]:
    """The declared options of the command `stage`: make's variables, then those its API
    function declares on its signature (a Check and a Help: arguments.command_options)."""
    api = COMMANDS[stage].api if stage in COMMANDS else None
    return [*(var for var in VARIABLES if stage in var.stages),
            *(command_options(api, stage) if api else ())]


COMMANDS: dict[str, Command] = {}
# The commands of make itself, the only ones that are no API function's (`command_of`): they
# read make's variables (MAKEFLAGS, the environment) and its goals (pipeline/cli/variables.py,
# goals.py), which are the command line's alone: the library never imports it. Every other
# command is an API function (one door, tests/cli/test_registry.py walks them).
MAKE_OWN_COMMANDS = ("check", "goal", "variables", "targets")
WRITES = ("corpora", "indexes", "runs", "times")  # the data roots; times: runs/<corpus>/'s log


def command(name: str, help_text: str, *arguments: Option, writes: tuple[str, ...],
            corpus: bool = True, api: Callable[..., Any] | None = None,
            from_args: Mapping[str, str] | None = None, show: Show | None = None):
    """Register the decorated function as the command `name`, with its options (`arguments`)
    and what it writes into (`writes`, () for nothing); `api`, `from_args`, `show`:
    command_of's."""
    if set(writes) - set(WRITES):
        raise ValueError(f"command {name}: writes {writes}, not among {WRITES}")

    def register(func):
        COMMANDS[name] = Command(name, help_text, func, arguments, writes, corpus, api,
                                 dict(from_args or {}), show)
        return func
    return register


# ---- one door: a command that IS an API function --------------------------------------------
def check_parameters(function: Callable[..., Any], stage: str, own: set[str]) -> None:
    """Each parameter of the API `function` but `data` (the root options), its **keywords and
    those the command's own options give (`own`) is a declared option of the command `stage`
    of its name (a **keywords takes the command's other declared options: spread): ValueError
    for a parameter without one, or with one of other commands (make passes it to its
    `stages` only), and for an option naming the command among its stages that no parameter
    takes."""
    name, found = function.__name__, set()
    signature = inspect.signature(function).parameters
    for param in (p for p, v in signature.items() if p not in {"data", *own}
                  and v.kind is not v.VAR_KEYWORD):
        var = next((v for v in staged(stage) if param == v.keyword
                    and (not v.functions or name in v.functions)), None)
        if var is None:
            raise ValueError(f"command {stage}: parameter {param} of api.{name} is no declared "
                             f"option of {stage}: name {stage} among a make variable's stages "
                             "(pipeline/options/declared.py), give the parameter a Check and a "
                             "Help (core/annotations.py), or give it in the registration")
        found.add(var.name)
    extra = [v.name for v in staged(stage) if v.name not in found]
    if extra and not any(v.kind is v.VAR_KEYWORD for v in signature.values()):
        raise ValueError(f"command {stage}: {', '.join(extra)} name it among their stages, but "
                         f"api.{name} takes no such parameter")


def spread(stage: str, params: Collection[str]) -> list[str]:
    """The keywords of the declared options of `stage` that none of `params` is: what a
    function's **keywords takes."""
    return [v.keyword for v in staged(stage) if v.keyword not in params]


Show = Callable[[Any, Any, Mapping[str, Any]], None]  # (what it returned, data, the values)


def command_of(function: Callable[..., Any], name: str, help_text: str, *arguments: Option,
               writes: tuple[str, ...], show: Show | None = None,
               from_args: Mapping[str, str] | None = None) -> None:
    """Register the API `function` as the command `name`: its options those of its parameters
    (`data`: the root options; --corpus; a parameter no option declares: given by `arguments`,
    its dest the parameter's name, or another argument's as `from_args` maps it: verify's
    folders by its `path`, its program by the command line's own `program`, the name the user
    called it by, build_corpus's synthetic by --synth; '' for none, the function's default: a
    parameter Python alone gives; a **keywords: the command's other declared options), its run
    the call of `function` with their values (a *parameter's: each value given; a
    **keywords': those given; `data` where it takes one: `run`), `show` turning what it
    returns into the command's output."""
    def call(args: argparse.Namespace) -> None:
        run(name, data_of(args), command_values(name, args))

    params = [p for p, v in inspect.signature(function).parameters.items()
              if p != "data" and v.kind is not v.VAR_KEYWORD]
    corpus = "corpus" in ((from_args or {}).get(p, p) for p in params)
    command(name, help_text, *arguments, writes=writes, corpus=corpus, api=function,
            from_args=from_args, show=show)(call)
    COMMANDS[name].add_to(argparse.ArgumentParser())  # a parameter without its option: refused


def command_values(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """What the command line gives the command `name`: its parsed arguments, and each
    parameter of its API function by its own dest (`from_args`: verify's folders its path)."""
    entry = COMMANDS[name]
    dests = {p: entry.from_args.get(p, p) for p in inspect.signature(entry.api).parameters}
    return {**vars(args), **{p: getattr(args, dest) for p, dest in dests.items()
                             if dest and hasattr(args, dest)}}


def call_arguments(name: str, data: Any, values: Mapping[str, Any]
                   ) -> tuple[list[Any], dict[str, Any]]:
    """The command `name`'s API function's arguments from `values`: those its parameters
    take (`data` where it takes one; a *parameter's list spread; a **keywords: the command's
    other declared options, those given)."""
    kinds = {p: v.kind for p, v in inspect.signature(COMMANDS[name].api).parameters.items()}
    star = next((p for p, kind in kinds.items() if kind is inspect.Parameter.VAR_POSITIONAL), "")
    named = {p: values[p] for p, kind in kinds.items() if p in values and p not in (
        "data", star) and kind is not inspect.Parameter.VAR_KEYWORD}
    if inspect.Parameter.VAR_KEYWORD in kinds.values():  # those given
        named.update({key: values[key] for key in spread(name, kinds)
                      if values.get(key) is not None})
    return [*([data] if "data" in kinds else []), *(values.get(star) or ())], named


def run(name: str, data: Any, values: Mapping[str, Any]) -> None:
    """The command `name` run: the folders it writes into checked, its API function called
    with `values` (call_arguments), then its `show` with all of them (report's `times`)."""
    check_writes(name, data, values.get("corpus"))
    args, kwargs = call_arguments(name, data, values)
    result = COMMANDS[name].api(*args, **kwargs)  # type: ignore[misc]
    if COMMANDS[name].show:
        COMMANDS[name].show(result, data, values)  # type: ignore[misc]


def command_named(function: Callable[..., Any]) -> str:
    """The command that is the API `function` (command_of registered it)."""
    return next(name for name, entry in COMMANDS.items() if entry.api is function)


def data_of(args: argparse.Namespace) -> Any:
    """The command's data folders, as given (messages name them so)."""
    from pipeline.api import Data

    data = Data(corpora=args.corpora_root, indexes=args.index_root, runs=args.runs_root)
    data.corpora, data.indexes, data.runs = roots(args)
    return data


def check_writes(name: str, data: Any, corpus: str | None) -> None:
    """Each folder the command `name` writes into (Command.writes) is writable, before any
    work: `data`'s, and `corpus`'s folder of runs for its stage times."""
    from pipeline.core.atomic import check_writable

    folders = {"corpora": data.corpora, "indexes": data.indexes, "runs": data.runs}
    if corpus:
        folders["times"] = Path(data.runs) / corpus
    for kind in COMMANDS[name].writes:
        if kind in folders:
            check_writable(Path(folders[kind]))


def roots(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """The command's data roots: corpora, indexes, runs."""
    return Path(args.corpora_root), Path(args.index_root), Path(args.runs_root)


def where_of(args: argparse.Namespace) -> Where:
    """Where this command's data lies, as a repair command names it."""
    return where(*roots(args), getattr(args, "program", PIPELINE_COMMAND))


def error_line(exc: InputError, args: argparse.Namespace, from_make: bool = False) -> str:
    """An InputError's one line: a refusal (OptionError) in make's words when make ran us, else
    the command line's, and its repair as the command to type for this command's data."""
    message = worded(exc, "make" if from_make else "command") if isinstance(
        exc, OptionError) else exc.message
    return message + (f"; repair: {exc.repair.command(where_of(args))}" if exc.repair else "")


def comma_list(text: str) -> list[str]:
    """Names separated by commas or spaces."""
    return text.replace(",", " ").split()
