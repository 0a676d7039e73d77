"""An option that changes runs, added after runs were made (issue 72): a run recorded before it
existed is current at the option's default and stale at any other value, so adding MADE_K1 does
not search every BM25 run of every pool again. The option is added as docs/extending.md says:
a Variable with changes_run=True in the declarations, read by the retriever among its OPTIONS."""

from __future__ import annotations

import pytest

from pipeline.core.files import read_json
from pipeline.layout import Place, run_paths
from pipeline.models import get_model
from pipeline.options import declared
from pipeline.options.declared import Variable, kind_run_options
from pipeline.retrieval.registry import retriever
from pipeline.retrieval.runs import identity_problem
from pipeline.retrieval.search import current_run, run_identity, search_pool
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])
K = 50  # the run's depth: small, the rule is the same at any
OTHER = 1.2  # a value of the new option other than its default


def k1_value(text: str) -> float:
    """The new option's check: a k1 as a float."""
    return float(text)


def add_option(monkeypatch: pytest.MonkeyPatch, name: str, default_text: str | None,
               default: object) -> None:
    """Declare `name` (unless `default_text` is None: a retriever's undeclared option) as an
    option that changes BM25's runs, its default `default` (a number, as the API takes it;
    make writes `default_text`, '' none), and give BM25's retriever the option with
    `default`: the two lines docs/extending.md asks for."""
    if default_text is not None:
        var = Variable(name, default if default_text else "", k1_value, "BM25's k1 (test)",
                       "search", optional=not default_text, one_word=True,
                       stages=("index", "search"), type=float | None, changes_run=True)
        monkeypatch.setattr(declared, "VARIABLES", (*declared.VARIABLES, var))
        monkeypatch.setitem(declared.BY_NAME, name, var)
    kind = type(retriever("bm25"))
    monkeypatch.setattr(kind, "OPTIONS", {**kind.OPTIONS, name.lower(): default})


def at_defaults() -> dict:
    """BM25's run options at their defaults as the declarations stand before the new option:
    whatever options a change of BM25's results has been given by then, not pinned here."""
    return dict(kind_run_options(get_model("bm25"), {}))


def recorded_options(place: Place) -> dict:
    """The options the BM25 run's manifest records."""
    manifest = run_paths(place.runs_root, place.corpus, POOL, "bm25").manifest
    return read_json(manifest)["parameters"]["options"]


@pytest.fixture
def made(corpus_dir, tmp_path) -> Place:
    """A BM25 run of the small pool searched before any new option existed."""
    place = Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs")
    entry = get_model("bm25")
    search_pool(place, POOL, entry, k=K, threads=1, run_options=kind_run_options(entry, {}))
    assert recorded_options(place) == at_defaults() and "MADE_K1" not in at_defaults()
    return place


@pytest.mark.parametrize(("default_text", "default"), [("", None), ("0.9", 0.9)])
def test_a_run_made_before_an_option_existed_is_current_at_its_default_only(
        made, monkeypatch, default_text, default):
    """The new option at its default (not given, or given as the default): the earlier run is
    current, its missing key read as the default. At another value it is stale, and the reason
    names the options. A run searched now records the key, so a later other default is seen."""
    entry, before = get_model("bm25"), at_defaults()
    add_option(monkeypatch, "MADE_K1", default_text, default)
    at_default = kind_run_options(entry, {})
    assert at_default == {**before, "MADE_K1": default}  # the wanted identity: the new key
    assert current_run(made, POOL, entry, K, run_options=at_default)
    assert current_run(made, POOL, entry, K,
                       run_options=kind_run_options(entry, {"made_k1": default}))
    other = kind_run_options(entry, {"made_k1": OTHER})
    assert not current_run(made, POOL, entry, K, run_options=other)
    assert identity_problem(made, POOL, run_identity(entry, POOL, K, run_options=other)) == \
        "made with other parameters (options: MADE_K1)"
    search_pool(made, POOL, entry, k=K, threads=1, run_options=at_default)
    assert recorded_options(made) == {**before, "MADE_K1": default}  # every key recorded
    add_option(monkeypatch, "MADE_K1", "1.5", 1.5)  # the default changed later
    assert not current_run(made, POOL, entry, K, run_options=kind_run_options(entry, {}))


def test_an_undeclared_option_missing_from_the_record_stays_a_difference(made, monkeypatch):
    """A retriever's option no declaration names has no declared default: a run recorded
    without it is stale, whatever its value."""
    entry, before = get_model("bm25"), at_defaults()
    add_option(monkeypatch, "BM25_EXTRA", None, None)
    wanted = kind_run_options(entry, {})
    assert wanted == {**before, "BM25_EXTRA": None}
    assert not current_run(made, POOL, entry, K, run_options=wanted)


def test_a_run_recorded_without_an_optional_value_is_repaired_without_it(made, monkeypatch):
    """An optional option not given is recorded as None (a run of BM25's tuned k1): the run's
    repair leaves it out, as make takes no `MADE_K1=None`; a value given is carried."""
    from pipeline.retrieval.runs import recorded_run_repair

    entry = get_model("bm25")
    add_option(monkeypatch, "MADE_K1", "", None)
    for given, carried in (({}, None), ({"made_k1": OTHER}, f"MADE_K1={OTHER}")):
        search_pool(made, POOL, entry, k=K, threads=1,
                    run_options=kind_run_options(entry, given))
        assert recorded_options(made)["MADE_K1"] == given.get("made_k1")
        command = recorded_run_repair(made.runs_root, made.corpus, POOL, "bm25").command()
        assert "MADE_K1" not in command if carried is None else carried in command, command
