"""The kind of an argument of the Python API, read from its function's annotation: a kind
(pipeline/options/arguments.py FORMS, declared.KIND_WORDS) for each annotation that says one,
and the names, for the API's annotations, of those one annotation cannot say (a list of pool
names and one of metric names are both `str | Sequence[str]`). Standard library only (as
declared.py is): `import pipeline` loads it with the annotations unread."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import polars as pl

    from pipeline.models import ModelEntry

# the arguments one annotation cannot tell apart, each named by its kind
Pools: TypeAlias = "str | Sequence[str]"  # a pool's name or a non-empty list of them
Metrics: TypeAlias = "str | Sequence[str]"  # 'auto', a metric set or metric names
Models: TypeAlias = "str | ModelEntry | Sequence[str | ModelEntry]"
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

# an annotation (its members in any order, each by its last dotted name, None apart) -> its
# kind; None, where a member, says the argument takes None
ANNOTATED: dict[str, str] = {
    "int": "int",
    "bool": "bool",
    "str": "str",
    "float": "number",
    "int | float": "number",
    "str | os.PathLike": "path",
    "Data | str | os.PathLike": "data",
    "str | ModelEntry": "model",
    "int | str": "size",
    "int | str | SyntheticConfig": "synthetic",
    "PoolSpec": "pool_spec",
    **{alias: kind for alias, kind in (
        ("Pools", "pools"), ("Metrics", "metrics"), ("Models", "models"),
        ("TrainingSets", "training_sets"), ("Results", "results"), ("Sample", "sample"),
        ("Deltas", "deltas"), ("Counts", "counts"), ("Run", "run"), ("Qrels", "qrels"),
        ("Judgments", "judgments"), ("NamedRuns", "named_runs"))},
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


BY_MEMBERS = {normalised(text)[0]: kind for text, kind in ANNOTATED.items()}


def annotated_kind(annotation: object) -> tuple[str, bool] | None:
    """The kind an annotation (its text: `from __future__ import annotations`) says, and
    whether it takes None; None where it says none (no annotation, `Any`, a **keyword's)."""
    if not isinstance(annotation, str):
        annotation = getattr(annotation, "__name__", "")  # an evaluated one: int, bool, ...
    kinds, none = normalised(annotation) if annotation else (frozenset(), False)
    kind = BY_MEMBERS.get(kinds)
    return None if kind is None else (kind, none)
