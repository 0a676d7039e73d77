"""Tables and the MAP-vs-pool-size plot from runs/results.parquet."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.report.build import report, stage_times


def results_frame() -> pl.DataFrame:
    rows = []
    for model, base in (("bm25", 0.40), ("minilm", 0.30), ("random", 0.01)):
        for size, drop in ((2000, 0.0), (5000, 0.05), (10000, 0.1)):
            for repeat, jitter in ((0, 0.01), (1, -0.01)):
                for metric, value in (("map", base - drop + jitter), ("ndcg", 0.7),
                                      ("recall@30", 0.5)):
                    for query, spread in (("1", 0.02), ("2", -0.02)):  # mean over queries
                        rows.append({"corpus": "demo", "pool": f"all-{size}-r{repeat}",
                                     "level": "dataset", "scope": "all", "field": None,
                                     "size": size, "repeat": repeat, "seed": 0,
                                     "split": "test", "model": model, "query": query,
                                     "metric": metric, "value": value + spread})
    for model, value in (("bm25", 0.33), ("minilm", 0.25)):
        for field in ("Medicine", "Art"):
            rows.append({"corpus": "demo", "pool": f"{field.lower()}-20k-r0", "level": "field",
                         "scope": field.lower(), "field": field, "size": 20000, "repeat": 0,
                         "seed": 0, "split": "test", "model": model, "query": "1",
                         "metric": "map", "value": value})
    return pl.DataFrame(rows, infer_schema_length=None)


def test_tables_and_plot(tmp_path):
    results_frame().write_parquet(tmp_path / "results.parquet")
    text = report(tmp_path, "demo")
    # dataset level: mean over queries, then mean ± std over the two repeats, x100
    bm25 = next(line for line in text.splitlines() if line.startswith("| bm25 |")
                and "/" in line)
    assert bm25.split(" | ")[1:4] == ["**40.0 ± 1.4** / 70.0 ± 0.0 / 50.0 ± 0.0",
                                      "**35.0 ± 1.4** / 70.0 ± 0.0 / 50.0 ± 0.0",
                                      "**30.0 ± 1.4** / 70.0 ± 0.0 / 50.0 ± 0.0 |"]
    # bold: the best MAP; †: significantly below it (every query 10 points lower)
    minilm = next(line for line in text.splitlines() if line.startswith("| minilm |"))
    assert minilm.split(" | ")[1] == "30.0 ± 1.4† / 70.0 ± 0.0 / 50.0 ± 0.0"
    assert ": paired tests of every two models" in text
    assert "| all-2k | map | bm25 | minilm |" in text
    # field level: MAP per field (paper abbreviations) and the average
    assert "| model | Art | Med | avg |" in text
    assert "| bm25 | **33.0** | **33.0** | 33.0 |" in text
    out = tmp_path / "reports"
    png = (out / "demo-map-vs-pool-size.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    latex = (out / "demo-dataset.tex").read_text()
    assert "\\begin{tabular}" in latex and "\\textbf{40.0 $\\pm$ 1.4}" in latex
    assert "$^\\dagger$" in latex
    assert (out / "demo-field-20k.tex").exists() and (out / "demo.md").exists()
    assert (out / "demo-fields-20k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_results_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="make eval"):
        report(tmp_path, "demo")


def test_stage_times_are_summed(tmp_path):
    (tmp_path / "demo").mkdir()
    lines = [{"stage": "embed", "seconds": 10.0}, {"stage": "search", "seconds": 1.5},
             {"stage": "search", "seconds": 2.5}]
    (tmp_path / "demo" / "stage-times.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines))
    table = stage_times(tmp_path, "demo")
    assert "| search | 4.0 | 2 |" in table and "| total | 14.0 | 3 |" in table


def test_seeds_are_never_mixed(tmp_path):
    """Defect 5: `make report` averaged seed-0 and seed-1 pools into one column."""
    frame = results_frame()
    other = frame.with_columns(seed=pl.lit(1, pl.Int64), value=pl.lit(0.99))
    pl.concat([frame, other]).write_parquet(tmp_path / "results.parquet")
    validation = frame.with_columns(split=pl.lit("validation"), value=pl.lit(0.77))
    pl.concat([frame, other, validation]).write_parquet(tmp_path / "results.parquet")
    zero = report(tmp_path, "demo")
    assert "| bm25 | **33.0** | **33.0** | 33.0 |" in zero and "99.0" not in zero
    assert "77.0" not in zero  # validation pools tune models; they are not reported
    one = report(tmp_path, "demo", seed=1)
    assert "99.0" in one
    with pytest.raises(InputError, match="seeds present: 0, 1"):
        report(tmp_path, "demo", seed=7)


def test_one_model_at_two_sizes_says_one_model(tmp_path):
    """Issue 46: one model at two pool sizes was reported as "every scope was measured at one
    pool size"."""
    results_frame().filter(pl.col("model") == "bm25").write_parquet(
        tmp_path / "results.parquet")
    text = report(tmp_path, "demo")
    assert "No crossing estimated: one model was evaluated on these pools" in text
    assert "every scope was measured at one pool size" not in text
