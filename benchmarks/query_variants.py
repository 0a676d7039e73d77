"""Query robustness on the demo corpus: `make eval QUERY_VARIANT=<v>` for BM25 and MiniLM and
every variant, then `make report`'s query-robustness table (MAP x100 and the change against
full queries, over the demo's dataset- and field-level pools).

Writes benchmarks/results/query_variants.md and query_variants.json.
Usage: .venv/bin/python -m benchmarks.query_variants   (after `make demo`)
"""

from __future__ import annotations

import json
import time

from benchmarks.demo import OUT as RESULTS
from benchmarks.demo import machine
from benchmarks.mdcr_demo import make
from pipeline.glossary import VARIANTS

MODELS = ("bm25", "minilm")


def main() -> None:
    seconds = {}
    for model in MODELS:
        for variant in VARIANTS:
            *_, seconds[f"{model}~{variant}"] = make("eval", f"MODEL={model}",
                                                     f"QUERY_VARIANT={variant}")
    report, *_ = make("report")
    table = report[report.index("## demo: query robustness"):].split("\n## ", 1)[0].strip()
    figures = {"machine": machine(), "date": time.strftime("%Y-%m-%d"),
               "seconds_make_eval": seconds, "table": table}
    (RESULTS / "query_variants.json").write_text(json.dumps(figures, indent=2) + "\n")
    (RESULTS / "query_variants.md").write_text(
        f"# Perturbed queries on the demo corpus, {figures['date']}\n\n"
        f"Machine: {figures['machine']}. Pools: the demo's (dataset-level 2k/5k/10k, 50 "
        "queries; field-level 1k, 25 queries per field); variants as in pipeline/pools/queries.py, "
        "seed 0.\n\n" + table + "\n\nSeconds per `make eval` (search + score, the encoder "
        "encoding the perturbed queries): "
        + ", ".join(f"{k} {v}" for k, v in seconds.items()) + ".\n")
    print((RESULTS / "query_variants.md").read_text())


if __name__ == "__main__":
    main()
