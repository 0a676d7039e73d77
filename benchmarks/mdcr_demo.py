"""MDCR-style benchmark on the demo corpus: `make mdcr`, then `make eval` for BM25 and MiniLM on
the benchmark corpus, `make report`; records Tables 3 and 4, the checks of issue 9 (random
negatives the easiest type for both models), the model-pair Jaccard table and stage times, and
the official evaluator's parity (issue 21): each model's Table 3 averages against the official
script's computation on `make export-mdcr` and `make mdcr-scores` files (its FIELDS cut to the
demo's fields: the official script stops on a benchmark with fewer than 19).

Writes benchmarks/results/mdcr_demo.md and mdcr_demo.json.
Usage: .venv/bin/python -m benchmarks.mdcr_demo   (after `make demo`: it needs the demo's
field-level pools; make rebuilds whatever is missing or stale)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.demo import OUT as RESULTS
from benchmarks.demo import ROOT, machine
from pipeline.mdcr.official import evaluate_files
from tests.mdcr.test_mdcr_official import official_script

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
        copied[model] = sum(int(n) for n in re.findall(r"\bembedded=\d+ reused=(\d+)", err))
    jaccard, *_ = make("mdcr-jaccard", "MODELS=bm25,minilm,random")
    report, *_ = make("report", "CORPUS=demo-mdcr")
    parity = official_parity(report)
    results = pl.read_parquet(ROOT / "runs" / "results.parquet").filter(
        pl.col("corpus") == "demo-mdcr", pl.col("metric") == "map",
        ~pl.col("negatives").is_in(["all", "official"]))
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
               "map_by_type": {f"{m}/{t}": round(v, 2) for m, t, v in by_type.iter_rows()},
               "official_parity": parity}
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
        f"{copied.get('minilm', 0)} of the {counts['papers']} papers' vectors reused from the "
        "demo's store (papers of its pools), the rest encoded.\n\n"
        f"{tables}\n\n## The official evaluator's numbers\n\n"
        "Each model's scores file (`make mdcr-scores`) on the export (`make export-mdcr`), "
        "through the official evaluate.py's computation (its FIELDS cut to the demo's "
        "fields), through `mdcr-evaluate`, and Table 3's averages; beside them the numbers "
        "over every list, the extra `minilm` list included (not the official evaluator's)."
        "\n\n| model | official script MAP / NDCG / R@5 | mdcr-evaluate | Table 3 | "
        "every list (Table 3 over all lists) | identical |\n|---|---|---|---|---|---|\n"
        + "".join(f"| {m} | {' / '.join(map(str, p['official_script'].values()))} | "
                  f"{' / '.join(map(str, p['mdcr_evaluate'].values()))} | "
                  f"{' / '.join(p['table3'])} | {' / '.join(p['every_list'])} | "
                  f"{p['identical']} |\n" for m, p in parity.items())
        + "\n## Choosing the model-based types (`make mdcr-jaccard`)\n\n"
        f"{jaccard.strip()}\n")
    print((RESULTS / "mdcr_demo.md").read_text())


def _averages(report: str, caption: str, model: str) -> list[str]:
    """A model's three averages (MAP, NDCG, R@5) in the report's table under `caption`."""
    section = report[report.index(caption):].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {model} |"))
    return [cell.strip().strip("*") for cell in row.strip("|").split("|")[-3:]]


def official_parity(report: str) -> dict:
    """Per model: the official script's averages on the exported files, mdcr-evaluate's,
    Table 3's and the every-list table's, and whether the first three are identical."""
    parity = {}
    with tempfile.TemporaryDirectory() as tmp:
        make("export-mdcr", "CORPUS=demo-mdcr", f"OUT={tmp}/export")
        benchmark = json.loads(Path(tmp, "export", "mdcr_test.json").read_text())
        for model in MODELS:
            scores_path = Path(tmp, f"{model}.json")
            make("mdcr-scores", "CORPUS=demo-mdcr", f"MODEL={model}", f"OUT={scores_path}")
            _, script = official_script(benchmark, json.loads(scores_path.read_text()),
                                        sorted(benchmark))
            _, ours = evaluate_files(Path(tmp, "export", "mdcr_test.json"), scores_path)
            table3 = _averages(report, "(MDCR Table 3)", model)
            every = _averages(report, "NOT the official evaluator's numbers", model)
            script = {m: float(v) for m, v in script.items()}
            parity[model] = {"official_script": script, "mdcr_evaluate": ours,
                             "table3": table3, "every_list": every,
                             "identical": script == ours and table3 == [
                                 f"{v:.2f}" for v in script.values()]}
    return parity


if __name__ == "__main__":
    main()
