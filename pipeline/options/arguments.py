"""The rules applied to the Python API: each argument of a public function is checked before
it runs, its type by its annotation (typeguard; an Annotated one of core/annotations.py also
by its test), its value by its rule: its parameter's own Check, else the make variable of its
name's check, so the API, the command line and make refuse a bad value in the same words, on
one line. The rules on the signatures are read here for the command line and the docs too."""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import types
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pipeline.core.annotations import PATH, Check, Given, Help, NamedRuns, Run
from pipeline.core.errors import InputError, OptionError, quoted
from pipeline.core.repair import Where
from pipeline.layout import check_path
from pipeline.options import declared
from pipeline.roots import data_roots, where

# The names an annotation may use that its module imports for type checkers only (importing
# `pipeline` loads the standard library only): imported when a call's annotations are read
LATE = {"PoolSpec": "pipeline.pools.build", "SyntheticConfig": "pipeline.ingest.synthetic"}
# What a builtin type takes, in words (the others: their annotation's Given, or their name)
WORDS = {int: "a whole number (an int)", bool: "True or False", str: "a str",
         float: "a number (an int or a float)", os.PathLike: "an os.PathLike"}


def hints(function: Callable, late: bool = True) -> dict[str, object]:
    """Each annotated parameter of `function` -> its annotation, evaluated in its module
    (annotations are text: `from __future__ import annotations`), one by one so that a
    parameter's annotation is read alone: LATE's names imported, or with `late=False` such a
    parameter left out (a class never carries a Check: the command line imports no stage)."""
    function, names, found = inspect.unwrap(function), {}, {}
    for name, param in inspect.signature(function).parameters.items():
        said = param.annotation
        while isinstance(said, str):
            try:
                said = eval(said, function.__globals__, names)  # noqa: S307 (its own source)
            except NameError as exc:
                if exc.name not in LATE:
                    raise
                if not late:
                    said = param.empty
                    break
                module = import_module(LATE[exc.name])
                names[exc.name] = getattr(module, exc.name)
        if said is not param.empty:
            found[name] = said
    return found


def split_rule(hint: object) -> tuple[object, Check | None, Help | None]:
    """`hint` without the Check and Help it carries (core/annotations.py: on an Annotated type,
    or on a member of a union: `Folder | None`), and them: the type is checked by typeguard,
    the value by the Check."""
    found: list[object] = []

    def bare(said: object) -> object:
        if get_origin(said) is Annotated:
            kept = [m for m in said.__metadata__ if not isinstance(m, Check | Help)]
            found.extend(m for m in said.__metadata__ if isinstance(m, Check | Help))
            inner = bare(get_args(said)[0])
            return Annotated[(inner, *kept)] if kept else inner
        if get_origin(said) in (Union, types.UnionType):
            return Union[tuple(bare(member) for member in get_args(said))]  # noqa: UP007
        return said

    hint = bare(hint)
    return (hint, next((m for m in found if isinstance(m, Check)), None),
            next((m for m in found if isinstance(m, Help)), None))


def check_of(function: str, name: str, hint: object) -> Callable[[str], object] | None:
    """The check of argument `name` of `function`: its annotation's Check (None: its
    annotation alone), else the make variable of its name's (declared.declaration), in the
    form `function` takes (Variable.check_for); None: none."""
    own = split_rule(hint)[1]
    if own is not None:
        return own.check
    var = declared.declaration(function, name)
    return None if var is None else var.check_for(function)


@functools.cache
def own_options(function: Callable, stage: str = "", late: bool = True
                ) -> tuple[declared.Variable, ...]:
    """The rules `function` declares on its signature (a parameter with a Check), each as a
    make variable is declared; one with a Help is also an option of the command `stage` (its
    default a str's; a switch where a bool). `late=False`: no stage imported (hints)."""
    params, options = inspect.signature(function).parameters, []
    for name, hint in hints(function, late).items():
        kind, own, said = split_rule(hint)
        if own is None:
            continue
        default, command = params[name].default, (stage,) if said and stage else ()
        options.append(declared.Variable(
            name, default if isinstance(default, str) else "", own.check,
            said.text if said else "", "api", type=kind, repeats=bool(said and said.repeats),
            switch=kind is bool, stages=command, variable=False,
            required=command if said and said.required else (),
            changes_run=said.changes_run if said else None, functions=(function.__name__,)))
    return tuple(options)


