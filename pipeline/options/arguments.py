"""How the declarations apply to the Python API: every argument of every public name of
`pipeline` (its _API) is checked before the function runs by its declaration
(pipeline/options/declared.py: a make variable's `keywords`, or an argument of the API alone,
`keyword`), here only the mechanism: the Python types of each declared `kind` (KINDS), then
the declaration's check of the value. The API, the command line and make so refuse a bad
value with the same words, on one line (an InputError) naming the function, the argument and
what to give.

Python values are typed: a whole number is an int (the str "20" is refused, saying so; the
command line parses its text itself), a flag a bool, a path a str or os.PathLike. An unknown
keyword is refused with the nearest known name. `pipeline.__getattr__` wraps each public
function with `validated`; `Data` calls `check_arguments` itself (a class stays a class).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError, OptionError
from pipeline.layout import check_path_length
from pipeline.options import declared
from pipeline.options.declared import Variable, worded


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_path(value: object) -> bool:
    return isinstance(value, str | os.PathLike)


def _is_model(value: object) -> bool:
    """A model's name, or an entry (a ModelEntry, or any object naming its model and kind)."""
    return (isinstance(value, str) and value.strip() != "") or (
        isinstance(getattr(value, "name", None), str) and hasattr(value, "kind"))


def _is_models(value: object) -> bool:
    return _is_model(value) or (isinstance(value, Sequence) and not isinstance(value, str)
                                and len(value) > 0 and all(map(_is_model, value)))


def _is_metrics(value: object) -> bool:
    return (isinstance(value, str) and value.strip() != "") or (
        isinstance(value, Sequence) and len(value) > 0
        and all(isinstance(m, str) and m for m in value))


def _is_size(value: object) -> bool:
    return _is_int(value) or isinstance(value, str)


def _is_data(value: object) -> bool:
    """A data folder's path, or what pipeline.Data is (the API sits above this layer): its
    three folders, each a Path."""
    return _is_path(value) or all(isinstance(getattr(value, root, None), Path)
                                  for root in ("corpora", "indexes", "runs"))


def _is_synthetic(value: object) -> bool:
    from pipeline.ingest.synthetic import SyntheticConfig

    return _is_size(value) or isinstance(value, SyntheticConfig)


def _is_pool_spec(value: object) -> bool:
    from pipeline.pools.build import PoolSpec

    return isinstance(value, PoolSpec)


def _is_training_sets(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(model, str) and _is_path(path) for model, path in value.items())


# kind -> (the test of a value's type, what to give, said in words): a registry, one entry a kind
KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "int": (_is_int, "a whole number (an int)"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "str": (lambda v: isinstance(v, str), "a str"),
    "path": (_is_path, "a path (a str or os.PathLike)"),
    "data": (_is_data, "a pipeline.Data or the data folder's path"),
    "model": (_is_model, "a model's name (a str such as 'bm25') or a ModelEntry"),
    "models": (_is_models, "a model's name (a str such as 'bm25'), a ModelEntry, or a "
                           "non-empty list of them"),
    "metrics": (_is_metrics, "'auto', a metric set's name, or metric names (a str such as "
                             "'map ndcg@10', or a non-empty list of str)"),
    "size": (_is_size, "a size (an int, or a str such as '20k')"),
    "synthetic": (_is_synthetic, "a number of papers (an int, or a str such as '120k') or a "
                                 "SyntheticConfig"),
    "pool_spec": (_is_pool_spec, "a pipeline.pools.build.PoolSpec"),
    "training_sets": (_is_training_sets, "a dict of model name -> file of its training papers"),
}


def _is_nested(value: object) -> bool:
    """A dict of dicts, {query: {doc: value}}, or a list of ir_measures' named tuples: the
    forms pytrec_eval, BEIR and ir_measures hold (their contents: score.plain)."""
    return (isinstance(value, Mapping) and all(isinstance(v, Mapping) for v in value.values())
            or isinstance(value, list | tuple) and len(value) > 0
            and hasattr(value[0], "_fields"))


def _is_run(value: object) -> bool:
    """A run made elsewhere: a TREC file's path, a DataFrame, a dict of dicts, ir_measures'
    ScoredDocs or a ranx Run."""
    return _is_path(value) or type(value).__name__ in ("DataFrame", "Run") or _is_nested(value)


