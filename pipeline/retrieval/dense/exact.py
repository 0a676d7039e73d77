"""Exact dense search (docs/retrieval.md): Faiss flat search, on the GPU when a working GPU build is
present, else torch matmul + top-k on the GPU, else Faiss on the CPU.

The PyPI `faiss-gpu-cu12` wheel has no kernels for compute capability 9.0 (H100/H200); a tiny
probe search is compared against the CPU result before a GPU index is trusted, so a broken
build falls back instead of returning wrong neighbours. Multi-vector models (ASPIRE) are
searched by `maxsim_stream`: torch, on the GPU or the CPU, exact.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING

import faiss
import numpy as np

from pipeline.core.errors import OptionError
from pipeline.core.logs import progress
from pipeline.glossary import GPU_BACKENDS
from pipeline.models import Similarity

if TYPE_CHECKING:
    import torch

GPU_MAX_K = 2048  # Faiss GPU top-k limit
log = logging.getLogger(__name__)



def prepare(vectors: np.ndarray, similarity: Similarity) -> np.ndarray:
    """float32, C-contiguous; unit length for cosine similarity."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if similarity == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


def run_scores(scores: np.ndarray, similarity: Similarity) -> np.ndarray:
    """The scores a run holds, float64: L2 models' searches give negated squared distances,
    and the run holds the negated distance, -||q - d|| (as SciDocs and ASPIRE score), so that
    score fusion combines the numbers the authors rank by; the order is the same."""
    scores = np.asarray(scores, dtype=np.float64)
    if similarity == "l2":
        return -np.sqrt(np.maximum(-scores, 0.0))
    return scores


def _faiss_index(dim: int, similarity: Similarity) -> faiss.Index:
    return faiss.IndexFlatL2(dim) if similarity == "l2" else faiss.IndexFlatIP(dim)


def faiss_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 gpu: bool = False, doc_chunk: int = 1 << 17) -> tuple[np.ndarray, np.ndarray]:
    """(scores, positions) of the top-k docs per query; higher score = more similar
    (L2 scores are negated squared distances). Missing hits have position -1.

    On the CPU the docs are searched `doc_chunk` rows at a time (each made float32, unit
    length for cosine, as it goes) and the results merged in a Faiss ResultHeap: memory is the
    docs as given (float16 stays float16) plus one chunk, any k. Faiss GPU holds the whole
    float32 matrix on the device and takes k <= GPU_MAX_K."""
    queries = prepare(queries, similarity)
    k = min(k, len(docs))
    if gpu:
        index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0,
                                       _faiss_index(docs.shape[1], similarity))
        index.add(prepare(docs, similarity))
        scores, positions = index.search(queries, k)
        return (-scores if similarity == "l2" else scores), positions
    heap = faiss.ResultHeap(len(queries), k, keep_max=similarity != "l2")
    show = bool(k) and len(docs) > doc_chunk
    with progress(len(docs), "search", "candidates", show=show) as bar:
        for lo in range(0, len(docs), doc_chunk) if k else []:
            index = _faiss_index(docs.shape[1], similarity)
            index.add(prepare(docs[lo : lo + doc_chunk], similarity))
            scores, positions = index.search(queries, min(k, index.ntotal))
            heap.add_result(scores, np.where(positions >= 0, positions + lo, -1))
            bar.update(index.ntotal)
    heap.finalize()
    scores, positions = heap.D, heap.I
    return (-scores if similarity == "l2" else scores), positions


