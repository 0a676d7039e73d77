"""Depth is what a run cut (issue 78): the report's grouping of runs by where they cut their
lists (pipeline/report/build.py: cuts, main_depth, labelled_depths), on results rows made by
hand: a complete run compares with any depth at or above its pool's size."""

from __future__ import annotations

import polars as pl

from pipeline.report.build import ALL, CUT, cut_words, labelled_depths, main_depth


def rows(*runs: tuple[str, str, int, int | None, int | None, bool]) -> pl.DataFrame:
    """One results row per (model, pool, candidates, depth, shortest, complete)."""
    return pl.DataFrame(
        [{"model": m, "pool": p, "candidates": c, "depth": d, "shortest": s, "complete": w,
          "query": "q", "metric": "map", "value": 0.5} for m, p, c, d, s, w in runs],
        schema={"model": pl.String, "pool": pl.String, "candidates": pl.Int64,
                "depth": pl.Int64, "shortest": pl.Int64, "complete": pl.Boolean,
                "query": pl.String, "metric": pl.String, "value": pl.Float64})


def labels(frame: pl.DataFrame) -> dict[tuple[str, str], str]:
    out = labelled_depths(frame)
    return {(pool, model): f"{label} [{cut}]" for pool, model, label, cut in zip(
        frame["pool"], frame["model"], out["model"], out[CUT], strict=True)}


def test_a_complete_run_of_a_small_pool_is_at_the_reports_depth():
    """K=500 on pools of 2,000 and of 300 candidates: on the small pool the run ranks every
    candidate, which is its top 500 too: one label, compared. A pool of 3,000 ranked whole is
    no top 500: labelled by what it is."""
    frame = rows(("bm25", "a-2k", 2000, 500, None, False),
                 ("bm25", "b-300", 300, 500, None, True),
                 ("dense", "a-2k", 2000, 500, None, False),
                 ("dense", "b-300", 300, 500, None, True),
                 ("whole", "c-3k", 3000, 3000, None, True))
    assert main_depth(frame) == "500"
    assert labels(frame) == {
        ("a-2k", "bm25"): "bm25 [500]", ("b-300", "bm25"): "bm25 [500]",
        ("a-2k", "dense"): "dense [500]", ("b-300", "dense"): "dense [500]",
        ("c-3k", "whole"): "whole (every candidate ranked) [all]"}


def test_complete_runs_of_several_lengths_are_one_depth():
    """CSFCube: BM25 searched at 500 ranking each query's own list whole, and a run imported
    whole whose longest list differs per facet (238, 253, 252): one depth, every candidate."""
    frame = rows(("bm25", "bg", 1796, 500, None, True), ("bm25", "me", 2084, 500, None, True),
                 ("specter", "bg", 1796, 238, 20, True), ("specter", "me", 2084, 253, 30, True))
    assert main_depth(frame) == ALL and cut_words(ALL) == "every candidate ranked"
    assert set(labelled_depths(frame)["model"]) == {"bm25", "specter"}


def test_an_imported_run_of_cut_lists_is_labelled_by_what_it_is():
    frame = rows(("bm25", "bg", 1796, 500, None, True), ("bm25", "me", 2084, 500, None, True),
                 ("x", "bg", 1796, 25, 20, False), ("y", "bg", 1796, 25, 25, False),
                 ("z", "bg", 1796, None, None, False))
    assert labels(frame) == {
        ("bg", "bm25"): "bm25 [all]", ("me", "bm25"): "bm25 [all]",
        ("bg", "x"): "x (imported, lists of 20-25) [20-25]", ("bg", "y"): "y (top 25) [25]",
        ("bg", "z"): "z (depth not recorded) [None]"}


def test_a_table_without_the_cut_columns_reads_as_before():
    """A results table of the user's own (no shortest, complete): every run cut at its depth,
    as before the columns existed."""
    frame = rows(("a", "p", 300, 100, None, False), ("b", "p", 300, 500, None, False),
                 ("c", "p", 300, 500, None, False)).drop("shortest", "complete")
    assert main_depth(frame) == "500"
    assert set(labelled_depths(frame)["model"]) == {"a (top 100)", "b", "c"}
