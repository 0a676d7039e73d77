"""`pipeline.score` and `pipeline.compare`: any run scored and compared without writing
anything, equal to trec_eval (pytrec_eval) and to what `make report` shows."""

from __future__ import annotations

import logging

import polars as pl
import pytest
import pytrec_eval
import ranx

import pipeline
from pipeline.core.errors import InputError
from pipeline.layout import run_paths
from pipeline.pools.build import load_pool
from tests.conftest import POOL_SEED, pool_of

# ours -> trec_eval's name of the same metric
TREC_EVAL = {"map": "map", "ndcg": "ndcg", "ndcg@10": "ndcg_cut_10", "recall@30": "recall_30",
             "precision@10": "P_10", "mrr": "recip_rank"}

# Three queries; scores tie within each query, and the file lists tied documents in the
# opposite of trec_eval's order (score descending, then doc id descending as a string), so a
# scorer that kept the file's order would rank them otherwise.
RUN_LINES = [
    # q1: d10, d2, d30 tied at 3.0 (trec_eval: d30, d2, d10), then d4 d5 tied at 1.0
    ("q1", "d10", 3.0), ("q1", "d2", 3.0), ("q1", "d30", 3.0), ("q1", "d4", 1.0),
    ("q1", "d5", 1.0), ("q1", "d6", 0.5),
    # q2: every document tied
    ("q2", "d1", 2.0), ("q2", "d11", 2.0), ("q2", "d3", 2.0), ("q2", "d7", 2.0),
    ("q2", "d8", 2.0), ("q2", "d9", 2.0), ("q2", "d12", 2.0), ("q2", "d13", 2.0),
    ("q2", "d14", 2.0), ("q2", "d15", 2.0), ("q2", "d16", 2.0), ("q2", "d17", 2.0),
    # q3: no tie at the top, a tie below
    ("q3", "d1", 9.0), ("q3", "d20", 4.0), ("q3", "d3", 4.0), ("q3", "d2", 1.5),
]
QRELS_LINES = [("q1", "d10", 2), ("q1", "d2", 0), ("q1", "d4", 1), ("q1", "d99", 1),
               ("q2", "d1", 1), ("q2", "d17", 2), ("q2", "d9", 1),
               ("q3", "d3", 3), ("q3", "d2", 1), ("q3", "d50", 2)]


def write_run(path, lines=RUN_LINES) -> str:
    rank = {}
    text = []
    for query, doc, score in lines:
        rank[query] = rank.get(query, 0) + 1
        text.append(f"{query} Q0 {doc} {rank[query]} {score} mine")
    path.write_text("\n".join(text) + "\n")
    return str(path)


def write_qrels(path, lines=QRELS_LINES) -> str:
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in lines))
    return str(path)


def trec_eval_values(run_lines=RUN_LINES, qrels_lines=QRELS_LINES) -> dict:
    run, qrels = {}, {}
    for query, doc, score in run_lines:
        run.setdefault(query, {})[doc] = score
    for query, doc, rel in qrels_lines:
        qrels.setdefault(query, {})[doc] = rel
    return pytrec_eval.RelevanceEvaluator(qrels, set(TREC_EVAL.values())).evaluate(run)


def test_score_equals_trec_eval_on_a_run_with_ties(tmp_path):
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    expected = trec_eval_values()
    values = pipeline.score(run, qrels, list(TREC_EVAL), per_query=True)
    assert values.columns == ["query", *TREC_EVAL]
    assert values["query"].to_list() == ["q1", "q2", "q3"]
    for row in values.iter_rows(named=True):
        for ours, theirs in TREC_EVAL.items():
            assert row[ours] == pytest.approx(expected[row["query"]][theirs], abs=1e-12), (
                row["query"], ours)
    means = pipeline.score(run, qrels, list(TREC_EVAL))
    assert means == pytest.approx({ours: sum(v[theirs] for v in expected.values()) / 3
                                   for ours, theirs in TREC_EVAL.items()}, abs=1e-12)
    # the ties matter: ranked in the file's order, q1's MAP and MRR would be others
    in_file_order = [(q, d, -i) for i, (q, d, _) in enumerate(RUN_LINES)]
    assert trec_eval_values(in_file_order)["q1"]["map"] != pytest.approx(
        expected["q1"]["map"])


