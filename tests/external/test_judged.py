"""A BEIR-layout collection shaped as SciDocs (each query judges 5 documents relevant and 25
not, the corpus holds many more) imported with its judged-only pool (JUDGED=1): each query
ranks only its 30 judged documents, and BM25's and a dense encoder's metrics there equal
pytrec_eval's over each query's 30, computed apart from the pool's own-lists machinery."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import pytrec_eval

from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed
from pipeline.evaluation.evaluate import collect_results, eval_run, pool_metrics
from pipeline.external.beir import import_beir
from pipeline.layout import Place, pool_names
from pipeline.models import ModelEntry, get_model
from pipeline.pools.build import load_pool
from pipeline.report.build import report
from pipeline.retrieval.search import search_pool
from tests.conftest import make_ok
from tests.test_errors import cli
from tests.test_errors_inputs import refused

QUERIES, RELEVANT, NOT_RELEVANT, DOCUMENTS = 6, 5, 25, 600
DEEP = 1000  # a run deeper than the corpus: every judged document is in it


def _write(src: Path, docs: list[dict], queries: list[dict], qrels: list[str]) -> Path:
    src.mkdir(parents=True)
    for name, records in (("corpus.jsonl", docs), ("queries.jsonl", queries)):
        (src / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    (src / "qrels").mkdir()
    (src / "qrels" / "test.tsv").write_text("\n".join(["query-id\tcorpus-id\tscore", *qrels])
                                            + "\n")
    return src


@pytest.fixture(scope="module")
def scidocs(corpus_dir, tmp_path_factory) -> Path:
    """600 papers of the small corpus as documents; 6 queries, each the title of one document
    (judged 1, so BM25 finds it) with 4 more documents judged 1 and 25 judged 0; 420
    documents judged for no query."""
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(DOCUMENTS)
    docs = [{"_id": f"d{i}", "title": t, "text": a}
            for i, t, a in papers.select("corpusid", "title", "abstract").iter_rows()]
    ids = [d["_id"] for d in docs]
    per_query = RELEVANT + NOT_RELEVANT
    queries, qrels = [], []
    for n in range(QUERIES):
        judged = ids[n * per_query:(n + 1) * per_query]
        queries.append({"_id": f"q{n}", "text": docs[n * per_query]["title"]})
        qrels += [f"q{n}\t{d}\t{int(j < RELEVANT)}" for j, d in enumerate(judged)]
    return _write(tmp_path_factory.mktemp("scidocs") / "src", docs, queries, qrels)


@pytest.fixture(scope="module")
def imported(scidocs, tmp_path_factory):
    root = tmp_path_factory.mktemp("judged-data")
    corpus = root / "corpora" / "scidocs"
    info = import_beir(scidocs, corpus, judged=True)
    return corpus, root, info


def _run(trec: Path) -> dict[str, dict[str, float]]:
    run: dict = {}
    for line in trec.read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    return run


def _judged(qrels: pl.DataFrame) -> dict[str, dict[str, int]]:
    judged: dict = {}
    for q, d, r in qrels.select("query", "doc", "rel").iter_rows():
        judged.setdefault(q, {})[d] = int(r)
    return judged


def test_the_judged_pool_lists_each_querys_judged_documents(imported):
    corpus, _, info = imported
    assert info["collection"]["pools"] == ["beir-600-r0", "judged-30-r0"]
    assert pool_names(corpus) == ["beir-600-r0", "judged-30-r0"]
    queries, candidates, qrels = load_pool(corpus, "judged-30-r0")
    whole_queries, whole_candidates, whole_qrels = load_pool(corpus, "beir-600-r0")
    assert queries.equals(whole_queries) and qrels.equals(whole_qrels)  # the same questions
    assert whole_candidates.height == DOCUMENTS
    assert candidates.columns == ["query", "corpusid"]  # each query's own list
    assert candidates.sort("query", "corpusid").equals(
        qrels.select("query", corpusid="doc").sort("query", "corpusid"))
    assert candidates.group_by("query").len()["len"].to_list() == [30] * QUERIES
    assert pool_metrics(corpus, "judged-30-r0") == ("ndcg@10", "map", "ndcg")


@pytest.mark.parametrize("kind", ["bm25", pytest.param("dense", marks=pytest.mark.slow)])
def test_judged_pool_metrics_equal_pytrec_eval_over_each_querys_30(imported, scidocs, kind,
                                                                    tiny_bert, tmp_path):
    """BM25's statistics in a pool whose queries rank their own lists are those of the
    documents the lists hold: the reference is BEIR's pool of a collection of the judged
    documents only, searched deeper than it, each query's run cut by hand to its own 30. A
    dense score does not depend on the other documents: the reference is the whole pool's
    run, cut the same way. Both differ from the whole pool's metrics."""
    corpus, root, _ = imported
    entry = get_model("bm25") if kind == "bm25" else ModelEntry(
        "tiny-bert", "dense", str(tiny_bert), "cls", "ip", max_length=64)
    place = Place(corpus, root / "indexes", root / "runs")
    if kind == "dense":
        embed(place, entry)
    means = {}
    for pool in pool_names(corpus):
        search_pool(place, pool, entry, k=DEEP)
        means[pool] = eval_run(place, pool, entry.name, ("ndcg@10", "map", "ndcg"))["means"]
    _, candidates, qrels = load_pool(corpus, "judged-30-r0")
    if kind == "bm25":  # the judged documents alone as a collection, whole pool searched
        only = tmp_path / "judged-only"
        shutil.copytree(scidocs, only)
        keep = set(candidates["corpusid"])
        lines = (scidocs / "corpus.jsonl").read_text().splitlines()
        (only / "corpus.jsonl").write_text("".join(
            line + "\n" for line in lines if json.loads(line)["_id"] in keep))
        other = tmp_path / "corpora" / "only"
        import_beir(only, other)
        reference_place = Place(other, tmp_path / "indexes", tmp_path / "runs")
        [reference_pool] = pool_names(other)
        search_pool(reference_place, reference_pool, entry, k=DEEP)
        reference = _run(tmp_path / "runs" / "only" / reference_pool / "bm25.trec")
    else:
        reference = _run(root / "runs" / corpus.name / "beir-600-r0" / f"{entry.name}.trec")
    lists = _judged(qrels)
    # each query's 30, those the reference did not rank (no query term: BM25 scores no
    # match) scored 0, as a pool whose queries rank their own lists keeps every pair
    cut = {q: {d: reference[q].get(d, 0.0) for d in judged} for q, judged in lists.items()}
    unranked = sum(d not in reference[q] for q, judged in lists.items() for d in judged)
    assert (unranked > 0) == (kind == "bm25")
    expected = pytrec_eval.RelevanceEvaluator(lists, {"ndcg_cut_10", "map", "ndcg"}).evaluate(cut)
    values = pl.read_parquet(root / "runs" / corpus.name / "judged-30-r0"
                             / f"{entry.name}.metrics.parquet").filter(
        pl.col("negatives") == "all")
    assert sorted(values["query"]) == sorted(lists)
    for query, ndcg10, ap, ndcg in values.select("query", "ndcg@10", "map", "ndcg").iter_rows():
        assert ndcg10 == pytest.approx(expected[query]["ndcg_cut_10"], abs=1e-9)
        assert ap == pytest.approx(expected[query]["map"], abs=1e-9)
        assert ndcg == pytest.approx(expected[query]["ndcg"], abs=1e-9)
    judged, whole = means["judged-30-r0"], means["beir-600-r0"]
    assert 0 < judged["ndcg@10"] < 1
    assert judged["ndcg@10"] != pytest.approx(whole["ndcg@10"], abs=1e-6)
    assert judged["map"] > whole["map"]  # 30 candidates flatter the model, 600 do not


