"""`pipeline.score` and `pipeline.compare`: any run scored and compared without writing
anything, equal to trec_eval (pytrec_eval) and to what `make report` shows."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import ir_measures
import polars as pl
import pytest
import pytrec_eval
import ranx

import pipeline
from pipeline.core.errors import InputError
from pipeline.layout import run_paths
from pipeline.pools.build import load_pool
from pipeline.report.tables import interval_cell, markdown_text, p_cell
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
    values = pipeline.score(qrels, run, list(TREC_EVAL), per_query=True)
    assert values.columns == ["query", *TREC_EVAL]
    assert values["query"].to_list() == ["q1", "q2", "q3"]
    for row in values.iter_rows(named=True):
        for ours, theirs in TREC_EVAL.items():
            assert row[ours] == pytest.approx(expected[row["query"]][theirs], abs=1e-12), (
                row["query"], ours)
    means = pipeline.score(qrels, run, list(TREC_EVAL))
    assert means == pytest.approx({ours: sum(v[theirs] for v in expected.values()) / 3
                                   for ours, theirs in TREC_EVAL.items()}, abs=1e-12)
    # the ties matter: ranked in the file's order, q1's MAP and MRR would be others
    in_file_order = [(q, d, -i) for i, (q, d, _) in enumerate(RUN_LINES)]
    assert trec_eval_values(in_file_order)["q1"]["map"] != pytest.approx(
        expected["q1"]["map"])


# scores apart in double precision but equal in single, as pytrec_eval's trec_eval holds them:
# a tie there (b ranked above a, by id descending), whatever the double says
NEAR_TIES = [("q1", "a", 7.12345679), ("q1", "b", 7.12345678), ("q1", "c", 1.0),
             ("q2", "x", 0.30000000000000004), ("q2", "y", 0.3), ("q2", "z", 0.1)]


def test_scores_equal_only_in_single_precision_are_ties_as_in_pytrec_eval(tmp_path):
    qrels_lines = [("q1", "a", 1), ("q2", "x", 1), ("q2", "z", 1)]
    run, qrels = write_run(tmp_path / "run.trec", NEAR_TIES), write_qrels(
        tmp_path / "qrels.txt", qrels_lines)
    expected = trec_eval_values(NEAR_TIES, qrels_lines)
    values = pipeline.score(qrels, run, list(TREC_EVAL), per_query=True)
    for row in values.iter_rows(named=True):
        for ours, theirs in TREC_EVAL.items():
            assert row[ours] == pytest.approx(expected[row["query"]][theirs], abs=1e-12)
    measures = [ir_measures.parse_measure(m) for m in ("AP", "RR", "nDCG")]
    theirs = ir_measures.calc_aggregate(measures, ir_measures.read_trec_qrels(qrels),
                                        ir_measures.read_trec_run(run))
    assert pipeline.score(qrels, run, ["map", "mrr", "ndcg"]) == pytest.approx(
        {"map": theirs[measures[0]], "mrr": theirs[measures[1]], "ndcg": theirs[measures[2]]},
        abs=1e-12)
    # the near ties matter: in double precision q1's relevant a would rank first
    assert expected["q1"]["map"] == 0.5


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
    expected = pipeline.score(qrels_path, path, list(TREC_EVAL))
    for run in runs:
        for qrels in qrels_forms:
            assert pipeline.score(qrels, run, list(TREC_EVAL)) == expected
    # integer ids in DataFrames are the same ids as in a file
    numbers = pl.DataFrame({"query": [1, 1, 2], "doc": [10, 11, 12], "score": [1.0, 1.0, 2.0]})
    (tmp_path / "n.trec").write_text("1 Q0 10 1 1 x\n1 Q0 11 2 1 x\n2 Q0 12 1 2 x\n")
    judged = pl.DataFrame({"query": [1, 2], "doc": [10, 12], "relevance": [1, 1]})
    assert pipeline.score(judged, numbers, "map mrr") == pipeline.score(
        judged, tmp_path / "n.trec", "map mrr") == {"map": 0.75, "mrr": 0.75}


def test_counting_rule_and_what_is_left_out_is_logged(tmp_path, caplog):
    """As make eval: a query the run does not answer scores 0; queries without a relevant
    document, and the run's unjudged queries, are left out; each counted in the log."""
    run = pl.DataFrame({"query": ["a", "a", "z"], "doc": ["1", "2", "1"],
                        "score": [2.0, 1.0, 1.0]})
    qrels = pl.DataFrame({"query": ["a", "b", "c"], "doc": ["2", "1", "1"],
                          "relevance": [1, 1, 0]})
    with caplog.at_level(logging.WARNING, logger="pipeline.evaluation.score"):
        values = pipeline.score(qrels, run, ["map", "recall@30"], per_query=True)
    assert values.rows() == [("a", 0.5, 1.0), ("b", 0.0, 0.0)]
    assert pipeline.score(qrels, run, "map") == {"map": 0.25}
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
    assert pipeline.score(qrels, run, "csfcube") == pytest.approx(
        {"ndcg%20": 2 / 3, "map_ranked-l2": (1 + 2 / 3) / 2})
    assert list(pipeline.score(qrels, run, "mdcr")) == ["map", "ndcg", "recall@5"]
    assert list(pipeline.score(qrels, run, "large-scale")) == ["map", "ndcg", "recall@30"]
    with pytest.raises(InputError, match="'auto' is a pool's own set"):
        pipeline.score(qrels, run, "auto")


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
    assert one_line_error(lambda: pipeline.score(qrels, five, "map")).startswith(
        f"{five}:2: not a TREC run line (qid Q0 docid rank score tag, 6 fields")
    text = tmp_path / "text.qrels"
    text.write_text("q1 0 d10 1\nq1 0 d2 high\n")
    assert one_line_error(lambda: pipeline.score(text, run, "map")) == (
        f"{text}:2: the relevance 'high' is not an integer; write an integer grade "
        "(0 = not relevant)")
    assert "did you mean 'ndcg@10'?" in one_line_error(
        lambda: pipeline.score(qrels, run, "ndgc@10"))
    twice = pl.DataFrame({"query": ["q1", "q1"], "doc": ["d1", "d1"], "score": [1.0, 2.0]})
    assert "ranks the document d1 twice" in one_line_error(
        lambda: pipeline.score(qrels, twice, "map"))
    clash = pl.DataFrame({"query": ["q1", "q1"], "doc": ["d1", "d1"], "relevance": [1, 2]})
    assert "judged twice with different grades (1, 2)" in one_line_error(
        lambda: pipeline.score(clash, run, "map"))
    no_score = pl.DataFrame({"query": ["q1"], "doc": ["d1"], "rank": [1]})
    assert "has no column score" in one_line_error(
        lambda: pipeline.score(qrels, no_score, "map"))
    fractional = pl.DataFrame({"query": ["q1"], "doc": ["d1"], "relevance": [0.5]})
    assert "not integers" in one_line_error(lambda: pipeline.score(fractional, run, "map"))
    assert "is not a file" in one_line_error(
        lambda: pipeline.score(qrels, tmp_path / "missing.trec", "map"))
    bad_score = tmp_path / "nan.trec"
    bad_score.write_text("q1 Q0 d1 1 nan x\n")
    assert f"{bad_score}:1: not a TREC run line" in one_line_error(
        lambda: pipeline.score(qrels, bad_score, "map"))
    assert one_line_error(lambda: pipeline.score(ranx.Run({"q": {"d": 1.0}}), run, "map"))
    assert "per_query=1" in one_line_error(lambda: pipeline.score(qrels, run, "map",
                                                                   per_query=1))
    assert "no query of the qrels has a relevant document" in one_line_error(
        lambda: pipeline.score(pl.DataFrame({"query": ["q1"], "doc": ["d1"],
                                             "relevance": [0]}), run, "map"))
    assert "two or more runs" in one_line_error(
        lambda: pipeline.compare(qrels, {"a": run}, "map"))
    assert "unknown significance test 'wilcoxon'" in one_line_error(
        lambda: pipeline.compare(qrels, {"a": run, "b": run}, "map", test="wilcoxon"))
    assert "correction='bonferroni': use one of holm, none" in one_line_error(
        lambda: pipeline.compare(qrels, {"a": run, "b": run}, "map", correction="bonferroni"))
    assert "alpha=1.5" in one_line_error(
        lambda: pipeline.compare(qrels, {"a": run, "b": run}, "map", alpha=1.5))
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
    t = pipeline.compare(judged, runs, "large-scale")
    fisher = pipeline.compare(judged, runs, "large-scale", test="randomization")
    assert isinstance(t, pipeline.Comparison)
    assert t.metrics == ("map", "ndcg", "recall@30")
    # the report's pairs: pools, metric, a, b, mean a, mean b, t-test p (Holm), randomization
    shown = {row[1]: row[2:] for row in _markdown_rows(report.tables["significance"].markdown)
             if row[2:4] == ["bm25", "random"]}
    assert set(shown) == {"map", "ndcg", "recall@30"}
    for metric, (a, b, mean_a, mean_b, t_p, fisher_p) in shown.items():
        pair = t.pairs.filter(pl.col("metric") == metric).row(0, named=True)
        other = fisher.pairs.filter(pl.col("metric") == metric).row(0, named=True)
        assert (pair["a"], pair["b"]) == (a, b)
        assert (f"{pair['mean_a'] * 100:.1f}", f"{pair['mean_b'] * 100:.1f}") == (mean_a, mean_b)
        assert markdown_text(p_cell(pair["p"], pair["p_adjusted"], pair["queries"])) == t_p
        assert markdown_text(p_cell(other["p"], other["p_adjusted"], other["queries"])) \
            == fisher_p
    # the report's bootstrap intervals: pools, metric, model, queries, mean, interval, and
    # the interval's simulated coverage
    intervals = {(row[1], row[2]): row[3:6] for row in _markdown_rows(
        report.tables["significance-intervals"].markdown) if len(row) == 7
        and row[0] != "pools"}
    for row in t.frame().iter_rows(named=True):
        assert intervals[(row["metric"], row["model"])] == [
            str(row["queries"]), f"{row['mean'] * 100:.1f}",
            interval_cell(row["low"], row["high"], row["queries"], row["mean"])]
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
    intact = pipeline.score(qrels, paths.trec, "map")
    changed = "".join(lines).replace("q3 Q0 d3 21 4.0", "q3 Q0 d3 21 0.1")
    assert changed != "".join(lines)
    paths.trec.write_text(changed)
    mine = tmp_path / "mine.trec"  # the same bytes, no manifest: one's own run
    mine.write_text(changed)
    assert pipeline.score(qrels, mine, "map") != intact  # what a reader would have returned
    for call in (lambda: pipeline.score(qrels, paths.trec, "map"),
                 lambda: pipeline.compare(qrels, {"a": paths.trec, "b": mine}, "map")):
        with pytest.raises(InputError, match="does not match its manifest") as refused:
            call()
        assert str(paths.trec) in refused.value.message
        assert refused.value.repair.command() == "make eval CORPUS=demo MODEL=bm25"


