"""Metric values on a hand-computed example, and exact agreement with trec_eval's semantics."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import RESULTS_SCHEMA
from pipeline.metrics import per_query
from pipeline.retrieval.runs import finalize_run


def frame(rows: list[tuple], columns: list[str]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=columns, orient="row")


def test_hand_computed_example():
    # q1: relevant 1, 3, 5; ranking 1, 2, 3, 4 (5 not retrieved). q2: relevant 9; ranking 8, 9.
    # q3 has no relevant document in the pool: dropped and counted.
    run = frame([(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4), (2, 8, 1), (2, 9, 2), (3, 1, 1)],
                ["query", "doc", "rank"])
    qrels = frame([(1, 1, 1), (1, 3, 1), (1, 5, 1), (2, 9, 1)], ["query", "doc", "rel"])
    metrics, dropped = per_query(run, qrels, pl.Series([1, 2, 3]))
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
    metrics, _ = per_query(run, qrels, pl.Series([1]))
    assert metrics["recall@30"][0] == 0.5


def test_ties_are_broken_like_trec_eval():
    hits = frame([(7, 10, 2.0), (7, 9, 2.0), (7, 100, 2.0), (7, 7, 5.0), (7, 3, 1.0)],
                 ["query", "doc", "score"])
    run, self_hits = finalize_run(hits, k=3)
    assert self_hits == 1  # the query paper itself is removed
    # equal scores: docid descending *as a string*, as trec_eval compares docnos
    assert run["doc"].to_list() == [9, 100, 10]
    assert run["rank"].to_list() == [1, 2, 3]



def test_scores_are_rounded_as_anserini_writes_them():
    """Halves away from zero, as Java's "%.6f" in Anserini's run files: the float32 score
    287.9453125 (Anserini's 287.9453 after its 1e-4 rounding) is written 287.945313 by both
    BM25 engines (half to even would make it 287.945312 from the arrays engine only)."""
    hits = frame([(1, 2, 287.9453125), (1, 3, 3.0078125), (1, 4, 0.1234564)],
                 ["query", "doc", "score"])
    run, _ = finalize_run(hits, k=3)
    assert run["score"].to_list() == [287.945313, 3.007813, 0.123456]


def test_a_tie_at_the_cut_keeps_the_papers_lucene_keeps():
    """Four papers tie at the 2nd place of a top 3: Lucene keeps the lowest ids as strings
    (10, 100), and the run writes them in trec_eval's order (100 before 10)."""
    hits = frame([(1, 5, 3.0), (1, 20, 1.0), (1, 10, 1.0), (1, 100, 1.0), (1, 9, 1.0)],
                 ["query", "doc", "score"])
    run, _ = finalize_run(hits, k=3)
    assert run["doc"].to_list() == [5, 100, 10]  # "10" < "100" < "20" < "9"


def test_ranx_agrees_with_trec_eval_on_tied_runs():
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
    ours, _ = per_query(run, qrels, pl.Series(range(1, 41)))
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


# ranx name -> pytrec_eval measure and the key of its output
TREC_NAMES = {"map": ("map", "map"), "ndcg": ("ndcg", "ndcg"), "recall@30": ("recall.30",
              "recall_30"), "recall@5": ("recall.5", "recall_5"), "ndcg@10": ("ndcg_cut.10",
              "ndcg_cut_10"), "recall@100": ("recall.100", "recall_100"),
              "precision@10": ("P.10", "P_10"), "mrr": ("recip_rank", "recip_rank")}


@pytest.mark.parametrize("string_ids", [False, True])
def test_every_metric_equals_trec_eval_on_adversarial_runs(string_ids):
    """Graded relevance, ties, judged non-relevant documents, queries absent from the run
    (scored 0, trec_eval -c), queries with nothing relevant (dropped), runs shorter than the
    cut-offs, and string ids."""
    rng = np.random.default_rng(1)
    rows, qrels_rows = [], []
    for q in range(1, 61):
        n_docs = int(rng.choice([0, 1, 3, 40, 300]))  # 0: absent from the run
        docs = rng.choice(np.arange(1, 800), size=n_docs, replace=False)
        rows += [(q, int(d), float(s)) for d, s in
                 zip(docs, rng.integers(0, 5, size=n_docs), strict=True)]  # many ties
        if q % 10 == 0:
            continue  # nothing relevant: dropped
        judged = rng.choice(np.arange(1, 800), size=int(rng.integers(1, 30)), replace=False)
        qrels_rows += [(q, int(d), int(rng.integers(0, 4))) for d in judged]  # grades 0-3
        qrels_rows.append((q, int(judged[0]), 2) if not any(
            r[0] == q and r[2] > 0 for r in qrels_rows) else (q, -1, 0))
    run, _ = finalize_run(frame(rows, ["query", "doc", "score"]), k=500)
    qrels = frame(qrels_rows, ["query", "doc", "rel"]).filter(pl.col("doc") > 0)
    queries = pl.Series(range(1, 61))
    if string_ids:
        run = run.with_columns(pl.format("d{}", "doc").alias("doc"))
        qrels = qrels.with_columns(pl.format("d{}", "doc").alias("doc"))
    ours, dropped = per_query(run, qrels, queries, list(TREC_NAMES))
    relevant = qrels.filter(pl.col("rel") > 0)
    assert dropped == 60 - relevant["query"].n_unique()
    evaluator = pytrec_eval.RelevanceEvaluator(
        {str(q): {str(d): int(r) for d, r in zip(g["doc"], g["rel"], strict=True)}
         for (q,), g in qrels.group_by("query")},
        {name for name, _ in TREC_NAMES.values()})
    trec = evaluator.evaluate({str(q): {str(d): float(s) for d, s in
                                        zip(g["doc"], g["score"], strict=True)}
                               for (q,), g in run.group_by("query")})
    absent = 0
    for row in ours.iter_rows(named=True):
        want = trec.get(str(row["query"]))
        absent += want is None
        for metric, (_, key) in TREC_NAMES.items():
            expected = 0.0 if want is None else want[key]  # -c: an unanswered query is 0
            assert row[metric] == pytest.approx(expected, abs=1e-12), (row["query"], metric)
    assert absent > 0 and set(ours["query"]) == set(relevant["query"])


def test_metric_names_are_checked():
    from pipeline.core.errors import InputError
    from pipeline.glossary import parse_metrics

    assert parse_metrics("mdcr") == ("map", "ndcg", "recall@5")
    assert parse_metrics("map, ndcg@10 map") == ("map", "ndcg@10")
    for bad in ("mapp", "recall@0", "ndcg@x", ""):
        with pytest.raises(InputError, match="metric"):
            parse_metrics(bad)


def test_a_single_metric_with_a_cutoff():
    """ranx.evaluate fails on one metric with a cut-off (it looks up 'recall', not
    'recall@30'); the pipeline calls ranx's kernels itself."""
    run = frame([(1, d, d) for d in range(1, 41)], ["query", "doc", "rank"])
    qrels = frame([(1, 30, 1), (1, 31, 1)], ["query", "doc", "rel"])
    values, _ = per_query(run, qrels, pl.Series([1]), ["recall@30"])
    assert values.columns == ["query", "recall@30"] and values["recall@30"][0] == 0.5


def test_ranked_map_differs_from_trec_eval_map_only_on_what_the_run_left_out():
    """`map_ranked` (CSFCube's official AP: the relevant candidates the run ranked are its
    denominator) beside ranx's `map` (trec_eval's: every judged relevant candidate), integer
    ids as S2ORC's: q1 ranks relevant 1 and 3 of 1, 3, 5 at ranks 1 and 3, so `map_ranked` is
    (1 + 2/3) / 2 and `map` (1 + 2/3) / 3; q2 ranks its only relevant paper, so both agree;
    q3, judged but absent from the run, scores 0 on both and counts."""
    run = frame([(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4), (2, 8, 1), (2, 9, 2)],
                ["query", "doc", "rank"])
    qrels = frame([(1, 1, 1), (1, 3, 2), (1, 5, 1), (2, 9, 1), (3, 7, 1)],
                  ["query", "doc", "rel"])
    values, dropped = per_query(run, qrels, pl.Series([1, 2, 3]),
                                ["map_ranked", "map", "map_ranked-l2"])
    by_query = {r["query"]: r for r in values.iter_rows(named=True)}
    assert dropped == 0 and sorted(by_query) == [1, 2, 3]
    assert by_query[1]["map_ranked"] == pytest.approx((1 + 2 / 3) / 2, abs=1e-12)
    assert by_query[1]["map"] == pytest.approx((1 + 2 / 3) / 3, abs=1e-12)
    assert by_query[1]["map_ranked-l2"] == pytest.approx(1 / 3, abs=1e-12)  # doc 3 at rank 3
    assert by_query[2]["map_ranked"] == by_query[2]["map"] == pytest.approx(0.5, abs=1e-12)
    assert (by_query[3]["map_ranked"], by_query[3]["map"]) == (0.0, 0.0)


# ---- reading runs/results.parquet: checked against its manifest (issue 46) ------------------
def _results(seed: int = 0) -> pl.DataFrame:
    """Two models, two pool sizes of three draws, 12 queries: what collect writes."""
    rng = np.random.default_rng(seed)
    rows = [{"corpus": "demo", "pool": f"all-{size}-r{repeat}", "level": "dataset",
             "scope": "all", "field": None, "size": size, "repeat": repeat, "seed": 0,
             "exclusion": "", "split": "test", "candidates": size, "model": model,
             "query": f"{q}", "negatives": "all", "metric": "map",
             "value": float(rng.uniform(0.2, 0.5)) + (0.05 if model == "bm25" else 0.0)}
            for size in (1000, 2000) for repeat in range(3) for model in ("bm25", "random")
            for q in range(12)]
    return pl.DataFrame(rows, schema=RESULTS_SCHEMA)


def _collected(root: Path) -> Path:
    """A data folder whose runs/results.parquet and its manifest are as collect writes them,
    recording one evaluation as its input."""
    from pipeline.core.checksums import fingerprints
    from pipeline.core.files import write_json, write_parquet
    from pipeline.core.inputs import Roots, record
    from pipeline.core.manifests import manifest
    from pipeline.layout import RESULTS_FILE, RESULTS_MANIFEST

    runs = root / "runs"
    evaluation = runs / "demo" / "all-1000-r0" / "bm25.eval.json"
    evaluation.parent.mkdir(parents=True)
    (root / "corpora").mkdir()
    (root / "indexes").mkdir()
    evaluation.write_text('{"means": {"map": 0.3}}')
    write_parquet(_results().to_arrow(), runs / RESULTS_FILE)
    inputs = record(Roots(root / "corpora", root / "indexes", runs), [evaluation])
    write_json(manifest("collect", {"missing_queries": "scored-0"}, inputs=inputs,
                        outputs=fingerprints(runs, [RESULTS_FILE])), runs / RESULTS_MANIFEST)
    return runs / RESULTS_FILE


def _readers(root: Path) -> dict[str, Callable[[], object]]:
    """Every reader of runs/results.parquet that the API offers."""
    import pipeline

    path = root / "runs" / "results.parquet"
    return {"variance": lambda: pipeline.variance(path),
            "topic_set_size": lambda: pipeline.topic_set_size(path),
            "crossover": lambda: pipeline.crossover(path, "bm25", "random"),
            "Data.results": lambda: pipeline.Data(root).results(collect=False),
            "build_report": lambda: pipeline.build_report(root, "demo", collect=False)}


def collect_command(root: Path) -> str:
    """What collects the results of the data folder `root` again (verify's repair of them):
    the pipeline's collect on its three roots, whichever reader refused them."""
    return (f"python -m pipeline --corpora-root {root / 'corpora'} --index-root "
            f"{root / 'indexes'} --runs-root {root / 'runs'} collect")


def test_damaged_results_are_refused_by_every_reader(tmp_path):
    """Issue 46: verify flagged a damaged results.parquet CORRUPT while `variance(path)` and
    `build_report(collect=False)` read it ("35.5 ± 1.1" became "35.4 ± 1.0"). A readable
    table with other values in place of the collected one is refused by every reader, naming
    the file and the command that collects it again."""
    import pipeline

    path = _collected(tmp_path)
    readers = _readers(tmp_path)
    for read in readers.values():
        read()  # intact: read
    intact = pipeline.variance(path).filter(pl.col("model") == "bm25")["mean"].to_list()
    _results().with_columns(value=pl.col("value") - 0.001).write_parquet(path)
    damaged = pipeline.variance(pl.read_parquet(path)).filter(pl.col("model") == "bm25")
    assert damaged["mean"].to_list() != intact  # what a reader would have returned
    for name, read in readers.items():
        with pytest.raises(InputError, match="does not match its manifest") as refused:
            read()
        assert str(path) in refused.value.message, name
        assert str(refused.value).endswith(f"; repair: {collect_command(tmp_path)}"), name


def test_results_from_changed_evaluations_are_refused_where_the_data_is_known(tmp_path):
    """collect=False reads the table as written last; an evaluation it was collected from
    that changed since makes it stale: refused as verify reports it, with its repair."""
    path = _collected(tmp_path)
    (path.parent / "demo" / "all-1000-r0" / "bm25.eval.json").write_text(
        '{"means": {"map": 0.4}}')
    readers = _readers(tmp_path)
    for name in ("Data.results", "build_report"):
        with pytest.raises(InputError, match="evaluations that changed since") as refused:
            readers[name]()
        assert str(refused.value).endswith(f"; repair: {collect_command(tmp_path)}")


def test_a_results_table_of_ones_own_is_read_and_said_unverified(tmp_path, caplog):
    """A table the user wrote (no collect manifest beside it) is the user's own data: read,
    with a warning that nothing vouches for it."""
    import pipeline

    mine = tmp_path / "mine.parquet"
    _results().write_parquet(mine)
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.evaluate"):
        found = pipeline.variance(mine)
    assert found.height == 4 and f"{mine}: no results.manifest.json" in caplog.text
    assert "unverified" in caplog.text
