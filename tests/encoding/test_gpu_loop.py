"""The GPU batch loop (Encoder._one_by_one) run on a CPU, as CI has no GPU: its batches'
vectors are those of each batch run alone, read back IN_FLIGHT batches after they are queued,
every paper once, an out-of-memory error in the middle costing nothing; and the pooling it
moved before the conversion to float32 gives the CPU's vectors bit for bit. With length
buckets (Encoder.bucket, issue 80) its batches are of one padded width, a few shapes, and the
vectors those of mixed lengths up to rounding."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.core.logs import Progress
from pipeline.encoding import encoders
from pipeline.encoding.encoders import (
    GPU_BUCKET,
    IN_FLIGHT,
    MAX_BATCH,
    Encoder,
    HostCopy,
    batch_shapes,
    default_budget,
    gpu_attention,
    host_array,
)
from pipeline.models import ModelEntry, with_precision
from tests.encoding.test_encoders import forward_shapes

# the tests' bucket: no divisor of the tiny model's max length (128), so the last width is capped
BUCKET = 48


def entry(tiny_bert, pooling: str) -> ModelEntry:
    return ModelEntry(f"tiny-{pooling}", "dense", str(tiny_bert), pooling,
                      "l2" if pooling == "cls" else "cosine", normalize=pooling == "mean",
                      max_length=128)


@pytest.fixture(scope="module")
def encoder(tiny_bert) -> Encoder:
    gpu_like = Encoder(entry(tiny_bert, "mean"), device="cpu")
    gpu_like.pad_step = None  # the GPU's path: batches of mixed lengths, one after another
    return gpu_like


@pytest.fixture(scope="module")
def ids(corpus_dir, encoder) -> list[list[int]]:
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(160)
    texts = [encoder.format(t, a[: 12 * i]) for i, (t, a) in  # lengths differ a lot
             enumerate(zip(papers["title"], papers["abstract"], strict=True))]
    return encoder.tokenize(texts)


def widths_of(encoder: Encoder, ids: list[list[int]]) -> np.ndarray:
    return encoder.padded_widths(np.array([len(x) for x in ids]))


def run_loop(encoder: Encoder, ids: list[list[int]], budget: int
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    widths = widths_of(encoder, ids)
    with torch.inference_mode():
        return [(idx, vectors.copy()) for idx, vectors in
                encoder._one_by_one(ids, widths, budget, MAX_BATCH)]


def alone(encoder: Encoder, ids: list[list[int]], idx: np.ndarray) -> np.ndarray:
    """The batch `idx` run by itself, its vectors brought back at once (no pipelining)."""
    with torch.inference_mode():
        return host_array(encoder._forward(encoder._tensors(ids, idx, widths_of(encoder, ids))))


def check_batches(encoder: Encoder, ids: list[list[int]],
                  batches: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Every paper in one batch, and each batch's vectors those of the batch run alone."""
    order = np.concatenate([idx for idx, _ in batches])
    assert np.array_equal(np.sort(order), np.arange(len(ids)))
    for idx, vectors in batches:
        assert np.array_equal(vectors, alone(encoder, ids, idx))


@pytest.mark.slow
def test_the_loop_gives_each_batch_the_vectors_it_has_alone_in_input_order(encoder, ids):
    batches = run_loop(encoder, ids, budget=2048)
    assert len(batches) > 2 * IN_FLIGHT  # the signal: batches read back while others queue
    check_batches(encoder, ids, batches)
    widths = widths_of(encoder, ids)
    firsts = [int(widths[idx[0]]) for idx, _ in batches]
    assert firsts == sorted(firsts, reverse=True)  # longest first, in the order queued
    expected = np.zeros((len(ids), encoder.dim), np.float32)
    for idx, vectors in batches:
        expected[idx] = vectors
    got, tokens = encoder.encode_ids(ids, 2048, progress=False)
    assert np.array_equal(got, expected) and tokens == sum(map(len, ids))


@pytest.mark.slow
def test_vectors_are_read_back_only_after_later_batches_are_queued(encoder, ids,
                                                                   monkeypatch):
    """No waiting on the GPU inside the loop: batch k's vectors are read (HostCopy.result,
    where a GPU's copy is waited for) only once batch k + IN_FLIGHT has been queued."""
    events: list[str] = []
    forward, result = Encoder._forward, HostCopy.result

    def queued(self, batch):
        events.append("queue")
        return forward(self, batch)

    def read(self):
        events.append("read")
        return result(self)

    monkeypatch.setattr(Encoder, "_forward", queued)
    monkeypatch.setattr(HostCopy, "result", read)
    batches = run_loop(encoder, ids, budget=2048)
    expected: list[str] = []
    for k in range(len(batches)):
        expected += ["queue"] + (["read"] if k >= IN_FLIGHT else [])
    expected += ["read"] * min(len(batches), IN_FLIGHT)
    assert events == expected