# One measure by three tools' names: (ranx's, the canonical name outputs carry; ir_measures';
# trec_eval's; the relevance level trec_eval is run with, its -l). Cutoffs of 3 fall inside
# RUN_LINES' ties; level 2 makes grade 1 non-relevant.
NAMINGS = [
    ("map", "AP", "map", 1), ("map@3", "AP@3", "map_cut_3", 1),
    ("map@100", "AP@100", "map_cut_100", 1), ("ndcg", "nDCG", "ndcg", 1),
    ("ndcg@3", "nDCG@3", "ndcg_cut_3", 1), ("ndcg@10", "nDCG@10", "ndcg_cut_10", 1),
    ("recall@3", "R@3", "recall_3", 1), ("recall@30", "R@30", "recall_30", 1),
    ("precision@3", "P@3", "P_3", 1), ("precision@10", "P@10", "P_10", 1),
    ("mrr", "RR", "recip_rank", 1), ("r-precision", "Rprec", "Rprec", 1),
    ("hit_rate@3", "Success@3", "success_3", 1),
    ("map-l2", "AP(rel=2)", "map-l2", 2), ("map@3-l2", "AP(rel=2)@3", "map_cut_3-l2", 2),
    ("precision@3-l2", "P(rel=2)@3", "P_3-l2", 2), ("recall@3-l2", "R(rel=2)@3", "recall_3-l2", 2),
    ("mrr-l2", "RR(rel=2)", "recip_rank-l2", 2), ("r-precision-l2", "Rprec(rel=2)", "Rprec-l2", 2),
    ("hit_rate@3-l2", "Success(rel=2)@3", "success_3-l2", 2),
]


