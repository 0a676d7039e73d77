"""How the synthetic generator scales: wall time and peak memory against corpus size.

Each size runs in a fresh process (peak RSS read from the kernel after it exits), then the
output is ingested to check it parses. Writes benchmarks/results/synthetic_scale.{json,md}.
Usage: .venv/bin/python benchmarks/synthetic_scale.py [sizes...]   (default: 100k 400k 1M)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
CHILD = """
import sys
from pathlib import Path
from pipeline.layout import parse_size
from pipeline.ingest.synthetic import SyntheticConfig, generate
generate(Path(sys.argv[1]), SyntheticConfig(n_papers=parse_size(sys.argv[2]), n_shards=8),
         workers=int(sys.argv[3]))
"""


def run_child(code: str, *args: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, check=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def main() -> None:
    sizes = sys.argv[1:] or ["100k", "400k", "1M"]
    workers = str(os.cpu_count() or 1)
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(dir=ROOT / "corpora") as tmp:
            seconds, peak = run_child(CHILD, tmp, size, workers)
            raw = Path(tmp)
            gz_mb = sum(p.stat().st_size for p in (raw / "metadata").iterdir()) / 2**20
            n = json.loads((raw / "manifest.json").read_text())["counts"]["papers"]
            rows.append({"papers": n, "seconds": round(seconds, 1),
                         "papers_per_s": round(n / seconds), "peak_rss_mib": round(peak),
                         "gzip_mib": round(gz_mb, 1), "workers": int(workers)})
            print(rows[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "synthetic_scale.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["| papers | seconds | papers/s | peak RSS (MiB) | gzip output (MiB) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['papers']:,} | {r['seconds']} | {r['papers_per_s']:,} | "
              f"{r['peak_rss_mib']} | {r['gzip_mib']} |" for r in rows]
    (OUT / "synthetic_scale.md").write_text(
        f"# Synthetic generator scaling ({time.strftime('%Y-%m-%d')})\n\n"
        f"{os.cpu_count()} cores, {workers} worker processes, 8 shards. Peak RSS is the "
        "largest process: a fixed part (Python, numpy, pyarrow, one 50k-paper block of text) "
        "plus the O(N) layout of small numeric arrays; the slope between sizes is the "
        "memory per paper.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
