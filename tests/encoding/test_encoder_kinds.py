"""Encoder kinds registered at run time (pipeline/models.py, ENCODERS, issue 72): the hooks an
entry says its class has are what the embed stage asks of a store, and only those. A kind
whose entry says `own_identity` has a store of another model refused by its class's
`identity_change`; one whose entry says `adds_settings` has its class's settings recorded and
checked; a kind with neither is checked without importing its class (as a dense model's store
is checked without torch). A class whose hooks its entry does not say is refused, before
anything is stored. The toy kinds embed with an object's encoder (numpy only)."""

from __future__ import annotations

import hashlib
import sys
import types
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.embed import embed
from pipeline.encoding.encoder_kinds import encoder_class
from pipeline.encoding.objects import ObjectEncoder
from pipeline.encoding.store_texts import check_current
from pipeline.layout import MANIFEST, store_dir
from pipeline.models import ENCODERS, EncoderKind, ModelEntry

HOOKED, PLAIN = "toy-hooked", "toy-plain"  # the kinds registered here
HERE = __name__  # this module: the hooked classes' ENCODERS entries name it
ALIAS = "toy_plain_encoders"  # the plain kind's module: gone from sys.modules when checked
SETTINGS = {"salt": "v1"}  # the toy's settings in "this version"; a test changes them


@dataclass(frozen=True)
class ToyEntry(ModelEntry):
    """A toy kind's model entry: `hf_id` says where its model comes from (as a served
    entry's endpoint does); `batch_size`: texts per encode call (ObjectEncoder.encode_ids)."""

    batch_size: int = 64


class Hashed:
    """A model of numpy only: each word hashed (with `salt`) into one of 32 buckets."""

    def __init__(self, salt: str) -> None:
        self.salt = salt

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.full((len(texts), 32), 1e-3)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hashlib.sha1((self.salt + word).encode()).digest()[0] % 32] += 1.0
        return out


class Here:
    """The device a toy encodes on, as the embed stage records it."""

    type = "cpu"

    def __str__(self) -> str:
        return "cpu"


class PlainToy(ObjectEncoder):
    """A kind's encoder with no hook: an object's checks and batches around `Hashed`, for
    any entry of its kind; nothing beyond the entry in its store's settings."""

    def __init__(self, entry: ModelEntry, model_path: str | None = None,
                 device: str | None = None) -> None:
        self.entry, self.obj = entry, Hashed(entry.hf_id)
        self.device, self.compute_dtype = Here(), "float64"
        self.max_length, self.task_metadata = None, None
        self.dim = self._vectors(["dimension probe"]).shape[1]


class HookedToy(PlainToy):
    """A kind's encoder with both hooks: its settings (SETTINGS) and its identity (where its
    model comes from, known without loading it)."""

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        return {"toy": dict(SETTINGS)}

    @classmethod
    def identity_change(cls, config: dict, entry: ModelEntry) -> str | None:
        was = (config.get("model") or {}).get("hf_id")
        return None if was in (None, entry.hf_id) else f"from {was}, not {entry.hf_id}"


class SettingsToy(PlainToy):
    """Adds to its store's settings, as HookedToy does, without an identity of its own."""

    config_for = HookedToy.config_for


class ColumnsToy(PlainToy):
    """Reads an optional corpus column (a collection's own sentence split)."""

    columns = ("abstract_sentences",)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    """A small synthetic corpus "c" with one pool; each test embeds into its own indexes."""
    data = pipeline.Data(tmp_path_factory.mktemp("kinds"))
    pipeline.build_corpus(data, "c", synthetic=600, shards=1, seed=0)
    pipeline.build_pool(data, "c", size=150, queries=5)
    return data.corpora