def pytrec_eval_value(trec_name: str, level: int, run_lines=RUN_LINES) -> dict[str, float]:
    """trec_eval's value per query of `trec_name` (`P_3-l2`: P_3 run with -l2)."""
    run, qrels = {}, {}
    for query, doc, score in run_lines:
        run.setdefault(query, {})[doc] = score
    for query, doc, rel in QRELS_LINES:
        qrels.setdefault(query, {})[doc] = rel
    measure = trec_name.partition("-l")[0]
    asked = re.sub(r"_([0-9]+)$", r".\1", measure)  # P_3 is asked for as P.3
    values = pytrec_eval.RelevanceEvaluator(qrels, {asked}, relevance_level=level).evaluate(run)
    return {query: value[measure] for query, value in values.items()}


def qrels_files(tmp_path) -> dict[str, str]:
    """The same judgments as a TREC qrels file and as BEIR's qrels/test.tsv, with its header
    and without."""
    beir = "".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS_LINES)
    (tmp_path / "beir.tsv").write_text("query-id\tcorpus-id\tscore\n" + beir)
    (tmp_path / "bare.tsv").write_text(beir)
    return {"trec": write_qrels(tmp_path / "qrels.txt"), "beir": str(tmp_path / "beir.tsv"),
            "beir without a header": str(tmp_path / "bare.tsv")}


