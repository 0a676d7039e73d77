"""Calibration of the demo corpus against the paper's field/dataset ratio (issue 10).

In MDCR, field-level pools are about as hard as dataset-level ones (BM25 MAP 32.1 on 100k field
pools; 40.4 on 200k dataset pools), and positives per query average 29. This builds, on the demo
corpus, dataset-level pools of DEMO_SIZES and field-level pools of DEMO_FIELD_SIZE for
DEMO_FIELDS, runs the models through `make eval`, and records per pool: level, size, queries,
positives per query, MAP x100 per model; then the ratio dataset MAP / field MAP at the same size.

Targets: field-level MAP within a factor of 2 of dataset-level MAP at the same size (BM25 and
MiniLM), dataset-level MAP falling with pool size, 20-35 positives per query.

Writes benchmarks/results/calibration.json (one entry per --label, kept across runs) and
calibration.md. Usage:
  .venv/bin/python benchmarks/calibrate_demo.py --label after --data /tmp/calib [--models bm25]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
TARGET_RATIO = 2.0


def make(data: Path, *args: str) -> None:
    subprocess.run(["make", "--no-print-directory", f"DATA={data}", "CORPUS=demo", *args],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def measure(data: Path, models: list[str], sizes: str, fields: str, field_size: str,
            queries: int) -> dict:
    """Build the pools, evaluate every model, and gather MAP and positives per pool."""
    make(data, "pool", f"SIZE={sizes}", f"QUERIES={queries}")
    make(data, "pool", f"FIELD={fields}", f"SIZE={field_size}", f"QUERIES={queries}")
    for model in models:
        make(data, "eval", f"MODEL={model}")
    results = pl.read_parquet(data / "runs" / "results.parquet").filter(
        pl.col("corpus") == "demo", pl.col("metric") == "map", pl.col("split") == "test")
    rows = []
    for pool in sorted(results["pool"].unique()):
        info = json.loads((data / "corpora" / "demo" / "pools" / pool / "manifest.json")
                          .read_text())
        counts = info["counts"]
        per_model = (results.filter(pl.col("pool") == pool)  # one row per query
                     .group_by("model").agg(pl.col("value").mean()))
        maps = {r["model"]: round(100 * r["value"], 1) for r in per_model.iter_rows(named=True)}
        rows.append({"pool": pool, "level": info["level"],
                     "field": info["parameters"]["field"], "size": counts["candidates"],
                     "queries": counts["queries"],
                     "positives_mean": counts["mean_positives_per_query"],
                     "positives_median": counts["median_positives_per_query"], "map": maps})
    return {"rows": rows}


def ratios(rows: list[dict], models: list[str]) -> dict:
    """Dataset-level MAP / field-level MAP at the same pool size, per model: for each field,
    and for the macro average over the fields (the paper's 32.1 is such an average)."""
    dataset = {r["size"]: r["map"] for r in rows if r["level"] == "dataset"}
    fields = [r for r in rows if r["level"] == "field" and r["size"] in dataset]
    out: dict = {}
    for r in fields:
        out[r["field"]] = {m: round(dataset[r["size"]][m] / max(r["map"][m], 1e-9), 2)
                           for m in models if m in r["map"]}
    if fields:
        size = fields[0]["size"]
        out["macro average over fields"] = {
            m: round(dataset[size][m] / max(sum(r["map"][m] for r in fields) / len(fields),
                                            1e-9), 2) for m in models}
    return out


def report(entries: dict) -> str:
    lines = ["# Demo corpus calibration (issue 10)", "",
             "Paper (MDCR §3): field-level BM25 MAP 32.1 on 100k pools, dataset-level 40.4 at "
             "200k; 29 positives per query. Targets here: dataset MAP / field MAP at the same "
             f"pool size at most {TARGET_RATIO} for BM25 and MiniLM, dataset MAP falling with "
             "size, 20-35 positives per query.", ""]
    for label, entry in entries.items():
        models = sorted({m for r in entry["rows"] for m in r["map"]})
        lines += [f"## {label} ({entry['date']}, generator code {entry['code']})", "",
                  *([entry["note"], ""] if entry.get("note") else []),
                  "| pool | level | candidates | queries | positives/query (mean, median) | "
                  + " | ".join(f"{m} MAP" for m in models) + " |",
                  "|---|---|---|---|---|" + "---|" * len(models)]
        for r in sorted(entry["rows"], key=lambda r: (r["level"], r["size"], r["pool"])):
            lines.append(f"| {r['pool']} | {r['level']} | {r['size']:,} | {r['queries']} | "
                         f"{r['positives_mean']}, {r['positives_median']} | "
                         + " | ".join(str(r["map"].get(m, "")) for m in models) + " |")
        lines += ["", "Dataset MAP / field MAP at the same size:", ""]
        for field, by_model in ratios(entry["rows"], models).items():
            lines.append(f"- {field}: " + ", ".join(f"{m} {v}" for m, v in by_model.items()))
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="e.g. before, after")
    parser.add_argument("--note", default="", help="what this generator changed")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite calibration.md from calibration.json")
    parser.add_argument("--data", type=Path, required=True, help="a scratch DATA folder")
    parser.add_argument("--models", default="bm25,minilm")
    parser.add_argument("--sizes", default="2k 5k 10k")
    parser.add_argument("--fields", default="medicine biology computer-science")
    parser.add_argument("--field-size", default="2k")
    parser.add_argument("--queries", type=int, default=50,
                        help="per pool; ~22 positives each must fit the smallest pool")
    args = parser.parse_args()
    path = OUT / "calibration.json"
    entries = json.loads(path.read_text()) if path.exists() else {}
    if args.report_only:
        (OUT / "calibration.md").write_text(report(entries))
        return
    models = args.models.split(",")
    entry = measure(args.data, models, args.sizes, args.fields, args.field_size, args.queries)
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "pipeline/ingest/synthetic.py",
                            "pipeline/data"], cwd=ROOT, text=True, capture_output=True).stdout
    entry |= {"date": time.strftime("%Y-%m-%d"), "code": code + ("+changes" if dirty else ""),
              "models": models, "queries_per_pool": args.queries}
    entries[args.label] = entry | {"note": args.note} if args.note else entry
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2) + "\n")
    (OUT / "calibration.md").write_text(report(entries))
    print(report({args.label: entry}))


if __name__ == "__main__":
    main()
