"""A hub model is its snapshot and its revision; SPECTER2's adapter is part of its model
(identity.py). A Hugging Face hub cache is built here as huggingface_hub writes one (blobs,
snapshots linking to them, refs/main naming the revision), holding the tiny BERT of
conftest, read offline (HF_HUB_OFFLINE=1). The `adapters` library is not needed: an identity
is computed without loading the model, and the stores are embedded with the adapter's loading
replaced by the base model's alone."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.checksums import sha256_file
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import Roots
from pipeline.encoding import encoders
from pipeline.encoding.embed import embed
from pipeline.encoding.identity import DigestCache, folder_identity, model_identity
from pipeline.encoding.store import stored_ids
from pipeline.layout import MANIFEST, Place, model_digests_path, store_dir
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.verify import verify
from tests.conftest import POOL_SEED, copy_corpus

# commit hashes, as the hub names a snapshot
FIRST, SECOND, BASE = (hashlib.sha1(word.encode()).hexdigest() for word in ("one", "two", "base"))
ADAPTER_WEIGHTS = "pytorch_adapter.bin"


def publish(hub: Path, repo: str, revision: str, folder: Path) -> Path:
    """`folder`'s files in the hub cache `hub` as `repo` at `revision`, laid out as
    huggingface_hub downloads them: each file a blob named by its digest, the snapshot's
    files relative links to the blobs, refs/main naming the revision. The snapshot."""
    root = hub / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / revision
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = root / "blobs" / sha256_file(path)
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snapshot / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(revision)  # no newline, as the hub's client writes
    return snapshot


def adapter_folder(folder: Path, seed: int) -> Path:
    """What `save_adapter` writes (its config and weights), with weights of `seed`: the
    identity reads the bytes, never the tensors."""
    folder.mkdir(parents=True)
    write_json({"config": {"architecture": "bottleneck", "reduction_factor": 16},
                "model_class": "BertAdapterModel", "name": "proximity", "version": "1.0.0"},
               folder / "adapter_config.json")
    weights = np.random.default_rng(seed).normal(size=(64, 32)).astype(np.float32)
    (folder / ADAPTER_WEIGHTS).write_bytes(weights.tobytes())
    return folder


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Path:
    """An empty hub cache of this test's own, read offline (huggingface_hub reads its
    variables when first imported, so its constants are set too)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture
def without_adapters(monkeypatch) -> None:
    """SPECTER2 loaded as its base model alone (the `adapters` library is not in .venv):
    its store is embedded and records its identity, adapter files included, all the same."""
    from transformers import AutoModel

    monkeypatch.setattr(encoders, "_load_with_adapter", lambda source, adapter:
                        AutoModel.from_pretrained(source, local_files_only=True))