@pytest.mark.slow
@pytest.mark.parametrize("bucket", [None, BUCKET])
def test_an_out_of_memory_error_in_the_middle_halves_the_budget_and_loses_nothing(
        encoder, ids, monkeypatch, caplog, bucket):
    """An injected CUDA OOM on the third batch, with two batches queued before it: those two
    are read back as they were, the budget halves, the batch is cut again and retried, and
    every paper gets the vectors of the batch it ended up in; with buckets every batch, the
    ones cut again included, still of one padded width."""
    monkeypatch.setattr(encoder, "bucket", bucket)
    real, calls, shapes = Encoder._forward, [], []

    def oom_once(self, batch):
        calls.append(1)
        if len(calls) == IN_FLIGHT + 1:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        shapes.append(tuple(batch["input_ids"].shape))
        return real(self, batch)

    plain = run_loop(encoder, ids, budget=4096)
    monkeypatch.setattr(Encoder, "_forward", oom_once)
    batches = run_loop(encoder, ids, budget=4096)
    assert "token budget now 2048" in caplog.text
    monkeypatch.setattr(Encoder, "_forward", real)
    check_batches(encoder, ids, batches)
    widths = widths_of(encoder, ids)
    one_width = [len(set(widths[idx].tolist())) == 1 for idx, _ in batches]
    assert all(one_width) if bucket else not all(one_width)
    assert all(rows * width <= 4096 for rows, width in shapes[:IN_FLIGHT])
    assert all(rows * width <= 2048 for rows, width in shapes[IN_FLIGHT:])
    assert [idx.tolist() for idx, _ in batches[:IN_FLIGHT]] == \
        [idx.tolist() for idx, _ in plain[:IN_FLIGHT]]  # those queued before: kept
    got, want = (np.zeros((len(ids), encoder.dim), np.float32) for _ in range(2))
    for out, run in ((got, batches), (want, plain)):
        for idx, vectors in run:
            out[idx] = vectors
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # other batches: rounding


