"""Exact dense search (SPEC.md §7): Faiss flat search, on the GPU when a working GPU build is
present, else torch matmul + top-k on the GPU, else Faiss on the CPU.

The PyPI `faiss-gpu-cu12` wheel has no kernels for compute capability 9.0 (H100/H200); a tiny
probe search is compared against the CPU result before a GPU index is trusted, so a broken
build falls back instead of returning wrong neighbours.
"""

from __future__ import annotations

import sys
from functools import cache

import faiss
import numpy as np

from pipeline.errors import InputError
from pipeline.models import Similarity

GPU_MAX_K = 2048  # Faiss GPU top-k limit


def prepare(vectors: np.ndarray, similarity: Similarity) -> np.ndarray:
    """float32, C-contiguous; unit length for cosine similarity."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if similarity == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


def _faiss_index(dim: int, similarity: Similarity) -> faiss.Index:
    return faiss.IndexFlatL2(dim) if similarity == "l2" else faiss.IndexFlatIP(dim)


def faiss_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 gpu: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(scores, positions) of the top-k docs per query; higher score = more similar
    (L2 scores are negated squared distances). Missing hits have position -1."""
    index = _faiss_index(docs.shape[1], similarity)
    if gpu:
        index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    index.add(docs)
    scores, positions = index.search(queries, min(k, len(docs)))
    return (-scores if similarity == "l2" else scores), positions


def torch_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 device: str = "cuda", doc_chunk: int = 1 << 18
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The same contract as faiss_search, with torch matmul + topk (GPU fallback)."""
    import torch

    k = min(k, len(docs))
    q = torch.from_numpy(queries).to(device)
    q_norm = (q * q).sum(1, keepdim=True)
    best_s = torch.full((len(q), 0), float("-inf"), device=device)
    best_i = torch.zeros((len(q), 0), dtype=torch.long, device=device)
    for lo in range(0, len(docs), doc_chunk):
        x = torch.from_numpy(docs[lo : lo + doc_chunk]).to(device)
        scores = q @ x.T
        if similarity == "l2":
            scores = 2 * scores - q_norm - (x * x).sum(1)[None, :]
        s, i = torch.topk(scores, min(k, scores.shape[1]), dim=1)
        best_s, order = torch.topk(torch.cat([best_s, s], 1), min(k, best_s.shape[1] + s.shape[1]),
                                   dim=1)
        best_i = torch.gather(torch.cat([best_i, i + lo], 1), 1, order)
    return best_s.cpu().numpy(), best_i.cpu().numpy()


@cache
def faiss_gpu_works() -> bool:
    """True when Faiss has GPU support and a probe search on GPU 0 matches the CPU."""
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() < 1:
        return False
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((1000, 32)).astype(np.float32)
    queries = rng.standard_normal((8, 32)).astype(np.float32)
    try:
        _, gpu_pos = faiss_search(queries, docs, 10, "ip", gpu=True)
    except RuntimeError as exc:  # e.g. "no kernel image is available for execution"
        print(f"[dense] Faiss GPU unusable here ({str(exc).splitlines()[0]})", file=sys.stderr)
        return False
    _, cpu_pos = faiss_search(queries, docs, 10, "ip")
    return bool((gpu_pos == cpu_pos).all())


def check_backend(backend: str) -> None:
    """A forced GPU backend that cannot run is an error, never a silent fallback."""
    if backend not in ("faiss-gpu", "torch-cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise InputError(f"--backend {backend}: no CUDA GPU is visible here; use --backend "
                         "faiss-cpu (or auto) or run on a GPU node")
    if backend == "faiss-gpu" and not faiss_gpu_works():
        raise InputError("--backend faiss-gpu: this Faiss build has no working GPU support "
                         "here; use --backend torch-cuda (or auto)")


def exact_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 backend: str = "auto") -> tuple[np.ndarray, np.ndarray, str]:
    """Exact top-k with the best available backend; returns (scores, positions, backend).

    backend: auto | faiss-cpu | faiss-gpu | torch-cuda | torch-cpu.
    """
    queries, docs = prepare(queries, similarity), prepare(docs, similarity)
    if backend == "auto":
        backend = "faiss-cpu"
        try:
            import torch

            if torch.cuda.is_available():
                backend = "faiss-gpu" if faiss_gpu_works() and k <= GPU_MAX_K else "torch-cuda"
        except ImportError:
            pass
    check_backend(backend)
    if backend.startswith("torch"):
        scores, positions = torch_search(queries, docs, k, similarity,
                                         device=backend.split("-")[1])
    else:
        scores, positions = faiss_search(queries, docs, k, similarity,
                                         gpu=backend == "faiss-gpu")
    return scores, positions, backend
