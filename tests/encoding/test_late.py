"""Late-interaction encoders (pipeline/encoding/late.py) and MaxSim (pipeline/retrieval/late.py):
token vectors and scores equal to PyLate's own, run in PyLate's environment (it pins another
sentence-transformers: tests/conftest.py install_pylate), on a tiny ColBERT folder PyLate saves;
exact MaxSim equal to a brute-force reference; the rerank mode ordered as PyLate's rerank."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.encoding.late import LateEncoder, LateScorer, TokenVectors
from pipeline.models import ModelEntry
from pipeline.retrieval.dense.exact import maxsim_stream
from tests.conftest import (
    CHILD_BOUND_S,
    PYLATE_DOCUMENT_LENGTH,
    PYLATE_QUERY_LENGTH,
    PYLATE_REFERENCE,
    UNUSUAL_PAPER,
    pylate_python,
)

QUERY_LENGTH, DOCUMENT_LENGTH = PYLATE_QUERY_LENGTH, PYLATE_DOCUMENT_LENGTH


@pytest.fixture(scope="module")
def texts(corpus_dir) -> list[str]:
    """Papers of different lengths (some cut at either length), one with punctuation only in
    its title, unusual characters."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(5)
    papers = [*zip(rows["title"], rows["abstract"], strict=True), ("A title; (short).", ""),
              UNUSUAL_PAPER]
    return [f"{t or ''} {a or ''}".strip() for t, a in papers]


@pytest.fixture(scope="module")
def reference(pylate_folder, texts, tmp_path_factory) -> dict[str, np.ndarray]:
    """PyLate's token vectors (queries, documents), colbert_scores and rerank of the texts."""
    work = tmp_path_factory.mktemp("pylate-reference")
    (work / "texts.json").write_text(json.dumps(texts))
    subprocess.run([pylate_python(), str(PYLATE_REFERENCE), "encode", str(pylate_folder),
                    str(work / "texts.json"), str(work / "out.npz")], check=True,
                   timeout=CHILD_BOUND_S, capture_output=True)
    return dict(np.load(work / "out.npz"))


@pytest.fixture(scope="module")
def encoder(pylate_folder) -> LateEncoder:
    entry = ModelEntry("st:local/colbert", "late-interaction", "local/colbert", join="space")
    return LateEncoder(entry, model_path=pylate_folder, device="cpu")


def test_token_vectors_equal_pylate(encoder, texts, reference):
    """Documents through the embedding engine (batches of one padded width) and queries
    through encode_queries: the same kept tokens (skiplist, marker, truncation to
    document_length) and the same normalised vectors as PyLate's encode, to 1e-5; every query
    [MASK]-padded to query_length."""
    docs, _ = encoder.encode_ids(encoder.tokenize(texts), progress=False)
    vectors, offsets, _ = docs.flat()
    assert list(np.diff(offsets)) == list(reference["lengths"])
    assert max(np.diff(offsets)) < DOCUMENT_LENGTH  # the skiplist dropped some of the longest
    np.testing.assert_allclose(vectors, reference["docs"], atol=1e-5)
    queries, _ = encoder.encode_queries(texts)
    q, q_offsets, _ = queries.flat()
    assert set(np.diff(q_offsets)) == {QUERY_LENGTH}
    np.testing.assert_allclose(q.reshape(reference["queries"].shape), reference["queries"],
                               atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_maxsim_scores_and_rerank_order_equal_pylate(encoder, texts, reference, pylate_folder):
    """Every (query, document) MaxSim (the exact stream, and LateScorer's pairs: make rerank's)
    equals PyLate's colbert_scores to 1e-5, and the rerank orders each query's documents as
    pylate.rank.rerank does."""
    docs, _ = encoder.encode_ids(encoder.tokenize(texts), progress=False)
    queries, _ = encoder.encode_queries(texts)
    q, q_offsets, _ = queries.flat()
    d, d_offsets, _ = docs.flat()
    n = len(texts)
    chunks = [(d, d_offsets, np.arange(n))]
    scores, positions = maxsim_stream(q, q_offsets, chunks, n, "ip", reduce="sum")
    exact = np.zeros((n, n), dtype=np.float32)
    np.put_along_axis(exact, positions, scores, axis=1)
    np.testing.assert_allclose(exact, reference["scores"], atol=1e-5)
    scorer = LateScorer(encoder.entry, model_path=pylate_folder, device="cpu")
    text = dict(enumerate(texts))
    paired = scorer.score(text, text, [(i, j) for i in range(n) for j in range(n)])
    np.testing.assert_allclose(paired.reshape(n, n), reference["scores"], atol=1e-5)
    order = np.argsort(-paired.reshape(n, n), axis=1, kind="stable")
    assert (order == reference["rerank"]).all()


def brute_maxsim(q, q_offsets, d, d_offsets) -> np.ndarray:
    """Sum over each query vector of its best dot product with a document's: loops."""
    out = np.zeros((len(q_offsets) - 1, len(d_offsets) - 1))
    for i in range(len(q_offsets) - 1):
        for j in range(len(d_offsets) - 1):
            sims = q[q_offsets[i] : q_offsets[i + 1]] @ d[d_offsets[j] : d_offsets[j + 1]].T
            out[i, j] = sims.max(axis=1).sum()
    return out


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_exact_maxsim_equals_brute_force(chunk):
    """maxsim_stream's sum reduction over candidates streamed in chunks of `chunk` papers and
    queries in chunks of a few vectors: each query's top k equal the brute-force MaxSim's
    (scores to 1e-5, ties broken by the lower position)."""
    rng = np.random.default_rng(4)
    q_len, d_len = rng.integers(1, 6, 9), rng.integers(1, 12, 40)
    d_len[5] = d_len[3]  # document 5 is a copy of document 3: tied everywhere
    q_offsets, d_offsets = np.r_[0, np.cumsum(q_len)], np.r_[0, np.cumsum(d_len)]
    q = rng.standard_normal((q_offsets[-1], 8)).astype(np.float32)
    d = rng.standard_normal((d_offsets[-1], 8)).astype(np.float32)
    d[d_offsets[5] : d_offsets[6]] = d[d_offsets[3] : d_offsets[4]]
    chunks = [(d[d_offsets[lo] : d_offsets[min(lo + chunk, 40)]],
               d_offsets[lo : min(lo + chunk, 40) + 1] - d_offsets[lo],
               np.arange(lo, min(lo + chunk, 40))) for lo in range(0, 40, chunk)]
    k = 10
    scores, positions = maxsim_stream(q, q_offsets, chunks, k, "ip", query_rows=4,
                                      reduce="sum")
    brute = brute_maxsim(q, q_offsets, d, d_offsets)
    expected = np.argsort(-brute, axis=1, kind="stable")[:, :k]
    np.testing.assert_allclose(scores, np.take_along_axis(brute, expected, 1), atol=1e-5)
    assert (positions == expected).all()


def test_query_cache_array_round_trips(encoder, texts):
    """The query cache's array (as_array) gives back each query's vectors and offsets."""
    queries, _ = encoder.encode_queries(texts[:3])
    vectors, offsets = TokenVectors.from_array(queries.as_array(), 3)
    flat, flat_offsets, _ = queries.flat()
    assert torch.equal(torch.from_numpy(vectors), torch.from_numpy(flat))
    assert (offsets == flat_offsets).all()