@pytest.mark.slow
def test_a_one_paper_batch_out_of_memory_is_raised(encoder, ids, monkeypatch):
    def no_memory(self, batch):
        raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    monkeypatch.setattr(Encoder, "_forward", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        run_loop(encoder, ids[:1], budget=4096)


def old_pool(entry: ModelEntry, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Encoder.pool as it was before issue 70: every state converted to float32 first."""
    hidden = hidden.float()
    if entry.pooling == "cls":
        vectors = hidden[:, 0]
    elif entry.pooling == "lasttoken":
        positions = torch.arange(mask.shape[1], device=mask.device)
        vectors = hidden[torch.arange(len(hidden)), (mask * positions).argmax(1)]
    else:
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    if entry.normalize:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    return vectors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("pooling", ["cls", "lasttoken", "mean"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pooling_before_the_conversion_gives_the_same_bits(dtype, pooling, normalize):
    """CLS and last-token pooling select a row before converting it to float32 (less memory
    traffic in half precision): the same bits as converting every state first."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(6, 9, 16, generator=generator).to(dtype)
    mask = torch.ones(6, 9, dtype=torch.int64)
    for row, length in enumerate([9, 1, 4, 7, 2, 9]):
        mask[row, length:] = 0
    e = ModelEntry("x", "dense", "", pooling, "cosine", normalize=normalize)
    got = Encoder.pool(SimpleNamespace(entry=e), hidden, mask)
    assert got.dtype == torch.float32
    assert torch.equal(got, old_pool(e, hidden, mask))


def old_forward(self, batch):
    """Encoder._forward before issue 70: states to float32, pooled, brought to the host."""
    hidden = self.model(**batch).last_hidden_state
    return old_pool(self.entry, hidden, batch["attention_mask"]).cpu().numpy()


@pytest.mark.slow
@pytest.mark.parametrize(("pooling", "precision"), [("cls", "fp32"), ("mean", "fp32"),
                                                    ("cls", "bf16")])
def test_the_cpu_path_gives_the_vectors_it_gave_before_bit_for_bit(
        tiny_bert, corpus_dir, monkeypatch, pooling, precision):
    cpu = Encoder(with_precision(entry(tiny_bert, pooling), precision), device="cpu")
    assert cpu.pad_step is not None  # the CPU path: batches of one width, side by side
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(80)
    texts = [cpu.format(t, a) for t, a in zip(papers["title"], papers["abstract"], strict=True)]
    now, _ = cpu.encode(texts, progress=False)
    monkeypatch.setattr(Encoder, "_forward", old_forward)
    before, _ = cpu.encode(texts, progress=False)
    assert np.array_equal(now, before)


def test_host_copy_of_cpu_vectors_and_of_arrays_is_the_vectors():
    vectors = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert np.array_equal(HostCopy(vectors).result(), vectors.numpy())
    array = np.ones((2, 3), np.float32)
    assert HostCopy(array).result() is array  # an encoder whose _forward gives numpy


@pytest.mark.slow
@pytest.mark.gpu
def test_on_a_gpu_the_loop_reads_back_the_vectors_of_each_batch(tiny_bert, ids):
    """On a GPU: the asynchronous copies (pinned memory, an event each) give the vectors of
    each batch run alone, and the CPU's vectors up to rounding."""
    gpu = Encoder(entry(tiny_bert, "mean"), device="cuda")
    assert gpu.pad_step is None
    batches = run_loop(gpu, ids, budget=2048)
    order = np.concatenate([idx for idx, _ in batches])
    assert np.array_equal(np.sort(order), np.arange(len(ids)))
    for idx, vectors in batches:
        np.testing.assert_allclose(vectors, alone(gpu, ids, idx), rtol=1e-5, atol=1e-6)
    cpu = Encoder(entry(tiny_bert, "mean"), device="cpu")
    got, _ = gpu.encode_ids(ids, progress=False)
    np.testing.assert_allclose(got, cpu.encode_ids(ids, progress=False)[0], atol=1e-4)


def waits(encoder: Encoder, ids: list[list[int]]) -> int:
    """The calls that wait for the device (aten::item: a tensor's value read on the host)
    in the GPU loop over `ids`, as torch.profiler counts them on this thread."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_loop(encoder, ids, budget=2048)
    return sum(e.count for e in prof.key_averages() if e.key == "aten::item")


@pytest.mark.slow
def test_a_broadcast_mask_gives_bert_the_same_vectors_without_a_wait(encoder, ids,
                                                                    monkeypatch):
    """transformers reads whether a 2-D padding mask pads anything (`padding_mask.all()`,
    on a GPU a wait in every batch); BERT given the mask as (batch, 1, 1, length) booleans
    skips that and computes the same attention: bit for bit here."""
    assert not encoder.mask_4d  # a CPU: the mask as it was
    some = ids[:40]
    plain, plain_waits = run_loop(encoder, ids, budget=2048), waits(encoder, some)
    monkeypatch.setattr(encoder, "mask_4d", True)
    broadcast = run_loop(encoder, ids, budget=2048)
    assert plain_waits >= len(run_loop(encoder, some, budget=2048))  # one a batch at least
    assert waits(encoder, some) == 0
    for (idx, a), (same, b) in zip(plain, broadcast, strict=True):
        assert np.array_equal(idx, same) and np.array_equal(a, b)


def test_only_bert_with_sdpa_on_a_gpu_gets_a_broadcast_mask(encoder, tiny_mpnet):
    from transformers import AutoModel

    from pipeline.encoding.encoders import broadcast_mask

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert broadcast_mask(encoder.model, "sdpa", cuda)
    assert not broadcast_mask(encoder.model, "sdpa", cpu)
    assert not broadcast_mask(encoder.model, "eager", cuda)
    mpnet = AutoModel.from_pretrained(tiny_mpnet)
    assert not broadcast_mask(mpnet, "eager", cuda)


def test_on_a_gpu_encode_tokenizes_in_chunks_and_gives_every_text_its_vector(
        encoder, corpus_dir, monkeypatch):
    """encode on the GPU's path tokenizes chunk by chunk (the next on a thread): every text
    tokenized once, in order, each vector the one the whole list gives up to rounding (batches
    are cut per chunk), the tokens counted once, one bar over all the texts."""
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(50)
    texts = [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                                  strict=True)]
    whole, whole_tokens = encoder.encode_ids(encoder.tokenize(texts), progress=False)
    monkeypatch.setattr(encoders, "TOKENIZE_CHUNK", 16)
    seen: list[int] = []
    tokenize = encoder.tokenize
    monkeypatch.setattr(encoder, "tokenize", lambda some: seen.append(len(some)) or
                        tokenize(some))
    bar = Progress(len(texts), "embed", show=False)
    vectors, tokens = encoder.encode(texts, progress=bar)
    assert seen == [16, 16, 16, 2] and tokens == whole_tokens and bar.done == len(texts)
    np.testing.assert_allclose(vectors, whole, atol=2e-6)


def test_a_gpu_batch_runs_without_cudnn_attention_and_a_cpu_one_as_it_is():
    """cuDNN's SDPA builds a plan per new shape: off inside a GPU batch (the flags restored
    after it), a CPU's SDPA left as it is."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    with gpu_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        with gpu_attention(torch.device("cpu")):
            assert torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_with_buckets_a_gpu_batch_runs_cudnn_attention_first():
    """Batches from buckets take few shapes, so cuDNN's plans are built once each: cuDNN
    first inside a bucketed GPU batch (the flags and order restored after)."""
    from torch.nn.attention import SDPBackend

    before = (torch.backends.cuda.cudnn_sdp_enabled(), torch._C._get_sdp_priority_order())
    with gpu_attention(torch.device("cuda"), few_shapes=True):
        assert torch.backends.cuda.cudnn_sdp_enabled()
        assert torch._C._get_sdp_priority_order()[0] == int(SDPBackend.CUDNN_ATTENTION)
    assert (torch.backends.cuda.cudnn_sdp_enabled(),
            torch._C._get_sdp_priority_order()) == before


def test_buckets_leave_a_plan_at_most_two_shapes_a_width():
    """5,000 lengths up to 512 at the GPU's budget: with buckets at most a full and a tail
    batch per width, each width a multiple of the bucket; mixed lengths meet more shapes."""
    lengths = np.random.default_rng(0).integers(8, 513, 5000)
    budget = default_budget(torch.device("cuda"))
    bucketed = batch_shapes(lengths, GPU_BUCKET, budget, 512)
    assert len(bucketed) <= 2 * math.ceil(512 / GPU_BUCKET)
    assert all(width % GPU_BUCKET == 0 for _, width in bucketed)
    assert len(batch_shapes(lengths, None, budget, 512)) > len(bucketed)
    longer = np.random.default_rng(1).integers(8, 513, 50_000)  # more batches: far more
    assert len(batch_shapes(longer, None, budget, 512)) > 10 * len(bucketed)
    assert len(batch_shapes(longer, GPU_BUCKET, budget, 512)) <= 2 * math.ceil(512 / GPU_BUCKET)


@pytest.mark.slow
def test_with_buckets_each_batch_is_of_one_width_and_the_shapes_are_the_plans(
        encoder, ids, monkeypatch):
    """The GPU loop with buckets: every batch of one padded width, a multiple of the bucket
    or the max length; the shapes it runs those batch_shapes tells; each batch's vectors those
    of the batch run alone; every paper once."""
    monkeypatch.setattr(encoder, "bucket", BUCKET)
    real = Encoder._forward
    shapes = forward_shapes(monkeypatch)
    batches = run_loop(encoder, ids, budget=2048)
    monkeypatch.setattr(Encoder, "_forward", real)
    check_batches(encoder, ids, batches)
    widths, lengths = widths_of(encoder, ids), np.array([len(x) for x in ids])
    assert all(len(set(widths[idx].tolist())) == 1 for idx, _ in batches)
    assert {width for _, width in shapes} == {48, 96, 128}  # 128: capped at the max length
    assert set(shapes) == batch_shapes(lengths, BUCKET, 2048, encoder.max_length)
    assert len(shapes) > len(set(shapes))  # the signal: shapes met again


@pytest.mark.slow
def test_buckets_give_the_vectors_of_mixed_lengths_up_to_rounding(encoder, ids, monkeypatch):
    """Padding further changes a vector in its last bits on a CPU (not bit for bit: under
    1e-7 here), within the tolerance of batches cut per chunk."""
    mixed, tokens = encoder.encode_ids(ids, 2048, progress=False)
    monkeypatch.setattr(encoder, "bucket", BUCKET)
    bucketed, same_tokens = encoder.encode_ids(ids, 2048, progress=False)
    assert same_tokens == tokens
    np.testing.assert_allclose(bucketed, mixed, atol=2e-6, rtol=0)
