"""The one validation layer of the Python API: every argument of every public name of
`pipeline` (its _API) is checked here before the function runs, with the check of the make
variable it stands for (VARIABLES in pipeline/options/declared.py, the checks of
pipeline/options/checks.py). The API, the command line and make so refuse a bad value with the
same words, on one line (an InputError) naming the function, the argument and what to give.

Python values are typed: a whole number is an int (the str "20" is refused, saying so; the
command line parses its text itself), a flag a bool, a path a str or os.PathLike. An unknown
keyword is refused with the nearest known name. `pipeline.__getattr__` wraps each public
function with `validated`; `Data` calls `check_arguments` itself (a class stays a class).
docs/api.md (Validation) lists every argument's rule.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError, OptionError
from pipeline.layout import check_path_length, parse_size, run_name, split_run_name
from pipeline.options.checks import non_negative, positive, synth_shard_count
from pipeline.options.declared import BY_NAME, VARIABLES, worded


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


@dataclass(frozen=True)
class Argument:
    """How an API argument is checked: its `kind` (KINDS), then the value by the check of the
    make `variable` it stands for (given as the command line's text), or by `check` where no
    variable does. `none`: None is accepted (the default's meaning)."""

    kind: str
    variable: str = ""
    check: Callable[[str], object] | None = None
    none: bool = False

    @property
    def value_check(self) -> Callable[[str], object] | None:
        return self.check or (BY_NAME[self.variable].check if self.variable else None)


def _model(text: str) -> str:
    """A model's name, or a run's ('bm25~title'): the registry knows the model."""
    from pipeline.models import get_model

    model, variant = split_run_name(text)
    return run_name(get_model(model).name, variant)


def _scored(text: str) -> str:
    """A run to score: a registered model's run, or a run imported under its own name (its
    pool's run store knows it: evaluate refuses a name with no run there)."""
    from pipeline.layout import check_name

    try:
        return _model(text)
    except InputError:
        return check_name("model", text)


def _imported_name(text: str) -> str:
    from pipeline.retrieval.imported import check_model_name

    return check_model_name(text)


def _vectors_name(text: str) -> str:
    from pipeline.models import vectors_model

    return vectors_model(text).name


def _similarity(text: str) -> str:
    from pipeline.models import SIMILARITIES

    if text not in SIMILARITIES:
        raise InputError(f"similarity {text!r}: use one of {', '.join(SIMILARITIES)}")
    return text


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


def _significance_test(text: str) -> str:
    from pipeline.evaluation.significance import significance_test

    return significance_test(text)


def _correction(text: str) -> str:
    from pipeline.report.compare import CORRECTIONS

    if text not in CORRECTIONS:
        raise InputError(f"use one of {', '.join(CORRECTIONS)}")
    return text


def _named(text: str) -> str:
    """A model's or metric's name as results.parquet holds it: not empty."""
    if not text.strip():
        raise InputError("give a non-empty name")
    return text


def _power(text: str) -> float:
    if not 0 < float(text) < 1:
        raise InputError("give a power between 0 and 1, such as 0.8")
    return float(text)


def _probability(text: str) -> float:
    if not 0 < float(text) < 1:
        raise InputError("give a significance level between 0 and 1, such as 0.05")
    return float(text)


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
A = Argument
# Every argument name of the public API, one meaning each (docs/api.md, Validation): those of
# a declared option (Variable.keywords), checked by its check, and the API's own.
ARGUMENTS: dict[str, Argument] = {
    **{keyword: A(v.kind, v.name, none=v.none) for v in VARIABLES for keyword in v.keywords},
    "data": A("data"),
    "folder": A("path", none=True),
    "corpora": A("path", none=True),
    "indexes": A("path", none=True),
    "runs": A("path", none=True),
    "model": A("model", check=_model),
    "synthetic": A("synthetic", check=parse_size, none=True),
    "shards": A("int", check=synth_shard_count),
    "raw": A("path", none=True),
    "strict": A("bool"),
    "min_citations": A("int", check=non_negative),
    "spec": A("pool_spec", none=True),
    "size": A("size", check=parse_size),
    "field": A("str", none=True),
    "repeat": A("int", check=non_negative),
    "query_year": A("int", check=non_negative),
    "max_year": A("int", check=non_negative),
    "min_positives": A("int", check=positive),
    "exclude": A("path", none=True),
    "model_path": A("path", none=True),
    "means": A("bool"),
    "save": A("bool"),
    "collect": A("bool"),
    "folders": A("path"),
    "deep": A("bool"),
    "run": A("run"),
    "drop_unknown": A("bool"),
    "judged": A("bool"),
    "qrels": A("qrels"),
    "per_query": A("bool"),
    "test": A("str", check=_significance_test),
    "correction": A("str", check=_correction),
    "alpha": A("number", check=_probability),
    "src": A("path"),
    "similarity": A("str", check=_similarity),
    "results": A("results"),
    "a": A("str", check=_named),
    "b": A("str", check=_named),
    "metric": A("str", check=_named),
    "resamples": A("int", check=positive),
    "deltas": A("deltas"),
    "draws": A("counts"),
    "power": A("number", check=_power),
    "judgments": A("judgments"),
    "sample": A("sample"),
}
# An argument of one function that means something else there than ARGUMENTS says
OVERRIDES: dict[tuple[str, str], Argument] = {
    ("evaluate", "model"): A("models", check=_scored),
    ("mteb_result", "model"): A("model", check=_scored),
    ("import_run", "model"): A("str", check=lambda text: _imported_name(text)),
    ("import_run", "pool"): A("str", "POOL", none=True),  # None: the whole collection's run
    ("import_vectors", "model"): A("str", check=lambda text: _vectors_name(text)),
    ("compare", "runs"): A("named_runs"),
    ("variance", "corpus"): A("str", "CORPUS", none=True),
    ("topic_set_size", "corpus"): A("str", "CORPUS", none=True),
    **{(function, "models"): A("models", check=lambda text: [
        _scored(name) for name in text.replace(",", " ").split()])  # MODELS=bm25,minilm too
       for function in ("judge", "judge_page")},
    **{(function, "judge_url"): A("str", "JUDGE_URL", none=True)
       for function in ("judge", "judge_agreement")},
}
del A
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


def declared(name: str) -> Argument | None:
    """The argument `name` of a declared option (Variable.keywords), as declared now (a
    declaration added at run time included)."""
    var = next((v for v in VARIABLES if name in v.keywords), None)
    return var and Argument(var.kind, var.name, none=var.none)


def stage_keywords(stage: str) -> list[str]:
    """The API's keywords of the declared options of the command `stage`."""
    return [keyword for v in VARIABLES if stage in v.stages for keyword in v.keywords]


def argument(function: str, name: str) -> Argument:
    """How argument `name` of public function `function` is checked."""
    return OVERRIDES.get((function, name)) or declared(name) or ARGUMENTS[name]


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
    check = rule.value_check
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
        if name not in ARGUMENTS and declared(name) is None:
            raise unknown(function, name, sorted(ARGUMENTS))
        check_value(function, name, value)


def check_options(function: str, owner: str, options: Mapping[str, Any],
                  known: Sequence[str]) -> None:
    """Keyword options of one owner (a retriever kind, say): each a known one, checked."""
    for name, value in options.items():
        if name not in known:
            raise unknown(function, name, list(known), owner)
        check_value(function, name, value)


def validated(function: Callable) -> Callable:
    """`function`, with every argument checked first (its name in ARGUMENTS, its **keywords in
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
