"""Exact dense search: Faiss flat search and the torch fallback agree with brute force."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.dense import exact_search, faiss_search, prepare, torch_search


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


def test_auto_backend_on_cpu_is_faiss(data):
    queries, docs = data
    _, positions, backend = exact_search(queries, docs, 10, "ip")
    assert backend == "faiss-cpu" and positions.shape == (20, 10)


def test_k_larger_than_the_pool(data):
    queries, docs = data
    scores, positions, _ = exact_search(queries, docs[:7], 500, "l2")
    assert positions.shape == (20, 7) and (positions >= 0).all()