@pytest.mark.parametrize("form", ["trec", "beir", "beir without a header"])
def test_three_tools_names_give_trec_eval_and_ir_measures_values(tmp_path, form):
    """Issue 50: ir_measures' and trec_eval's names are read as ranx's (the names outputs
    carry), per query and mean equal to pytrec_eval (trec_eval's names) and ir_measures
    itself (its names), on a run with ties, unjudged documents and graded relevance, against
    TREC qrels and BEIR's qrels .tsv."""
    run, qrels = write_run(tmp_path / "run.trec"), qrels_files(tmp_path)[form]
    judged = list(ir_measures.read_trec_qrels(qrels_files(tmp_path)["trec"]))
    for tool in range(3):
        asked = [names[tool] for names in NAMINGS]
        values = pipeline.score(qrels, run, asked, per_query=True)
        assert values.columns == ["query", *dict.fromkeys(asked)]  # issue 56: as asked
        means = pipeline.score(qrels, run, asked)
        assert list(means) == list(dict.fromkeys(asked))
        for names in NAMINGS:
            ours, ir_name, trec_name, level = names
            expected = pytrec_eval_value(trec_name, level)
            assert dict(values.select("query", names[tool]).rows()) == pytest.approx(
                expected, abs=1e-12), (tool, ours)
            measure = ir_measures.parse_measure(ir_name)
            theirs = {m.query_id: m.value for m in ir_measures.iter_calc(
                [measure], judged, list(ir_measures.read_trec_run(run)))}
            assert theirs == pytest.approx(expected, abs=1e-12), ir_name
            assert means[names[tool]] == pytest.approx(ir_measures.calc_aggregate(
                [measure], judged, list(ir_measures.read_trec_run(run)))[measure], abs=1e-12)
    # the ties matter: in the file's order q1's RR would be 1, not 1/3
    in_file_order = [(q, d, -i) for i, (q, d, _) in enumerate(RUN_LINES)]
    assert pytrec_eval_value("recip_rank", 1, in_file_order)["q1"] == 1
    assert pytrec_eval_value("recip_rank", 1)["q1"] == pytest.approx(1 / 3)