KINDS["run"] = (_is_run, "a TREC run file's path, a DataFrame (query, doc, score), a dict "
                         "{query: {doc: score}}, a list of ir_measures' ScoredDoc or a ranx Run")


def _is_qrels(value: object) -> bool:
    """Judgments made elsewhere: a TREC qrels file's path, a DataFrame, a dict of dicts,
    ir_measures' Qrels or a ranx Qrels."""
    return (_is_path(value) or type(value).__name__ in ("DataFrame", "Qrels")
            or _is_nested(value))


def _is_named_runs(value: object) -> bool:
    """compare's runs: two or more, each named by a non-empty str."""
    return isinstance(value, Mapping) and len(value) >= 2 and all(
        isinstance(name, str) and name.strip() != "" and _is_run(run)
        for name, run in value.items())


KINDS["qrels"] = (_is_qrels, "a TREC qrels file's path, a DataFrame (query, doc, relevance), "
                             "a dict {query: {doc: grade}}, a list of ir_measures' Qrel or a "
                             "ranx Qrels")
KINDS["named_runs"] = (_is_named_runs, "a dict of two or more runs, name (a str) -> run (a TREC "
                                       "run file's path, a DataFrame or a ranx Run)")
KINDS["results"] = (lambda v: _is_path(v) or type(v).__name__ == "DataFrame",
                    "runs/results.parquet's path or a polars DataFrame of its columns")
KINDS["deltas"] = (lambda v: isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                   and all(isinstance(x, int | float) and not isinstance(x, bool)
                           and 0 < x <= 1 for x in v),
                   "a non-empty list of differences in metric units, each in (0, 1], such as "
                   "(0.01, 0.02)")
KINDS["counts"] = (lambda v: isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                   and all(_is_int(x) and x > 0 for x in v),
                   "a non-empty list of positive whole numbers, such as (1, 3, 5)")
KINDS["judgments"] = (_is_qrels, "a DataFrame (query, doc, grade), a TREC qrels file's path, a "
                                "dict {query: {doc: grade}} or a ranx Qrels")
KINDS["sample"] = (lambda v: _is_path(v) or type(v).__name__ == "DataFrame",
                   "a sample's parquet file or a polars DataFrame (pipeline.judging.sample)")
KINDS["number"] = (lambda v: isinstance(v, int | float) and not isinstance(v, bool),
                   "a number (an int or a float)")
# The kinds a path may be given for: each path checked for its length (layout.MAX_GIVEN_PATH)
PATH_KINDS = frozenset({"path", "data", "run", "qrels", "results", "judgments", "sample"})
# The keywords a function takes through **keywords (the rest are refused): build_pool's
# PoolSpec fields. search takes its model's retriever's own options (OWN_KEYWORDS: each kind's
# Retriever.OPTIONS), which it checks itself (`check_options`, naming the kind).
KEYWORDS: dict[str, tuple[str, ...]] = {
    "build_pool": ("size", "field", "repeat", "n_queries", "query_year", "max_year", "seed",
                   "min_positives", "exclude", "split"),
}
OWN_KEYWORDS = frozenset({"search"})
# The functions that take (qrels, run) in ranx's order, and the name of their run argument
QRELS_FIRST = {"score": "run", "compare": "runs", "inferred": "run"}


def argument(function: str, name: str) -> Variable | None:
    """The declaration of argument `name` of public function `function` (declared.py: the
    one naming `function` first, then one naming no function; a declaration added at run time
    included), or None for an unknown name."""
    found = [v for v in (*declared.VARIABLES, *declared.KEYWORD_ONLY) if name in v.keywords
             and (not v.functions or function in v.functions)]
    return next((v for v in found if v.functions), found[0] if found else None)


def stage_keywords(stage: str) -> list[str]:
    """The API's keywords of the declared options of the command `stage`."""
    return [keyword for v in declared.VARIABLES if stage in v.stages for keyword in v.keywords]


def _text(value: object) -> str:
    if isinstance(value, str | os.PathLike):
        return str(value)
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, Sequence):
        return " ".join(map(str, value))
    return str(value)


