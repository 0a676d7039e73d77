"""The retriever registry: a model's `kind` names the retriever that indexes and searches it.

A retriever is a module holding `RETRIEVER`, an object with the methods of `Retriever`
(pipeline/retrieval/base.py). A new kind is that module plus one line below; its modules
are imported only when a model of that kind is used, so a CLI call that needs none of them
does not pay for their imports (torch, faiss, the JVM).
"""

from __future__ import annotations

from importlib import import_module

from pipeline.core.errors import InputError

RETRIEVERS: dict[str, str] = {
    "bm25": "pipeline.retrieval.bm25.retriever",
    "dense": "pipeline.retrieval.dense.retriever",
    "multi-vector": "pipeline.retrieval.dense.retriever:MULTI_VECTOR",
    "object": "pipeline.retrieval.dense.retriever",  # an encoder given as an object
    "api": "pipeline.retrieval.dense.retriever",  # a served model (MODEL=api:<model>)
    "st": "pipeline.retrieval.dense.retriever",  # MODEL=st:<id>, pipeline/encoding/stmodels.py
    "sparse": "pipeline.retrieval.sparse.retriever",  # learned sparse: an inverted index
    "late-interaction": "pipeline.retrieval.late",  # ColBERT: MaxSim, exact or a rerank
    "vectors": "pipeline.retrieval.dense.retriever:IMPORTED",  # make import-vectors
    "fusion": "pipeline.retrieval.fusion",
    "rerank": "pipeline.retrieval.rerank",  # a first stage reranked (make rerank)
    "reranker": "pipeline.retrieval.rerank:ALONE",  # a cross-encoder: refused alone
    "decoder-reranker": "pipeline.retrieval.rerank:ALONE",  # likewise
    "random": "pipeline.retrieval.random",
}


def retriever(kind: str):
    """The registered retriever of a model kind (imported now), or a one-line InputError."""
    try:
        target = RETRIEVERS[kind]
    except KeyError:
        raise InputError(f"no retriever is registered for model kind {kind!r}: add its module "
                         "to pipeline/retrieval/registry.py (RETRIEVERS)") from None
    module, _, name = target.partition(":")
    return getattr(import_module(module), name or "RETRIEVER")
