"""Exact dense search: Faiss flat search and the torch fallback agree with brute force."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.retrieval.dense.exact import (
    device_chunks,
    exact_search,
    faiss_search,
    prepare,
    torch_search,
)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((20, 16)).astype(np.float32),
            rng.standard_normal((3000, 16)).astype(np.float32))


def brute(queries, docs, k, similarity):
    q, x = prepare(queries, similarity), prepare(docs, similarity)
    scores = -((q[:, None, :] - x[None, :, :]) ** 2).sum(-1) if similarity == "l2" else q @ x.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, top, 1), top


@pytest.mark.parametrize("similarity", ["ip", "l2", "cosine"])
def test_faiss_and_torch_match_brute_force(data, similarity):
    queries, docs = data
    want_s, want_i = brute(queries, docs, 50, similarity)
    for scores, positions in (
        faiss_search(prepare(queries, similarity), prepare(docs, similarity), 50, similarity),
        torch_search(prepare(queries, similarity), prepare(docs, similarity), 50, similarity,
                     device="cpu", doc_chunk=700),
    ):
        np.testing.assert_array_equal(positions, want_i)
        np.testing.assert_allclose(scores, want_s, rtol=1e-4, atol=1e-3)


@pytest.mark.cpu_only
def test_auto_backend_on_cpu_is_faiss(data):
    queries, docs = data
    _, positions, backend = exact_search(queries, docs, 10, "ip")
    assert backend == "faiss-cpu" and positions.shape == (20, 10)


@pytest.mark.gpu
def test_auto_backend_on_a_gpu_node_is_a_gpu_backend_with_the_cpu_lists(data):
    """auto on a GPU node: Faiss GPU where its probe passes and k fits, else torch on the
    GPU; either finds Faiss CPU's lists. k over Faiss GPU's limit takes torch."""
    from pipeline.retrieval.dense.exact import GPU_MAX_K, faiss_gpu_works

    queries, docs = data
    _, want, _ = exact_search(queries, docs, 10, "ip", "faiss-cpu")
    _, positions, backend = exact_search(queries, docs, 10, "ip")
    assert backend == ("faiss-gpu" if faiss_gpu_works() else "torch-cuda")
    np.testing.assert_array_equal(positions, want)
    big = np.concatenate([docs] * 2)
    _, positions, backend = exact_search(queries, big, GPU_MAX_K + 1, "ip")
    assert backend == "torch-cuda" and positions.shape == (20, GPU_MAX_K + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_device_chunks_are_the_rows_in_order_as_stored(data, device):
    """Each chunk on the device holds the next rows of the docs, in their dtype; on a GPU the
    two pinned buffers are reused (31 chunks), and no chunk sees a later one's rows."""
    _, docs = data
    for stored in (docs, docs.astype(np.float16)):
        chunks = [(lo, chunk.to(device).clone()) for lo, chunk in
                  device_chunks(stored, 97, device)]
        assert [lo for lo, _ in chunks] == list(range(0, len(stored), 97))
        rows = np.concatenate([chunk.cpu().numpy() for _, chunk in chunks])
        assert rows.dtype == stored.dtype
        np.testing.assert_array_equal(rows, stored)


def test_k_larger_than_the_pool(data):
    queries, docs = data
    scores, positions, _ = exact_search(queries, docs[:7], 500, "l2")
    assert positions.shape == (20, 7) and (positions >= 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("similarity", ["ip", "l2", "cosine"])
def test_chunked_search_of_raw_and_float16_docs(data, similarity, device):
    """Faiss CPU and torch in small doc and query chunks (on a GPU, more chunks than its two
    pinned buffers), on raw (not yet normalized) docs in float32 and float16: the brute-force
    list of the docs as float32."""
    queries, docs = data
    for stored in (docs, docs.astype(np.float16)):
        want_s, want_i = brute(queries, stored.astype(np.float32), 120, similarity)
        for scores, positions in (
            faiss_search(queries, stored, 120, similarity, doc_chunk=400),
            torch_search(queries, stored, 120, similarity, device=device, doc_chunk=333,
                         query_chunk=7),
        ):
            np.testing.assert_array_equal(positions, want_i)
            np.testing.assert_allclose(scores, want_s, rtol=1e-4, atol=1e-3)


def test_backends_agree_on_top_500_at_a_realistic_shape():
    """Faiss CPU and torch on the CPU, 768 dims, 20k docs, k=500 and k=2500 (beyond Faiss
    GPU's limit): the same lists, but where two scores are within float rounding."""
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((16, 768)).astype(np.float32)
    docs = rng.standard_normal((20_000, 768)).astype(np.float32)
    for k in (500, 2500):
        f_s, f_i, f_backend = exact_search(queries, docs, k, "cosine", "faiss-cpu")
        t_s, t_i, t_backend = exact_search(queries, docs, k, "cosine", "torch-cpu")
        assert (f_backend, t_backend) == ("faiss-cpu", "torch-cpu")
        assert f_i.shape == t_i.shape == (16, k)
        np.testing.assert_allclose(f_s, t_s, rtol=0, atol=1e-5)
        differ = f_i != t_i
        # a swap only between near-ties (scores within 1e-5 of each other)
        assert differ.mean() < 0.01
        for row, col in zip(*np.nonzero(differ), strict=True):
            assert abs(f_s[row, col] - t_s[row, col]) < 1e-5
            assert set(f_i[row, max(col - 2, 0) : col + 3]) & {t_i[row, col]}


@pytest.mark.cpu_only
def test_forced_backend_that_cannot_run_is_an_error(data):
    from pipeline.core.errors import InputError

    queries, docs = data
    for backend in ("faiss-gpu", "torch-cuda"):
        with pytest.raises(InputError, match=f"--backend {backend}"):
            exact_search(queries, docs, 10, "ip", backend)


@pytest.mark.gpu
def test_forced_gpu_backends_run_on_a_gpu_node(data):
    """torch-cuda runs and finds the CPU's lists; faiss-gpu runs where its probe passes (else
    it is refused, by name), and k over its limit is refused, never silently switched."""
    from pipeline.core.errors import InputError
    from pipeline.retrieval.dense.exact import GPU_MAX_K, faiss_gpu_works

    queries, docs = data
    _, want, _ = exact_search(queries, docs, 50, "cosine", "faiss-cpu")
    _, positions, backend = exact_search(queries, docs, 50, "cosine", "torch-cuda")
    assert backend == "torch-cuda"
    np.testing.assert_array_equal(positions, want)
    if faiss_gpu_works():
        _, positions, backend = exact_search(queries, docs, 50, "cosine", "faiss-gpu")
        assert backend == "faiss-gpu"
        np.testing.assert_array_equal(positions, want)
        with pytest.raises(InputError, match=f"k={GPU_MAX_K + 1} is over Faiss GPU's limit"):
            exact_search(queries, docs, GPU_MAX_K + 1, "ip", "faiss-gpu")
    else:
        with pytest.raises(InputError, match="--backend faiss-gpu: this Faiss build"):
            exact_search(queries, docs, 10, "ip", "faiss-gpu")
