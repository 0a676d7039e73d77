"""`make report` gives the same bytes every time (issue 29): twice on the same results, with one
polars thread or many, and on a results table whose rows come in another order. Every file
under runs/reports/ (markdown, LaTeX, the plots' PNGs, the HTML page) and the returned markdown
are compared.

The results cover every kind of table: dataset- and field-level pools (with a query variant and
pools of the published sizes), an MDCR-style benchmark, a BEIR-layout collection and CSFCube's
facet pools."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.layout import RESULTS_FILE, reports_dir, run_paths
from pipeline.report.build import report
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ("demo", "bench", "scidocs", "cube")
COLUMNS = ["corpus", "pool", "level", "scope", "field", "size", "repeat", "seed", "split",
           "candidates", "model", "query", "negatives", "metric", "value"]


def _rows(rng: np.random.Generator, corpus: str, pool: str, level: str, scope: str,
          field: str | None, size: int, repeat: int, models: dict[str, float],
          queries: list[str], metrics: tuple[str, ...], negatives: str = "all") -> list[dict]:
    """One row per model, query and metric: the model's base value plus noise, in [0, 1]."""
    return [{"corpus": corpus, "pool": pool, "level": level, "scope": scope, "field": field,
             "size": size, "repeat": repeat, "seed": 0, "split": "test", "candidates": size,
             "model": model, "query": query, "negatives": negatives, "metric": metric,
             "value": float(np.clip(base + rng.normal(0, 0.15), 0, 1))}
            for model, base in models.items() for query in queries for metric in metrics]


def results_frame() -> pl.DataFrame:
    """Per-query results of four corpora, one of each kind the report tables."""
    rng = np.random.default_rng(29)
    rows: list[dict] = []
    large = ("map", "ndcg", "recall@30")
    models = {"bm25": 0.40, "minilm": 0.36, "minilm~title": 0.30, "random": 0.02}
    queries = [str(1000 + 37 * i) for i in range(30)]
    for size, name in ((2000, "2k"), (200_000, "200k")):
        for repeat in (0, 1):
            rows += _rows(rng, "demo", f"all-{name}-r{repeat}", "dataset", "all", None, size,
                          repeat, models, queries, large)
    for field in ("Medicine", "Biology", "Computer Science"):
        slug = field.lower().replace(" ", "-")
        rows += _rows(rng, "demo", f"{slug}-100k-r0", "field", slug, field, 100_000, 0,
                      {"bm25": 0.33, "minilm": 0.31}, [f"{slug[:3]}{i}" for i in range(12)],
                      large)
    for field in ("Medicine", "Biology"):
        slug = field.lower()
        for negatives in ("all", "official", "bm25", "random", "minilm"):
            rows += _rows(rng, "bench", f"mdcr-{slug}-1k-r0", "mdcr", f"mdcr-{slug}", field,
                          1000, 0, {"bm25": 0.5, "minilm": 0.45},
                          [f"{slug}-{i}" for i in range(10)], ("map", "ndcg", "recall@5"),
                          negatives)
    rows += _rows(rng, "scidocs", "beir-300-r0", "collection", "beir", None, 300, 0,
                  {"bm25": 0.16, "minilm": 0.2, "random": 0.01},
                  [f"q{i}" for i in range(40)], ("ndcg@10", "recall@100"))
    for facet in ("background", "method", "result"):
        rows += _rows(rng, "cube", f"csfcube-{facet}-100-r0", "csfcube", f"csfcube-{facet}",
                      facet, 100, 0, {"bm25": 0.5, "specter": 0.55},
                      [f"{p}_{facet}" for p in range(101, 111)], ("ndcg%20", "map_ranked-l2"))
    return pl.DataFrame(rows, infer_schema_length=None).select(COLUMNS)


def write_results(runs_root: Path, frame: pl.DataFrame) -> None:
    """results.parquet, and the eval.json of each CSFCube run naming its queries' test folds."""
    runs_root.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(runs_root / RESULTS_FILE)
    cube = frame.filter(pl.col("corpus") == "cube").select("pool", "model", "query").unique()
    for (pool, model), group in cube.group_by("pool", "model"):
        queries = sorted(group["query"].to_list())
        path = run_paths(runs_root, "cube", pool, model).evaluation
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"folds": {"fold1": queries[::2], "fold2": queries[1::2]}}))


def is_output(path: Path) -> bool:
    """A file the report wrote: not the stat cache of the checksums its manifest took
    (`.checksums.json`: inodes and times, never compared)."""
    return path.is_file() and not path.name.startswith(".")


def outputs(runs_root: Path) -> dict[str, bytes]:
    """Every corpus reported: each file under runs/reports/ and the markdown returned."""
    texts = {f"returned:{c}": report(runs_root, c).encode() for c in CORPORA}
    folder = reports_dir(runs_root)
    return {**texts, **{str(p.relative_to(folder)): p.read_bytes()
                        for p in sorted(folder.rglob("*")) if is_output(p)}}


