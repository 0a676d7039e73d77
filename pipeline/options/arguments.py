"""The declarations applied to the Python API: every argument of every public function is
checked before it runs, by its type (its declared `kind`: KINDS) and then by its option's check
(pipeline/options/declared.py), so the API, the command line and make refuse a bad value in
the same words, on one line naming the function, the argument and what to give.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError, OptionError
from pipeline.layout import check_path_length
from pipeline.options import declared
from pipeline.options.declared import Variable, worded


def _accepts(value: object, forms: tuple) -> bool:
    """Whether `value` takes one of `forms`: a type (a bool is no number), a class's name
    (polars' DataFrame, ranx's Run: their libraries not loaded here) or a test."""
    for form in forms:
        if isinstance(form, str):
            taken = type(value).__name__ == form
        elif isinstance(form, type):
            taken = isinstance(value, form) and (form is bool or not isinstance(value, bool))
        else:
            taken = form(value)
        if taken:
            return True
    return False


def _list_of(*forms: object) -> Callable[[object], bool]:
    """A non-empty list (or tuple; never a str) of values of `forms`."""
    return lambda v: (isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                      and all(_accepts(x, forms) for x in v))


def _text(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _entry(value: object) -> bool:
    """A ModelEntry, or any object naming its model and kind."""
    return isinstance(getattr(value, "name", None), str) and hasattr(value, "kind")


def _nested(value: object) -> bool:
    """A dict of dicts, {query: {doc: value}}, or a list of ir_measures' named tuples: the
    forms pytrec_eval, BEIR and ir_measures hold."""
    return (isinstance(value, Mapping) and all(isinstance(v, Mapping) for v in value.values())
            or isinstance(value, list | tuple) and len(value) > 0
            and hasattr(value[0], "_fields"))


def _instance(module: str, name: str) -> Callable[[object], bool]:
    """An object of class `name` of `module` (imported only when a value is tested)."""
    return lambda v: isinstance(v, getattr(import_module(module), name))


PATH = (str, os.PathLike)  # a kind taking os.PathLike takes a path: its length is checked
RUN = (*PATH, "DataFrame", "Run", _nested)
QRELS = (*PATH, "DataFrame", "Qrels", _nested)
# kind (declared.py's `kind`) -> (the forms a value may take, what to give in words)
KINDS: dict[str, tuple[tuple, str]] = {
    "int": ((int,), "a whole number (an int)"),
    "bool": ((bool,), "True or False"),
    "str": ((str,), "a str"),
    "number": ((int, float), "a number (an int or a float)"),
    "path": (PATH, "a path (a str or os.PathLike)"),
    "data": ((*PATH, lambda v: all(isinstance(getattr(v, root, None), Path)
                                   for root in ("corpora", "indexes", "runs"))),
             "a pipeline.Data or the data folder's path"),
    "model": ((_text, _entry), "a model's name (a str such as 'bm25') or a ModelEntry"),
    "models": ((_text, _entry, _list_of(_text, _entry)), "a model's name (a str such as "
               "'bm25'), a ModelEntry, or a non-empty list of them"),
    "metrics": ((_text, _list_of(_text)), "'auto', a metric set's name, or metric names (a str "
                "such as 'map ndcg@10', or a non-empty list of str)"),
    "size": ((int, str), "a size (an int, or a str such as '20k')"),
    "synthetic": ((int, str, _instance("pipeline.ingest.synthetic", "SyntheticConfig")),
                  "a number of papers (an int, or a str such as '120k') or a SyntheticConfig"),
    "pool_spec": ((_instance("pipeline.pools.build", "PoolSpec"),),
                  "a pipeline.pools.build.PoolSpec"),
    "training_sets": ((lambda v: isinstance(v, Mapping) and all(
        isinstance(model, str) and _accepts(path, PATH) for model, path in v.items()),),
        "a dict of model name -> file of its training papers"),
    "run": (RUN, "a TREC run file's path, a DataFrame (query, doc, score), a dict {query: "
            "{doc: score}}, a list of ir_measures' ScoredDoc or a ranx Run"),
    "qrels": (QRELS, "a TREC qrels file's path, a DataFrame (query, doc, relevance), a dict "
              "{query: {doc: grade}}, a list of ir_measures' Qrel or a ranx Qrels"),
    "named_runs": ((lambda v: isinstance(v, Mapping) and len(v) >= 2 and all(
        _text(name) and _accepts(run, RUN) for name, run in v.items()),),
        "a dict of two or more runs, name (a str) -> run (a TREC run file's path, a DataFrame "
        "or a ranx Run)"),
    "results": ((*PATH, "DataFrame"), "runs/results.parquet's path or a polars DataFrame of "
                "its columns"),
    "judgments": (QRELS, "a DataFrame (query, doc, grade), a TREC qrels file's path, a dict "
                  "{query: {doc: grade}} or a ranx Qrels"),
    "sample": ((*PATH, "DataFrame"), "a sample's parquet file or a polars DataFrame "
               "(pipeline.judging.sample)"),
    "deltas": ((_list_of(lambda x: _accepts(x, (int, float)) and 0 < x <= 1),), "a non-empty "
               "list of differences in metric units, each in (0, 1], such as (0.01, 0.02)"),
    "counts": ((_list_of(lambda x: _accepts(x, (int,)) and x > 0),), "a non-empty list of "
               "positive whole numbers, such as (1, 3, 5)"),
}


def argument(function: str, name: str) -> Variable | None:
    """The declaration of argument `name` of public function `function`: the one naming
    `function`, else one naming no function (one added at run time included); None: unknown."""
    found = [v for v in (*declared.VARIABLES, *declared.KEYWORD_ONLY) if name in v.keywords
             and (not v.functions or function in v.functions)]
    return next((v for v in found if v.functions), found[0] if found else None)


def stage_keywords(stage: str) -> list[str]:
    """The API's keywords of the declared options of the command `stage`."""
    return [keyword for v in declared.VARIABLES if stage in v.stages for keyword in v.keywords]