def device_chunks(docs: np.ndarray, doc_chunk: int, device: str
                  ) -> Iterator[tuple[int, torch.Tensor]]:
    """(first row, tensor on `device`) for each `doc_chunk` rows of `docs`, as stored, in order.

    On a CPU a chunk is a view. On a GPU the host side is the bottleneck (a pageable copy
    blocks the host and waits behind the last chunk's kernels), so each chunk is copied into
    one of two pinned buffers (torch's copy, parallel over the host's threads) and moved by a
    side stream: the next chunk travels while the kernels of this one run. The consumer's
    stream waits for each chunk's copy; a buffer is refilled only after its copy is done."""
    import torch

    if not device.startswith("cuda"):
        for lo in range(0, len(docs), doc_chunk):
            yield lo, torch.from_numpy(np.ascontiguousarray(docs[lo : lo + doc_chunk]))
        return
    rows = min(doc_chunk, len(docs))
    dtype = torch.from_numpy(docs[:1].copy()).dtype
    pinned = [torch.empty((rows, docs.shape[1]), dtype=dtype, pin_memory=True)
              for _ in range(2)]
    copied: list[torch.cuda.Event | None] = [None, None]
    side = torch.cuda.Stream(device)
    for step, lo in enumerate(range(0, len(docs), doc_chunk)):
        slot = step % 2
        if copied[slot] is not None:
            copied[slot].synchronize()  # the copy out of this buffer is done: refill it
        host = torch.from_numpy(np.ascontiguousarray(docs[lo : lo + doc_chunk]))
        buffer = pinned[slot][: len(host)]
        buffer.copy_(host)
        with torch.cuda.stream(side):
            chunk = buffer.to(device, non_blocking=True)
            copied[slot] = side.record_event()
        torch.cuda.current_stream(device).wait_event(copied[slot])
        chunk.record_stream(torch.cuda.current_stream(device))
        yield lo, chunk


