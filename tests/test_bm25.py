"""Real Lucene through Anserini: index a pool, search it, guard the clause limit."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline import bm25
from pipeline.errors import InputError


@pytest.fixture(scope="module")
def docs() -> pl.DataFrame:
    return pl.DataFrame({
        "corpusid": [11, 12, 13, 14],
        "title": ["Myocardial infarction outcomes", "Tumor chemotherapy response",
                  "Volcanic eruptions and magma", "Cardiac arrhythmia after infarction"],
        "abstract": ["Troponin levels in myocardial infarction patients.",
                     "Chemotherapy resistance in solid tumor cells.",
                     "Magma chambers feed volcanic eruptions.",
                     "Arrhythmia follows myocardial infarction in many patients."],
    })


@pytest.fixture(scope="module")
def index_dir(docs, tmp_path_factory):
    out = tmp_path_factory.mktemp("lucene") / "bm25"
    info = bm25.build_index(docs, out, threads=1)
    assert info["documents"] == 4
    return out


def test_search_ranks_by_bm25(index_dir):
    queries = pl.DataFrame({"corpusid": [1, 2], "title": ["myocardial infarction", "magma"],
                            "abstract": [None, "volcanic eruptions"]})
    hits, capped = bm25.search(queries, index_dir, k=10, threads=1)
    assert capped == []
    first = hits.filter(pl.col("query") == 1).sort("score", descending=True)
    assert set(first["doc"]) == {11, 14}  # only documents sharing a term are returned
    assert first["doc"][0] == 11  # both query terms twice, against one of them twice
    second = hits.filter(pl.col("query") == 2)
    assert second["doc"].to_list() == [13]
    assert (hits["score"] > 0).all()


def test_pyserini_defaults_and_parameters_change_scores(index_dir):
    queries = pl.DataFrame({"corpusid": [1], "title": ["myocardial infarction patients"],
                            "abstract": [None]})
    default, _ = bm25.search(queries, index_dir, k=10, threads=1)
    other, _ = bm25.search(queries, index_dir, k=10, k1=1.5, b=1.0, threads=1)
    assert default.sort("doc")["score"].to_list() != other.sort("doc")["score"].to_list()


def test_long_queries_are_capped_to_the_clause_limit(index_dir, docs):
    long_text = " ".join(f"term{i}" for i in range(1500)) + " myocardial myocardial"
    queries = pl.DataFrame({"corpusid": [5], "title": [long_text], "abstract": [None]})
    hits, capped = bm25.search(queries, index_dir, k=10, threads=1, pool_papers=lambda: docs)
    assert capped == [5]
    assert set(hits["doc"]) == {11, 14}  # terms found in the pool are kept first


def test_cap_query_keeps_top_tfidf_terms():
    df = {"alpha": 1, "beta": 9, "gamma": 1}
    text, cut = bm25.cap_query("alpha alpha beta gamma delta the of", df, 10, max_terms=2)
    assert cut and text.split() == ["alpha", "alpha", "gamma"]  # delta is in no document
    assert bm25.cap_query("short query", {}, 10) == ("short query", False)


def test_missing_index_is_a_clear_error(tmp_path):
    queries = pl.DataFrame({"corpusid": [1], "title": ["x"], "abstract": [None]})
    with pytest.raises(InputError, match="no Lucene index"):
        bm25.search(queries, tmp_path / "nothing", k=5)


def test_a_failed_anserini_run_keeps_its_log(tmp_path):
    """Defect 10: the error named a log inside a temporary folder that was already deleted."""
    from pipeline.errors import ToolError

    keep = tmp_path / "runs" / "bm25-search.failed.log"
    # Anserini exits with status 0 here: the missing output tells the failure
    with pytest.raises(ToolError, match=f"log kept at {keep}: .*-output"):
        bm25.run_anserini("io.anserini.search.SearchCollection", ["-index", "/nonexistent"],
                          tmp_path / "work.log", keep, expect=tmp_path / "run.txt")
    assert "-output" in keep.read_text()


def test_java_must_exist(monkeypatch):
    monkeypatch.setenv("JAVA", "/nonexistent/java")
    with pytest.raises(InputError, match="JAVA=/nonexistent/java is not an executable"):
        bm25.java_binary()
