"""What inferred.py's `infAP` equals, and when (issue 71): trec_eval's `infAP` (through
pytrec_eval and ir_measures; trectools has no infAP) on one uniformly
sampled stratum with nothing else judged; with the pool's citations in the qrels, trec_eval
takes the citations for part of that one uniform sample, and its value is then this estimator
with the citations drawn into the sampled stratum, not the value the pipeline reports (which
counts the citations as a stratum judged whole, a census)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from pipeline.judging.inferred import pool_values
from tests.judging.test_inferred import _data, _judge, _nested

DEPTH = 200  # the one stratum: each query's top 200 of bm25
DRAWN = 25  # drawn from it per query


def _uniform(seed: int, cited: dict | None = None) -> tuple[dict, pl.DataFrame, pl.DataFrame,
                                                           pl.DataFrame]:
    """One stratum (each query's top DEPTH of bm25, the citations, when `cited` is given, left
    out of it as sample.py leaves them), DRAWN of it drawn uniformly: (truth, the run, the
    sample, its judgments)."""
    truth, runs, _, _ = _data(seed=seed)
    ranked = runs["bm25"]
    rng = np.random.default_rng(seed + 1)
    parts = []
    for q in range(len(truth)):
        docs = ranked.filter(pl.col("query") == q)["doc"].to_numpy()[:DEPTH]
        if cited is not None:
            docs = docs[~np.isin(docs, cited[q])]
        drawn = np.zeros(len(docs), bool)
        drawn[rng.choice(len(docs), DRAWN, replace=False)] = True
        parts.append(pl.DataFrame({"query": q, "doc": docs, "stratum": f"1-{DEPTH}",
                                   "sampled": drawn, "probability": DRAWN / len(docs)}))
    sample = pl.concat(parts)
    return truth, ranked, sample, _judge(sample, truth)


def _trec_qrels(sample: pl.DataFrame, truth: dict, cited: dict | None = None) -> dict:
    """trec_eval's qrels of the sample: a drawn candidate's grade, an undrawn one -1 (pooled,
    not judged), and the citations' 1 where given."""
    qrels: dict = {}
    for q, d, drawn in sample.select("query", "doc", "sampled").iter_rows():
        qrels.setdefault(str(q), {})[str(d)] = int(truth[q][d]) if drawn else -1
    for q, docs in (cited or {}).items():
        for d in docs:
            qrels.setdefault(str(q), {})[str(d)] = 1
    return qrels


def _infap(values: pl.DataFrame) -> dict[str, float]:
    rows = values.filter(pl.col("metric") == "infAP")
    return dict(zip(rows["query"], rows["inferred"], strict=True))


def _ir_measures_infap(qrels: dict, ranked: pl.DataFrame) -> dict[str, float]:
    """ir_measures' infAP of the run (trec_eval's measure, through its own reader of qrels and
    runs; trectools has no infAP)."""
    import ir_measures

    return {m.query_id: m.value for m in ir_measures.iter_calc(
        [ir_measures.infAP], [ir_measures.Qrel(q, d, g) for q, docs in qrels.items()
                              for d, g in docs.items()],
        [ir_measures.ScoredDoc(str(q), str(d), float(-r))
         for q, d, r in ranked.select("query", "doc", "rank").iter_rows()])}


def test_without_citations_it_is_trec_evals_infap():
    """One uniformly sampled stratum and nothing else judged: equal to trec_eval's infAP to
    1e-12 in every query with a relevant judged (a query with none has no R to estimate: left
    out here, 0 in trec_eval)."""
    truth, ranked, sample, judgments = _uniform(seed=5)
    none = pl.DataFrame(schema={"query": pl.Int64, "doc": pl.Int64, "rel": pl.Int64})
    got = _infap(pool_values("p", none, {"bm25": ranked}, judgments, sample))
    trec = _trec_qrels(sample, truth)
    expected = pytrec_eval.RelevanceEvaluator(trec, {"infAP"}).evaluate(_nested(ranked))
    listed = _ir_measures_infap(trec, ranked)
    assert 6 <= len(got) < len(truth)
    for query, measures in expected.items():
        assert got.get(query, 0.0) == pytest.approx(measures["infAP"], abs=1e-12), query
        assert got.get(query, 0.0) == pytest.approx(listed.get(query, 0.0), abs=1e-12), query


def test_with_citations_trec_eval_takes_them_for_drawn_members_of_the_stratum():
    """The pool's citations in the qrels (5 a query, relevant) beside the uniform sample of the
    candidates they leave unjudged: trec_eval's infAP differs from the pipeline's in every
    query, by up to 0.1 and more. trec_eval reads every judged document as part of one uniform
    sample of the pooled ones: the citations' relevance enters the share of relevant above each
    rank that stands in for the unjudged, and its R is the judged relevant count (citations +
    relevant drawn), where the pipeline's is the citations + the drawn relevant weighted by
    N / n. So trec_eval's value is this estimator with the citations as drawn members of the
    sampled stratum (a sample that holds them, sampled, with their grade and no qrels): equal
    to 1e-12. The pipeline's counts them as a census (xinfAP's stratum judged whole)."""
    truth, runs, cited, qrels = _data(seed=5)
    _, ranked, sample, judgments = _uniform(seed=5, cited=cited)
    ours = _infap(pool_values("p", qrels, {"bm25": ranked}, judgments, sample))
    trec = _trec_qrels(sample, truth, cited)
    expected = pytrec_eval.RelevanceEvaluator(trec, {"infAP"}).evaluate(_nested(ranked))
    theirs = {q: m["infAP"] for q, m in expected.items()}
    listed = _ir_measures_infap(trec, ranked)
    assert all(listed[q] == pytest.approx(v, abs=1e-12) for q, v in theirs.items())
    assert sorted(ours) == sorted(theirs)  # every query has relevant citations
    gaps = np.array([ours[q] - theirs[q] for q in sorted(ours)])
    assert (np.abs(gaps) > 1e-4).all() and np.abs(gaps).max() > 0.1, gaps

    # the citations drawn into the stratum, no qrels: trec_eval's value
    drawn_in = pl.DataFrame({"query": np.repeat(list(cited), [len(v) for v in cited.values()]),
                             "doc": np.concatenate(list(cited.values())),
                             "stratum": f"1-{DEPTH}", "sampled": True, "probability": 1.0})
    pooled = pl.concat([sample, drawn_in.cast(sample.schema)])
    with_them = pl.concat([judgments, drawn_in.select("query", "doc", grade=pl.lit(1)).cast(
        judgments.schema)])
    none = qrels.clear()
    recoded = _infap(pool_values("p", none, {"bm25": ranked}, with_them, pooled))
    for query, value in theirs.items():
        assert recoded[query] == pytest.approx(value, abs=1e-12), query