def test_rr_at_a_cutoff_is_ir_measures_given_trec_eval_ranking(tmp_path):
    """ir_measures' RR@k (its msmarco provider; trec_eval has no cut of recip_rank) breaks
    score ties otherwise than trec_eval: given the run ranked as trec_eval ranks it, its
    values are ours for RR@2 and mrr@2 alike; on the tied scores they differ."""
    qrels, run = qrels_files(tmp_path)["trec"], write_run(tmp_path / "run.trec")
    ranked = pl.DataFrame(RUN_LINES, schema=["query", "doc", "score"], orient="row").sort(
        "query", "score", "doc", descending=[False, True, True])
    ordered = write_run(tmp_path / "ordered.trec", [
        (q, d, -i) for i, (q, d, _) in enumerate(ranked.iter_rows())])
    judged = list(ir_measures.read_trec_qrels(qrels))
    for name in ("mrr@2", "RR@2", "RR(rel=2)@2"):
        measure = ir_measures.parse_measure(name if name != "mrr@2" else "RR@2")
        values = pipeline.score(qrels, run, [name], per_query=True)
        expected = {m.query_id: m.value for m in ir_measures.iter_calc(
            [measure], judged, list(ir_measures.read_trec_run(ordered)))}
        assert dict(values.rows()) == pytest.approx(expected, abs=1e-12), name
    on_ties = {m.query_id: m.value for m in ir_measures.iter_calc(
        [ir_measures.parse_measure("RR@2")], judged, list(ir_measures.read_trec_run(run)))}
    assert on_ties != dict(pipeline.score(qrels, run, "RR@2", per_query=True).rows())