REPORT_SCRIPT = """
import sys
from pathlib import Path
from tests.report.test_report_determinism import outputs
outputs(Path(sys.argv[1]))
"""


def outputs_in_subprocess(runs_root: Path, threads: str | None) -> dict[str, bytes]:
    """`outputs` in a fresh interpreter, with POLARS_MAX_THREADS=`threads` (None: the default)."""
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    if threads is not None:
        env["POLARS_MAX_THREADS"] = threads
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", REPORT_SCRIPT, str(runs_root)], env=env,
                          capture_output=True, text=True, cwd=ROOT, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = reports_dir(runs_root)
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if is_output(p)}


def differing(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The results written once and reported once: (runs folder, outputs)."""
    runs_root = tmp_path_factory.mktemp("determinism") / "runs"
    write_results(runs_root, results_frame())
    return runs_root, outputs(runs_root)


def test_every_kind_of_table_is_reported(reference):
    _, made = reference
    names = set(made)
    assert {"demo-dataset.tex", "demo-field-100k.tex", "demo-query-variants.tex",
            "demo-map-vs-pool-size.png", "demo-fields-100k.png", "demo-published-dataset.tex",
            "bench-mdcr.tex", "bench-mdcr-types.tex", "bench-mdcr-other-types.tex",
            "cube-csfcube.tex", "scidocs-collection.tex", "scidocs.md", "demo-variance.tex",
            "demo-variance-differences.tex", "demo-queries-needed.tex"} <= names
    assert {f"{corpus}.html" for corpus in CORPORA} <= names  # the pages are compared too
    for corpus in CORPORA:
        assert b"bootstrap interval" in made[f"returned:{corpus}"]


def test_csfcube_says_which_mean_each_section_prints(reference):
    """Issue 47: CSFCube's table prints the mean of its two test folds' means, the significance,
    interval and variance sections plain means over the queries, and nothing said which.
    Issue 58: the significance section prints the table's fold means (the runs record the
    folds), and says so; each of its means is the table's cell, to the decimal it prints."""
    _, made = reference
    cube = made["returned:cube"].decode()
    assert ("the mean of the two test folds' means, as the significance section's means are; "
            "the variance section uses the plain mean over the queries") in cube
    assert "CSFCube's facet pools: every mean here is the mean of the two test folds'" in cube
    cells = [[c.strip().strip("*") for c in line.strip("|").split("|")]
             for line in cube.splitlines() if line.startswith("| ")]
    table = {(row[0], facet): float(cell.split(" / ")[0].strip("*"))
             for row in cells if len(row) == 5 and " / " in row[1] and row[0] != "model"
             for facet, cell in zip(("background", "method", "result"), row[1:4], strict=True)}
    means = {(row[2], row[0].split("-")[1]): float(row[4]) for row in cells
             if len(row) == 7 and row[1] == "ndcg%20"}  # pools, metric, model, queries, mean
    assert len(means) == 6 and set(means) <= set(table)
    assert all(abs(mean - table[key]) <= 0.051 for key, mean in means.items())
    assert "CSFCube's facet pools: the plain mean over queries" in cube  # variance captions
    assert "plain mean" not in made["returned:demo"].decode()


def test_twice_gives_the_same_bytes(reference, tmp_path):
    runs_root, made = reference
    again = tmp_path / "runs"
    shutil.copytree(runs_root, again)
    shutil.rmtree(reports_dir(again))
    assert not differing(made, outputs(again))
    assert not differing(made, outputs(again))  # over its own earlier outputs too


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffled_results_give_the_same_bytes(reference, tmp_path, seed):
    """The rows of results.parquet in another order: the same randomization p-values,
    bootstrap intervals, rows and plots."""
    runs_root, made = reference
    shuffled = tmp_path / "runs"
    shutil.copytree(runs_root, shuffled)
    shutil.rmtree(reports_dir(shuffled))
    frame = pl.read_parquet(runs_root / RESULTS_FILE)
    frame.sample(fraction=1, shuffle=True, seed=seed).write_parquet(shuffled / RESULTS_FILE)
    assert not differing(made, outputs(shuffled))


def test_one_polars_thread_or_many_give_the_same_bytes(reference, tmp_path):
    runs_root, made = reference
    files = {k: v for k, v in made.items() if not k.startswith("returned:")}
    for threads in ("1", None, "8"):
        copy = tmp_path / f"runs-{threads}"
        shutil.copytree(runs_root, copy)
        shutil.rmtree(reports_dir(copy))
        assert not differing(files, outputs_in_subprocess(copy, threads)), threads