def torch_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 device: str = "cuda", doc_chunk: int | None = None,
                 query_chunk: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The contract of faiss_search with torch: chunks of `doc_chunk` docs go to the device
    as stored (float16 moves half the bytes; `device_chunks`), become float32 there (unit
    length for cosine), and meet chunks of `query_chunk` queries in an fp32 matmul (TF32 off:
    exact scores); each block's top k is merged into the running top k. Memory: the queries,
    two doc chunks and one query_chunk x doc_chunk block of scores. Any k."""
    import torch

    cuda = device.startswith("cuda")
    doc_chunk = doc_chunk or (1 << 16 if cuda else 1 << 14)
    query_chunk = query_chunk or (1 << 12 if cuda else 1 << 10)
    k = min(k, len(docs))
    q = torch.from_numpy(prepare(queries, similarity)).to(device)
    q_norm = (q * q).sum(1, keepdim=True)
    best_s = torch.full((len(q), 0), float("-inf"), device=device)
    best_i = torch.zeros((len(q), 0), dtype=torch.long, device=device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    bar = progress(len(docs), "search", "candidates", show=bool(k) and len(docs) > doc_chunk)
    try:
        for lo, x in device_chunks(docs, doc_chunk, device) if k else []:
            x = x.to(device).float()
            if similarity == "cosine":
                x = torch.nn.functional.normalize(x, dim=1, eps=1e-12)
            x_norm = (x * x).sum(1)[None, :]
            chunk_s, chunk_i = [], []
            for q_lo in range(0, len(q), query_chunk):
                scores = q[q_lo : q_lo + query_chunk] @ x.T
                if similarity == "l2":
                    scores = 2 * scores - q_norm[q_lo : q_lo + query_chunk] - x_norm
                s, i = torch.topk(scores, min(k, scores.shape[1]), dim=1)
                chunk_s.append(s)
                chunk_i.append(i + lo)
            merged_s = torch.cat([best_s, torch.cat(chunk_s)], 1)
            best_s, order = torch.topk(merged_s, min(k, merged_s.shape[1]), dim=1)
            best_i = torch.gather(torch.cat([best_i, torch.cat(chunk_i)], 1), 1, order)
            bar.update(len(x))
    finally:
        bar.close()
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return best_s.cpu().numpy(), best_i.cpu().numpy()


def paper_chunks(offsets: np.ndarray, max_rows: int) -> list[tuple[int, int]]:
    """Consecutive paper ranges [lo, hi) of at most `max_rows` sentence rows each (one paper
    at least), for papers whose rows are offsets[i]:offsets[i + 1]."""
    chunks, lo, n = [], 0, len(offsets) - 1
    while lo < n:
        hi = max(int(np.searchsorted(offsets, offsets[lo] + max_rows, side="right")) - 1, lo + 1)
        chunks.append((lo, hi))
        lo = hi
    return chunks


# How a query paper's vectors combine their best matches (maxsim_stream's `reduce`): ASPIRE
# takes the best (query sentence, candidate sentence) pair, ColBERT sums each query token's best
REDUCES = {"max": "max over (query sentence, candidate sentence) pairs",
           "sum": "MaxSim: sum over the query's token vectors of the best dot product with any "
                  "of the candidate's"}


def maxsim_stream(queries: np.ndarray, query_offsets: np.ndarray,
                  chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], k: int,
                  similarity: Similarity, device: str = "cpu", query_rows: int | None = None,
                  total: int | None = None, reduce: str = "max") -> tuple[np.ndarray, np.ndarray]:
    """A candidate paper's score for a query paper, exact: each query vector's best similarity
    with any of the candidate's vectors, then the maximum of those (`reduce` "max": ASPIRE's
    best sentence pair) or their sum ("sum": ColBERT's MaxSim). Query paper i is
    queries[query_offsets[i]:query_offsets[i + 1]]. Candidates come in chunks
    (vector rows, their paper offsets, the papers' positions in ascending order), so the
    pool never has to fit in memory: a chunk goes to `device` once; for each query chunk of
    `query_rows` vectors a torch matmul gives every pair's similarity, a segment max
    (scatter_reduce 'amax') per candidate paper, then a segment max or sum per query paper,
    and the chunk's top k are merged into the running top k. Memory is bounded by
    query_rows x one chunk.

    Returns (scores, positions), (queries, min(k, candidates)), as faiss_search does; tied
    scores keep the lower position first, as np.argsort(-scores, kind="stable") would.
    `total`: the number of candidate papers, for progress (pipeline.core.logs).
    """
    import torch

    query_rows = query_rows or (1 << 12 if device.startswith("cuda") else 1 << 11)
    queries = prepare(queries, similarity)
    n_queries = len(query_offsets) - 1
    q = torch.from_numpy(queries).to(device)
    q_norm = (q * q).sum(1)
    q_paper = torch.repeat_interleave(torch.arange(n_queries),
                                      torch.from_numpy(np.diff(query_offsets))).to(device)
    q_chunks = paper_chunks(np.asarray(query_offsets), query_rows)
    best_s = torch.full((n_queries, 0), float("-inf"), device=device)
    best_p = torch.zeros((n_queries, 0), dtype=torch.long, device=device)
    bar = progress(total or 0, "search", "candidates", show=bool(total) and k > 0)
    for docs, doc_offsets, positions in chunks if k > 0 and q_chunks else []:
        x = torch.from_numpy(prepare(docs, similarity)).to(device)
        n_docs = len(doc_offsets) - 1
        x_paper = torch.repeat_interleave(torch.arange(n_docs),
                                          torch.from_numpy(np.diff(doc_offsets))).to(device)
        x_norm = (x * x).sum(1)
        chunk_s, chunk_i = [], []
        for q_lo, q_hi in q_chunks:
            a, b = int(query_offsets[q_lo]), int(query_offsets[q_hi])
            pairs = q[a:b] @ x.T
            if similarity == "l2":  # negated squared distance
                pairs = 2 * pairs - q_norm[a:b, None] - x_norm[None, :]
            per_vector = torch.full((b - a, n_docs), float("-inf"), device=device)
            per_vector.scatter_reduce_(1, x_paper[None, :].expand_as(pairs), pairs, "amax")
            rows = (q_paper[a:b] - q_lo)[:, None].expand_as(per_vector)
            if reduce == "sum":
                per_paper = torch.zeros((q_hi - q_lo, n_docs), device=device)
                per_paper.scatter_add_(0, rows, per_vector)
            else:
                per_paper = torch.full((q_hi - q_lo, n_docs), float("-inf"), device=device)
                per_paper.scatter_reduce_(0, rows, per_vector, "amax")
            s, i = torch.sort(per_paper, dim=1, descending=True, stable=True)
            chunk_s.append(s[:, :k])
            chunk_i.append(i[:, :k])
        chunk_p = torch.from_numpy(np.asarray(positions, dtype=np.int64)).to(device)
        scores = torch.cat([best_s, torch.cat(chunk_s)], 1)
        found = torch.cat([best_p, chunk_p[torch.cat(chunk_i)]], 1)
        # score descending, then position ascending: sort by position, then stably by score
        by_position = torch.argsort(found, dim=1)
        scores, found = scores.gather(1, by_position), found.gather(1, by_position)
        order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
        best_s, best_p = scores.gather(1, order), found.gather(1, order)
        bar.update(n_docs)
    bar.close()
    return best_s.cpu().numpy(), best_p.cpu().numpy()


def maxsim_device(backend: str) -> str:
    """The torch device of a multi-vector search: auto takes the GPU when one is visible;
    torch-cpu / torch-cuda are honoured (no GPU: an error); Faiss cannot take a maximum over
    sentence pairs, so a Faiss backend is an error, never a silent switch."""
    if backend.startswith("faiss"):
        raise OptionError("{BACKEND=}: multi-vector models are searched with torch; use "
                          "auto, torch-cpu or torch-cuda", {"BACKEND": backend})
    check_backend(backend)
    if backend == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return backend.split("-")[1]


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
        log.warning(f"[dense] Faiss GPU unusable here ({str(exc).splitlines()[0]})")
        return False
    _, cpu_pos = faiss_search(queries, docs, 10, "ip")
    return bool((gpu_pos == cpu_pos).all())


def check_backend(backend: str) -> None:
    """A forced GPU backend that cannot run is an error, never a silent fallback."""
    if backend not in GPU_BACKENDS:
        return
    import torch

    if not torch.cuda.is_available():
        raise OptionError("{BACKEND=}: no CUDA GPU is visible here; use faiss-cpu (or auto) "
                          "or run on a GPU node", {"BACKEND": backend})
    if backend == "faiss-gpu" and not faiss_gpu_works():
        raise OptionError("{BACKEND=}: this Faiss build has no working GPU support here; use "
                          "torch-cuda (or auto)", {"BACKEND": backend})


def exact_search(queries: np.ndarray, docs: np.ndarray, k: int, similarity: Similarity,
                 backend: str = "auto") -> tuple[np.ndarray, np.ndarray, str]:
    """Exact top-k with the best available backend; returns (scores, positions, backend).
    `docs` may be float16 (a float16 store): chunks are made float32 as they are searched.

    backend: auto (Faiss GPU if its probe passes and k <= GPU_MAX_K, else torch on the GPU,
    else Faiss CPU) | faiss-cpu | faiss-gpu | torch-cuda | torch-cpu. A forced backend that
    cannot run is an error.
    """
    if backend == "auto":
        backend = "faiss-cpu"
        try:
            import torch

            if torch.cuda.is_available():
                backend = "faiss-gpu" if faiss_gpu_works() and k <= GPU_MAX_K else "torch-cuda"
        except ImportError:
            pass
    check_backend(backend)
    if backend == "faiss-gpu" and k > GPU_MAX_K:
        raise OptionError("{BACKEND=}: {K=} is over Faiss GPU's limit of "
                          f"{GPU_MAX_K}; use torch-cuda (or auto)",
                          {"BACKEND": backend, "K": k})
    if backend.startswith("torch"):
        scores, positions = torch_search(queries, docs, k, similarity,
                                         device=backend.split("-")[1])
    else:
        scores, positions = faiss_search(queries, docs, k, similarity,
                                         gpu=backend == "faiss-gpu")
    return scores, positions, backend
