"""An argument's type is its function's annotation (issues 72 and 81): the value it must have,
and whether it takes None, are what the public function's signature says, checked by
typeguard (options/arguments.py) and, for an Annotated type of core/annotations.py, by its
test; a declaration names a type only where no annotation says one (a **keyword)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.docs import annotation, argument_words, public_arguments
from pipeline.core import annotations
from pipeline.core.errors import InputError
from pipeline.options import declared
from pipeline.options.arguments import (
    check_value,
    hints,
    split_rule,
    takes,
    type_of,
    validated,
    words,
)


def test_a_value_is_taken_by_its_annotation_whatever_its_order():
    assert takes(int, 3) and not takes(int, True) and not takes(int, 1.5)  # a bool is no int
    assert takes(float, 2) and not takes(float, False)
    assert takes(os.PathLike | str | None, Path("x")) and takes(str | os.PathLike, "x")
    assert not takes(Sequence[str], ["a", 1])  # every item, not the first alone
    assert takes(annotations.Pools, ["a", "b"]) and not takes(annotations.Pools, [])
    assert not takes(annotations.Counts, (1, 0)) and takes(annotations.Counts, (1, 3))
    assert not takes(annotations.Deltas, (0.5, 1.5))
    assert takes(annotations.Model, "bm25") and not takes(annotations.Model, "  ")
    assert takes(annotations.NamedRuns, {"a": {"q": {"d": 1.0}}, "b": "b.trec"})
    assert not takes(annotations.NamedRuns, {"a": "a.trec"})  # two or more


def test_what_to_give_is_said_from_the_annotation():
    assert words(int | None) == "a whole number (an int)"
    assert words(str | os.PathLike) == "a path (a str or os.PathLike)"
    assert words(pipeline.Data | str | os.PathLike) == "a Data or a path (a str or os.PathLike)"
    assert words(int | str | bool) == "a whole number (an int), a str or True or False"
    assert words(annotations.Pools | None).startswith("a pool's name")


def test_every_public_argument_has_a_type_its_annotation_or_its_declaration():
    """Each public function's annotations evaluate (those its module imports for type
    checkers only included: arguments.LATE), and each argument has words to refuse it by."""
    for function, names in public_arguments().items():
        value = getattr(pipeline, function)
        said = hints(value.__init__ if isinstance(value, type) else value)
        for name in names:
            hint = said.get(name) or type_of(function, name)
            assert words(hint), (function, name)
    assert hints(pipeline.build_pool)["spec"].__args__[0].__name__ == "PoolSpec"


def test_an_arguments_type_follows_its_annotation(monkeypatch):
    """The same declaration (K's) checks `k` by whatever its function's annotation says: an
    int, or None too, or a str; the docs read a public function's by its name."""
    def ranked(data: pipeline.Data | str | os.PathLike, *, k: int = 500) -> object:
        return k

    assert validated(ranked)(".", k=20) == 20
    with pytest.raises(InputError, match=r"^ranked: k=None: give a whole number \(an int\)$"):
        validated(ranked)(".", k=None)
    with pytest.raises(InputError, match=r"^ranked: k=1.5: give a whole number \(an int\), "
                                         "not a float$"):
        validated(ranked)(".", k=1.5)
    with pytest.raises(InputError, match=r"^ranked: k=True: give a whole number \(an int\), "
                                         "not a bool$"):
        validated(ranked)(".", k=True)

    def ranked_or_not(data: pipeline.Data | str | os.PathLike, *, k: int | None = None
                      ) -> object:
        return k

    assert validated(ranked_or_not)(".", k=None) is None
    with pytest.raises(InputError, match="^ranked_or_not: k=0: 0 is too small: use 1 to 10,000$"):
        validated(ranked_or_not)(".", k=0)  # K's check, as ever

    def made_up(data: pipeline.Data | str | os.PathLike, *, k: str | None = None) -> object:
        return k

    monkeypatch.setattr(pipeline, "__all__", [*pipeline.__all__, "made_up"])
    monkeypatch.setattr(pipeline, "made_up", validated(made_up), raising=False)
    said = annotation("made_up", "k")  # the docs' reading of it, by the function's name
    assert said == str | None
    assert argument_words("made_up", "k") == "a str: 1 to 10,000, as `K`, or None"
    with pytest.raises(InputError, match="^made_up: k=5: give a str, not an int$"):
        check_value("made_up", "k", 5, said)
    with pytest.raises(InputError, match="^made_up: k=5: give a str, not an int$"):
        pipeline.made_up(".", k=5)
    check_value("made_up", "k", None, said)
    with pytest.raises(InputError, match="^made_up: data: an empty path: give a file"):
        pipeline.made_up("")


def test_none_is_taken_where_the_annotation_takes_it():
    """build_corpus's `seed` defaults to None (as the shards were made), search's is an int."""
    for function, name in (("build_corpus", "seed"), ("build_pools", "query_year")):
        check_value(function, name, None, annotation(function, name))
    with pytest.raises(InputError, match=r"^search: seed=None: give a whole number \(an int\)$"):
        check_value("search", "seed", None, annotation("search", "seed"))


def test_a_declared_type_is_only_where_no_annotation_says_it():
    """A declaration's `type` serves an argument with no annotation (a **keyword: search's
    options): never one an annotation says; build_pool's fields are its own parameters."""
    typed = {var.keyword for var in declared.VARIABLES if var.type is not str}
    unannotated = set()  # the keywords some function takes by its **keywords alone
    for function, names in public_arguments().items():
        for name in names:
            said = annotation(function, name)
            if said is None:
                unannotated.add(name)
            else:
                assert type_of(function, name, said) == split_rule(said)[0], (function, name)
    assert typed and typed <= unannotated, typed - unannotated
    assert type_of("search", "rerank_depth") is int
    said = annotation("build_pool", "exclude")
    assert type_of("build_pool", "exclude", said) == str | os.PathLike | None
    with pytest.raises(InputError, match=r"^build_pool: size=1.5: give a whole number \(an "
                                         r"int\) or a str, not a float$"):
        check_value("build_pool", "size", 1.5, annotation("build_pool", "size"))