def test_a_judged_pool_is_added_to_the_collection_imported_without_it(scidocs, imported,
                                                                      tmp_path):
    """The whole pool is the same bytes with or without JUDGED; importing again with it adds
    the judged-only pool beside the whole pool."""
    first, _, _ = imported
    corpus = tmp_path / "corpora" / "scidocs"
    assert import_beir(scidocs, corpus)["collection"]["pools"] == ["beir-600-r0"]
    for name in ("queries", "candidates", "qrels"):
        file = f"pools/beir-600-r0/{name}.parquet"
        assert (corpus / file).read_bytes() == (first / file).read_bytes()
    assert import_beir(scidocs, corpus, judged=True)["collection"]["installed"] == "added"
    assert pool_names(corpus) == ["beir-600-r0", "judged-30-r0"]
    for name in ("queries", "candidates", "qrels"):
        file = f"pools/judged-30-r0/{name}.parquet"
        assert (corpus / file).read_bytes() == (first / file).read_bytes()


def test_judged_without_judgments_of_0_is_refused(scidocs, tmp_path):
    """A collection whose qrels grade no document 0 would give lists of relevant documents
    only: JUDGED=1 is refused in one line, nothing written."""
    src = tmp_path / "src"
    shutil.copytree(scidocs, src)
    qrels = src / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    kept = [line for line in lines[1:] if not line.endswith("\t0")]
    qrels.write_text("\n".join([lines[0], *kept]) + "\n")
    with pytest.raises(InputError, match="grade no document 0.*leave out JUDGED"):
        import_beir(src, tmp_path / "out", judged=True)
    assert not (tmp_path / "out").exists()
    assert import_beir(src, tmp_path / "out")["collection"]["pools"] == ["beir-600-r0"]


