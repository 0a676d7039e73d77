"""Multi-vector retrieval: placeholder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.encoding.store import candidate_chunks, load_sentence_vectors


def maxsim_hits(store: Path, query_ids: np.ndarray, doc_ids: np.ndarray, k: int,
                similarity: str, backend: str = "auto", chunk_rows: int | None = None
                ) -> tuple[pl.DataFrame, dict]:
    """Top-k candidate papers per query paper by the best sentence pair (ts-ASPIRE), exact;
    hits (query, doc, score) and the run details. Candidates are streamed from the store
    (candidate_chunks) and positioned in trec_eval's tie order (docid descending as a
    string); the search keeps the lower position among tied scores, so an exact tie at the
    k-th place keeps the papers trec_eval ranks first. `chunk_rows`: sentence rows per
    candidate chunk (memory: chunk_rows x dim x 4 bytes, plus the pair scores)."""
    from pipeline.encoding.store import stored_ids
    from pipeline.retrieval.dense import maxsim_device, maxsim_stream

    device = maxsim_device(backend)
    query_ids = np.asarray(query_ids, dtype=np.int64)
    doc_ids = (pl.DataFrame({"doc": np.asarray(doc_ids, dtype=np.int64)})
               .sort(pl.col("doc").cast(pl.String), descending=True)["doc"].to_numpy())
    missing = np.setdiff1d(doc_ids, stored_ids(store))
    if len(missing):  # before any work, as load_sentence_vectors says for the queries
        raise InputError(f"{len(missing)} papers (e.g. {missing[0]}) have no vector in {store}: "
                         "run the embed stage for this pool first")
    queries, offsets = load_sentence_vectors(store, query_ids)
    counted = {"candidate_sentences": 0}

    def counting(chunks):
        for chunk in chunks:
            counted["candidate_sentences"] += len(chunk[0])
            yield chunk

    chunk_rows = chunk_rows or (1 << 18 if device.startswith("cuda") else 1 << 14)
    scores, positions = maxsim_stream(queries, offsets, counting(candidate_chunks(
        store, doc_ids, chunk_rows)), k, similarity, device)  # type: ignore[arg-type]
    valid = positions >= 0
    hits = pl.DataFrame({
        "query": np.repeat(query_ids, positions.shape[1])[valid.ravel()],
        "doc": doc_ids[positions[valid]],
        "score": scores[valid].astype(np.float64),
    })
    return hits, {"backend": f"torch-{device}", "similarity": similarity,
                  "score": "max over (query sentence, candidate sentence) pairs",
                  "query_sentences": len(queries), **counted}
