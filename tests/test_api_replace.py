"""`pipeline.search(..., replace=True)`, the API's REPLACE=1 (its keyword declared with REPLACE
in pipeline/options/declared.py): a store of the model's name embedded by another model (its
weights changed under MODEL_PATH, the JSON files unchanged) is refused from Python in one line
naming the repair in the API's words; with replace=True that store and the runs searched from
it are removed, then embedded and searched again, and nothing else is touched. On the tiny
BERT of tests/conftest.py, loaded as minilm from a folder of the test's own."""

from __future__ import annotations

import inspect
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.store import load_vectors, stored_ids
from pipeline.layout import MANIFEST, run_paths, stage_times_path, store_dir
from pipeline.options.declared import BY_NAME
from tests.conftest import POOL_SIZES, pool_of

WEIGHTS = "model.safetensors"
MINE = b"a user's own bytes\n"


def files(*folders: Path) -> dict[str, bytes]:
    """Every file under `folders` -> its bytes (the checksum caches and locks left out)."""
    found = {}
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                path = Path(root) / name
                if not name.startswith("."):
                    found[str(path)] = path.read_bytes()
    return found


def nudge(folder: Path) -> None:
    """Other weights under the same files' names: the word embeddings moved, every JSON file
    as it was (the checkpoint another model). Moved by seeded noise, not by a constant: a
    constant added to every component is what the embeddings' LayerNorm subtracts again, and
    left the vectors equal up to rounding."""
    tensors = load_file(folder / WEIGHTS)
    key = next(k for k in sorted(tensors) if "word_embeddings" in k)
    noise = np.random.default_rng(57).normal(0, 0.05, tensors[key].shape).astype(np.float32)
    tensors[key] = tensors[key] + noise
    save_file(tensors, folder / WEIGHTS, metadata={"format": "pt"})


@pytest.mark.slow  # embeds two pools with the tiny BERT
def test_a_store_of_another_model_is_refused_then_replaced_from_python(corpus_dir, tiny_bert,
                                                                        tmp_path):
    folder = Path(shutil.copytree(tiny_bert, tmp_path / "model"))
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    corpus, pools = corpus_dir.name, [pool_of(size) for size in POOL_SIZES]
    for pool in pools:  # minilm's runs, made from its store; BM25's, made from none
        for model, options in (("minilm", {"model_path": folder}), ("bm25", {})):
            pipeline.search(data, corpus, pool, model, k=20, threads=1, **options)
            pipeline.evaluate(data, corpus, pool, model)
    store = store_dir(data.indexes, corpus, "minilm")
    made = read_json(store / MANIFEST)["config"]["model_identity"]
    ids = stored_ids(store)
    before = load_vectors(store, ids)
    ours = [path for pool in pools for path in run_paths(data.runs, corpus, pool, "minilm")]
    run_shas = [read_json(run_paths(data.runs, corpus, pool, "minilm").manifest)["outputs"][
        "minilm.parquet"]["sha256"] for pool in pools]
    # a user's files beside the store and beside the runs, named alike
    planted = {store.parent / "minilm.bak" / MANIFEST, store.parent / "minilm-notes.txt",
               data.runs / corpus / pools[0] / "minilm.notes",
               data.runs / corpus / pools[0] / "minilm-mine.trec"}
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(MINE + path.name.encode())
    nudge(folder)
    everything = files(corpus_dir.parent, data.indexes, data.runs, folder)

    def search(**given: object) -> str:
        return pipeline.search(data, corpus, pools[0], "minilm", k=20, threads=1,
                               model_path=folder, **given)

    with pytest.raises(InputError) as refused:
        search()
    line = str(refused.value)
    assert "\n" not in line
    assert f"{store} was embedded by another model named minilm" in line
    assert "files changed: model.safetensors" in line
    assert f"weights digest {made['sha256'][:8]}" in line
    # the repair in the API's words: the call again, with replace=True; not make's REPLACE=1
    assert "search again with replace=True" in line, line
    assert (f"repair: in Python: pipeline.search(<data>, {corpus!r}, {pools[0]!r}, 'minilm', "
            f"model_path={str(folder)!r}, replace=True)") in line, line
    assert "REPLACE" not in line and "make " not in line
    assert files(corpus_dir.parent, data.indexes, data.runs, folder) == everything  # nothing

    assert search(replace=True) == "minilm"
    now = read_json(store / MANIFEST)["config"]["model_identity"]
    assert now["sha256"] != made["sha256"]
    again = stored_ids(store)  # the searched pool's papers embedded again ...
    assert np.array_equal(again, np.unique(pool_ids(corpus_dir, pools[0])))
    assert len(again) < len(ids) and np.isin(again, ids).all()
    old = before[np.searchsorted(ids, again)]
    assert not np.allclose(load_vectors(store, again), old)  # ... by the new weights
    made_again = run_paths(data.runs, corpus, pools[0], "minilm")
    assert read_json(made_again.manifest)["outputs"]["minilm.parquet"]["sha256"] != run_shas[0]
    # removed: the store and the runs searched from it (their evaluations too), nothing else
    after = files(corpus_dir.parent, data.indexes, data.runs, folder)
    gone = sorted(set(everything) - set(after))
    assert all(Path(p).is_relative_to(store) or Path(p) in ours for p in gone), gone
    assert {p for p in ours if p.exists()} == {made_again.trec, made_again.parquet,
                                                made_again.manifest}
    times = str(stage_times_path(data.runs, corpus))  # the stage-times log: appended to
    assert after[times].startswith(everything[times]) and after[times] != everything[times]
    kept = {p: b for p, b in everything.items()
            if not Path(p).is_relative_to(store) and Path(p) not in ours and p != times}
    assert {p: after.get(p) for p in kept} == kept  # BM25's runs, the planted files, the model
    assert all(path.read_bytes() == MINE + path.name.encode() for path in planted)
    # now current: searched again without replace, nothing is written
    current = files(data.indexes, data.runs)
    assert search() == "minilm"
    assert files(data.indexes, data.runs) == current


def test_replace_is_the_declared_option_in_every_function_that_takes_it():
    """`replace` is REPLACE's keyword (its declaration's, checked by its check: True or
    False), and each function that takes it defaults to REPLACE's own default, off."""
    assert BY_NAME["REPLACE"].keyword == "replace" and BY_NAME["REPLACE"].default == ""
    takers = [name for name in pipeline.__all__ if inspect.isfunction(getattr(pipeline, name))
              and "replace" in inspect.signature(getattr(pipeline, name)).parameters]
    assert {"search", "import_run", "import_vectors", "import_collection"} <= set(takers)
    for name in takers:
        assert inspect.signature(getattr(pipeline, name)).parameters["replace"].default is False
    with pytest.raises(InputError, match=r"search: replace=1: give True or False, not an int"):
        pipeline.search("data", "c", "p", "bm25", replace=1)
    with pytest.raises(InputError, match=r"import_run: replace='yes': give True or False"):
        pipeline.import_run("data", "c", "p", "run.trec", "mine", replace="yes")