@pytest.fixture(scope="module")
def small_corpus(corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session corpus with one pool of 24 candidates and 2 queries."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("hub") / "corpora" / "small")
    spec = PoolSpec(size=24, queries=2, seed=POOL_SEED)
    build_pool(corpus, spec)
    return corpus, spec.name


def stale_lines(place: Place) -> list[str]:
    """make verify's lines about a model changed since its store was embedded."""
    roots = Roots(place.corpus_dir.parent, place.index_root, place.runs_root)
    return [line for line in verify(roots, [place.index_root], deep=False)
            if "changed since it was embedded" in line]


def test_a_hub_model_records_its_revision_and_another_revision_is_refused(
        tiny_bert, hub, small_corpus, tmp_path):
    """hf:org/tiny resolved from the hub cache: its identity is the snapshot's files (the
    same digest as the folder they came from) and its revision; the store records it. The
    same name at another revision (refs/main moved, every byte the same) is refused in one
    line naming both revisions, and make verify calls the store STALE; back at the first
    revision it is current again, nothing embedded."""
    corpus, pool = small_corpus
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    cache = model_digests_path(place.index_root)
    entry = get_model("hf:org/tiny@cls")
    assert model_identity(entry, cache=cache) == {}  # not in the cache: known once loaded
    publish(hub, "org/tiny", FIRST, tiny_bert)
    made = model_identity(entry, cache=cache)
    assert made["revision"] == FIRST
    assert made["sha256"] == folder_identity(tiny_bert, DigestCache(None))["sha256"]
    assert "revision" not in model_identity(entry, tiny_bert, cache=cache)  # a folder's
    embedded = embed(place, entry, [pool])["embedded"]
    store = store_dir(place.index_root, corpus.name, entry.name)
    assert embedded == len(stored_ids(store)) > 0
    assert read_json(store / MANIFEST)["config"]["model_identity"] == made

    publish(hub, "org/tiny", SECOND, tiny_bert)
    with pytest.raises(InputError) as refused:
        embed(place, entry, [pool])
    line = str(refused.value)
    assert f"revision {FIRST[:12]} -> {SECOND[:12]}" in line and "REPLACE=1" in line
    assert "weights digest" not in line and "\n" not in line  # the revision alone changed
    assert read_json(store / MANIFEST)["config"]["model_identity"] == made  # untouched
    stale = stale_lines(place)
    assert len(stale) == 1 and stale[0].startswith(f"STALE {store}"), stale

    (hub / "models--org--tiny" / "refs" / "main").write_text(FIRST)
    assert embed(place, entry, [pool])["embedded"] == 0
    assert stale_lines(place) == []


def test_a_file_under_the_adapter_folder_changes_the_identity_and_stales_the_store(
        tiny_bert, small_corpus, tmp_path, without_adapters):
    """specter2 from a MODEL_PATH whose `adapter/` holds the adapter: its files are part of
    the identity; other adapter weights (base and configs unchanged) give another identity
    naming only that file, refused at the next embed and STALE in make verify."""
    corpus, pool = small_corpus
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    cache = model_digests_path(place.index_root)
    folder = Path(shutil.copytree(tiny_bert, tmp_path / "specter2"))
    adapter_folder(folder / "adapter", seed=1)
    entry = get_model("specter2")
    made = model_identity(entry, folder, cache=cache)
    assert {"adapter/adapter_config.json", f"adapter/{ADAPTER_WEIGHTS}"} <= set(made["files"])
    assert "adapter" not in made  # read from the folder, not the hub
    embedded = embed(place, entry, [pool], model_path=str(folder))["embedded"]
    store = store_dir(place.index_root, corpus.name, entry.name)
    assert embedded == len(stored_ids(store)) > 0
    assert read_json(store / MANIFEST)["config"]["model_identity"] == made

    other = adapter_folder(tmp_path / "other", seed=2)
    os.replace(other / ADAPTER_WEIGHTS, folder / "adapter" / ADAPTER_WEIGHTS)
    now = model_identity(entry, folder, cache=cache)
    assert now["sha256"] != made["sha256"]
    assert [n for n in made["files"] if made["files"][n] != now["files"][n]] == [
        f"adapter/{ADAPTER_WEIGHTS}"]
    with pytest.raises(InputError, match=f"files changed: adapter/{ADAPTER_WEIGHTS}\\)"):
        embed(place, entry, [pool], model_path=str(folder))
    stale = stale_lines(place)
    assert len(stale) == 1 and stale[0].startswith(f"STALE {store}"), stale
    assert f"MODEL_PATH={folder}" in stale[0] and "REPLACE=1" in stale[0]


def test_a_hub_adapter_is_its_id_revision_and_files(tiny_bert, hub, small_corpus, tmp_path,
                                                     without_adapters):
    """specter2 from the hub cache (base allenai/specter2_base, adapter allenai/specter2):
    unknown while the adapter is not cached (downloaded when loaded); then its base's
    revision and the adapter's id, revision and folder digest; the adapter at another
    revision with other weights is refused in one line naming both."""
    corpus, pool = small_corpus
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    cache = model_digests_path(place.index_root)
    entry = get_model("specter2")
    publish(hub, entry.hf_id, BASE, tiny_bert)
    assert model_identity(entry, cache=cache) == {}
    first = adapter_folder(tmp_path / "first", seed=1)
    publish(hub, entry.adapter, FIRST, first)
    made = model_identity(entry, cache=cache)
    assert made["revision"] == BASE
    assert made["adapter"] == {"id": "allenai/specter2", "revision": FIRST,
                               "sha256": folder_identity(first, DigestCache(None))["sha256"]}
    embedded = embed(place, entry, [pool])["embedded"]
    store = store_dir(place.index_root, corpus.name, entry.name)
    assert embedded == len(stored_ids(store)) > 0
    assert read_json(store / MANIFEST)["config"]["model_identity"] == made

    publish(hub, entry.adapter, SECOND, adapter_folder(tmp_path / "second", seed=2))
    with pytest.raises(InputError) as refused:
        embed(place, entry, [pool])
    line = str(refused.value)
    assert (f"adapter allenai/specter2@{FIRST[:12]} ({made['adapter']['sha256'][:8]}...) -> "
            f"allenai/specter2@{SECOND[:12]}") in line
    assert "weights digest" not in line and "REPLACE=1" in line and "\n" not in line
    assert len(stale_lines(place)) == 1
