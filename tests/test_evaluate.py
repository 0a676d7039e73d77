"""Metric values on a hand-computed example, and exact agreement with trec_eval's semantics."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pipeline.evaluate import per_query_metrics
from pipeline.search import finalize_run


def frame(rows: list[tuple], columns: list[str]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=columns, orient="row")


def test_hand_computed_example():
    # q1: relevant 1, 3, 5; ranking 1, 2, 3, 4 (5 not retrieved). q2: relevant 9; ranking 8, 9.
    # q3 has no relevant document in the pool: dropped and counted.
    run = frame([(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4), (2, 8, 1), (2, 9, 2), (3, 1, 1)],
                ["query", "doc", "rank"])
    qrels = frame([(1, 1, 1), (1, 3, 1), (1, 5, 1), (2, 9, 1)], ["query", "doc", "rel"])
    metrics, dropped = per_query_metrics(run, qrels, pl.Series([1, 2, 3]))
    assert dropped == 1
    by_query = {r["query"]: r for r in metrics.iter_rows(named=True)}
    assert by_query[1]["map"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert by_query[1]["ndcg"] == pytest.approx((1 + 1 / math.log2(4)) / idcg)
    assert by_query[1]["recall@30"] == pytest.approx(2 / 3)
    assert by_query[2]["map"] == pytest.approx(0.5)
    assert by_query[2]["ndcg"] == pytest.approx(1 / math.log2(3))
    assert by_query[2]["recall@30"] == 1.0


def test_recall_cutoff_is_30():
    run = frame([(1, d, d) for d in range(1, 41)], ["query", "doc", "rank"])
    qrels = frame([(1, 30, 1), (1, 31, 1)], ["query", "doc", "rel"])
    metrics, _ = per_query_metrics(run, qrels, pl.Series([1]))
    assert metrics["recall@30"][0] == 0.5


def test_ties_are_broken_like_trec_eval():
    hits = frame([(7, 10, 2.0), (7, 9, 2.0), (7, 100, 2.0), (7, 7, 5.0), (7, 3, 1.0)],
                 ["query", "doc", "score"])
    run, self_hits = finalize_run(hits, k=3)
    assert self_hits == 1  # the query paper itself is removed
    # equal scores: docid descending *as a string*, as trec_eval compares docnos
    assert run["doc"].to_list() == [9, 100, 10]
    assert run["rank"].to_list() == [1, 2, 3]


def test_ranx_agrees_with_trec_eval_on_tied_runs():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(0)
    rows, qrels_rows = [], []
    for q in range(1, 41):
        docs = rng.choice(np.arange(1, 3000), size=200, replace=False)
        scores = rng.integers(0, 20, size=200).astype(float)  # many ties
        rows += [(q, int(d), s) for d, s in zip(docs, scores, strict=True)]
        relevant = rng.choice(np.arange(1, 3000), size=15, replace=False)
        qrels_rows += [(q, int(d), 1) for d in relevant]
    run, _ = finalize_run(frame(rows, ["query", "doc", "score"]), k=500)
    qrels = frame(qrels_rows, ["query", "doc", "rel"])
    ours, _ = per_query_metrics(run, qrels, pl.Series(range(1, 41)))
    evaluator = pytrec_eval.RelevanceEvaluator(
        {str(q): {str(d): r for qq, d, r in qrels_rows if qq == q} for q in range(1, 41)},
        {"map", "ndcg", "recall.30"})
    trec = evaluator.evaluate({str(q): {str(d): s for qq, d, _, s in run.iter_rows() if qq == q}
                               for q in range(1, 41)})
    for row in ours.iter_rows(named=True):
        want = trec[str(row["query"])]
        assert row["map"] == pytest.approx(want["map"], abs=1e-12)
        assert row["ndcg"] == pytest.approx(want["ndcg"], abs=1e-12)
        assert row["recall@30"] == pytest.approx(want["recall_30"], abs=1e-12)
