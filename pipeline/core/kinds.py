"""The kinds of the Python API's arguments, each declared once (KINDS): what to give, in
words (a refusal and docs/api.md's table of the arguments say it), the forms a value may take,
and the annotations that say it. An argument's kind is read from its function's annotation;
the aliases below name what one annotation cannot tell apart (a list of pool names and one
of metric names are both `str | Sequence[str]`). Standard library only, and at the bottom of
the layers: `import pipeline` loads it with the annotations unread, and the stages annotate
with its aliases (score's Qrels and Run)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import polars as pl

# the arguments one annotation cannot tell apart, each named by its kind
Pools: TypeAlias = "str | Sequence[str]"  # a pool's name or a non-empty list of them
Metrics: TypeAlias = "str | Sequence[str]"  # 'auto', a metric set or metric names
# (ModelEntry: pipeline.models', a layer above this one, named but not imported)
Models: TypeAlias = "str | ModelEntry | Sequence[str | ModelEntry]"  # noqa: F821
# model name -> its training papers' file; or the command line's text of them, which the
# API refuses (its kind takes a dict)
TrainingSets: TypeAlias = Mapping[str, str | os.PathLike] | str
Results: TypeAlias = "str | os.PathLike | pl.DataFrame"  # runs/results.parquet's columns
Sample: TypeAlias = "str | os.PathLike | pl.DataFrame"  # a judging sample's
Deltas: TypeAlias = Sequence[float]  # differences in metric units, each in (0, 1]
Counts: TypeAlias = Sequence[int]  # positive whole numbers
Run: TypeAlias = Any  # a TREC run file's path, a DataFrame, a dict, ir_measures' or ranx's
Qrels: TypeAlias = Any  # a TREC qrels file's path, a DataFrame, a dict, ir_measures' or ranx's
Judgments: TypeAlias = Any  # qrels of graded judgments
NamedRuns: TypeAlias = Mapping[str, Any]  # name -> run, two or more


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


PATH = (str, os.PathLike)  # a kind taking os.PathLike takes a path: its length is checked
# a dict of dicts, {query: {doc: value}}, or a list of ir_measures' named tuples: the forms
# pytrec_eval, BEIR and ir_measures hold
NESTED = (_mapping(lambda key: True, (Mapping,)),
          lambda v: isinstance(v, list | tuple) and len(v) > 0 and hasattr(v[0], "_fields"))
RUN = (*PATH, "DataFrame", "Run", *NESTED)
QRELS = (*PATH, "DataFrame", "Qrels", *NESTED)
# a model's name, or an entry (a ModelEntry, or any object naming its model and kind)
MODEL = (_text, lambda v: isinstance(getattr(v, "name", None), str) and hasattr(v, "kind"))
RUN_WORDS = "a TREC run file's path, a DataFrame (query, doc, score), a dict {query: {doc: " \
    "score}}, a list of ir_measures' ScoredDoc or a ranx Run"
QRELS_WORDS = "a TREC qrels file's path, a DataFrame (query, doc, relevance), a dict {query: " \
    "{doc: grade}}, a list of ir_measures' Qrel or a ranx Qrels"


@dataclass(frozen=True)
class Kind:
    """What an argument of this kind takes: `words` (a refusal says them), the `forms` a value
    may take (a type, a test, a class's name), and the annotations (`said`: their members in
    any order, each by its last dotted name) that give an argument this kind."""

    words: str
    forms: tuple
    said: tuple[str, ...] = ()


KINDS: dict[str, Kind] = {
    "int": Kind("a whole number (an int)", (int,), ("int",)),
    "bool": Kind("True or False", (bool,), ("bool",)),
    "str": Kind("a str", (str,), ("str",)),
    "number": Kind("a number (an int or a float)", (int, float), ("float", "int | float")),
    "path": Kind("a path (a str or os.PathLike)", PATH, ("str | os.PathLike",)),
    "data": Kind("a pipeline.Data or the data folder's path", (*PATH, "pipeline.api.Data"),
                 ("Data | str | os.PathLike",)),
    "model": Kind("a model's name (a str such as 'bm25') or a ModelEntry", MODEL,
                  ("str | ModelEntry",)),
    "models": Kind("a model's name (a str such as 'bm25'), a ModelEntry, or a non-empty list "
                   "of them", (*MODEL, _list_of(*MODEL)), ("Models",)),
    "pools": Kind("a pool's name (a str) or a non-empty list of them", (str, _list_of(str)),
                  ("Pools",)),
    "metrics": Kind("'auto', a metric set's name, or metric names (a str such as 'map "
                    "ndcg@10', or a non-empty list of str)", (_text, _list_of(_text)),
                    ("Metrics",)),
    "size": Kind("a size (an int, or a str such as '20k')", (int, str), ("int | str",)),
    "synthetic": Kind("a number of papers (an int, or a str such as '120k') or a "
                      "SyntheticConfig", (int, str, "pipeline.ingest.synthetic.SyntheticConfig"),
                      ("int | str | SyntheticConfig",)),
    "pool_spec": Kind("a pipeline.pools.build.PoolSpec", ("pipeline.pools.build.PoolSpec",),
                      ("PoolSpec",)),
    "training_sets": Kind("a dict of model name -> file of its training papers",
                          (_mapping(lambda key: isinstance(key, str), PATH),),
                          ("TrainingSets",)),
    "run": Kind(RUN_WORDS, RUN, ("Run",)),
    "qrels": Kind(QRELS_WORDS, QRELS, ("Qrels",)),
    "named_runs": Kind("a dict of two or more runs, name (a str) -> run (a TREC run file's "
                       "path, a DataFrame or a ranx Run)", (_mapping(_text, RUN, 2),),
                       ("NamedRuns",)),
    "results": Kind("runs/results.parquet's path or a polars DataFrame of its columns",
                    (*PATH, "DataFrame"), ("Results",)),
    "judgments": Kind("a DataFrame (query, doc, grade), a TREC qrels file's path, a dict "
                      "{query: {doc: grade}} or a ranx Qrels", QRELS, ("Judgments",)),
    "sample": Kind("a sample's parquet file or a polars DataFrame (pipeline.judging.sample)",
                   (*PATH, "DataFrame"), ("Sample",)),
    "deltas": Kind("a non-empty list of differences in metric units, each in (0, 1], such as "
                   "(0.01, 0.02)", (_list_of(lambda x: accepts(x, (int, float)) and 0 < x <= 1),),
                   ("Deltas",)),
    "counts": Kind("a non-empty list of positive whole numbers, such as (1, 3, 5)",
                   (_list_of(lambda x: accepts(x, (int,)) and x > 0),), ("Counts",)),
}


def members(annotation: str) -> list[str]:
    """The members of a union's text, each by its last dotted name (`os.PathLike`: PathLike,
    `kinds.Pools`: Pools), split at the `|` outside brackets."""
    found, depth, start = [], 0, 0
    for at, char in enumerate(annotation + "|"):
        depth += (char == "[") - (char == "]")
        if char == "|" and depth == 0:
            found.append(annotation[start:at].strip())
            start = at + 1
    return [member if "[" in member else member.rpartition(".")[2] for member in found]


def normalised(annotation: str) -> tuple[frozenset[str], bool]:
    """An annotation's text as compared: its members apart from None, and whether None is one."""
    named = members(annotation)
    return frozenset(m for m in named if m != "None"), "None" in named


BY_MEMBERS = {normalised(text)[0]: name for name, kind in KINDS.items() for text in kind.said}


def annotated_kind(annotation: object) -> tuple[str, bool] | None:
    """The kind an annotation (its text: `from __future__ import annotations`) says, and
    whether it takes None; None where it says none (no annotation, `Any`, a **keyword's)."""
    if not isinstance(annotation, str):
        annotation = getattr(annotation, "__name__", "")  # an evaluated one: int, bool, ...
    kinds, none = normalised(annotation) if annotation else (frozenset(), False)
    kind = BY_MEMBERS.get(kinds)
    return None if kind is None else (kind, none)