def command_options(function: Callable, stage: str) -> list[declared.Variable]:
    """The options of the command `stage` that its API `function` declares on its signature
    (a parameter with a Check and a Help: own_options), read without importing a stage (the
    command line's parser is built before the environment exists: make check)."""
    return [var for var in own_options(function, stage, late=False) if var.stages]


def members(hint: object) -> tuple[object, ...]:
    """A union's members (`int | None`: int, NoneType); any other type alone."""
    return get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)


def given(hint: object) -> Given | None:
    """An Annotated type's Given (core/annotations.py), else None."""
    return next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Given)), None) \
        if get_origin(hint) is Annotated else None


def takes(hint: object, value: object) -> bool:
    """Whether `value` is of type `hint` (each item of a list too; a bool is no number), and
    passes the test of the Annotated member that takes it."""
    from typeguard import CollectionCheckStrategy, TypeCheckError, check_type  # the venv's

    for member in members(hint):
        said = given(member)
        of = get_args(member)[0] if said else member  # an Annotated type's own type
        if isinstance(value, bool) and of in (int, float):
            continue
        try:
            if of is not Any:
                check_type(value, of, collection_check_strategy=CollectionCheckStrategy.ALL_ITEMS)
        except TypeCheckError:
            continue
        if said is None or said.test(value):
            return True
    return False


def words(hint: object) -> str:
    """What an argument of type `hint` takes, in words, None left out: each member's (its
    Given's, WORDS', or its name's; a str or an os.PathLike: a path), the last after 'or'."""
    found = [m for m in members(hint) if m is not type(None)]
    path = all(form in found for form in PATH)
    said = [given(m).words if given(m) else WORDS.get(m) or  # type: ignore[union-attr]
            f"a {getattr(m, '__name__', m)}" for m in found if not (path and m in PATH)]
    if path:
        said.append("a path (a str or os.PathLike)")
    return " or ".join([", ".join(said[:-1]), said[-1]] if len(said) > 2 else said)


def type_of(function: str, name: str, hint: object = None) -> object:
    """The type of argument `name` of `function`: its annotation (`hint`, evaluated), without
    its Check and Help, else, where none says it (a **keyword's: search's options), its
    declaration's `type`, None too where it is optional."""
    if hint is not None:
        return split_rule(hint)[0]
    var = declared.declaration(function, name)
    if var is None:
        raise unknown(function, name, [])
    return var.type | None if var.optional else var.type


def check_value(function: str, name: str, value: object, hint: object = None) -> None:
    """One argument's type, by its annotation (`hint`, evaluated; None for a **keyword's: its
    declaration's type), then its value by its rule (check_of): a one-line InputError naming
    the function, the argument and what to give."""
    check = check_of(function, name, hint)
    hint = type_of(function, name, hint)
    if value is None and type(None) in members(hint):
        return
    if not takes(hint, value):
        shown, what = type_name(value), words(hint)  # not said for the wrong content
        said = f", not {'an' if shown[0] in 'aeiou' else 'a'} {shown}" if (
            value is not None and shown not in what) else ""
        raise InputError(f"{function}: {name}={quoted(value)}: give {what}{said}")
    check_paths(function, name, value, hint)
    if check is None:
        return
    try:
        for item in value if isinstance(value, list | tuple) else [value]:  # each alone, as
            if isinstance(item, str | int | float | os.PathLike | Mapping):  # given (an
                check(item)  # object, a ModelEntry or a SyntheticConfig: its fields)
    except InputError as exc:
        raise InputError(f"{function}: {name}={quoted(value)}: {exc.message}") from None


def type_name(value: object) -> str:
    """The name of `value`'s type as a user writes it: a builtin's alone (str), another's with
    its package (numpy.bool, not bool: a numpy.bool_ is no bool)."""
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__.partition('.')[0]}.{kind.__qualname__}"


