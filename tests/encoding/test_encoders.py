"""The embedding engine: token-budget batches, padding-independent vectors, OOM back-off."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed, pool_ids
from pipeline.encoding.encoders import Encoder, batch_of, batch_rows
from pipeline.encoding.store import load_vectors
from pipeline.layout import Place, store_dir
from pipeline.models import ModelEntry
from tests.conftest import POOL_SIZES, pool_of


@pytest.fixture(scope="module")
def encoder(tiny_bert) -> Encoder:
    return Encoder(ModelEntry("tiny-mean", "dense", str(tiny_bert), "mean", "cosine",
                              normalize=True, max_length=128), device="cpu")


@pytest.fixture(scope="module")
def texts(corpus_dir, encoder) -> list[str]:
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(300)
    return [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                                 strict=True)]


def test_batch_rows_respects_the_budget():
    assert batch_rows(128, 8192) == 64
    assert batch_rows(10, 8192, max_batch=512) == 512
    assert batch_rows(9000, 8192) == 1  # one sequence always fits


def test_cpu_batches_hold_one_length():
    lengths = np.array([9, 9, 9, 7, 7, 5])
    todo = np.arange(6)
    assert batch_of(todo, lengths, 100).tolist() == [0, 1, 2, 3, 4, 5]
    assert batch_of(todo, lengths, 100, one_length=True).tolist() == [0, 1, 2]
    assert batch_of(todo, lengths, 18, one_length=True).tolist() == [0, 1]
    assert batch_of(todo[3:], lengths, 100, one_length=True).tolist() == [3, 4]


@pytest.mark.slow
def test_batches_are_packed_by_tokens_and_sorted_by_length(encoder, texts, monkeypatch):
    """The GPU path (mixed lengths in a batch), run on the CPU."""
    monkeypatch.setattr(encoder, "one_length", False)
    seen: list[tuple[int, int]] = []
    real = Encoder._forward

    def spy(self, batch):
        seen.append(tuple(batch["input_ids"].shape))
        return real(self, batch)

    monkeypatch.setattr(Encoder, "_forward", spy)
    encoder.encode(texts, token_budget=2048, progress=False)
    assert sum(rows for rows, _ in seen) == len(texts)
    assert all(rows * longest <= 2048 for rows, longest in seen)
    assert [longest for _, longest in seen] == sorted((x for _, x in seen), reverse=True)
    assert len(seen) < len(texts) / 8  # packed, not one by one


@pytest.mark.slow
def test_vectors_do_not_depend_on_the_batching(encoder, texts, monkeypatch):
    """Padding and batch composition must not change a paper's vector (masking is right):
    on a CPU bit for bit (batches of one length), with padding up to rounding."""
    packed, tokens = encoder.encode(texts, token_budget=4096, progress=False)
    alone = np.concatenate([encoder.encode([t], progress=False)[0] for t in texts[:40]])
    assert np.array_equal(packed[:40], alone)
    assert np.array_equal(encoder.encode(texts[::-1], token_budget=512, progress=False)[0],
                          packed[::-1])
    monkeypatch.setattr(encoder, "one_length", False)
    padded, _ = encoder.encode(texts, token_budget=4096, progress=False)
    np.testing.assert_allclose(padded, packed, rtol=1e-4, atol=1e-5)
    lengths = [len(x) for x in encoder.tokenize(texts)]
    assert tokens == sum(lengths) and max(lengths) <= encoder.max_length


@pytest.mark.slow
def test_padding_does_not_change_an_mpnet_vector(tiny_mpnet, corpus_dir):
    """MPNet's attention adds relative position buckets, and it numbers positions by
    skipping its padding id (1, where BERT's is 0): a padded batch (the GPU path) still gives
    each paper the vector it has alone, as BERT's does (test above)."""
    encoder = Encoder(tiny_entry("tiny-mpnet"), model_path=tiny_mpnet, device="cpu")
    assert encoder.tokenizer.pad_token_id == encoder.model.config.pad_token_id == 1
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(60)
    some = [encoder.format(t, a[: 40 * i]) for i, (t, a) in  # lengths differ a lot
            enumerate(zip(papers["title"], papers["abstract"], strict=True))]
    alone, _ = encoder.encode(some, progress=False)
    encoder.one_length = False
    padded, _ = encoder.encode(some, token_budget=4096, progress=False)
    assert len({len(x) for x in encoder.tokenize(some)}) > 5
    np.testing.assert_allclose(padded, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_out_of_memory_halves_the_budget_and_retries(encoder, texts, monkeypatch, caplog):
    """A CUDA OOM (injected: CI has no GPU) must shrink the batches, not fail the job."""
    real = Encoder._forward
    limit = 1500  # padded tokens the 'GPU' can hold

    def small_gpu(self, batch):
        rows, longest = batch["input_ids"].shape
        if rows * longest > limit:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real(self, batch)

    expected, _ = encoder.encode(texts, token_budget=1024, progress=False)
    monkeypatch.setattr(Encoder, "_forward", small_gpu)
    got, _ = encoder.encode(texts, token_budget=8192, progress=False)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert "token budget now 1024" in caplog.text  # a warning (pipeline.core.logs)


@pytest.mark.slow
def test_store_does_not_depend_on_parts_or_shards(corpus_dir, tmp_path, tiny_bert):
    """One process with big parts, or 3 shards with small parts and a small budget: the
    same ids and the same vectors, bit for bit (CPU batches hold one length)."""
    from pipeline.models import REGISTRY

    entry = ModelEntry("tiny-cls", "dense", str(tiny_bert), "cls", "l2", max_length=128)
    REGISTRY[entry.name] = entry
    try:
        pool = pool_of(POOL_SIZES[0])
        one, three = (Place(corpus_dir, tmp_path / name, tmp_path / "runs")
                      for name in ("one", "three"))
        embed(one, entry, [pool], part_size=4096, device="cpu")
        for shard in range(3):
            embed(three, entry, [pool], shard=shard, num_shards=3, part_size=64,
                  token_budget=1024, device="cpu")
    finally:
        del REGISTRY[entry.name]
    ids = pool_ids(corpus_dir, pool)
    one = load_vectors(store_dir(tmp_path / "one", corpus_dir.name, entry.name), ids)
    three = load_vectors(store_dir(tmp_path / "three", corpus_dir.name, entry.name), ids)
    assert np.array_equal(one, three)


@pytest.mark.slow
@pytest.mark.gpu
def test_a_gpu_packs_mixed_lengths_in_half_precision_near_the_cpu_vectors(encoder, texts):
    """On a GPU: batches of mixed lengths, bf16 weights when chosen, and the CPU's vectors up
    to half-precision rounding (cosine > 0.99)."""
    from pipeline.models import with_precision

    gpu = Encoder(with_precision(encoder.entry, "bf16"), device="cuda")
    assert not gpu.one_length and gpu.model.dtype == torch.bfloat16
    want, tokens = encoder.encode(texts, progress=False)
    got, gpu_tokens = gpu.encode(texts, progress=False)
    assert got.dtype == want.dtype and gpu_tokens == tokens
    assert (np.sum(got * want, axis=1) > 0.99).all()  # normalized: the cosine


def tiny_entry(name: str) -> ModelEntry:
    return ModelEntry(name, "dense", "", "mean", "cosine", normalize=True, max_length=128)


@pytest.mark.parametrize(("fixture", "attention"), [("tiny_bert", "sdpa"),
                                                    ("tiny_mpnet", "eager")])
def test_attention_is_sdpa_where_the_architecture_has_it(request, fixture, attention, caplog):
    """BERT runs with SDPA; MPNet, which transformers refuses SDPA for (a ValueError), loads
    with its own attention instead of failing, and the log says which."""
    caplog.set_level("INFO", logger="pipeline.encoding.encoders")
    encoder = Encoder(tiny_entry("tiny"), model_path=request.getfixturevalue(fixture),
                      device="cpu")
    assert encoder.attention == attention
    assert f"{attention} attention" in caplog.text
    vectors, _ = encoder.encode(["a title about proteins", "cells"], progress=False)
    assert np.isfinite(vectors).all() and np.allclose(np.linalg.norm(vectors, axis=1), 1)


def _unknown_type(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "no-such-type"}))


def _cut(name: str) -> Callable[[Path], None]:
    def cut(folder: Path) -> None:
        (folder / name).write_bytes((folder / name).read_bytes()[:40])
    return cut


# a model folder damaged in each way transformers reports differently: a ValueError (unknown
# architecture, a tokenizer.json that is not JSON), the safetensors library's own error, an
# OSError (a file missing)
DAMAGE = {"unknown-model-type": _unknown_type, "cut-weights": _cut("model.safetensors"),
          "cut-tokenizer": _cut("tokenizer.json"),
          "no-weights": lambda folder: (folder / "model.safetensors").unlink()}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_model_that_cannot_load_is_one_line_naming_it(tiny_mpnet, tmp_path, damage):
    """Whatever breaks in a model folder, loading ends in one InputError line (exit status 2
    at the command line) that names the model and the folder and says what to do: never a
    traceback."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_mpnet, folder)
    DAMAGE[damage](folder)
    with pytest.raises(InputError) as error:
        Encoder(tiny_entry("mine"), model_path=folder, device="cpu")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load MODEL mine from {folder} (")
    assert "MODEL_PATH=<folder>" in message
