"""One rule says whether an artifact is current (pipeline/core/current.py): each reason it
gives, and every artifact kind asking it (issue 41)."""

from __future__ import annotations

import json
from importlib import import_module

import numpy as np
import pytest

from pipeline.core.checksums import fingerprints
from pipeline.core.current import (
    DAMAGED,
    INPUTS,
    MISSING,
    OWN,
    PARAMETERS,
    UNREADABLE,
    Stale,
    stale,
)
from pipeline.core.errors import InputError
from pipeline.core.files import write_json
from pipeline.core.inputs import Roots, record
from pipeline.core.manifests import manifest

PARAMETERS_NOW = {"pool": "p", "k": 10}


@pytest.fixture
def artifact(tmp_path):
    """An artifact (one file) made from one input, with its manifest; and its data roots."""
    roots = Roots(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs", "c")
    source = tmp_path / "corpora" / "c" / "prefiltered.parquet"
    source.parent.mkdir(parents=True)
    source.write_text("texts")
    folder = tmp_path / "runs" / "c"
    folder.mkdir(parents=True)
    (folder / "run.txt").write_text("hits")
    inputs = record(roots, [source])
    write_json(manifest("search", PARAMETERS_NOW, inputs=inputs,
                        outputs=fingerprints(folder, ["run.txt"])), folder / "manifest.json")
    return folder, inputs, roots, source


def test_a_current_artifact_has_no_reason(artifact):
    folder, inputs, roots, _ = artifact
    assert stale(folder / "manifest.json", PARAMETERS_NOW, files=folder, inputs=inputs,
                 roots=roots, own=lambda info: None) is None


def test_each_reason_names_what_differs(artifact):
    folder, inputs, roots, source = artifact
    path = folder / "manifest.json"
    assert stale(folder / "other.json", PARAMETERS_NOW).check == MISSING
    assert stale(path, {"pool": "p", "k": 20}) == Stale(
        PARAMETERS, "made with other parameters (k)")
    assert stale(path, {}, key="config") == Stale(
        PARAMETERS, "made with other config (none recorded)")
    assert stale(path, PARAMETERS_NOW, own=lambda info: f"{info['stage']} is old") == Stale(
        OWN, "search is old")
    label = "corpora/@/prefiltered.parquet"
    assert stale(path, PARAMETERS_NOW, inputs={label: "0" * 64}) == Stale(
        INPUTS, f"made from another {label}")
    assert stale(path, PARAMETERS_NOW, inputs={**inputs, "corpora/@/b": "0"}) == Stale(
        INPUTS, "made without its input corpora/@/b")
    assert stale(path, PARAMETERS_NOW, inputs={}) == Stale(
        INPUTS, f"made from {label}, which is no input of it now")
    source.write_text("other texts")
    assert stale(path, PARAMETERS_NOW, roots=roots) == Stale(
        INPUTS, "its input corpora/c/prefiltered.parquet changed since")
    assert stale(path, PARAMETERS_NOW, files=folder / "elsewhere") == Stale(
        DAMAGED, f"{folder / 'elsewhere' / 'run.txt'}: missing")
    (folder / "run.txt").write_text("damaged")
    assert stale(path, PARAMETERS_NOW, files=folder) == Stale(
        DAMAGED, f"{folder / 'run.txt'}: 7 bytes, manifest says 4 (truncated or rewritten)")
    write_json({"parameters": PARAMETERS_NOW}, folder / "bare.json")
    assert stale(folder / "bare.json", PARAMETERS_NOW, files=folder) == Stale(
        DAMAGED, f"{folder / 'bare.json'} records none of its files")
    path.write_text(json.dumps({**json.loads(path.read_text()), "stage": "edited"}))
    problem = stale(path, PARAMETERS_NOW)
    assert problem.check == UNREADABLE and "differs from its own checksum" in problem.reason


def _run(place, tmp_path):
    from pipeline.retrieval.runs import run_problem

    assert run_problem(place, "p", "bm25") == "told so"


def _evaluation(place, tmp_path):
    from pipeline.evaluation.evaluate import eval_problem

    assert eval_problem(place, "p", "bm25") == "told so"


def _lucene_index(place, tmp_path):
    from pipeline.retrieval.bm25.lucene import index_is_current

    # current, had the index decided for itself
    write_json({"parameters": {}, "inputs": {}}, tmp_path / "manifest.json")
    assert not index_is_current(tmp_path, {}, {})


def _bm25_terms(place, tmp_path):
    from pipeline.retrieval.bm25.store import fill

    with pytest.raises(InputError, match="told so"):
        fill(place, [], repair=False)


def _vectors(place, tmp_path):
    from pipeline.encoding.writer import add_part

    with pytest.raises(InputError, match="told so"):
        add_part(tmp_path / "vectors", {"dtype": "float32"}, np.array([1]),
                 np.ones((1, 2), np.float32), "cpu")


KINDS = {"pipeline.retrieval.runs": _run, "pipeline.evaluation.evaluate": _evaluation,
         "pipeline.retrieval.bm25.lucene": _lucene_index,
         "pipeline.retrieval.bm25.store": _bm25_terms, "pipeline.encoding.writer": _vectors}


@pytest.mark.parametrize("module", KINDS)
def test_every_artifact_kind_asks_the_rule(module, monkeypatch, tmp_path, corpus_dir):
    """A run, an evaluation, a Lucene index, a store of BM25 terms and a store of vectors are
    current or not as the rule says (here: never): each fails here if it decides for itself."""
    from pipeline.layout import Place

    asked = []

    def told(manifest, parameters, **_):
        asked.append(manifest)
        return Stale(PARAMETERS, "told so")

    monkeypatch.setattr(import_module(module), "stale", told, raising=False)
    KINDS[module](Place(corpus_dir, tmp_path / "indexes", tmp_path / "runs"), tmp_path)
    assert asked
