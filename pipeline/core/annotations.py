"""The annotations of the Python API's arguments that a type alone does not say: an `Annotated`
type carrying a `Given`, what to give in words (a refusal and docs/api.md's table say them) and
a test of the value (a list not empty, a run in one of the forms it takes); and the rule of an
argument that no make variable names, on its own parameter: `Annotated[type, Check(check),
Help(text)]`. options/arguments.py checks an argument by its annotation, with typeguard, then
the Given's test, then its rule (its Check, else the make variable of its name). Standard
library only, at the bottom of the layers: the stages annotate with these."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pipeline.core.numbers import significance_level


@dataclass(frozen=True)
class Given:
    """What an argument of an Annotated type takes, in `words`, and the `test` its value
    passes besides its type (a class the stage loads later is named by a string: accepts)."""

    words: str
    test: Callable[[object], bool] = lambda value: True


@dataclass(frozen=True)
class Check:
    """The rule of an API argument that no make variable names (or that means another thing
    than the variable of its name: a single pool, a year), on its parameter: `check` takes the
    value as given (the command line's text, the API's typed value), as the variables' checks
    do (pipeline/options/checks.py), so the API and the command line refuse it in the same words;
    None: its annotation alone, not the variable of its name."""

    check: Callable[[str], object] | None = None


@dataclass(frozen=True)
class Help:
    """With a Check: the argument is also an option of its function's command (`python -m
    pipeline <command> --<keyword>`, make passing it where a goal needs it), said by `text`,
    given again for each value where it `repeats` (--pool a --pool b), or `required` there;
    for a command that searches or embeds, whether its value `changes_run`
    (options/declared.py's Variable.changes_run); its default (a str's) and whether it is a
    bare switch (a bool) are its parameter's."""

    text: str
    repeats: bool = False
    required: bool = False
    changes_run: bool | str | None = None


def accepts(value: object, forms: Sequence[Any]) -> bool:
    """Whether `value` takes one of `forms`: a type (a bool is no number), a test, or a class
    by its name (polars' DataFrame, ranx's Run: not loaded here) or its module's and name."""
    for form in forms:
        if isinstance(form, type):
            taken = isinstance(value, form) and (form is bool or not isinstance(value, bool))
        elif isinstance(form, str):
            kind = type(value)
            taken = form in (kind.__name__, f"{kind.__module__}.{kind.__name__}")
        else:
            taken = form(value)
        if taken:
            return True
    return False


def _list_of(*forms: Any) -> Callable[[object], bool]:
    """A non-empty list (or tuple; never a str) of values of `forms`."""
    return lambda v: (isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                      and all(accepts(x, forms) for x in v))


def _text(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _mapping(keys: Callable[[object], bool], values: tuple, least: int = 0
             ) -> Callable[[object], bool]:
    return lambda v: isinstance(v, Mapping) and len(v) >= least and all(
        keys(key) and accepts(value, values) for key, value in v.items())


def _one_of(*forms: Any) -> Callable[[object], bool]:
    return lambda value: accepts(value, forms)


class Table(Protocol):
    """A DataFrame, polars' or pandas': named columns (not imported here: the layers' bottom)."""

    columns: Any


class Ranked(Protocol):
    """ranx's Run or Qrels (not imported here): what turns itself into a dict."""

    def to_dict(self) -> Any: ...


class Named(Protocol):
    """A model's entry: a ModelEntry, or any object naming its model and kind."""

    name: Any
    kind: Any


# The types of the forms a run or qrels takes (the tests below tell them apart): a path, a
# DataFrame, a ranx object, a dict of dicts or a list of named tuples
RANKED = str | os.PathLike | Table | Ranked | Mapping[Any, Any] | Sequence[Any]
PATH = (str, os.PathLike)
# a dict of dicts, {query: {doc: value}}, or a list of ir_measures' named tuples: the forms
# pytrec_eval, BEIR and ir_measures hold
NESTED = (_mapping(lambda key: True, (Mapping,)),
          lambda v: isinstance(v, list | tuple) and len(v) > 0 and hasattr(v[0], "_fields"))
RUN = (*PATH, "DataFrame", "Run", *NESTED)
QRELS = (*PATH, "DataFrame", "Qrels", *NESTED)
# a model's name, or an entry (a ModelEntry, or any object naming its model and kind)
MODEL = (_text, lambda v: isinstance(getattr(v, "name", None), str) and hasattr(v, "kind"))

Pools = Annotated[str | Sequence[str], Given(
    "a pool's name (a str) or a non-empty list of them", _one_of(str, _list_of(str)))]
Metrics = Annotated[str | Sequence[str], Given(
    "'auto', a metric set's name, or metric names (a str such as 'map ndcg@10', or a "
    "non-empty list of str)", _one_of(_text, _list_of(_text)))]
Model = Annotated[str | Named, Given(
    "a model's name (a str such as 'bm25') or a ModelEntry", _one_of(*MODEL))]
Models = Annotated[str | Named | Sequence[str | Named], Given(
    "a model's name (a str such as 'bm25'), a ModelEntry, or a non-empty list of them",
    _one_of(*MODEL, _list_of(*MODEL)))]
TrainingSets = Annotated[Mapping[str, str | os.PathLike], Given(
    "a dict of model name -> file of its training papers")]
Results = Annotated[str | os.PathLike | Table, Given(
    "runs/results.parquet's path or a polars DataFrame of its columns",
    _one_of(*PATH, "DataFrame"))]
Sample = Annotated[str | os.PathLike | Table, Given(
    "a sample's parquet file or a polars DataFrame (pipeline.judging.sample)",
    _one_of(*PATH, "DataFrame")), Check()]  # not SAMPLE's (a count)
Deltas = Annotated[Sequence[float], Given(
    "a non-empty list of differences in metric units, each in (0, 1], such as (0.01, 0.02)",
    _list_of(lambda x: accepts(x, (int, float)) and 0 < x <= 1))]
Counts = Annotated[Sequence[int], Given(
    "a non-empty list of positive whole numbers, such as (1, 3, 5)",
    _list_of(lambda x: accepts(x, (int,)) and x > 0))]
Run = Annotated[RANKED, Given(
    "a TREC run file's path, a DataFrame (query, doc, score), a dict {query: {doc: score}}, "
    "a list of ir_measures' ScoredDoc or a ranx Run", _one_of(*RUN)), Check()]  # not RUN's
Qrels = Annotated[RANKED, Given(
    "a TREC qrels file's path, a DataFrame (query, doc, relevance), a dict {query: {doc: "
    "grade}}, a list of ir_measures' Qrel or a ranx Qrels", _one_of(*QRELS))]
Judgments = Annotated[RANKED, Given(
    "a DataFrame (query, doc, grade), a TREC qrels file's path, a dict {query: {doc: grade}} "
    "or a ranx Qrels", _one_of(*QRELS))]
NamedRuns = Annotated[Mapping[str, Any], Given(
    "a dict of two or more runs, name (a str) -> run (a TREC run file's path, a DataFrame or "
    "a ranx Run)", _mapping(_text, RUN, 2))]
# any path, checked as every path is (layout.check_path), not as DATA's, RAW's, SRC's or
# EXCLUDE's (make's: a target's, without spaces)
Folder = Annotated[str | os.PathLike, Check()]
Alpha = Annotated[float, Check(significance_level)]  # compare's, topic_set_size's