def check_value(function: str, name: str, value: object) -> None:
    """One argument's type, then its value (the make variable's check); a one-line InputError
    naming the function, the argument and what to give."""
    rule = argument(function, name)
    if rule is None:  # a public function's argument no declaration names
        raise unknown(function, name, [])
    if value is None and rule.none:
        return
    test, what = KINDS[rule.kind]
    if not test(value):
        kind = type(value).__name__  # not said when it is the right type of the wrong content
        raise InputError(f"{function}: {name}={value!r}: give {what}"
                         + (f", not {_a(kind)}" if value is not None and kind not in what
                            else ""))
    if rule.kind == "path" and str(value) == "":
        raise InputError(f"{function}: {name}='': an empty path: give a file or folder")
    if rule.kind in PATH_KINDS and _is_path(value):
        try:
            check_path_length(value)  # type: ignore[arg-type]
        except InputError as exc:
            raise InputError(f"{function}: {name}: {exc.message}") from None
    check = rule.check
    if check is None or rule.kind in ("model", "models") and not isinstance(value, str):
        return
    for text in _texts(rule.kind, value):
        try:
            check(text)
        except (InputError, argparse.ArgumentTypeError) as exc:
            message = exc.message if isinstance(exc, InputError) else str(exc)
            raise InputError(f"{function}: {name}={value!r}: {message}") from None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _texts(kind: str, value: object) -> list[str]:
    """The command line's text(s) of a typed value, for the variable's check."""
    if kind == "models" and not isinstance(value, str):
        return [m for m in value if isinstance(m, str)]  # type: ignore[union-attr]
    if kind in ("size", "synthetic") and not isinstance(value, int | str):
        return []  # a SyntheticConfig: checked by its own fields
    if kind == "bool":  # a switch's (REPLACE=1: replace=True)
        return ["1" if value else "0"]
    return [_text(value)]


def unknown(function: str, name: str, known: Sequence[str], owner: str = "") -> InputError:
    """An unknown keyword, with the nearest known name."""
    near = difflib.get_close_matches(name, known, n=1)
    hint = f": did you mean {near[0]}?" if near else (
        f": use one of {', '.join(known)}" if known else ": it takes none")
    return InputError(f"unknown option {name} for {owner or function}{hint}")


def check_arguments(function: str, given: Mapping[str, Any]) -> None:
    """Check each argument given by name (None where the function's default applies)."""
    for name, value in given.items():
        if argument(function, name) is None:
            raise unknown(function, name, sorted(
                {k for v in (*declared.VARIABLES, *declared.KEYWORD_ONLY) for k in v.keywords}))
        check_value(function, name, value)


def check_options(function: str, owner: str, options: Mapping[str, Any],
                  known: Sequence[str]) -> None:
    """Keyword options of one owner (a retriever kind, say): each a known one, checked."""
    for name, value in options.items():
        if name not in known:
            raise unknown(function, name, list(known), owner)
        check_value(function, name, value)


def validated(function: Callable) -> Callable:
    """`function`, with every argument checked first (by its declaration, its **keywords in
    KEYWORDS): nothing runs, and nothing is written, with a bad one."""
    name = function.__name__
    signature = inspect.signature(function)
    params = signature.parameters
    named = [p for p in params.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    var_keyword = any(p.kind is p.VAR_KEYWORD for p in params.values())
    extra = KEYWORDS.get(name, ())

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in params and not (var_keyword and (key in extra
                                                           or name in OWN_KEYWORDS)):
                raise unknown(name, key, [p.name for p in named] + list(extra))
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            missing = [p.name for p in named if p.default is p.empty
                       and p.kind is not p.KEYWORD_ONLY and p.name not in kwargs][len(args):]
            if missing:
                raise InputError(f"{name}: missing {missing[0]}: give "
                                 f"{KINDS[argument(name, missing[0]).kind][1]}") from None
            raise InputError(f"{name}: {exc}") from None
        if name in QRELS_FIRST:  # before the kinds: a call in the old order says so
            from pipeline.evaluation.score import check_order

            check_order(name, bound.arguments.get("qrels"),
                        bound.arguments.get(QRELS_FIRST[name]))
        for key, value in bound.arguments.items():
            kind = params[key].kind
            if kind is kind.VAR_POSITIONAL:
                for item in value:
                    check_value(name, key, item)
            elif kind is kind.VAR_KEYWORD:
                for option, item in value.items():
                    if option in extra:  # the others: refused by the function (OWN_KEYWORDS)
                        check_value(name, option, item)
            else:
                check_value(name, key, value)
        try:
            return function(*args, **kwargs)
        except OptionError as exc:  # a refusal naming declared options: the API's keywords
            exc.message = worded(exc, "api")
            raise

    wrapper.validated = True  # type: ignore[attr-defined]
    return wrapper
