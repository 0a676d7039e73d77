"""The rows of runs/results.parquet that a report's analyses read (the API's crossover,
variance and topic_set_size take a results file or table): one corpus, one pool seed, the test
split, every candidate, the full queries, one exclusion list."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import read_results
from pipeline.layout import VARIANT_SEP


def results_table(results: str | os.PathLike | pl.DataFrame, function: str,
                  columns: set[str]) -> pl.DataFrame:
    """`results` as a DataFrame (a path read by `read_results`), refused without `columns`."""
    table = results if isinstance(results, pl.DataFrame) else read_results(Path(results))
    if missing := sorted(columns - set(table.columns)):
        raise InputError(f"{function}: results lack the column(s) {', '.join(missing)} of "
                         "runs/results.parquet")
    return table


def report_rows(results: str | os.PathLike | pl.DataFrame, corpus: str | None, seed: int,
                function: str) -> pl.DataFrame:
    """The rows a report reads: one corpus (`corpus`, needed with several), pool seed `seed`, the
    test split (else validation), every candidate, the full queries, one exclusion list."""
    table = results_table(results, function, {"scope", "size", "seed", "repeat", "model",
                                               "query", "metric", "value"})
    if corpus is not None and "corpus" in table.columns:
        table = table.filter(pl.col("corpus") == corpus)
    table = table.filter(pl.col("seed") == seed,
                         ~pl.col("model").str.contains(VARIANT_SEP, literal=True))
    if "negatives" in table.columns:
        table = table.filter(pl.col("negatives") == "all")
    if "split" in table.columns and (table["split"] == "test").any():
        table = table.filter(pl.col("split") == "test")
    for column, what in (("corpus", "corpus=<one>"), ("split", "one split"),
                         ("exclusion", "the rows of one exclusion list")):
        if column in table.columns and table[column].n_unique() > 1:
            raise InputError(f"{function}: results hold several {column}s "
                             f"({', '.join(sorted(map(str, table[column].unique())))}): give "
                             f"{what}")
    if table.is_empty():
        raise InputError(f"{function}: no rows of seed {seed}"
                         + (f" and corpus {corpus}" if corpus else "") + " in results")
    return table
