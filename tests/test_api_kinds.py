"""An argument's kind is read from its function's annotation (issue 72): the type a value of
it must have, and whether it takes None, are what the public function's signature says
(pipeline/core/kinds.py maps an annotation to its kind), not repeated in its declaration;
a declaration names a kind only where no annotation says one (a **keyword, an `Any`)."""

from __future__ import annotations

import os

import pytest

import pipeline
from pipeline.cli.docs import annotation, argument_words, public_arguments
from pipeline.core import kinds
from pipeline.core.errors import InputError
from pipeline.core.kinds import KINDS, annotated_kind
from pipeline.options import declared
from pipeline.options.arguments import check_value, validated
from pipeline.options.declared import argument_kind, declaration


def test_an_annotation_says_its_kind_whatever_its_order_and_qualifiers():
    assert annotated_kind("int") == ("int", False)
    assert annotated_kind("int | None") == ("int", True)
    assert annotated_kind("None | os.PathLike | str") == ("path", True)
    assert annotated_kind("pipeline.Data | str | PathLike") == ("data", False)
    assert annotated_kind("kinds.Pools | None") == ("pools", True)
    assert annotated_kind(int) == ("int", False)  # an evaluated one
    # a list of pools or of metrics: named (kinds.Pools, kinds.Metrics), never guessed
    for said in ("str | Sequence[str]", "Any", "Sequence[str | ModelEntry]", ""):
        assert annotated_kind(said) is None, said


def test_each_kind_an_annotation_says_is_checked():
    assert set(kinds.BY_MEMBERS.values()) == set(KINDS)
    for alias in ("Pools", "Metrics", "Models", "TrainingSets", "Results", "Sample", "Deltas",
                  "Counts", "Run", "Qrels", "Judgments", "NamedRuns"):
        assert hasattr(kinds, alias) and annotated_kind(alias) is not None, alias


def test_an_arguments_kind_follows_its_annotation(monkeypatch):
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

    def ranked_or_not(data: pipeline.Data | str | os.PathLike, *, k: int | None = None
                      ) -> object:
        return k

    assert validated(ranked_or_not)(".", k=None) is None
    with pytest.raises(InputError, match="^ranked_or_not: k=0: 0 is too small: use 1 or more$"):
        validated(ranked_or_not)(".", k=0)  # K's check, as ever

    def made_up(data: pipeline.Data | str | os.PathLike, *, k: str | None = None) -> object:
        return k

    monkeypatch.setattr(pipeline, "__all__", [*pipeline.__all__, "made_up"])
    monkeypatch.setattr(pipeline, "made_up", validated(made_up), raising=False)
    said = annotation("made_up", "k")  # the docs' reading of it, by the function's name
    assert argument_kind("made_up", "k", said) == ("str", True)
    assert argument_words("made_up", "k") == "a str: 1 to 10,000, as `K`, or None"
    with pytest.raises(InputError, match="^made_up: k=5: give a str, not an int$"):
        check_value("made_up", "k", 5, said)
    with pytest.raises(InputError, match="^made_up: k=5: give a str, not an int$"):
        pipeline.made_up(".", k=5)
    check_value("made_up", "k", None, said)


def test_none_is_taken_where_the_annotation_takes_it():
    """build_corpus's `seed` defaults to None (as the shards were made), search's is an int."""
    for function, name in (("build_corpus", "seed"), ("build_pools", "query_year")):
        check_value(function, name, None, annotation(function, name))
    with pytest.raises(InputError, match=r"^search: seed=None: give a whole number \(an int\)$"):
        check_value("search", "seed", None, annotation("search", "seed"))


def test_a_declared_kind_is_only_where_no_annotation_says_it():
    """A declaration's `kind` and `none` serve an argument whose annotation says no kind (a
    **keyword: search's options, build_pool's fields; an `Any`), the command line (--pool
    repeats by its kind) or no public function: never one the annotations say."""
    said: dict[declared.Variable, list[tuple[str, bool] | None]] = {}
    for function, names in public_arguments().items():
        for name in names:
            var = declaration(function, name)
            said.setdefault(var, []).append(annotated_kind(annotation(function, name)))
    assert said[declared.BY_NAME["K"]] == [("int", False)]
    for var in declared.DECLARED:
        if (var.kind or var.none) and not (var.stages and var.kind == "pools"):
            assert None in said.get(var, [None]), (
                f"{var.name}: its annotations say its kind: delete its kind= and none=")
    # the arguments neither an annotation nor a declaration gives a kind are strs: a new one
    # of another kind is annotated (or, a **keyword, declared with its kind)
    unsaid = {(function, name) for function, names in public_arguments().items()
              for name in names if annotated_kind(annotation(function, name)) is None
              and not declaration(function, name).kind}
    assert unsaid == {("build_pool", "field"), ("build_pool", "split"), ("index", "bm25_engine"),
                      ("search", "backend"), ("search", "bm25_engine")}
    assert {argument_kind(*where)[0] for where in unsaid} == {"str"}
    assert argument_kind("build_pool", "exclude") == ("path", True)  # declared: a **field
