"""Learned sparse encoders (SPLADE) as sentence-transformers' `SparseEncoder` computes them.

A SparseEncoder folder (modules.json: a Transformer run for `fill-mask`, whose MLM logits are
its token states, then SpladePooling) is loaded by the sentence-transformers library itself
and run on the batches of the project's embedding engine (pipeline/encoding/encoders.py), as
STEncoder runs a dense folder: a paper's vector is `SpladePooling`'s output, the max (or sum,
as the folder says) over its tokens of log(1 + relu(logit)) per vocabulary term, cut to the
folder's `max_active_dims` where it has one, exactly what `SparseEncoder.encode_document`
(candidates) and `.encode_query` (query papers, with the query prompt) give. Only the non-zero
terms are kept: a paper is its term ids and weights (`SparseVectors`), stored as two list
columns of the embedding store, `terms` (int32) and `weights` (the store's dtype). Scored by
the dot product, the folder's similarity (one whose configuration says another is refused).
pyserini's integer impacts (weights x 100, rounded: retrieval/sparse/impact.py `quantised`)
are computed from the stored weights at search time, never stored.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.stmodels import STEncoder, transformer_problem
from pipeline.encoding.store import id_array
from pipeline.encoding.writer import as_stored

log = logging.getLogger(__name__)

SPARSE_KIND = "sparse"
TERMS, WEIGHTS = "terms", "weights"  # a sparse store's columns: a list per paper each


class SparseVectors:
    """Sparse vectors of papers given in some order, filled a batch of rows at a time
    (`vectors[idx] = dense_rows`, as Encoder.encode_ids fills a matrix) and kept as their
    non-zero terms: CSR arrays `offsets`, `terms` (int32, ascending per row), `weights`
    (float32)."""

    def __init__(self, papers: int, dim: int):
        self.dim = dim
        self._rows: list[tuple[np.ndarray, np.ndarray] | None] = [None] * papers
        self._csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def __setitem__(self, idx: np.ndarray, rows: np.ndarray) -> None:
        for i, row in zip(idx, rows, strict=True):
            terms = np.flatnonzero(row).astype(np.int32)
            self._rows[int(i)] = (terms, row[terms].astype(np.float32))
        self._csr = None

    @classmethod
    def from_csr(cls, offsets: np.ndarray, terms: np.ndarray, weights: np.ndarray,
                 dim: int) -> SparseVectors:
        out = cls(0, dim)
        out._rows = [None] * (len(offsets) - 1)
        out._csr = (np.asarray(offsets, np.int64), np.asarray(terms, np.int32),
                    np.asarray(weights, np.float32))
        return out

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, terms, weights): row i's terms are terms[offsets[i]:offsets[i + 1]]."""
        if self._csr is None:
            if any(row is None for row in self._rows):
                raise ValueError("a row of SparseVectors was never set")
            rows = [row for row in self._rows if row is not None]
            lengths = np.fromiter((len(t) for t, _ in rows), np.int64, len(rows))
            self._csr = (np.r_[0, np.cumsum(lengths)].astype(np.int64),
                         np.concatenate([t for t, _ in rows]) if rows else np.empty(0, np.int32),
                         np.concatenate([w for _, w in rows]) if rows
                         else np.empty(0, np.float32))
        return self._csr

    def matrix(self):
        """The vectors as a scipy CSR matrix (papers x vocabulary)."""
        from scipy.sparse import csr_matrix

        offsets, terms, weights = self.csr()
        return csr_matrix((weights, terms, offsets), shape=(len(offsets) - 1, self.dim))

    @classmethod
    def joined(cls, parts: list[SparseVectors]) -> SparseVectors:
        """Consecutive chunks' vectors as one (Encoder.encode's chunks on a GPU)."""
        csrs = [part.csr() for part in parts]
        starts = np.cumsum([0, *(offsets[-1] for offsets, _, _ in csrs[:-1])])
        offsets = np.concatenate([[0], *(o[1:] + s for (o, _, _), s in zip(csrs, starts,
                                                                           strict=True))])
        return cls.from_csr(offsets, np.concatenate([t for _, t, _ in csrs]),
                            np.concatenate([w for _, _, w in csrs]), parts[0].dim)

    def as_array(self) -> np.ndarray:
        """The vectors as one float64 array, (non-zero terms, 3): row, term, weight (exact:
        float32 weights and int32 ids fit float64), as the query cache keeps them
        (query_vectors.encode_texts); `from_array` reads it back."""
        offsets, terms, weights = self.csr()
        rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        return np.stack([rows, terms, weights]).T.astype(np.float64)

    @classmethod
    def from_array(cls, array: np.ndarray, papers: int, dim: int) -> SparseVectors:
        rows = array[:, 0].astype(np.int64)
        offsets = np.r_[0, np.cumsum(np.bincount(rows, minlength=papers))]
        return cls.from_csr(offsets, array[:, 1].astype(np.int32),
                            array[:, 2].astype(np.float32), dim)

    def part(self, ids: np.ndarray, dtype: str) -> tuple[np.ndarray, dict, None, dict]:
        """Store columns for papers `ids` (the input order): their ids, `terms` and `weights`
        as a list per paper (weights in `dtype`, each finite there: writer.as_stored), no
        fixed-size vector, and the part's count of stored terms."""
        offsets, terms, weights = self.csr()
        ids = id_array(ids)
        stored = as_stored(weights[:, None], dtype, np.repeat(ids, np.diff(offsets)))[:, 0]
        offsets32 = pa.array(offsets.astype(np.int32))
        return ids, {TERMS: pa.ListArray.from_arrays(offsets32, pa.array(terms)),
                     WEIGHTS: pa.ListArray.from_arrays(offsets32, pa.array(stored))}, \
            None, {"terms": int(len(terms))}