def check_paths(function: str, name: str, value: object, hint: object) -> None:
    """Each path argument `name` of `function` holds (_paths) checked as every door checks a
    path (layout.check_path): a one-line InputError naming the function and the argument."""
    try:
        for path in _paths(value, hint):
            check_path(path)
    except InputError as exc:
        raise InputError(f"{function}: {name}: {exc.message}") from None


def _paths(value: object, hint: object) -> list[str | os.PathLike]:
    """The paths an argument of type `hint` holds, each for the one check of a path
    (layout.check_path): itself, where its type takes a path, or a dict's values that are
    paths (compare's runs' files, build_report's training sets)."""
    if isinstance(value, PATH):
        return [value] if takes(hint, Path(".")) else []
    if isinstance(value, Mapping):
        return [item for item in value.values() if isinstance(item, PATH)]
    return []


def unknown(function: str, name: str, known: Sequence[str], owner: str = "") -> InputError:
    """An unknown keyword, with the nearest known name."""
    near = difflib.get_close_matches(name, known, n=1)
    hint = f": did you mean {near[0]}?" if near else (
        f": use one of {', '.join(known)}" if known else ": it takes none")
    return InputError(f"unknown option {name} for {owner or function}{hint}")


def known_options(function: str, owner: str, options: Mapping[str, Any],
                  own: Sequence[str]) -> None:
    """The **keywords of `function` are `own` (a retriever kind's options: `owner`'s) or the
    declared options of its command (search's, index's): another is refused
    with the nearest known name. Their values are `validated`'s to check, once."""
    known = list(dict.fromkeys([*own, *declared.command_keywords(function)]))
    for name in options:
        if name not in known:
            raise unknown(function, name, known, owner)


def validated(function: Callable) -> Callable:
    """`function`, each argument it runs with (given, or its default) checked first by its
    annotation and its declaration, once: nothing runs, and nothing is written, with a bad
    one; its **keywords' names are its own to check (known_options)."""
    name, signature = function.__name__, inspect.signature(function)
    params = signature.parameters
    named = [p for p, v in params.items() if v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    said: dict[str, object] = {}  # the annotations, read on the first call (hints)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not said:
            said.update(hints(function))
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            key = next((key for key in kwargs if key not in params), None)
            raise unknown(name, key, named) if key else InputError(f"{name}: {exc}") from None
        for key in (p for p in named if params[p].default is params[p].empty):
            if key not in bound:
                what = words(type_of(name, key, said.get(key)))
                raise InputError(f"{name}: missing {key}: give {what}")
        # ranx's order, (qrels, run), by their contents (read once their paths are checked):
        # a call in the old order is refused saying so, before their types are
        run = next((p for p in named[1:] if said.get(p) in (Run, NamedRuns)), None)
        if named[:1] == ["qrels"] and run:
            from pipeline.evaluation.score import check_order

            for key in ("qrels", run):
                check_paths(name, key, bound.get(key), said.get(key))
            check_order(name, bound.get("qrels"), bound.get(run))
        defaults = {p: params[p].default for p in named if p not in bound
                    and params[p].default is not params[p].empty}
        for key, value in {**bound, **defaults}.items():  # given or defaulted: each once
            kind = params[key].kind
            if kind is kind.VAR_KEYWORD:  # its options: those declared (the others: refused
                for option, item in value.items():  # by the function, known_options)
                    if declared.declaration(name, option) is not None:
                        check_value(name, option, item)
                continue
            for item in value if kind is kind.VAR_POSITIONAL else [value]:
                check_value(name, key, item, said.get(key))
        try:
            return function(*args, **kwargs)
        except InputError as exc:
            if isinstance(exc, OptionError):  # a refusal naming declared options: the API's
                exc.message = declared.worded(exc, "api")  # keywords
            if exc.repair and "data" in bound:  # the repair names the data called with
                exc.where = _where(bound["data"])
            raise
    return wrapper


def _where(data: object) -> Where:
    """The data folders of an API call (a Data or its folder), as a repair command names them."""
    if isinstance(data, str | os.PathLike):
        return where(*data_roots(data).values())
    return where(data.corpora, data.indexes, data.runs)  # type: ignore[attr-defined]