def test_every_form_of_a_run_and_qrels_gives_the_same_numbers(tmp_path):
    path = write_run(tmp_path / "run.trec")
    qrels_path = write_qrels(tmp_path / "qrels.txt")
    run_frame = pl.DataFrame(RUN_LINES, schema=["query", "doc", "score"], orient="row")
    qrels_frame = pl.DataFrame(QRELS_LINES, schema=["query", "doc", "relevance"], orient="row")
    run_dict, qrels_dict = {}, {}
    for query, doc, score in RUN_LINES:
        run_dict.setdefault(query, {})[doc] = score
    for query, doc, rel in QRELS_LINES:
        qrels_dict.setdefault(query, {})[doc] = rel
    runs = [path, tmp_path / "run.trec", run_frame, run_frame.to_pandas(),
            run_frame.sample(fraction=1.0, shuffle=True, seed=3),  # row order: no matter
            ranx.Run(run_dict)]
    qrels_forms = [qrels_path, qrels_frame, qrels_frame.to_pandas(), ranx.Qrels(qrels_dict)]
    expected = pipeline.score(path, qrels_path, list(TREC_EVAL))
    for run in runs:
        for qrels in qrels_forms:
            assert pipeline.score(run, qrels, list(TREC_EVAL)) == expected
    # integer ids in DataFrames are the same ids as in a file
    numbers = pl.DataFrame({"query": [1, 1, 2], "doc": [10, 11, 12], "score": [1.0, 1.0, 2.0]})
    (tmp_path / "n.trec").write_text("1 Q0 10 1 1 x\n1 Q0 11 2 1 x\n2 Q0 12 1 2 x\n")
    judged = pl.DataFrame({"query": [1, 2], "doc": [10, 12], "relevance": [1, 1]})
    assert pipeline.score(numbers, judged, "map mrr") == pipeline.score(
        tmp_path / "n.trec", judged, "map mrr") == {"map": 0.75, "mrr": 0.75}


def test_counting_rule_and_what_is_left_out_is_logged(tmp_path, caplog):
    """As make eval: a query the run does not answer scores 0; queries without a relevant
    document, and the run's unjudged queries, are left out; each counted in the log."""
    run = pl.DataFrame({"query": ["a", "a", "z"], "doc": ["1", "2", "1"],
                        "score": [2.0, 1.0, 1.0]})
    qrels = pl.DataFrame({"query": ["a", "b", "c"], "doc": ["2", "1", "1"],
                          "relevance": [1, 1, 0]})
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.score"):
        values = pipeline.score(run, qrels, ["map", "recall@30"], per_query=True)
    assert values.rows() == [("a", 0.5, 1.0), ("b", 0.0, 0.0)]
    assert pipeline.score(run, qrels, "map") == {"map": 0.25}
    logged = caplog.text
    assert "2 queries scored" in logged
    assert "1 queries of the run that the qrels do not judge" in logged
    assert "1 queries of the qrels without a relevant document" in logged
    assert "1 queries of the qrels that the run does not answer, scored 0" in logged


def test_named_metric_sets(tmp_path):
    """CSFCube's set is its official NDCG%20 and MAP (grades >= 2, over the ranked list);
    MDCR's and the paper's sets are theirs; "auto" needs a pool."""
    grades = [2, 0, 3, 1, 0]
    run = pl.DataFrame({"query": ["q"] * 5, "doc": [f"d{i}" for i in range(5)],
                        "score": [5.0, 4.0, 3.0, 2.0, 1.0]})
    qrels = pl.DataFrame({"query": ["q"] * 5, "doc": [f"d{i}" for i in range(5)],
                          "relevance": grades})
    # NDCG%20 cuts at int(0.2 x 5) = 1: 2 / 3; AP over grades >= 2 at ranks 1, 3: (1 + 2/3) / 2
    assert pipeline.score(run, qrels, "csfcube") == pytest.approx(
        {"ndcg%20": 2 / 3, "map_ranked-l2": (1 + 2 / 3) / 2})
    assert list(pipeline.score(run, qrels, "mdcr")) == ["map", "ndcg", "recall@5"]
    assert list(pipeline.score(run, qrels, "large-scale")) == ["map", "ndcg", "recall@30"]
    with pytest.raises(InputError, match="'auto' is a pool's own set"):
        pipeline.score(run, qrels, "auto")


