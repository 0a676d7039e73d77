"""Where the curves cross (pipeline/evaluation/crossover.py) against a planted truth: synthetic
per-query scores of two models over pool sizes 10k..2M with repeats, whose gap is a known
line in log size."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.evaluation.crossover import (
    crossover,
    crossover_rows,
    crossovers,
    no_rows_reason,
    pair_text,
    pairs,
)

SIZES = (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000)
CROSS = 200_000


def planted(seed: int, cross: float = CROSS, slope: float = -0.02, queries: int = 200,
            repeats: int = 3, draw_sd: float = 0.005, sizes: tuple[int, ...] = SIZES
            ) -> pl.DataFrame:
    """size, repeat, model, query, value: A - B = slope * log(s / cross) on average, plus a
    query effect (shared by both models, and one on the gap), a pool draw effect per model,
    size and repeat (sd `draw_sd`), and per-value noise."""
    rng = np.random.default_rng(seed)
    n_cells = len(sizes) * repeats
    base = rng.normal(0.3, 0.1, queries)  # the query's difficulty, both models
    on_gap = rng.normal(0, 0.1, queries)  # the query's own advantage of A
    size = np.repeat(np.asarray(sizes, dtype=np.int64), repeats)
    log_s = np.log(size.astype(np.float64))[:, None]
    draws = rng.normal(0, draw_sd, (2, n_cells, 1))
    noise = rng.normal(0, 0.1, (2, n_cells, queries))
    common = base[None, :] - 0.01 * log_s
    a = common + slope * (log_s - math.log(cross)) + on_gap[None, :] + draws[0] + noise[0]
    b = common + draws[1] + noise[1]
    ids = [f"q{i:04d}" for i in range(queries)]
    frames = [pl.DataFrame({
        "size": np.repeat(size, queries), "repeat": np.repeat(np.tile(np.arange(repeats),
                                                                      len(sizes)), queries),
        "model": model, "query": ids * n_cells, "value": values.ravel()})
        for model, values in (("a", a), ("b", b))]
    return pl.concat(frames).with_columns(metric=pl.lit("map"))


def test_a_planted_crossing_is_found_and_covered():
    found = crossover(planted(1), "a", "b")
    assert found.outcome == "crosses" and "within the measured range [10k, 2M]" in found.text
    assert abs(math.log(found.crossing / CROSS)) < math.log(2)  # the queries: se ~0.35 in log
    assert found.low <= CROSS <= found.high and found.high / found.low < 10
    assert found.gap_min > 0 > found.gap_max and found.slope < 0


def test_the_interval_covers_the_planted_crossing_at_about_its_rate():
    """100 simulated data sets: measured 96 of 100 with these settings (379 of 400 with 1,000
    resamples, 96 of 100 with a draw sd of 0.02); the nominal rate is 95%."""
    covered = sum(found.low <= CROSS <= found.high
                  for found in (crossover(planted(100 + i), "a", "b", resamples=500)
                                for i in range(100)))
    assert 88 <= covered <= 100


def test_a_crossing_beyond_the_largest_pool_is_marked_extrapolated():
    found = crossover(planted(6, cross=2e7), "a", "b")
    assert found.outcome == "beyond" and found.crossing > SIZES[-1]
    assert "no crossing in the measured range [10k, 2M] (gap closing)" in found.text
    assert "extrapolated" in found.text and "beyond the largest measured pool" in found.text
    below = crossover(planted(6, cross=2e3, slope=0.02), "a", "b")
    assert below.outcome == "below" and "below the smallest measured pool" in below.text
    assert "gap widening" in below.text
    far = crossover(planted(6, cross=2e12, slope=-0.005), "a", "b")
    assert "extrapolated: > 1000 x 2M, beyond the largest measured pool" in far.text


def test_parallel_curves_have_no_crossing_in_the_measured_range():
    found = crossover(planted(7, slope=0.0, cross=1.0), "a", "b")
    assert "no crossing in the measured range" in found.text
    assert found.outcome in ("beyond", "below")
    # a slope of about 0: many resamples slope the other way, the interval is open
    assert found.no_crossing > 0 and (math.isinf(found.high) or found.low == 0.0)


def test_the_bootstrap_resamples_the_draws_too():
    """With a large pool draw variance the interval is wider than resampling the queries only
    would make it (the report's significance intervals resample queries only)."""
    data = planted(5, draw_sd=0.03)
    both, queries = crossover(data, "a", "b"), crossover(data, "a", "b", draws=False)
    assert both.crossing == queries.crossing
    assert math.log(both.high / both.low) > 1.3 * math.log(queries.high / queries.low)


def test_degenerate_cases_are_stated_never_raised():
    data = planted(2, sizes=(10_000, 20_000))
    one = crossover(data.filter(pl.col("size") == 10_000), "a", "b")
    assert one.outcome == "degenerate" and "1 pool size" in one.text
    missing = crossover(data.filter(~((pl.col("model") == "b") & (pl.col("size") == 20_000))),
                        "a", "b")
    assert missing.outcome == "degenerate" and "b not measured at 20k" in missing.text
    tied = data.filter(pl.col("model") == "a")
    tied = pl.concat([tied, tied.with_columns(model=pl.lit("b"))])
    assert crossover(tied, "a", "b").text == "tied at every measured size"
    assert crossover(data, "a", "nobody").outcome == "degenerate"
    # a slope of nearly 0: the crossing is e^(3e9), an overflow shown as far beyond, no error
    nearly = tied.with_columns(value=pl.col("value") - pl.when(pl.col("model") == "b").then(
        0.03 - 1e-11 * pl.col("size").log()).otherwise(0.0))
    far = crossover(nearly, "a", "b")
    assert far.outcome == "beyond" and "> 1000 x 20k" in far.text and far.crossing == math.inf


def test_byte_identical_on_rerun_and_with_rows_shuffled():
    data = pl.concat([planted(3).with_columns(scope=pl.lit("all")),
                      planted(4).with_columns(scope=pl.lit("cs"))])
    first = crossovers(data, "a", "b", resamples=300, seed=9)
    again = crossovers(data.sample(fraction=1.0, shuffle=True, seed=1), "a", "b",
                       resamples=300, seed=9)
    assert first.equals(again) and first["scope"].to_list() == ["all", "cs"]
    other = crossovers(data, "a", "b", resamples=300, seed=10)
    assert not first.equals(other)  # the seed reaches the generator


def test_the_report_rows_pair_every_model_with_bm25():
    assert pairs(["specter", "bm25", "scincl"]) == [("bm25", "scincl"), ("bm25", "specter")]
    assert pairs(["c", "a", "b"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    data = planted(8, sizes=(10_000, 100_000), queries=50).with_columns(
        level=pl.lit("dataset"), scope=pl.lit("all"), field=pl.lit(None, pl.String),
        model=pl.col("model").replace({"a": "bm25"}))
    rows = crossover_rows(data, "map", resamples=100)
    assert [r[:3] for r in rows] == [["dataset", "bm25 - b", "10k, 100k"]]
    assert crossover_rows(data.filter(pl.col("size") == 10_000), "map") == []


def test_the_api_reads_a_frame_and_checks_its_arguments(tmp_path):
    data = planted(1, queries=60)
    frame = pipeline.crossover(data, "a", "b", metric="map", resamples=100)
    path = tmp_path / "results.parquet"
    data.write_parquet(path)
    assert pipeline.crossover(path, "a", "b", resamples=100).equals(frame)
    for bad, says in ((dict(resamples=0), "resamples=0"), (dict(metric=""), "metric=''"),
                      (dict(b=3), "b=3")):
        with pytest.raises(InputError, match=says):
            pipeline.crossover(data, **({"a": "a", "b": "b"} | bad))
    with pytest.raises(InputError, match="lack the column"):
        pipeline.crossover(data.drop("repeat"), "a", "b")


def test_the_report_rows_are_the_same_for_rows_in_any_order():
    data = planted(9, sizes=(10_000, 100_000, 1_000_000), queries=40).with_columns(
        level=pl.lit("field"), scope=pl.lit("cs"), field=pl.lit("Computer science"),
        model=pl.col("model").replace({"a": "bm25"}))
    rows = crossover_rows(data, "map", resamples=200, seed=3)
    assert rows == crossover_rows(data.sample(fraction=1.0, shuffle=True, seed=2), "map",
                                  resamples=200, seed=3)
    assert rows[0][0] == "Computer science"


def test_one_query_gives_a_crossing_without_an_interval():
    """Issue 46: one query (and one draw) gave the interval "[168k, 168k]", a point that looks
    precise. The fit is shown, the interval is n/a, and the outcome says why."""
    data = planted(5, queries=1, repeats=1)
    found = crossover(data, "a", "b")
    assert found.crossing is not None and found.low is None and found.high is None
    assert "no interval from 1 query" in found.text
    cells = pair_text(found)
    assert cells[4] == "n/a (1 query)"
    one_draw = crossover(planted(5, queries=30, repeats=1), "a", "b", resamples=100)
    assert one_draw.low < one_draw.high and "the interval is over queries only" in one_draw.text


def test_an_unknown_metric_or_model_is_refused_with_the_known_names():
    """Issue 46: `crossover(metric="MAP")` returned an empty frame. Names are matched as the
    results write them (as METRICS and MODEL are): refused, listing them."""
    data = planted(6, queries=20, sizes=(10_000, 100_000))
    with pytest.raises(InputError, match=r"no metric 'MAP' in the results \(did you mean "
                       r"'map'\?\); they hold 'map'"):
        pipeline.crossover(data, "a", "b", metric="MAP", resamples=100)
    with pytest.raises(InputError, match=r"no model 'c' in the results; they hold 'a', 'b'"):
        pipeline.crossover(data, "a", "c", resamples=100)


def test_one_model_at_two_sizes_is_said_so():
    """Issue 46: one model measured at two pool sizes was reported as "every scope was
    measured at one pool size"."""
    data = planted(7, queries=20, sizes=(10_000, 100_000)).filter(pl.col("model") == "a")
    data = data.with_columns(level=pl.lit("dataset"), scope=pl.lit("all"),
                             field=pl.lit(None, pl.String))
    assert crossover_rows(data, "map") == []
    assert no_rows_reason(data, "map").startswith("one model was evaluated")
    both = planted(7, queries=20, sizes=(10_000, 10_000))
    assert no_rows_reason(both, "map").startswith("every scope was measured at one pool size")
