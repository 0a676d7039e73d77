"""The declarations applied to the Python API: each argument of a public function is checked
before it runs, its type by its kind (core.kinds.KINDS: read from its function's annotation,
declared.argument_kind), its value by its option's check, so the API, the command line and
make refuse a bad value in the same words, on one line."""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipeline.core.errors import InputError, OptionError
from pipeline.core.kinds import KINDS, PATH, accepts
from pipeline.core.repair import Where
from pipeline.layout import check_path_length
from pipeline.options import declared
from pipeline.roots import data_roots, where


def check_value(function: str, name: str, value: object, annotated: object = "") -> None:
    """One argument's type, by its kind (its annotation's, `annotated`; none for a
    **keyword's: its declaration's), then its value by its option's check (on the command
    line's text of it): a one-line InputError naming the function, the argument and what to
    give."""
    rule = declared.declaration(function, name)  # None: its annotation's kind alone
    if rule is None and not annotated:
        raise unknown(function, name, [])
    kind, none = declared.argument_kind(function, name, annotated)
    if value is None and none:
        return
    forms, what = KINDS[kind].forms, KINDS[kind].words
    if not accepts(value, forms):
        shown = type(value).__name__  # not said for the right type of the wrong content
        said = f", not {'an' if shown[0] in 'aeiou' else 'a'} {shown}" if (
            value is not None and shown not in what) else ""
        raise InputError(f"{function}: {name}={value!r}: give {what}{said}")
    if kind == "path" and str(value) == "":
        raise InputError(f"{function}: {name}='': an empty path: give a file or folder")
    if os.PathLike in forms and accepts(value, PATH):
        try:
            check_path_length(value)  # type: ignore[arg-type]
        except InputError as exc:
            raise InputError(f"{function}: {name}: {exc.message}") from None
    # an object (a ModelEntry, a list of them, a SyntheticConfig) is checked by its own fields
    if rule is None or rule.check is None or not isinstance(value, str | int) and kind in (
            "model", "models", "synthetic"):
        return
    try:
        for item in value if kind == "pools" and not isinstance(value, str) else [value]:
            rule.check(_command_line(item))
    except InputError as exc:
        raise InputError(f"{function}: {name}={value!r}: {exc.message}") from None


def _command_line(value: object) -> str:
    """The command line's text of a typed value: what its option's check reads."""
    if isinstance(value, bool):  # a switch's (REPLACE=1: replace=True)
        return str(int(value))
    if isinstance(value, Mapping):
        value = [f"{key}={item}" for key, item in value.items()]
    return " ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def unknown(function: str, name: str, known: Sequence[str], owner: str = "") -> InputError:
    """An unknown keyword, with the nearest known name."""
    near = difflib.get_close_matches(name, known, n=1)
    hint = f": did you mean {near[0]}?" if near else (
        f": use one of {', '.join(known)}" if known else ": it takes none")
    return InputError(f"unknown option {name} for {owner or function}{hint}")


def known_options(function: str, owner: str, options: Mapping[str, Any],
                  own: Sequence[str]) -> None:
    """The **keywords of `function` are `own` (build_pool's PoolSpec fields, a retriever kind's
    options: `owner`'s) or the declared options of its command (search's): another is refused
    with the nearest known name. Their values are `validated`'s to check, once."""
    known = list(dict.fromkeys([*own, *declared.command_keywords(function)]))
    for name in options:
        if name not in known:
            raise unknown(function, name, known, owner)


def renamed(function: str, kwargs: dict[str, Any], takes: Sequence[str]) -> dict[str, Any]:
    """`kwargs` with each keyword from before each option had one name (declared.RENAMED:
    n_queries) given under its option's (queries), warning: the API takes both for one
    release. A function's own parameter of the old name (mdcr_jaccard's depth) stays."""
    for old in [key for key in kwargs if key in declared.RENAMED and key not in takes]:
        var = declared.RENAMED[old]
        if declared.declaration(function, var.keyword) is not var:
            continue
        if var.keyword in kwargs:
            raise InputError(f"{function}: {old} and {var.keyword} are one option: give "
                             f"{var.keyword} alone")
        warnings.warn(f"{function}: {old}= is now {var.keyword}=, as make's {var.name}; "
                      f"{old} goes in the next release", DeprecationWarning, stacklevel=3)
        kwargs[var.keyword] = kwargs.pop(old)
    return kwargs


def validated(function: Callable) -> Callable:
    """`function`, each argument it runs with (given, or its default) checked first by its
    declaration, once: nothing runs, and nothing is written, with a bad one; its **keywords'
    names are its own to check (known_options)."""
    name, signature = function.__name__, inspect.signature(function)
    params = signature.parameters
    named = [p for p, v in params.items() if v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    said = {p: "" if v.annotation is v.empty else v.annotation for p, v in params.items()}
    # ranx's order, (qrels, run): a call in the old order is refused saying so, before the kinds
    run = next((p for p in named[1:] if declared.argument_kind(
        name, p, said[p])[0] in ("run", "named_runs")), None) if named[:1] == [
        "qrels"] else None

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs = renamed(name, kwargs, named)
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            key = next((key for key in kwargs if key not in params), None)
            raise unknown(name, key, named) if key else InputError(f"{name}: {exc}") from None
        for key in (p for p in named if params[p].default is params[p].empty):
            if key not in bound:
                what = KINDS[declared.argument_kind(name, key, said[key])[0]].words
                raise InputError(f"{name}: missing {key}: give {what}")
        if run:
            from pipeline.evaluation.score import check_order

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
                check_value(name, key, item, said[key])
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