@pytest.fixture()
def place(corpora, tmp_path):
    return pipeline.Data(corpora=corpora, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs").place("c")


def kind(monkeypatch, name: str, cls: str, **hooks: bool) -> None:
    """Register encoder kind `name` (class `cls`, "module:Class") for this test only."""
    monkeypatch.setitem(ENCODERS, name, EncoderKind(cls, **hooks))


def test_a_kind_whose_entry_says_its_hooks_has_its_store_checked_by_its_class(
        place, monkeypatch):
    """A kind registered with both hooks: its class's settings are in the store's config,
    a store made with other settings is refused, and a store of the same name made from
    another model is refused in the class's words (its identity, checked first)."""
    kind(monkeypatch, HOOKED, f"{HERE}:HookedToy", own_identity=True, adds_settings=True)
    entry = ToyEntry("toy-1", HOOKED, "a")
    assert entry.embedded
    assert embed(place, entry)["embedded"] > 0
    store = store_dir(place.index_root, place.corpus, entry.name)
    assert read_json(store / MANIFEST)["config"]["toy"] == {"salt": "v1"}
    check_current(place, store, entry)
    assert embed(place, entry)["embedded"] == 0  # current: nothing refused, nothing redone
    other = replace(entry, hf_id="b")
    for step in (lambda: check_current(place, store, other), lambda: embed(place, other)):
        with pytest.raises(InputError, match=r"embedded by another model named toy-1 "
                                             r"\(from a, not b\)"):
            step()
    monkeypatch.setitem(SETTINGS, "salt", "v2")
    with pytest.raises(InputError, match=r"other settings \(toy differ"):
        check_current(place, store, entry)


def test_a_kind_without_hooks_is_checked_without_its_class(place, monkeypatch):
    """A kind registered with neither hook records nothing beyond the entry, and its
    current store is checked with its class's module gone (importing it would fail): a store
    of the same name from another model is then told by the entry's settings alone, not by
    an identity of the class's."""
    module = types.ModuleType(ALIAS)
    module.PlainToy = PlainToy
    monkeypatch.setitem(sys.modules, ALIAS, module)
    kind(monkeypatch, PLAIN, f"{ALIAS}:PlainToy")
    entry = ToyEntry("toy-2", PLAIN, "a")
    embed(place, entry)
    store = store_dir(place.index_root, place.corpus, entry.name)
    config = read_json(store / MANIFEST)["config"]
    assert "toy" not in config and config["model"]["hf_id"] == "a"
    monkeypatch.delitem(sys.modules, ALIAS)
    check_current(place, store, entry)
    assert embed(place, entry)["embedded"] == 0  # all stored: no class needed, none imported
    with pytest.raises(InputError, match=r"other settings \(model hf_id differ"):
        check_current(place, store, replace(entry, hf_id="b"))
    assert ALIAS not in sys.modules


@pytest.mark.parametrize(("cls", "hooks", "needs"), [
    ("HookedToy", {"adds_settings": True}, "own_identity=True"),
    ("PlainToy", {"own_identity": True}, "own_identity=False"),
    ("ColumnsToy", {}, "adds_settings=True"),
])
def test_a_class_with_hooks_its_entry_does_not_say_is_refused(monkeypatch, cls, hooks, needs):
    """A class with a hook its entry does not say (which would be skipped in silence), or
    without one it says, is refused when imported, naming the entry's field to set."""
    kind(monkeypatch, HOOKED, f"{HERE}:{cls}", **hooks)
    with pytest.raises(TypeError, match=rf"kind '{HOOKED}' .*needs {needs} in its ENCODERS"):
        encoder_class(HOOKED)


def test_settings_a_kind_does_not_say_it_adds_are_refused_before_anything_is_stored(
        place, monkeypatch):
    """A class whose `config_for` adds to its store's settings while its entry does not say
    so (a check would never compare them) is refused by the embed before any part is
    written; said in its entry, the same class's settings are recorded."""
    kind(monkeypatch, HOOKED, f"{HERE}:SettingsToy")
    entry = ToyEntry("toy-3", HOOKED, "a")
    store = store_dir(place.index_root, place.corpus, entry.name)
    with pytest.raises(TypeError, match="needs adds_settings=True in its ENCODERS entry"):
        embed(place, entry)
    assert not (store / MANIFEST).exists() and not list(store.glob("part-*"))
    kind(monkeypatch, HOOKED, f"{HERE}:SettingsToy", adds_settings=True)
    embed(place, entry)
    assert read_json(store / MANIFEST)["config"]["toy"] == {"salt": "v1"}
