"""The report's HTML page at the paper's whole grid: its size and its load time in headless
chromium (issue 33).

Synthetic results of the paper's grid size: 19 fields x 4 field-level pool sizes x 3 repeats
(200 queries each) and dataset-level pools of 200k, 500k, 1M, 2M x 3 repeats (3,800 queries
each), 5 models, 3 metrics (MAP, NDCG, R@30), one row per run, query and metric in
results.parquet (about 1.4M rows), with a manifest for every pool and run (parameters,
sha256 of the files, code version: what the page's provenance shows). Timed: building the
report (the significance tests over every pool), saving it (the tables, the plots, the page),
and in headless chromium (Debian's, through selenium) the page's load: the navigation's
DOMContentLoaded and load events and the first contentful paint, over fresh loads (median),
then a sort and a filter of the largest table. Writes benchmarks/results/report_html.json and
.md.

Usage: .venv/bin/python benchmarks/report_html.py [--loads 5] [--work DIR]
       .venv/bin/python benchmarks/report_html.py --screenshot PAGE.html OUT.png
         (a screenshot of a page's top, as benchmarks/results/report_html.png is of make
         demo's: `make demo`, then runs/reports/demo.html)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.fields import MAG_FIELDS, field_slug  # noqa: E402
from pipeline.layout import (  # noqa: E402
    MANIFEST,
    REPORT_PAGE_SUFFIX,
    RESULTS_FILE,
    RESULTS_MANIFEST,
    pool_dir,
    pool_name,
    report_file,
    reports_dir,
    run_paths,
)

OUT = ROOT / "benchmarks" / "results"
CORPUS = "paper"
MODELS = {"bm25": 0.30, "minilm": 0.27, "scincl": 0.33, "specter": 0.29, "specter2": 0.34}
METRICS = ("map", "ndcg", "recall@30")
DATASET_SIZES, DATASET_QUERIES = (200_000, 500_000, 1_000_000, 2_000_000), 3800
FIELD_SIZES, FIELD_QUERIES = (20_000, 50_000, 100_000, 200_000), 200
REPEATS = (0, 1, 2)
WIDTH = 1400


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_pool(corpora: Path, name: str, level: str, field: str | None, size: int,
               repeat: int, queries: int) -> None:
    """A pool manifest of the shape the pool stage writes (no files: the report reads none)."""
    folder = pool_dir(corpora / CORPUS, name)
    folder.mkdir(parents=True, exist_ok=True)
    info = {"stage": "pool", "name": name, "level": level, "code_version": "0123456789",
            "parameters": {"size": size, "field": field, "repeat": repeat, "n_queries": queries,
                           "query_year": 2019, "max_year": 2019, "seed": 0,
                           "min_positives": 1, "split": "test"},
            "inputs": {"corpora/@/prefiltered.parquet": _sha("prefiltered")},
            "outputs": {f: {"bytes": 1000, "sha256": _sha(name + f)} for f in
                        ("candidates.parquet", "qrels.parquet", "queries.parquet")},
            "counts": {"candidates": size, "queries": queries}}
    (folder / MANIFEST).write_text(json.dumps(info, indent=1))


def write_run(runs: Path, pool: str, model: str) -> None:
    """A run's search manifest and evaluation, of the shapes search and eval write."""
    paths = run_paths(runs, CORPUS, pool, model)
    paths.manifest.parent.mkdir(parents=True, exist_ok=True)
    paths.manifest.write_text(json.dumps({
        "stage": "search", "code_version": "0123456789",
        "parameters": {"pool": pool, "model": model, "k": 500},
        "details": {"backend": "cuda", "dtype": "fp16", "query_variant": "full"},
        "outputs": {f"{model}.{s}": {"bytes": 1000, "sha256": _sha(pool + model + s)}
                    for s in ("trec", "parquet")}}, indent=1))
    paths.evaluation.write_text(json.dumps({
        "stage": "eval", "code_version": "0123456789",
        "parameters": {"pool": pool, "model": model, "metrics": list(METRICS),
                       "missing_queries": "scored-0"},
        "outputs": {f"{model}.metrics.parquet": {"bytes": 1000,
                                                 "sha256": _sha(pool + model)}}}, indent=1))


