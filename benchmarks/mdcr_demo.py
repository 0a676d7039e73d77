"""MDCR-style benchmark on the demo corpus: `make mdcr`, then `make eval` for BM25 and MiniLM on
the benchmark corpus, `make report`; records Tables 3 and 4, the checks of issue 9 (random
negatives the easiest type for both models), the model-pair Jaccard table and stage times.

Writes benchmarks/results/mdcr_demo.md and mdcr_demo.json.
Usage: .venv/bin/python -m benchmarks.mdcr_demo   (after `make demo`: it needs the demo's
field-level pools; make rebuilds whatever is missing or stale)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import polars as pl

from benchmarks.demo import OUT as RESULTS
from benchmarks.demo import ROOT, machine

MODELS = ("bm25", "minilm")


def make(*args: str) -> tuple[str, str, float]:
    """(stdout, stderr, seconds) of a silent make call (recipes not echoed)."""
    start = time.perf_counter()
    done = subprocess.run(["make", "--silent", "--no-print-directory", *args], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"make {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout, done.stderr, round(time.perf_counter() - start, 1)


def main() -> None:
    for folder in ("corpora", "indexes", "runs"):  # measured from scratch
        shutil.rmtree(ROOT / folder / "demo-mdcr", ignore_errors=True)
    seconds, copied = {}, {}
    *_, seconds["make mdcr"] = make("mdcr", "MDCR_MODELS=" + ",".join(MODELS))
    for model in MODELS:
        _, err, seconds[f"make eval CORPUS=demo-mdcr MODEL={model}"] = make(
            "eval", "CORPUS=demo-mdcr", f"MODEL={model}")
        copied[model] = sum(int(n) for n in re.findall(r"(\d+) vectors copied", err))
    jaccard, *_ = make("mdcr-jaccard", "MODELS=bm25,minilm,random")
    report, *_ = make("report", "CORPUS=demo-mdcr")
    results = pl.read_parquet(ROOT / "runs" / "results.parquet").filter(
        pl.col("corpus") == "demo-mdcr", pl.col("metric") == "map",
        pl.col("negatives") != "all")
    by_type = (results.group_by("model", "negatives", "field").agg(pl.col("value").mean())
               .group_by("model", "negatives").agg(pl.col("value").mean() * 100))
    easiest = {m: by_type.filter(pl.col("model") == m).sort("value")["negatives"][-1]
               for m in MODELS}
    hardest = {m: by_type.filter(pl.col("model") == m).sort("value")["negatives"][0]
               for m in MODELS}
    manifest = json.loads((ROOT / "corpora" / "demo-mdcr" / "manifest.json").read_text())
    figures = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "seconds": seconds,
               "benchmark": manifest["benchmark"]["counts"], "easiest_type": easiest,
               "hardest_type": hardest, "vectors_copied_from_demo_store": copied,
               "map_by_type": {f"{m}/{t}": round(v, 2) for m, t, v in by_type.iter_rows()}}
    (RESULTS / "mdcr_demo.json").write_text(json.dumps(figures, indent=2) + "\n")
    tables = report[report.index("## "):].split("## Significance", 1)[0].strip()
    counts = figures["benchmark"]
    (RESULTS / "mdcr_demo.md").write_text(
        f"# MDCR-style benchmark of the demo corpus, {figures['date']}\n\n"
        f"Machine: {figures['machine']}.\n\n"
        f"`make mdcr MDCR_MODELS={','.join(MODELS)}` built `demo-mdcr` from the demo's "
        f"field-level pools: {counts['fields']} fields, {counts['queries']} queries, "
        f"{counts['pairs']} query-candidate pairs, {counts['papers']} papers; candidates by "
        f"type {counts['by_type']}.\n\n"
        f"Easiest negative type (highest MAP with the positives): "
        f"{', '.join(f'{m}: {t}' for m, t in easiest.items())}; hardest: "
        f"{', '.join(f'{m}: {t}' for m, t in hardest.items())} (the paper's Table 4: random "
        "easiest, graph hardest).\n\n"
        "Seconds: " + ", ".join(f"{k} {v}" for k, v in seconds.items()) + ". MiniLM: "
        f"{copied.get('minilm', 0)} of the {counts['papers']} papers' vectors copied from the "
        "demo's store (papers of its pools), the rest encoded.\n\n"
        f"{tables}\n\n## Choosing the model-based types (`make mdcr-jaccard`)\n\n"
        f"{jaccard.strip()}\n")
    print((RESULTS / "mdcr_demo.md").read_text())


if __name__ == "__main__":
    main()
