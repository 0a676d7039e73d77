"""The embedding engine: token-budget batches of bounded padding, padding-independent vectors,
OOM back-off."""

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
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import (
    PAD_STEP,
    Encoder,
    batch_of,
    batch_rows,
    default_budget,
    pad_widths,
)
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


def test_cpu_batches_hold_one_width():
    widths = np.array([9, 9, 9, 7, 7, 5])
    todo = np.arange(6)
    assert batch_of(todo, widths, 100).tolist() == [0, 1, 2, 3, 4, 5]
    assert batch_of(todo, widths, 100, one_width=True).tolist() == [0, 1, 2]
    assert batch_of(todo, widths, 18, one_width=True).tolist() == [0, 1]
    assert batch_of(todo[3:], widths, 100, one_width=True).tolist() == [3, 4]


def batches(lengths: np.ndarray, step: int | None, max_batch: int) -> list[np.ndarray]:
    """The batches the engine forms for sequences of `lengths` (a large token budget, so
    `max_batch` binds), as index arrays."""
    widths, todo, out = pad_widths(lengths, step, 256), np.argsort(-lengths, kind="stable"), []
    while len(todo):
        out.append(batch_of(todo, widths, 1 << 20, max_batch, one_width=step is not None))
        todo = todo[len(out[-1]):]
    return out


def test_cpu_batches_span_a_range_of_lengths_with_bounded_padding():
    """A CPU batch holds one padded width (a length rounded up to PAD_STEP), not one length:
    960 papers of 200 lengths make about n / batch size batches (one per length before:
    96 demo papers of 35 lengths made 35 small forward passes, issue 57), each paper padded
    by fewer than PAD_STEP tokens, a width never past the max length."""
    lengths = np.random.default_rng(0).integers(20, 257, 960)
    widths = pad_widths(lengths, PAD_STEP, 256)
    assert (widths >= lengths).all() and (widths - lengths < PAD_STEP).all()
    assert widths.max() == 256 and np.array_equal(pad_widths(lengths, None, 256), lengths)
    formed = batches(lengths, PAD_STEP, 32)
    assert np.array_equal(np.sort(np.concatenate(formed)), np.arange(len(lengths)))
    assert len(set(lengths.tolist())) > 200  # the signal: many lengths
    assert len(formed) <= len(lengths) / 32 + 256 / PAD_STEP  # not one batch per length
    assert all(len(set(widths[b].tolist())) == 1 for b in formed)
    assert np.mean([len(set(lengths[b].tolist())) for b in formed]) > 4  # one length before
    padded = sum(len(b) * int(widths[b].max()) for b in formed)
    assert padded / lengths.sum() - 1 < PAD_STEP / lengths.mean()
    assert len(batches(lengths, None, 32)) == len(lengths) // 32  # a GPU: by count only


def forward_shapes(monkeypatch) -> list[tuple[int, int]]:
    """The (rows, width) of each batch Encoder._forward runs from now on, in order."""
    seen: list[tuple[int, int]] = []
    real = Encoder._forward

    def spy(self, batch):
        seen.append(tuple(batch["input_ids"].shape))
        return real(self, batch)

    monkeypatch.setattr(Encoder, "_forward", spy)
    return seen


def test_a_cpu_encoder_batches_papers_of_many_lengths_together(encoder, texts, monkeypatch):
    """The engine itself on the corpus's papers: forward passes of several lengths each,
    about as many as full batches of the CPU's token budget would make (plus one part-filled
    batch per padded width), padded to a multiple of PAD_STEP."""
    seen = forward_shapes(monkeypatch)
    some = [text[: 20 + 3 * i] for i, text in enumerate(texts)]  # cut: lengths differ a lot
    lengths = [len(x) for x in encoder.tokenize(some)]
    encoder.encode(some, max_batch=32, progress=False)
    assert len(set(lengths)) > 60  # the signal: many lengths
    assert sum(rows for rows, _ in seen) == len(some)
    full = batch_rows(encoder.max_length, default_budget(encoder.device), 32)
    assert len(seen) <= len(some) / full + encoder.max_length / PAD_STEP
    assert all(width % PAD_STEP == 0 or width == encoder.max_length for _, width in seen)


@pytest.mark.slow
def test_batches_are_packed_by_tokens_and_sorted_by_length(encoder, texts, monkeypatch):
    """The GPU path (mixed lengths in a batch), run on the CPU."""
    monkeypatch.setattr(encoder, "pad_step", None)
    seen = forward_shapes(monkeypatch)
    encoder.encode(texts, token_budget=2048, progress=False)
    assert sum(rows for rows, _ in seen) == len(texts)
    assert all(rows * longest <= 2048 for rows, longest in seen)
    assert [longest for _, longest in seen] == sorted((x for _, x in seen), reverse=True)
    assert len(seen) < len(texts) / 8  # packed, not one by one


@pytest.mark.slow
def test_vectors_do_not_depend_on_the_batching(encoder, texts, monkeypatch):
    """Padding and batch composition must not change a paper's vector (masking is right):
    on a CPU bit for bit (a paper padded to its own width), padded to a batch's longest
    (as on a GPU) up to rounding."""
    packed, tokens = encoder.encode(texts, token_budget=4096, progress=False)
    alone = np.concatenate([encoder.encode([t], progress=False)[0] for t in texts[:40]])
    assert np.array_equal(packed[:40], alone)
    assert np.array_equal(encoder.encode(texts[::-1], token_budget=512, progress=False)[0],
                          packed[::-1])
    monkeypatch.setattr(encoder, "pad_step", None)
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
    encoder.pad_step = None
    padded, _ = encoder.encode(some, token_budget=4096, progress=False)
    assert len({len(x) for x in encoder.tokenize(some)}) > 5
    np.testing.assert_allclose(padded, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_out_of_memory_halves_the_budget_and_retries(encoder, texts, monkeypatch, caplog):
    """A CUDA OOM (injected: CI has no GPU) must shrink the batches, not fail the job (the
    GPU's path: batches one by one, mixed lengths)."""
    real = Encoder._forward
    limit = 1500  # padded tokens the 'GPU' can hold

    def small_gpu(self, batch):
        rows, longest = batch["input_ids"].shape
        if rows * longest > limit:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real(self, batch)

    expected, _ = encoder.encode(texts, token_budget=1024, progress=False)
    monkeypatch.setattr(Encoder, "_forward", small_gpu)
    monkeypatch.setattr(encoder, "pad_step", None)
    got, _ = encoder.encode(texts, token_budget=8192, progress=False)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert "token budget now 1024" in caplog.text  # a warning (pipeline.core.logs)


@pytest.mark.slow
def test_store_does_not_depend_on_parts_or_shards(corpus_dir, tmp_path, tiny_bert):
    """One process with big parts, or 3 shards with small parts and a small budget: the
    same ids and the same vectors, bit for bit (CPU batches hold one padded width)."""
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
    assert gpu.pad_step is None and gpu.model.dtype == torch.bfloat16
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