def test_make_import_beir_judged_1_writes_both_pools_and_refuses_in_one_line(scidocs, tmp_path):
    """JUDGED=1 reaches the import from make's command line; without judgments of 0 it is
    refused in one line (exit 2), nothing written."""
    stamp = tmp_path / "stamp"
    stamp.touch()
    out = make_ok(tmp_path / "data", stamp, "import-beir", "CORPUS=s", f"SRC={scidocs}",
                  "JUDGED=1")
    assert "judged-only pool judged-30-r0" in out
    assert pool_names(tmp_path / "data" / "corpora" / "s") == ["beir-600-r0", "judged-30-r0"]
    src = tmp_path / "src"
    shutil.copytree(scidocs, src)
    qrels = src / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join([lines[0], *(x for x in lines[1:] if x.endswith("\t1"))]) + "\n")
    refused(tmp_path, cli(tmp_path, "import-beir", "--corpus", "t", "--src", str(src),
                          "--judged"), r"JUDGED=1: the test judgments grade no document 0")
    assert not (tmp_path / "corpora").exists()


def bm25_means(corpus: Path, root: Path, runs: Path) -> tuple[Place, dict[str, dict]]:
    """BM25's run of each pool of the imported corpus (written under `runs`) and its means."""
    place = Place(corpus, root / "indexes", runs)
    means = {}
    for pool in pool_names(corpus):
        search_pool(place, pool, get_model("bm25"))
        means[pool] = eval_run(place, pool, "bm25", pool_metrics(corpus, pool))["means"]
    return place, means


def test_one_report_shows_both_pools(imported, tmp_path):
    """The report's collection table has a column per pool and metric: the judged-only pool's
    nDCG@10 beside the whole pool's, each its evaluation's mean."""
    corpus, root, _ = imported
    runs = tmp_path / "runs"
    _, means = bm25_means(corpus, root, runs)
    collect_results(root / "corpora", root / "indexes", runs)
    lines = report(runs, corpus.name, corpora_root=root / "corpora").splitlines()
    [header] = [line for line in lines if line.startswith("| model | judged-30 NDCG@10")]
    names = header.removesuffix(" |").split(" | ")[1:]
    [row] = [line for line in lines[lines.index(header):] if line.startswith("| bm25 |")]
    cells = dict(zip(names, row.removesuffix(" |").split(" | ")[1:], strict=True))
    for pool, scope in (("beir-600-r0", "beir-600"), ("judged-30-r0", "judged-30")):
        assert cells[f"{scope} NDCG@10"].strip("*") == f"{means[pool]['ndcg@10']:.4f}"
    assert cells["judged-30 MAP"] == f"{means['judged-30-r0']['map']:.4f}"
    assert cells["judged-30 R@100"] == "-"  # not in the judged set
