"""Exact top-k by impact score over an inverted index of a pool (the arrays engine).

A pool's inverted index is its candidates' sparse vectors transposed (term -> the papers that
have it, with their weights: a scipy CSR matrix over terms), built from the embedding store.
A query's score for a candidate is the dot product of their weights (SparseEncoder's
similarity), summed over the terms they share: float32 weights as stored, or pyserini's
integer impacts (`quantise`: sparse.quantised on both sides, summed as int64, exactly Lucene's
impact scores). A candidate sharing no term with the query is not retrieved, as an inverted
index finds none (Lucene's impact search neither). Queries are scored a chunk at a time, so
memory is the index plus a chunk's scores (SCORES_BUDGET bytes). Ties keep the lower
candidate position (the caller orders candidates by id as a string, ascending: the ids
Anserini keeps on an index written in that order).
"""

from __future__ import annotations

import numpy as np

# bytes of one query chunk's scores (queries x candidates x 8)
SCORES_BUDGET = 1 << 27
# pyserini's and Anserini's impact quantisation of SPLADE weights (docs/retrieval.md)
QUANTISE_FACTOR = 100


def quantised(weights: np.ndarray) -> np.ndarray:
    """Integer impacts as pyserini indexes SPLADE: weight x 100, rounded to the nearest
    integer (halves to even, numpy's rint, as pyserini's np.round), as int32. A weight below
    0.005 becomes 0."""
    return np.rint(weights.astype(np.float64) * QUANTISE_FACTOR).astype(np.int32)


def csr_matrix(csr: tuple[np.ndarray, np.ndarray, np.ndarray], dim: int, quantise: bool):
    """The sparse vectors (offsets, terms, weights) as a scipy CSR matrix (rows x `dim`):
    float32 weights, or their integer impacts (int64, zeros dropped)."""
    from scipy.sparse import csr_matrix as matrix

    offsets, terms, weights = csr
    values = quantised(weights).astype(np.int64) if quantise else weights.astype(np.float32)
    out = matrix((values, terms, offsets), shape=(len(offsets) - 1, dim))
    out.eliminate_zeros()
    return out


def inverted_index(docs: tuple[np.ndarray, np.ndarray, np.ndarray], dim: int,
                   quantise: bool):
    """The pool's inverted index: terms x candidates (CSR: each term's postings)."""
    return csr_matrix(docs, dim, quantise).T.tocsr()


def impact_search(queries: tuple[np.ndarray, np.ndarray, np.ndarray], index, k: int,
                  quantise: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k candidates of each query by impact score, exact: (query row, candidate
    position, score) of every hit, queries in order, each query's hits by score descending,
    ties by position ascending. Only candidates that share a term with the query."""
    dim, n_docs = index.shape
    q = csr_matrix(queries, dim, quantise)
    rows = max(1, SCORES_BUDGET // max(8 * n_docs, 1))
    out_q, out_p, out_s = [], [], []
    for lo in range(0, q.shape[0], rows):
        scores = (q[lo : lo + rows] @ index).tocsr()
        scores.sort_indices()
        for r in range(scores.shape[0]):
            values = scores.data[scores.indptr[r] : scores.indptr[r + 1]]
            positions = scores.indices[scores.indptr[r] : scores.indptr[r + 1]]
            keep = top(values, k)
            out_q.append(np.full(len(keep), lo + r, dtype=np.int64))
            out_p.append(positions[keep].astype(np.int64))
            out_s.append(values[keep])
    dtype = np.int64 if quantise else np.float32
    if not out_q:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, dtype)
    return np.concatenate(out_q), np.concatenate(out_p), np.concatenate(out_s).astype(dtype)


def top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest positive `values` (given in position order), by value
    descending, ties by index ascending: the k-th value's ties keep the lowest indices."""
    positive = np.flatnonzero(values > 0)
    if len(positive) > k > 0:
        kth = np.partition(values[positive], len(positive) - k)[len(positive) - k]
        above = positive[values[positive] > kth]
        tied = positive[values[positive] == kth][: k - len(above)]
        positive = np.sort(np.concatenate([above, tied]))
    elif k <= 0:
        positive = positive[:0]
    return positive[np.argsort(-values[positive], kind="stable")]