def check_sparse(entry, model) -> None:
    """Refuse a SparseEncoder folder the engine does not run as the library does: other
    modules than a text Transformer run for fill-mask followed by SpladePooling (an
    inference-free Router, a SparseStaticEmbedding, a SparseAutoEncoder), task-specific
    lengths, or a similarity other than the dot product (what the inverted index scores)."""
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    modules = [type(module).__name__ for module in model]
    first = model[0]
    if (len(model) != 2 or not isinstance(first, Transformer)
            or not isinstance(model[1], SpladePooling) or "text" not in first.modality_config):
        problem = f"its modules are {' + '.join(modules)}, not a Transformer + SpladePooling"
    else:
        problem = transformer_problem(first, "fill-mask") or (
            f"it scores by {model.similarity_fn_name} similarity, not the dot product"
            if model.similarity_fn_name != "dot" else "")
    if problem:
        raise InputError(f"MODEL {entry.name}: {problem}, which learned sparse retrieval "
                         "(an inverted index scored by the dot product) does not run: give a "
                         "SPLADE folder (docs/encoders.md)")


class SparseEncoder(STEncoder):
    """A SparseEncoder folder (a registry entry's hub id, or an st: folder whose
    configuration says SparseEncoder) run by the embedding engine: the engine tokenizes,
    batches and pads; the model's modules turn a batch into vocabulary-wide weights, of which
    the non-zero ones are kept (`SparseVectors`)."""

    kinds = (SPARSE_KIND,)
    library = "SparseEncoder"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the vocabulary the MLM head scores (SpladePooling knows it only after a batch)
        self.dim = int(self.model[0].auto_model.config.vocab_size)

    def check(self, model) -> None:
        check_sparse(self.entry, model)

    def settings(self) -> dict:
        """What the store records besides the entry and the folder's identity: STEncoder's
        (prompts, max_seq_length), the folder's max_active_dims and SpladePooling's settings,
        each of which changes a vector."""
        pooling = self.model[1]
        return {**super().settings(), "max_active_dims": self.model.max_active_dims,
                "splade_pooling": {"pooling_strategy": pooling.pooling_strategy,
                                   "activation_function": pooling.activation_function}}

    def vectors_for(self, papers: int) -> SparseVectors:
        return SparseVectors(papers, self.dim)

    joined = staticmethod(SparseVectors.joined)

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """A batch's weights over the vocabulary, float32: SpladePooling's output, cut to the
        folder's max_active_dims as SparseEncoder.encode cuts it (select_max_active_dims)."""
        from sentence_transformers.util import select_max_active_dims

        weights = self.model(dict(batch))["sentence_embedding"]
        if self.model.max_active_dims is not None:
            weights = select_max_active_dims(weights, max_active_dims=self.model.max_active_dims)
        return weights.float()