def spec_keywords(function: Callable) -> list[str]:
    """The keywords `function` takes through **keywords in place of a PoolSpec (an argument
    of kind pool_spec: build_pool's): PoolSpec's declared fields (`exclusion` is not one: the
    pool's list fills it)."""
    from pipeline.pools.build import PoolSpec

    name = function.__name__
    if all(getattr(argument(name, p), "kind", "") != "pool_spec"
           for p in inspect.signature(function).parameters):
        return []
    return [f.name for f in dataclasses.fields(PoolSpec) if argument(name, f.name)]


def check_value(function: str, name: str, value: object) -> None:
    """One argument's type, then its value by its option's check (on the command line's text
    of it): a one-line InputError naming the function, the argument and what to give."""
    rule = argument(function, name)
    if rule is None:
        raise unknown(function, name, sorted(
            {k for v in (*declared.VARIABLES, *declared.KEYWORD_ONLY) for k in v.keywords}))
    if value is None and rule.none:
        return
    forms, what = KINDS[rule.kind]
    if not _accepts(value, forms):
        shown = type(value).__name__  # not said for the right type of the wrong content
        said = f", not {'an' if shown[0] in 'aeiou' else 'a'} {shown}" if (
            value is not None and shown not in what) else ""
        raise InputError(f"{function}: {name}={value!r}: give {what}{said}")
    if rule.kind == "path" and str(value) == "":
        raise InputError(f"{function}: {name}='': an empty path: give a file or folder")
    if os.PathLike in forms and _accepts(value, PATH):
        try:
            check_path_length(value)  # type: ignore[arg-type]
        except InputError as exc:
            raise InputError(f"{function}: {name}: {exc.message}") from None
    # an object (a ModelEntry, a list of them, a SyntheticConfig) is checked by its own fields
    if rule.check is None or not isinstance(value, str | int) and rule.kind in (
            "model", "models", "synthetic"):
        return
    try:
        rule.check(_command_line(value))
    except (InputError, argparse.ArgumentTypeError) as exc:
        message = exc.message if isinstance(exc, InputError) else str(exc)
        raise InputError(f"{function}: {name}={value!r}: {message}") from None


def _command_line(value: object) -> str:
    """The command line's text of a typed value, which its option's check reads."""
    if isinstance(value, bool):  # a switch's (REPLACE=1: replace=True)
        return "1" if value else "0"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return " ".join(map(str, value))
    return str(value)


def unknown(function: str, name: str, known: Sequence[str], owner: str = "") -> InputError:
    """An unknown keyword, with the nearest known name."""
    near = difflib.get_close_matches(name, known, n=1)
    hint = f": did you mean {near[0]}?" if near else (
        f": use one of {', '.join(known)}" if known else ": it takes none")
    return InputError(f"unknown option {name} for {owner or function}{hint}")


def check_options(function: str, owner: str, options: Mapping[str, Any],
                  known: Sequence[str]) -> None:
    """Keyword options of one owner (a retriever kind, say): each a known one, checked."""
    for name, value in options.items():
        if name not in known:
            raise unknown(function, name, list(known), owner)
        check_value(function, name, value)


def validated(function: Callable) -> Callable:
    """`function`, each argument checked first by its declaration: nothing runs, and nothing
    is written, with a bad one. Its **keywords are a PoolSpec's fields (`spec_keywords`), or
    its own to check (search: its retriever's options)."""
    name, signature = function.__name__, inspect.signature(function)
    params = signature.parameters
    named = [p for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    extra = spec_keywords(function)
    own = any(p.kind is p.VAR_KEYWORD for p in params.values()) and not extra
    # ranx's order, (qrels, run): a call in the old order is refused saying so, before the kinds
    run = next((p.name for p in named[1:] if getattr(argument(name, p.name), "kind", "") in
                ("run", "named_runs")), None) if named and named[0].name == "qrels" else None

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in params and key not in extra and not own:
                raise unknown(name, key, [p.name for p in named] + extra)
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            raise InputError(f"{name}: {exc}") from None
        missing = [p.name for p in named if p.default is p.empty and p.name not in bound]
        if missing:
            what = KINDS[argument(name, missing[0]).kind][1]  # type: ignore[union-attr]
            raise InputError(f"{name}: missing {missing[0]}: give {what}")
        if run:
            from pipeline.evaluation.score import check_order

            check_order(name, bound.get("qrels"), bound.get(run))
        for key, value in bound.items():
            kind = params[key].kind
            given = (value.items() if kind is kind.VAR_KEYWORD else [(key, v) for v in value]
                     if kind is kind.VAR_POSITIONAL else [(key, value)])
            for option, item in given:
                if kind is not kind.VAR_KEYWORD or option in extra:  # else: its own to check
                    check_value(name, option, item)
        try:
            return function(*args, **kwargs)
        except OptionError as exc:  # a refusal naming declared options: the API's keywords
            exc.message = worded(exc, "api")
            raise

    return wrapper