def one_line_error(call) -> str:
    with pytest.raises(InputError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_wrong_inputs_are_one_line_each(tmp_path):
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    five = tmp_path / "five.trec"
    five.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0\n")
    assert one_line_error(lambda: pipeline.score(five, qrels, "map")).startswith(
        f"{five}:2: not a TREC run line (qid Q0 docid rank score tag, 6 fields")
    text = tmp_path / "text.qrels"
    text.write_text("q1 0 d10 1\nq1 0 d2 high\n")
    assert one_line_error(lambda: pipeline.score(run, text, "map")) == (
        f"{text}:2: the relevance 'high' is not an integer; write an integer grade "
        "(0 = not relevant)")
    assert "did you mean 'ndcg@10'?" in one_line_error(
        lambda: pipeline.score(run, qrels, ["map", "ndcg_cut_10"]))
    assert "did you mean 'precision@10'?" in one_line_error(
        lambda: pipeline.score(run, qrels, "P_10"))
    assert "did you mean 'ndcg@10'?" in one_line_error(
        lambda: pipeline.score(run, qrels, "ndgc@10"))
    twice = pl.DataFrame({"query": ["q1", "q1"], "doc": ["d1", "d1"], "score": [1.0, 2.0]})
    assert "ranks the document d1 twice" in one_line_error(
        lambda: pipeline.score(twice, qrels, "map"))
    clash = pl.DataFrame({"query": ["q1", "q1"], "doc": ["d1", "d1"], "relevance": [1, 2]})
    assert "judged twice with different grades (1, 2)" in one_line_error(
        lambda: pipeline.score(run, clash, "map"))
    no_score = pl.DataFrame({"query": ["q1"], "doc": ["d1"], "rank": [1]})
    assert "has no column score" in one_line_error(
        lambda: pipeline.score(no_score, qrels, "map"))
    fractional = pl.DataFrame({"query": ["q1"], "doc": ["d1"], "relevance": [0.5]})
    assert "not integers" in one_line_error(lambda: pipeline.score(run, fractional, "map"))
    assert "is not a file" in one_line_error(
        lambda: pipeline.score(tmp_path / "missing.trec", qrels, "map"))
    bad_score = tmp_path / "nan.trec"
    bad_score.write_text("q1 Q0 d1 1 nan x\n")
    assert f"{bad_score}:1: not a TREC run line" in one_line_error(
        lambda: pipeline.score(bad_score, qrels, "map"))
    assert one_line_error(lambda: pipeline.score(run, ranx.Run({"q": {"d": 1.0}}), "map"))
    assert "per_query=1" in one_line_error(lambda: pipeline.score(run, qrels, "map",
                                                                   per_query=1))
    assert "no query of the qrels has a relevant document" in one_line_error(
        lambda: pipeline.score(run, pl.DataFrame({"query": ["q1"], "doc": ["d1"],
                                                  "relevance": [0]}), "map"))
    assert "two or more runs" in one_line_error(
        lambda: pipeline.compare({"a": run}, qrels, "map"))
    assert "unknown significance test 'wilcoxon'" in one_line_error(
        lambda: pipeline.compare({"a": run, "b": run}, qrels, "map", test="wilcoxon"))
    assert "correction='bonferroni': use one of holm, none" in one_line_error(
        lambda: pipeline.compare({"a": run, "b": run}, qrels, "map", correction="bonferroni"))
    assert "alpha=1.5" in one_line_error(
        lambda: pipeline.compare({"a": run, "b": run}, qrels, "map", alpha=1.5))
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.parquet"))


@pytest.fixture(scope="module")
def reported(corpus_dir, tmp_path_factory):
    """BM25 and random searched, scored and reported through the API on one pool of the
    fixture corpus: (data, pool, the report)."""
    root = tmp_path_factory.mktemp("score")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes", runs=root / "runs")
    pool = pool_of(800)
    for model in ("bm25", "random"):
        pipeline.search(data, corpus_dir.name, pool, model, threads=1)
    pipeline.evaluate(data, corpus_dir.name, pool, ["bm25", "random"])
    return data, pool, pipeline.build_report(data, corpus_dir.name, POOL_SEED)


def _markdown_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| ---")]


def test_compare_shows_what_make_report_shows(reported, corpus_dir):
    data, pool, report = reported
    _, candidates, qrels = load_pool(corpus_dir, pool)
    judged = qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))  # rel
    runs = {model: run_paths(data.runs, corpus_dir.name, pool, model).trec
            for model in ("random", "bm25")}
    written = sorted((p, p.stat().st_mtime_ns) for p in data.runs.rglob("*"))
    t = pipeline.compare(runs, judged, "large-scale")
    fisher = pipeline.compare(runs, judged, "large-scale", test="randomization")
    assert isinstance(t, pipeline.Comparison)
    assert t.metrics == ("map", "ndcg", "recall@30")
    # the report's pairs: pools, metric, a, b, mean a, mean b, t-test p (Holm), randomization
    shown = {row[1]: row[2:] for row in _markdown_rows(report.section("significance").text)
             if row[2:4] == ["bm25", "random"]}
    assert set(shown) == {"map", "ndcg", "recall@30"}
    for metric, (a, b, mean_a, mean_b, t_p, fisher_p) in shown.items():
        pair = t.pairs.filter(pl.col("metric") == metric).row(0, named=True)
        other = fisher.pairs.filter(pl.col("metric") == metric).row(0, named=True)
        assert (pair["a"], pair["b"]) == (a, b)
        assert (f"{pair['mean_a'] * 100:.1f}", f"{pair['mean_b'] * 100:.1f}") == (mean_a, mean_b)
        assert f"{pair['p']:.3g} ({pair['p_adjusted']:.3g})" == t_p
        assert f"{other['p']:.3g} ({other['p_adjusted']:.3g})" == fisher_p
    # the report's bootstrap intervals: pools, metric, model, mean, interval
    intervals = {(row[1], row[2]): row[3:] for row in _markdown_rows(
        report.section("significance").text) if len(row) == 5 and row[0] != "pools"}
    for row in t.frame().iter_rows(named=True):
        assert intervals[(row["metric"], row["model"])] == [
            f"{row['mean'] * 100:.1f}", f"[{row['low'] * 100:.1f}, {row['high'] * 100:.1f}]"]
    # the report's marks on MAP (bold the best, † significantly below it) are compare's
    dataset = {r[0]: r[1] for r in report.tables["dataset"].rows}
    for row in t.frame().filter(pl.col("metric") == "map").iter_rows(named=True):
        cell = dataset[row["model"]].split(" / ")[0]
        assert cell == {"best": f"**{row['mean'] * 100:.1f}**",
                        "worse": f"{row['mean'] * 100:.1f}†"}.get(row["mark"],
                                                                  f"{row['mean'] * 100:.1f}")
    assert t.frame()["model"].unique(maintain_order=True).to_list() == ["random", "bm25"]
    text = str(t)
    assert text == t.to_markdown() and "| MAP | NDCG | R@30 |" in text
    assert "\\begin{tabular}" in t.to_latex()
    # nothing was written or touched
    assert sorted((p, p.stat().st_mtime_ns) for p in data.runs.rglob("*")) == written


