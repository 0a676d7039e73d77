"""MDCR-style benchmarks (pipeline/mdcr/build.py, benchmark.py): typed candidates, the graph
type on a hand-built citation graph, ranking each query's own list, per-type scores, Tables 3
and 4."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import Place, pool_names
from pipeline.mdcr.benchmark import read_benchmark
from pipeline.mdcr.build import _graph_negatives, build_mdcr, negative_jaccard
from pipeline.models import get_model
from pipeline.pools.build import load_pool
from pipeline.report.build import report
from pipeline.retrieval.runs import load_run
from pipeline.retrieval.search import search_pool
from tests.conftest import MDCR_FIELDS as FIELDS
from tests.conftest import MDCR_MODELS as MODELS


def test_graph_negatives_follow_the_overlap_order():
    """q=1 cites 10, 11, 12. O(1, 11) = 2/3 (11 cites 10 and 12), O(1, 10) = O(1, 12) = 1/3
    (ties: lower id first). Neighbours not cited by q: 11 -> {21}; 10 -> {20, 30}; 12 -> {22}."""
    edges = [(1, 10), (1, 11), (1, 12), (10, 11), (10, 20), (30, 10), (11, 10), (11, 12),
             (11, 21), (12, 22)]
    citations = pl.LazyFrame({"citing": [a for a, _ in edges], "cited": [b for _, b in edges]})
    everything = pl.LazyFrame({"corpusid": [1, 10, 11, 12, 20, 21, 22, 30]})
    queries = pl.Series("corpusid", [1])

    def picked(n: int, allowed: pl.LazyFrame = everything) -> list[int]:
        return _graph_negatives(queries, citations, allowed, n, seed=0)["doc"].to_list()

    assert picked(1) == [21]  # the cited paper of highest overlap comes first
    assert picked(3)[0] == 21 and set(picked(3)) == {21, 20, 30}  # then 10's, before 12's
    assert picked(10)[:1] == [21] and picked(10)[3] == 22 and set(picked(10)) == {20, 21, 22,
                                                                                   30}
    # only papers of the prefiltered corpus are candidates (30 has no text there)
    assert set(picked(10, everything.filter(pl.col("corpusid") != 30))) == {20, 21, 22}


def test_every_query_gets_typed_candidates(mdcr_source, mdcr_benchmark):
    corpus, root = mdcr_source
    out, info = mdcr_benchmark
    table, papers = read_benchmark(out)
    assert set(table["type"].unique()) == {"cited", "bm25", "graph", "most_cited", "random"}
    assert set(table["field"].unique()) == set(FIELDS)
    citations = pl.read_parquet(corpus / "citations.parquet")
    for field in FIELDS:
        pool = f"{field.lower()}-600-r0"
        queries, _, qrels = load_pool(corpus, pool)
        rows = table.filter(pl.col("field") == field)
        assert set(rows["query"]) == set(queries["corpusid"])
        counts = rows.group_by("query", "type").len()
        assert counts.filter(pl.col("type") == "cited")["len"].max() <= 5
        assert counts.filter(pl.col("type") != "cited")["len"].max() == 10
        # positives are cited papers of the pool; negatives are never cited by the query
        positives = rows.filter(pl.col("type") == "cited").select("query", "doc")
        assert positives.join(qrels, on=["query", "doc"], how="anti").is_empty()
        cites = citations.select(query="citing", doc="cited")
        negatives = rows.filter(pl.col("type") != "cited")
        assert negatives.join(cites, on=["query", "doc"], how="semi").is_empty()
        assert negatives.filter(pl.col("query") == pl.col("doc")).is_empty()
        # model-based negatives come from the model's top 200 on the field-level pool
        run = load_run(Place(corpus, root / "indexes", root / "runs"), pool,
                       "bm25").filter(pl.col("rank") <= 200)
        model_rows = rows.filter(pl.col("type") == "bm25")
        assert model_rows.join(run, on=["query", "doc"], how="anti").is_empty()
    # every listed paper has its title and abstract in the benchmark corpus
    listed = pl.concat([table["query"], table["doc"]]).unique()
    assert listed.is_in(papers["corpusid"].implode()).all()
    manifest = pl.read_parquet(out / "prefiltered.parquet").height
    assert info["benchmark"]["counts"]["papers"] == manifest == papers.height


def test_most_cited_negatives_are_the_fields_most_cited(mdcr_source, mdcr_benchmark):
    corpus, _ = mdcr_source
    table, _ = read_benchmark(mdcr_benchmark[0])
    pre = pl.read_parquet(corpus / "prefiltered.parquet")
    for field in FIELDS:
        top = (pre.filter(pl.col("fields").list.contains(field))
               .sort(["n_inbound", "corpusid"], descending=[True, False]).head(200))
        docs = table.filter(pl.col("field") == field, pl.col("type") == "most_cited")["doc"]
        assert docs.is_in(top["corpusid"].implode()).all()


def test_the_build_is_seeded(mdcr_source, mdcr_benchmark, tmp_path):
    corpus, root = mdcr_source
    place = Place(corpus, root / "indexes", root / "runs")
    again = build_mdcr(place, tmp_path / "again", MODELS, seed=0)
    build_mdcr(place, tmp_path / "other", MODELS, seed=0,
               per_type=3)
    pools = sorted(mdcr_benchmark[1]["benchmark"]["pools"])
    assert again["benchmark"]["pools"] == pools
    for pool in pools:
        first = pl.read_parquet(mdcr_benchmark[0] / "pools" / pool / "candidates.parquet")
        assert first.equals(pl.read_parquet(tmp_path / "again" / "pools" / pool /
                                            "candidates.parquet"))
        assert not first.equals(pl.read_parquet(tmp_path / "other" / "pools" / pool /
                                                "candidates.parquet"))


def test_a_short_type_is_counted_with_its_reason(mdcr_source, tmp_path):
    corpus, root = mdcr_source
    info = build_mdcr(Place(corpus, root / "indexes", root / "runs"), tmp_path / "big", MODELS,
                      seed=0, positives=50,
                      per_type=10, top=12)
    pool = sorted(info["benchmark"]["pools"])[0]
    short = json.loads((tmp_path / "big" / "pools" / pool / "manifest.json").read_text())["short"]
    assert short["cited"]["queries"] > 0 and "cites fewer" in short["cited"]["why"]


def test_bad_model_lists_are_refused(mdcr_source, tmp_path):
    corpus, root = mdcr_source
    place = Place(corpus, root / "indexes", root / "runs")
    with pytest.raises(InputError, match="MDCR_MODELS is empty"):
        build_mdcr(place, tmp_path / "x", [], seed=0)
    with pytest.raises(InputError, match="candidate types of their own"):
        build_mdcr(place, tmp_path / "x", ["random"], seed=0)
    with pytest.raises(InputError, match="no complete run"):
        build_mdcr(place, tmp_path / "x", ["minilm"], seed=0)
    with pytest.raises(InputError, match="no field-level test pools of seed 5"):
        build_mdcr(place, tmp_path / "x", MODELS, seed=5)
    assert not (tmp_path / "x").exists()
    before = sorted(p.name for p in corpus.iterdir())
    with pytest.raises(InputError, match="names the source corpus itself"):
        build_mdcr(place, corpus.parent / corpus.name, MODELS, seed=0)
    assert sorted(p.name for p in corpus.iterdir()) == before


def test_jaccard_of_a_model_with_itself_is_one(mdcr_source):
    corpus, root = mdcr_source
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in pool_names(corpus):
        search_pool(place, pool, get_model("random"))
    table = negative_jaccard(place, ["bm25", "random"], seed=0)
    assert table.height == 1 and 0 <= table["jaccard"][0] < 0.5
    same = negative_jaccard(place, ["bm25", "bm25"], seed=0)
    assert same["jaccard"][0] == pytest.approx(1.0)


def _search_and_score(out: Path, root: Path, model: str) -> None:
    place = Place(out, root / "indexes", root / "runs")
    for pool in pool_names(out):
        search_pool(place, pool, get_model(model))
        eval_run(place, pool, model, ("map", "ndcg", "recall@5"))


def test_each_query_ranks_its_own_list_and_types_are_scored(mdcr_source, mdcr_benchmark):
    _, root = mdcr_source
    out, _ = mdcr_benchmark
    _search_and_score(out, root, "bm25")
    table, _ = read_benchmark(out)
    for pool in pool_names(out):
        run = load_run(Place(out, root / "indexes", root / "runs"), pool, "bm25")
        _, candidates, _ = load_pool(out, pool)
        pairs = candidates.select("query", doc="corpusid").unique()
        # the run holds exactly each query's listed candidates, every one ranked
        assert run.select("query", "doc").sort("query", "doc").equals(
            pairs.sort("query", "doc"))
        metrics = pl.read_parquet(root / "runs" / out.name / pool / "bm25.metrics.parquet")
        assert set(metrics["negatives"]) == {"all", "official", "bm25", "graph", "most_cited",
                                             "random"}
        # every type is one the official evaluator reads: its lists are every list
        official = metrics.filter(pl.col("negatives") == "official").drop("negatives")
        assert official.equals(metrics.filter(pl.col("negatives") == "all").drop("negatives"))
        # a type's MAP is computed on the positives and that type only: >= the full list's
        full = metrics.filter(pl.col("negatives") == "all")["map"].mean()
        for kind in ("graph", "random"):
            assert metrics.filter(pl.col("negatives") == kind)["map"].mean() >= full


def test_report_has_tables_3_and_4(mdcr_source, mdcr_benchmark):
    _, root = mdcr_source
    out, _ = mdcr_benchmark
    _search_and_score(out, root, "bm25")
    _search_and_score(out, root, "random")
    collect_results(root / "corpora", root / "indexes", root / "runs")
    text = report(root / "runs", out.name)
    assert "MDCR Table 3" in text and "MDCR Table 4" in text
    table4 = text[text.index("MDCR Table 4"):].split("\n## ")[0]
    rows = {line.split("|")[1].strip(): line for line in table4.splitlines()
            if line.startswith("| ") and "negatives" not in line}
    assert set(rows) == {"bm25", "graph", "most_cited", "random"}
    assert (root / "runs" / "reports" / f"{out.name}-mdcr-types.tex").exists()
