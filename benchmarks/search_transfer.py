"""The GPU search's host side: torch-cuda before and after pinned, overlapped transfers.

The paper's largest shape (3,800 queries x 2M candidates x 768 dims, top 500, cosine) in one
process, the same vectors for both: `before` is `torch_search` as it was at --before (read with
`git show`; a pageable copy per 2^18-row chunk, on the compute stream), `after` is this
checkout's (`device_chunks`: two pinned buffers, a side stream, the next chunk copied while this
one is searched), at chunks of 2^16, 2^17 and 2^18 rows, and both from a float16 store. Each is
timed 3 times after a small warm-up (the first of `after` includes allocating the pinned
buffers); lists are compared with `before`'s and, on the first 256 queries, with Faiss CPU's.
Needs a CUDA GPU. Writes benchmarks/results/search_transfer.{json,md}.
Usage: .venv/bin/python benchmarks/search_transfer.py [--before c24d06d]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))
SHAPE = (3800, 2_000_000, 768, 500)


def old_module(rev: str, folder: Path):
    """pipeline/retrieval/dense/exact.py as it was at `rev`, imported under another name."""
    path = folder / "exact_before.py"
    path.write_text(subprocess.run(["git", "show", f"{rev}:pipeline/retrieval/dense/exact.py"],
                                   cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    spec = importlib.util.spec_from_file_location("exact_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(rev: str) -> dict:
    import torch

    from pipeline.retrieval.dense import exact

    n_queries, n_docs, dim, k = SHAPE
    generator = torch.Generator(device="cuda").manual_seed(0)

    def unit(n: int) -> np.ndarray:
        x = torch.randn((n, dim), generator=generator, device="cuda")
        return torch.nn.functional.normalize(x, dim=1).cpu().numpy()

    queries, docs = unit(n_queries), unit(n_docs)
    stores = {"float32": docs, "float16": docs.astype(np.float16)}
    with tempfile.TemporaryDirectory() as tmp:
        before = old_module(rev, Path(tmp))
        cases = [("before", before.torch_search, "float32", None),
                 ("after", exact.torch_search, "float32", 1 << 16),
                 ("after", exact.torch_search, "float32", 1 << 17),
                 ("after", exact.torch_search, "float32", 1 << 18),
                 ("before", before.torch_search, "float16", None),
                 ("after", exact.torch_search, "float16", 1 << 16)]
        runs, lists = [], {}
        for code, search, store, chunk in cases:
            data = stores[store]
            search(queries[:64], data[: 1 << 14], k, "cosine", device="cuda")
            seconds = []
            for _ in range(3):
                torch.cuda.synchronize()
                start = time.perf_counter()
                _, positions = search(queries, data, k, "cosine", device="cuda",
                                      **({"doc_chunk": chunk} if chunk else {}))
                seconds.append(round(time.perf_counter() - start, 3))
            label = f"{code}, {store} store, chunk {chunk or 1 << 18}"
            lists[label] = positions
            runs.append({"label": label, "seconds": seconds, "best": min(seconds)})
            print(json.dumps(runs[-1]), flush=True)
    reference = lists[runs[0]["label"]]
    _, faiss_positions = exact.faiss_search(queries[:256], docs, k, "cosine")
    for run in runs:
        run["same_positions_as_before_float32"] = float((lists[run["label"]] == reference).mean())
        run["same_positions_as_faiss_cpu_256"] = float(
            (lists[run["label"]][:256] == faiss_positions).mean())
    return {"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(),
            "shape": f"{n_queries}x{n_docs}x{dim} top{k} cosine", "before": rev, "runs": runs}


def report(entry: dict) -> str:
    lines = ["# GPU exact search: pinned, overlapped transfers against a pageable copy per chunk",
             "", f"{entry['device']}, {entry['shape']}, {entry['date']}; `before` is "
             f"`torch_search` at {entry['before']}. Seconds of 3 runs after a warm-up (host "
             "vectors to host lists); `same positions`: share of list positions equal to "
             "`before`'s (float32) and to Faiss CPU's on the first 256 queries (differences "
             "are near-ties, and float16 rounding).", "",
             "| code, store, chunk rows | seconds | best | same as before | same as Faiss CPU |",
             "|---|---|---|---|---|"]
    for run in entry["runs"]:
        lines.append(f"| {run['label']} | {', '.join(map(str, run['seconds']))} | "
                     f"{run['best']} | {run['same_positions_as_before_float32']:.5f} | "
                     f"{run['same_positions_as_faiss_cpu_256']:.5f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="c24d06d", help="the commit to compare against")
    entry = measure(parser.parse_args().before)
    (OUT / "search_transfer.json").write_text(json.dumps(entry, indent=2) + "\n")
    (OUT / "search_transfer.md").write_text(report(entry))
    print(report(entry))


if __name__ == "__main__":
    main()