def grid(work: Path) -> int:
    """results.parquet of the paper's grid and the manifests of its pools and runs; its rows."""
    rng = np.random.default_rng(33)
    corpora, runs = work / "corpora", work / "runs"
    frames = []
    pools = [("dataset", "all", None, s, DATASET_QUERIES) for s in DATASET_SIZES]
    pools += [("field", field_slug(f), f, s, FIELD_QUERIES) for f in MAG_FIELDS
              for s in FIELD_SIZES]
    for level, scope, field, size, n in pools:
        queries = [str(100_000 + 7 * i) for i in range(n)]
        for repeat in REPEATS:
            name = pool_name(scope, size, repeat)
            write_pool(corpora, name, level, field, size, repeat, n)
            for model, base in MODELS.items():
                write_run(runs, name, model)
                shift = base - 0.02 * np.log10(size / 20_000)
                values = np.clip(shift + rng.normal(0, 0.15, (len(METRICS), n)), 0, 1)
                frames.append(pl.DataFrame({
                    "query": queries * len(METRICS),
                    "metric": [m for m in METRICS for _ in queries],
                    "value": values.ravel()}).with_columns(
                    corpus=pl.lit(CORPUS), pool=pl.lit(name), level=pl.lit(level),
                    scope=pl.lit(scope), field=pl.lit(field, pl.String),
                    size=pl.lit(size, pl.Int64), repeat=pl.lit(repeat, pl.Int64),
                    seed=pl.lit(0, pl.Int64), split=pl.lit("test"),
                    candidates=pl.lit(size, pl.Int64), model=pl.lit(model),
                    negatives=pl.lit("all")))
    results = pl.concat(frames).select(
        "corpus", "pool", "level", "scope", "field", "size", "repeat", "seed", "split",
        "candidates", "model", "query", "negatives", "metric", "value")
    results.write_parquet(runs / RESULTS_FILE)
    sha = hashlib.sha256((runs / RESULTS_FILE).read_bytes()).hexdigest()
    (runs / RESULTS_MANIFEST).write_text(json.dumps({
        "stage": "collect", "code_version": "0123456789",
        "outputs": {RESULTS_FILE: {"bytes": (runs / RESULTS_FILE).stat().st_size,
                                   "sha256": sha}}}))
    return results.height


def browser():
    """Headless Debian chromium through selenium, as the browser test drives it."""
    from tests.report.test_report_browser import browser_tools, headless_chromium

    tools = browser_tools()
    if tools is None:
        sys.exit("needs Debian's chromium and chromium-driver: "
                 "apt-get install chromium chromium-driver")
    return headless_chromium(*tools)


NAVIGATION = """
const n = performance.getEntriesByType('navigation')[0];
const paint = performance.getEntriesByType('paint')
  .filter((p) => p.name === 'first-contentful-paint')[0];
return [n.domContentLoadedEventEnd, n.loadEventEnd, paint ? paint.startTime : null,
        document.querySelectorAll('table.data tbody tr').length];
"""
# a click on the largest table's first numeric header, then a filter: milliseconds each
INTERACT = """
const tables = Array.from(document.querySelectorAll('table.data'));
const t = tables.reduce((a, b) => (b.tBodies[0].rows.length > a.tBodies[0].rows.length ? b : a));
const head = Array.from(t.tHead.rows[0].cells);
const th = head.find((h) => h.textContent.startsWith('mean')) || head[head.length - 1];
let start = performance.now();
th.click();
const sort = performance.now() - start;
const box = t.closest('.block').querySelector('input.filter');
box.value = 'specter2 map';
start = performance.now();
box.dispatchEvent(new Event('input'));
const filter = performance.now() - start;
return [t.dataset.name, t.tBodies[0].rows.length, sort, filter,
        Array.from(t.tBodies[0].rows).filter((r) => !r.hidden).length];
"""


def measure(page: Path, loads: int) -> dict:
    """Fresh loads of the page (median of `loads`), then a sort and a filter."""
    driver = browser()
    try:
        timings = []
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(page.as_uri())
            timings.append(driver.execute_script(NAVIGATION))
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        name, rows, sort, filtered, kept = driver.execute_script(INTERACT)
    finally:
        driver.quit()
    return {"dom_content_loaded_ms": statistics.median(t[0] for t in timings),
            "load_ms": statistics.median(t[1] for t in timings),
            "first_contentful_paint_ms": statistics.median(t[2] for t in timings
                                                           if t[2] is not None),
            "loads": [[round(v, 1) if v is not None else None for v in t[:3]]
                      for t in timings],
            "table_rows": timings[0][3], "console_errors": len(errors),
            "largest_table": name, "largest_table_rows": rows, "sort_ms": round(sort, 1),
            "filter_ms": round(filtered, 1), "filter_kept": kept}