def test_a_beir_qrels_file_is_read_as_its_loader_reads_it(tmp_path):
    """BEIR's qrels .tsv: tab-separated (an id may hold a space, as csv reads it), the header
    left out, blank lines skipped; a line of other fields or a header of other words refused,
    naming the line."""
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq 1\td 1\t2\n\nq 1\td2\t0\nq2\td3\t1\r\n")
    run = pl.DataFrame({"query": ["q 1", "q 1", "q2"], "doc": ["d2", "d 1", "d3"],
                        "score": [2.0, 1.0, 1.0]})
    assert pipeline.score(beir, run, "map mrr", per_query=True).rows() == [
        ("q 1", 0.5, 0.5), ("q2", 1.0, 1.0)]
    short = tmp_path / "short.tsv"
    short.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n")
    assert one_line_error(lambda: pipeline.score(short, run, "map")) == (
        f"{short}:3: 2 fields, not 3: a BEIR qrels line is 'query-id corpus-id score', "
        "separated by tabs")
    windows = tmp_path / "windows.tsv"  # every line ended by CRLF, the header's too
    windows.write_bytes(beir.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    assert pipeline.score(windows, run, "map mrr") == pipeline.score(beir, run, "map mrr")
    other = tmp_path / "other.tsv"
    other.write_text("qid\tdocid\trel\nq1\td1\t1\n")
    assert one_line_error(lambda: pipeline.score(other, run, "map")) == (
        f"{other}:1: the relevance 'rel' is not an integer; write an integer grade (0 = not "
        "relevant) (BEIR's header line is 'query-id\\tcorpus-id\\tscore')")


def test_a_run_file_near_the_root_is_read_as_any_file(tmp_path):
    """A run two folders from the root (/tmp/r.trec) is no pipeline run to check against a
    manifest: it is scored (was an IndexError)."""
    import tempfile

    qrels = write_qrels(tmp_path / "qrels.txt")
    with tempfile.NamedTemporaryFile("w", dir="/tmp", suffix=".trec") as near:
        near.write(Path(write_run(tmp_path / "run.trec")).read_text())
        near.flush()
        assert pipeline.score(qrels, near.name, "map") == pipeline.score(
            qrels, tmp_path / "run.trec", "map")


def test_a_call_in_the_old_order_is_refused_saying_the_order(tmp_path):
    """Issue 50: score and compare take the qrels first (ranx's order); a call with the run
    first, where the contents show it (a run's scores, qrels' grades), is refused in one line
    rather than scored."""
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    run_frame = pl.DataFrame(RUN_LINES, schema=["query", "doc", "score"], orient="row")
    qrels_frame = pl.DataFrame(QRELS_LINES, schema=["query", "doc", "rel"], orient="row")
    run_dict, qrels_dict = {}, {}
    for query, doc, score in RUN_LINES:
        run_dict.setdefault(query, {})[doc] = score
    for query, doc, rel in QRELS_LINES:
        qrels_dict.setdefault(query, {})[doc] = rel
    order = "score takes (qrels, run, metrics), the qrels first as in ranx and ir_measures"
    for old in ((run, qrels), (run_frame, qrels_frame), (run_frame.to_pandas(), qrels),
                (ranx.Run(run_dict), ranx.Qrels(qrels_dict)), (run, qrels_frame)):
        text = one_line_error(lambda old=old: pipeline.score(*old, "map"))
        assert text == (f"{order}, but the first argument is a run and the second is qrels: "
                        "put the qrels first")
    # dicts as files: a value no grade can be (a score such as 0.93) marks the run
    assert one_line_error(lambda: pipeline.score(run_dict, qrels_dict, "map")) == (
        f"{order}, but the first argument is a run: put the qrels first")
    assert "its first line has 4 fields, as a qrels line, not a run" in one_line_error(
        lambda: pipeline.score(qrels, qrels, "map"))  # issue 56: no swap, a run that is none
    assert one_line_error(lambda: pipeline.compare({"a": run, "b": run}, qrels, "map")) == (
        "compare takes (qrels, runs, metrics), the qrels first as in ranx and ir_measures, but "
        "the first argument is a dict of runs and the second is qrels: put the qrels first")
    assert pipeline.score(qrels, run, "map") == pipeline.score(qrels_frame, run_frame, "map")
    # BEIR's qrels as a DataFrame also have a score column: not taken for a run
    beir = pl.DataFrame(QRELS_LINES, schema=["query-id", "corpus-id", "score"], orient="row")
    assert "without the column 'query'" in one_line_error(
        lambda: pipeline.score(beir, run, "map"))


@pytest.mark.parametrize(("name", "line"), [
    ("Judged@10", "metric 'Judged@10': Judged is not computed here; the closest measure that "
                  "is: precision@10 (names: docs/evaluation.md)"),
    ("bpref", "metric 'bpref': bpref is not computed here; the closest measure that is: map "
              "(names: docs/evaluation.md)"),
    ("P", "metric 'P': trec_eval's P is a family of cutoffs: name one, such as P_10"),
    ("R", "metric 'R': ir_measures' R needs a cutoff, such as R@10"),
    ("Rprec@5", "metric 'Rprec@5': ir_measures' Rprec takes no cutoff"),
    ("ndcg_cut_10-l2", "metric 'ndcg_cut_10-l2': trec_eval's ndcg_cut takes the grades as "
                       "gains and ignores -l: write ndcg_cut_10"),
    ("nDCG(rel=2)@10", "metric 'nDCG(rel=2)@10': ir_measures' rel=2 is not computed here; "
                       "nDCG takes a cutoff only"),
    ("AP(judged_only=True)", "metric 'AP(judged_only=True)': ir_measures' judged_only=True is "
                             "not computed here; AP takes a cutoff and rel=<1 to 100> only"),
])
def test_a_measure_not_computed_is_refused_in_one_line(tmp_path, name, line):
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    assert line in one_line_error(lambda: pipeline.score(qrels, run, name))


def test_the_parser_reads_ir_measures_parameters_and_trec_eval_forms():
    """ir_measures' parameters inside a list (commas in parentheses), its defaults, and
    trec_eval's `-m` form (`P.10`): each read as ranx names it, each once."""
    from pipeline.glossary import parse_metrics
    from pipeline.options.checks import metric_list

    text = "AP(rel=2, judged_only=False)@100, nDCG(dcg='log2')@10 P.10 AP(rel=1) map MRR RPrec"
    assert parse_metrics(text) == (
        "map@100-l2", "ndcg@10", "precision@10", "map", "mrr", "r-precision")
    assert metric_list(text) == text  # make's METRICS: checked by the same parser


def test_float_ids_and_grades_beyond_int64_are_refused_in_one_line(tmp_path):
    """Issue 56: a DataFrame run of float ids (1.0) against qrels "1" scored MAP 0.0 (the ids
    became "1.0"); a grade of 10**30 was a polars traceback. Ids are identifiers: a float id
    column is refused, naming it; a grade outside int64 is refused, naming its row or line."""
    qrels = write_qrels(tmp_path / "qrels.txt", [("1", "1", 1), ("1", "2", 0)])
    floats = pl.DataFrame({"query": [1.0, 1.0], "doc": [1.0, 2.0], "score": [2.0, 1.0]})
    assert one_line_error(lambda: pipeline.score(qrels, floats, "map")).startswith(
        "run: the column 'query' holds Float64 ids: ids are strings or integers")
    assert "the column 'doc' holds Float64 ids" in one_line_error(lambda: pipeline.score(
        qrels, floats.with_columns(pl.col("query").cast(pl.Int64)), "map"))
    judged = pl.DataFrame({"query": [1.0], "doc": ["1"], "relevance": [1]})
    assert "qrels: the column 'query' holds Float64 ids" in one_line_error(
        lambda: pipeline.score(judged, floats.cast({"query": pl.Int64, "doc": pl.Int64}), "map"))
    assert pipeline.score(qrels, floats.cast({"query": pl.Int64, "doc": pl.Int64}), "map") == {
        "map": 1.0}  # the same ids as integers: scored
    run = write_run(tmp_path / "run.trec", [("1", "1", 2.0)])
    for huge in (pl.DataFrame({"query": ["1"], "doc": ["1"], "relevance": [10**30]}),
                 pl.DataFrame({"query": ["1"], "doc": ["1"], "relevance": [1e30]})):
        assert one_line_error(lambda huge=huge: pipeline.score(huge, run, "map")).startswith(
            "qrels: row 1: the grade 1")
    (tmp_path / "huge.txt").write_text(f"1 0 1 1\n1 0 2 {10**30}\n")
    assert one_line_error(lambda: pipeline.score(tmp_path / "huge.txt", run, "map")) == (
        f"{tmp_path / 'huge.txt'}:2: the grade {10**30} is outside the grades taken "
        "(-9,223,372,036,854,775,808 to 9,223,372,036,854,775,807, int64): give an integer "
        "grade such as 0 (not relevant), 1 or 2")


def test_a_run_file_of_four_fields_is_told_what_a_run_line_holds(tmp_path):
    """Issue 56: a malformed run (TREC run lines of 4 fields) after qrels was told to "put the
    qrels first": the order was right, the run was not; the field counts are the cause."""
    qrels = write_qrels(tmp_path / "qrels.txt")
    four = tmp_path / "four.trec"
    four.write_text("q1 Q0 d1 1\nq1 Q0 d2 2\n")
    assert one_line_error(lambda: pipeline.score(qrels, four, "map")) == (
        f"run {str(four)!r}: its first line has 4 fields, as a qrels line, not a run: a TREC "
        "run line has 6 fields (qid Q0 docid rank score tag), a qrels line 4 (query 0 doc "
        "relevance); a DataFrame run has columns query, doc, score")
    graded = pl.DataFrame(QRELS_LINES, schema=["query", "doc", "relevance"], orient="row")
    assert "the second argument holds relevance grades, as qrels do, not a run" in (
        one_line_error(lambda: pipeline.score(qrels, graded, "map")))
    # a true swap still says the order
    assert one_line_error(lambda: pipeline.score(write_run(tmp_path / "r.trec"), qrels, "map")
                          ).endswith("put the qrels first")


@pytest.mark.parametrize(("name", "exact"), [
    ("p@10", "P@10"), ("Map", "map"), ("NDCG@10", "nDCG@10"), ("ndcg_CUT_10", "ndcg_cut_10"),
    ("RECALL_30", "recall_30"), ("ap(rel=2)", "AP(rel=2)"), ("rr", "RR"), ("map-L2", "map-l2"),
    ("Hit_Rate@3", "hit_rate@3"), ("RPREC", "Rprec"), ("NDCG%20", "ndcg%20")])
def test_a_metric_name_in_any_case_reads_as_its_measure(tmp_path, name, exact):
    """Issue 56: `p@10` was refused with a 400-character message; a name in any letter case
    that reads as one measure in the three vocabularies is that measure."""
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    from pipeline.glossary import canonical_metric

    assert canonical_metric(name) == canonical_metric(exact)
    assert pipeline.score(qrels, run, [name]) == {name: pipeline.score(qrels, run, [exact])[exact]}


def test_an_unknown_metric_is_refused_in_one_short_line(tmp_path):
    """Issue 56: the refusal names the closest valid names, not every name known."""
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    text = one_line_error(lambda: pipeline.score(qrels, run, "ndgc@10"))
    assert "unknown metric 'ndgc@10' (did you mean 'ndcg@10'" in text and len(text) < 300
    assert "metric 'p': trec_eval's P is a family of cutoffs: name one, such as P_10" in (
        one_line_error(lambda: pipeline.score(qrels, run, "p")))
    assert "Bpref is not computed here" in one_line_error(
        lambda: pipeline.score(qrels, run, "BPREF"))


def test_each_metric_is_returned_under_the_name_it_was_asked_by(tmp_path):
    """Issue 56: asked for nDCG@10 or AP(rel=2), a user got ndcg@10 and map-l2 (a KeyError
    on result["nDCG@10"]); each is returned as asked, as ir_measures does; a set's under its
    documented names; two names of one measure both."""
    run, qrels = write_run(tmp_path / "run.trec"), write_qrels(tmp_path / "qrels.txt")
    asked = ["nDCG@10", "AP(rel=2)", "ndcg_cut_10", "map"]
    means = pipeline.score(qrels, run, asked)
    assert list(means) == asked and means["nDCG@10"] == means["ndcg_cut_10"]
    assert means["AP(rel=2)"] == pipeline.score(qrels, run, "map-l2")["map-l2"]
    assert pipeline.score(qrels, run, asked, per_query=True).columns == ["query", *asked]
    assert list(pipeline.score(qrels, run, "beir")) == ["ndcg@10", "recall@100"]
    compared = pipeline.compare(qrels, {"a": run, "b": run}, "nDCG@10 AP(rel=2)")
    assert compared.frame()["metric"].unique(maintain_order=True).to_list() == [
        "nDCG@10", "AP(rel=2)"]
    assert compared.pairs["metric"].to_list() == ["nDCG@10", "AP(rel=2)"]


def test_dicts_of_dicts_and_ir_measures_tuples_equal_their_own_tools(tmp_path):
    """Issue 56: qrels and runs as {query: {doc: value}} (pytrec_eval's, BEIR's) and as lists
    of ir_measures' Qrel and ScoredDoc were refused; taken now, and their numbers equal
    pytrec_eval's and ir_measures' own on the same input to 1e-9."""
    run_dict, qrels_dict = {}, {}
    for query, doc, score in RUN_LINES:
        run_dict.setdefault(query, {})[doc] = score
    for query, doc, rel in QRELS_LINES:
        qrels_dict.setdefault(query, {})[doc] = rel
    trec = pytrec_eval.RelevanceEvaluator(qrels_dict, {"map", "ndcg_cut.10", "P.3"}).evaluate(
        run_dict)
    values = pipeline.score(qrels_dict, run_dict, ["map", "ndcg_cut_10", "P_3"], per_query=True)
    for row in values.iter_rows(named=True):
        for name in ("map", "ndcg_cut_10", "P_3"):
            assert row[name] == pytest.approx(trec[row["query"]][name], abs=1e-9)
    judged = [ir_measures.Qrel(q, d, r) for q, d, r in QRELS_LINES]
    ranked = [ir_measures.ScoredDoc(q, d, s) for q, d, s in RUN_LINES]
    measures = [ir_measures.parse_measure(m) for m in ("nDCG@10", "AP(rel=2)", "R@3")]
    theirs = ir_measures.calc_aggregate(measures, judged, ranked)
    ours = pipeline.score(judged, ranked, [str(m) for m in measures])
    assert ours == pytest.approx({str(m): v for m, v in theirs.items()}, abs=1e-9)
    assert pipeline.score(qrels_dict, ranked, "map") == pipeline.score(judged, run_dict, "map")
    compared = pipeline.compare(judged, {"dict": run_dict, "tuples": ranked}, ["nDCG@10"])
    assert compared.frame()["mean"].to_list() == pytest.approx([theirs[measures[0]]] * 2,
                                                               abs=1e-9)
    assert "query 'q1', document 'd2' has the score 'x', not a number" in one_line_error(
        lambda: pipeline.score(qrels_dict, {"q1": {"d2": "x"}}, "map"))
    assert "the first argument is a run" in one_line_error(
        lambda: pipeline.score(ranked, judged, "map"))