def test_a_damaged_run_file_of_the_pipelines_is_refused(tmp_path):
    """Issue 46 (a sibling of the damaged results table): `score` and `compare` given a run
    file that a run manifest vouches for read it unchecked. Its best document moved down
    changes MAP; refused, naming the file and `make eval`. A run file of one's own: read."""
    from pipeline.core.checksums import fingerprints
    from pipeline.core.files import write_json
    from pipeline.core.manifests import manifest

    paths = run_paths(tmp_path / "runs", "demo", "all-1k-r0", "bm25")
    paths.trec.parent.mkdir(parents=True)
    lines = [f"{q} Q0 {d} {i + 1} {s} bm25\n" for i, (q, d, s) in enumerate(RUN_LINES)]
    paths.trec.write_text("".join(lines))
    write_json(manifest("search", {"pool": "all-1k-r0", "model": "bm25", "k": 500},
                        outputs=fingerprints(paths.trec.parent, [paths.trec.name])),
               paths.manifest)
    qrels = pl.DataFrame(QRELS_LINES, schema=["query", "doc", "relevance"], orient="row")
    intact = pipeline.score(paths.trec, qrels, "map")
    changed = "".join(lines).replace("q3 Q0 d3 21 4.0", "q3 Q0 d3 21 0.1")
    assert changed != "".join(lines)
    paths.trec.write_text(changed)
    mine = tmp_path / "mine.trec"  # the same bytes, no manifest: one's own run
    mine.write_text(changed)
    assert pipeline.score(mine, qrels, "map") != intact  # what a reader would have returned
    for call in (lambda: pipeline.score(paths.trec, qrels, "map"),
                 lambda: pipeline.compare({"a": paths.trec, "b": mine}, qrels, "map")):
        with pytest.raises(InputError, match="does not match its manifest") as refused:
            call()
        assert str(paths.trec) in refused.value.message
        assert refused.value.repair.command() == "make eval CORPUS=demo MODEL=bm25"
