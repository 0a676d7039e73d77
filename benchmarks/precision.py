"""The effect of PRECISION=bf16 against the fp32 default, on the demo corpus with the real
all-MiniLM-L6-v2 weights: `make eval MODEL=minilm` and `make eval MODEL=minilm PRECISION=bf16`
(the run `minilm+bf16`), then MAP x100 per pool for both, and how many queries' top 20 differ.

On a CPU, bf16 is torch's bf16 CPU kernels; on a GPU, its bf16 GPU kernels (run it there too:
the figures are written per device). Writes benchmarks/results/precision.{md,json}.
Usage: .venv/bin/python -m benchmarks.precision   (after `make demo`)
"""

from __future__ import annotations

import json
import time

import polars as pl

from benchmarks.demo import OUT as RESULTS
from benchmarks.demo import ROOT, machine
from benchmarks.mdcr_demo import make
from pipeline.layout import run_paths

MODEL, TOP = "minilm", 20


def top_lists(pool: str, model: str) -> pl.DataFrame:
    """query -> its top TOP documents, in rank order."""
    run = pl.read_parquet(run_paths(ROOT / "runs", "demo", pool, model).parquet)
    return (run.filter(pl.col("rank") <= TOP).sort("query", "rank")
            .group_by("query", maintain_order=True).agg(pl.col("doc")))


def main() -> None:
    import torch

    seconds = {}
    for precision in ("fp32", "bf16"):
        *_, seconds[precision] = make("eval", f"MODEL={MODEL}", f"PRECISION={precision}")
    bf16 = f"{MODEL}+bf16"
    results = pl.read_parquet(ROOT / "runs" / "results.parquet").filter(
        pl.col("corpus") == "demo", pl.col("model").is_in([MODEL, bf16]),
        pl.col("metric") == "map", pl.col("negatives") == "all")
    pools = sorted(results["pool"].unique().to_list())
    rows = []
    for pool in pools:
        means = {m: 100 * results.filter(pl.col("pool") == pool, pl.col("model") == m)[
            "value"].mean() for m in (MODEL, bf16)}
        lists = top_lists(pool, MODEL).join(top_lists(pool, bf16), on="query",
                                            suffix="_bf16")
        changed = int((lists["doc"] != lists["doc_bf16"]).sum())
        rows.append({"pool": pool, "map_fp32": round(means[MODEL], 2),
                     "map_bf16": round(means[bf16], 2),
                     "change": round(means[bf16] - means[MODEL], 2),
                     "queries": lists.height, "top20_changed": changed})
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    figures = {"machine": machine(), "device": device, "date": time.strftime("%Y-%m-%d"),
               "model": MODEL, "seconds_make_eval": seconds, "pools": rows}
    path = RESULTS / "precision.json"
    entries = json.loads(path.read_text()) if path.exists() else {}
    entries["gpu" if torch.cuda.is_available() else "cpu"] = figures
    path.write_text(json.dumps(entries, indent=2) + "\n")
    lines = [f"# PRECISION=bf16 against fp32: {MODEL} on the demo corpus", "",
             "Each pool's MAP x100 with the fp32 default and with PRECISION=bf16 (the run "
             f"`{bf16}`), and the queries whose top {TOP} differ. Written by "
             "benchmarks/precision.py.", ""]
    for key, entry in entries.items():
        lines += [f"## {key}: {entry['device']} ({entry['date']})", "",
                  f"Machine: {entry['machine']}. Seconds per `make eval`: "
                  + ", ".join(f"{k} {v}" for k, v in entry["seconds_make_eval"].items()) + ".",
                  "", "| pool | MAP fp32 | MAP bf16 | change | queries | top 20 changed |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['pool']} | {r['map_fp32']:.2f} | {r['map_bf16']:.2f} | "
                  f"{r['change']:+.2f} | {r['queries']} | {r['top20_changed']} |"
                  for r in entry["pools"]]
        lines.append("")
    (RESULTS / "precision.md").write_text("\n".join(lines))
    print((RESULTS / "precision.md").read_text())


if __name__ == "__main__":
    main()