def screenshot(page: Path, out: Path, height: int = 1800) -> None:
    """The top `height` pixels of the page, 1400 wide."""
    driver = browser()
    try:
        driver.set_window_size(WIDTH, height)
        driver.get(page.resolve().as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        if errors:
            sys.exit(f"the page logged errors: {errors}")
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--work", type=Path, help="keep the data and page here")
    parser.add_argument("--screenshot", nargs=2, type=Path, metavar=("PAGE", "OUT"))
    args = parser.parse_args()
    if args.screenshot:
        screenshot(*args.screenshot)
        return
    from pipeline.report.build import build_report

    work = args.work or Path(tempfile.mkdtemp(prefix="report-html-"))
    start = time.perf_counter()
    rows = grid(work)
    made = time.perf_counter() - start
    start = time.perf_counter()
    built = build_report(work / "runs", CORPUS, 0, work / "corpora")
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    built.save()
    save_s = time.perf_counter() - start
    page = report_file(reports_dir(work / "runs"), CORPUS, suffix=REPORT_PAGE_SUFFIX)
    start = time.perf_counter()
    built.page({p.name: b"" for s in built.sections for p in s.plots})
    render_s = time.perf_counter() - start  # the page alone, its plots already drawn
    data = page.read_bytes()
    png = sum(part.index(b'"') for part in data.split(b'src="data:image/png;base64,')[1:])
    figures = {
        "date": time.strftime("%Y-%m-%d"), "machine": machine(), "result_rows": rows,
        "pools": len(built.provenance.pools[1]), "runs": len(built.provenance.runs[1]),
        "tables": sum(len(s.tables) for s in built.sections),
        "plots": sum(len(s.plots) for s in built.sections),
        "grid_written_s": round(made, 1), "build_report_s": round(build_s, 1),
        "save_s": round(save_s, 1), "page_render_s": round(render_s, 2),
        "page_bytes": len(data), "page_gzip_bytes": len(gzip.compress(data, 9)),
        "plots_base64_bytes": png,
        **measure(page, args.loads)}
    if not args.work:
        shutil.rmtree(work)
    (OUT / "report_html.json").write_text(json.dumps(figures, indent=1) + "\n")
    (OUT / "report_html.md").write_text(markdown(figures))
    print(markdown(figures))


def markdown(f: dict) -> str:
    mb = 2**20
    return f"""# The report's HTML page at the paper's whole grid

{f['date']}, {f['machine']}. `python benchmarks/report_html.py`: synthetic results of the
paper's grid, 19 fields x 4 field-level pool sizes (20k, 50k, 100k, 200k; 200 queries) and
dataset-level pools of 200k, 500k, 1M, 2M (3,800 queries), 3 repeats each, 5 models, 3 metrics:
{f['result_rows']:,} rows of results.parquet, {f['pools']} pools and {f['runs']:,} runs (each
with its manifests, which the page's provenance lists).

| measurement | value |
|---|---|
| page size | {f['page_bytes'] / mb:.2f} MiB ({f['page_bytes']:,} bytes) |
| page size, gzip -9 | {f['page_gzip_bytes'] / mb:.2f} MiB |
| of which the plots (base64 PNG, {f['plots']}) | {f['plots_base64_bytes'] / mb:.2f} MiB |
| rows of all its tables (report, text and provenance tables) | {f['table_rows']:,} |
| load in headless chromium: DOMContentLoaded, median of {len(f['loads'])} \
| {f['dom_content_loaded_ms']:.0f} ms |
| load event | {f['load_ms']:.0f} ms |
| first contentful paint | {f['first_contentful_paint_ms']:.0f} ms |
| sort the largest table (`{f['largest_table']}`, {f['largest_table_rows']:,} rows) by a \
header click | {f['sort_ms']:.0f} ms |
| filter it by two words ({f['filter_kept']} rows kept) | {f['filter_ms']:.0f} ms |
| JavaScript console errors | {f['console_errors']} |
| building the report (tables, significance tests, bootstrap) | {f['build_report_s']:.1f} s |
| saving it (LaTeX, plots, page, Markdown) | {f['save_s']:.1f} s |
| rendering the page alone (plots drawn) | {f['page_render_s']:.2f} s |

Each load: [DOMContentLoaded, load, first contentful paint] ms: {f['loads']}.
"""


if __name__ == "__main__":
    main()
