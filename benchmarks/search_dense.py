"""Exact dense search, every backend side by side in one run (issue 7).

The paper's largest shape is 3,800 query papers x 2M candidates x 768 dims, top 500 (SciNCL on
a 2M pool). On a GPU that shape runs as is; on this 2-core CPU a scaled one (default 3,800 x
100k). Random unit vectors (cosine): the cost of a flat search does not depend on the values.
Each backend runs in its own process (pipeline.retrieval.dense.exact_search, the search stage's
call):
the time of the search (host-to-device transfer included: vectors start in host memory, as
the stage loads them), the best of `--repeats` after a warm-up, and the process's peak RSS
beside the size of the candidate matrix. Lists are compared with Faiss CPU's (the share of
identical positions; differences are near-ties).
Writes benchmarks/results/search_dense.json (one entry per device and shape) and .md.

Usage: .venv/bin/python benchmarks/search_dense.py [--queries 3800 --docs 100000 --dim 768]
       [--k 500] [--dtype float32|float16] [--backends faiss-cpu,torch-cpu]
       [--faiss-queries 256]   (on a GPU node: Faiss CPU on the first 256 queries only)
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"


def vectors(n: int, dim: int, seed: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=dtype)
    for lo in range(0, n, 1 << 16):  # in blocks: no float64 copy of the whole matrix
        block = rng.standard_normal((min(1 << 16, n - lo), dim), dtype=np.float32)
        out[lo : lo + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def worker(args: argparse.Namespace) -> None:
    """One backend in this process: time it, save its positions, print a JSON line."""
    from pipeline.retrieval.dense.exact import exact_search

    n_queries = args.faiss_queries if args.worker == "faiss-cpu" and args.faiss_queries \
        else args.queries
    queries = vectors(n_queries, args.dim, 1, "float32")  # the first n of the same queries
    docs = vectors(args.docs, args.dim, 2, args.dtype)
    exact_search(queries[:64], docs[: 1 << 14], args.k, "cosine", args.worker)  # warm-up
    seconds = []
    for _ in range(args.repeats):
        if args.worker.endswith("cuda") or args.worker == "faiss-gpu":
            import torch

            torch.cuda.synchronize()
        start = time.perf_counter()
        scores, positions, _ = exact_search(queries, docs, args.k, "cosine", args.worker)
        seconds.append(time.perf_counter() - start)  # results are on the host: synchronized
    np.save(args.save, positions)
    print(json.dumps({"queries": n_queries, "seconds": [round(s, 3) for s in seconds],
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                           / 2**20, 2)}))


def available_backends() -> list[str]:
    import torch

    from pipeline.retrieval.dense.exact import faiss_gpu_works

    found = ["faiss-cpu", "torch-cpu"]
    if torch.cuda.is_available():
        found += ["torch-cuda"] + (["faiss-gpu"] if faiss_gpu_works() else [])
    return found


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=3800)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k", type=int, default=500)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--backends", default="")
    parser.add_argument("--faiss-queries", type=int, default=0,
                        help="Faiss CPU, the reference, searches only the first N queries "
                        "(a GPU node's 2M shape takes Faiss CPU minutes); lists are "
                        "compared on those"),
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--save", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    backends = args.backends.split(",") if args.backends else available_backends()
    rows, lists = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            save = Path(tmp) / f"{backend}.npy"
            done = subprocess.run([sys.executable, __file__, "--worker", backend, "--save",
                                   str(save), *sys.argv[1:]], capture_output=True, text=True,
                                  check=True)
            rows[backend] = json.loads(done.stdout.strip().splitlines()[-1])
            lists[backend] = np.load(save)
            print(backend, rows[backend], flush=True)
    reference = lists.get("faiss-cpu", next(iter(lists.values())))
    for backend, row in rows.items():
        best, shared = min(row["seconds"]), min(len(lists[backend]), len(reference))
        row.update(best_seconds=round(best, 3), queries_per_s=round(row["queries"] / best, 1),
                   same_positions_as_faiss_cpu=round(float(
                       (lists[backend][:shared] == reference[:shared]).mean()), 5))
    shape = f"{args.queries}x{args.docs}x{args.dim} top{args.k} {args.dtype}"
    entry = {"date": time.strftime("%Y-%m-%d"), "device": device_name(),
             "machine": f"{platform.machine()}, {sys.platform}",
             "candidate_matrix_gb": round(args.docs * args.dim
                                          * np.dtype(args.dtype).itemsize / 2**30, 2),
             "backends": rows}
    path = OUT / "search_dense.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[f"{entry['device']} | {shape}"] = entry
    path.write_text(json.dumps(results, indent=2) + "\n")
    (OUT / "search_dense.md").write_text(report(results))
    print(report(results))


def report(results: dict) -> str:
    lines = ["# Exact dense search: every backend side by side", "",
             "Random unit vectors, cosine, each backend in its own process "
             "(`pipeline.retrieval.dense.exact_search`, host-to-device transfer included); "
             "best of the "
             "repeats after a warm-up. Target (issue 7): 3,800 x 2M x 768, top 500, under 1 s on "
             "an H100. `same positions`: share of list positions equal to Faiss CPU's, on the "
             "queries it searched "
             "(differences are near-ties).", ""]
    for key, entry in results.items():
        lines += [f"## {key} ({entry['date']})", "",
                  f"Machine: {entry['machine']}; candidate matrix "
                  f"{entry['candidate_matrix_gb']} GB.", "",
                  "| backend | queries | seconds | queries/s | peak RSS (GB) | same positions |",
                  "|---|---|---|---|---|---|"]
        for backend, row in entry["backends"].items():
            queries = row.get("queries", key.split("x")[0].split("| ")[-1])
            lines.append(f"| {backend} | {queries} | {row['best_seconds']} | "
                         f"{row['queries_per_s']:,} | "
                         f"{row['peak_rss_gb']} | {row['same_positions_as_faiss_cpu']} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
