"""A tiny collection in BEIR's layout (string ids, text queries, graded qrels) imported and
evaluated end to end: BM25 and a dense encoder, nDCG@10 and R@100 equal to pytrec_eval's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from pipeline.core.errors import InputError
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.store import load_vectors
from pipeline.evaluation.evaluate import collect_results, eval_run, pool_metrics
from pipeline.external.beir import import_beir
from pipeline.layout import Place, pool_names, store_dir
from pipeline.models import ModelEntry, get_model
from pipeline.pools.build import load_pool
from pipeline.report.build import report
from pipeline.retrieval.search import search_pool
from tests.conftest import PYSERINI_IMPORT, PYSERINI_SIDE, side_packages

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def collection(corpus_dir, tmp_path_factory) -> Path:
    """300 papers of the small corpus as documents `d<id>`; 8 queries (the titles of papers
    whose cited papers are judged 2, one other paper 1, one 0); a document whose id is also a
    query's; a judgment of an unknown document; a query without judgments."""
    src = tmp_path_factory.mktemp("beir")
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(300)
    citations = pl.read_parquet(corpus_dir / "citations.parquet").join(
        papers.select(cited="corpusid"), on="cited", how="semi")
    askers = citations["citing"].unique().sort().head(8).to_list()
    asking = pl.read_parquet(corpus_dir / "papers.parquet").filter(
        pl.col("corpusid").is_in(askers))
    docs = [{"_id": f"d{i}", "title": t, "text": a} for i, t, a in
            papers.select("corpusid", "title", "abstract").iter_rows()]
    docs.append({"_id": "q0", "title": asking["title"][0], "text": "same id as a query"})
    with (src / "corpus.jsonl").open("w") as handle:
        handle.writelines(json.dumps(d) + "\n" for d in docs)
    queries = [{"_id": f"q{n}", "text": t} for n, t in enumerate(asking["title"])]
    queries.append({"_id": "q-unjudged", "text": "nothing judged"})
    with (src / "queries.jsonl").open("w") as handle:
        handle.writelines(json.dumps(q) + "\n" for q in queries)
    lines = ["query-id\tcorpus-id\tscore"]
    for n, citing in enumerate(asking["corpusid"]):
        cited = citations.filter(pl.col("citing") == citing)["cited"].to_list()
        lines += [f"q{n}\td{c}\t2" for c in cited]
        lines += [f"q{n}\td{papers['corpusid'][n]}\t1", f"q{n}\td{papers['corpusid'][n + 50]}\t0"]
    lines.append("q1\td-missing\t1")
    (src / "qrels").mkdir()
    (src / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return src


@pytest.fixture(scope="module")
def imported(collection, tmp_path_factory):
    root = tmp_path_factory.mktemp("beir-data")
    corpus = root / "corpora" / "tiny-beir"
    info = import_beir(collection, corpus)
    return corpus, root, info


def test_import_counts_what_it_leaves_out(imported):
    corpus, _, info = imported
    counts = info["collection"]["counts"]
    assert counts["qrels_dropped_unknown_document_or_query"] == 1
    assert counts["queries_without_qrels_left_out"] == 1
    assert counts["queries_whose_id_is_a_document"] == 1  # q0: never retrieves document q0
    assert counts["qrels_of_the_query_itself_left_out"] == 0
    [pool] = pool_names(corpus)
    queries, candidates, qrels = load_pool(corpus, pool)
    assert queries["corpusid"].dtype == pl.String and queries.height == 8
    assert candidates.height == 301 and set(qrels["rel"]) == {0, 1, 2}  # graded, kept
    assert pool_metrics(corpus, pool) == ("ndcg@10", "recall@100")


def _pytrec(run_file: Path, qrels: pl.DataFrame) -> dict:
    run: dict = {}
    for line in run_file.read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    judged: dict = {}
    for q, d, r in qrels.iter_rows():
        judged.setdefault(q, {})[d] = int(r)
    return pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10", "recall_100"}).evaluate(run)


@pytest.mark.parametrize("kind", ["bm25", pytest.param("dense", marks=pytest.mark.slow)])
def test_end_to_end_equals_pytrec_eval(imported, kind, tiny_bert):
    corpus, root, _ = imported
    [pool] = pool_names(corpus)
    entry = get_model("bm25") if kind == "bm25" else ModelEntry(
        "tiny-bert", "dense", str(tiny_bert), "cls", "ip", max_length=64)
    place = Place(corpus, root / "indexes", root / "runs")
    if kind == "dense":
        assert embed(place, entry)["needed"] == 301  # documents only
    search_pool(place, pool, entry)
    run_dir = root / "runs" / corpus.name / pool
    run = pl.read_parquet(run_dir / f"{entry.name}.parquet")
    assert run["doc"].dtype == pl.String
    assert run.filter(pl.col("query") == pl.col("doc")).is_empty()  # q0 never retrieves q0
    info = eval_run(place, pool, entry.name,
                    pool_metrics(corpus, pool))
    queries, candidates, qrels = load_pool(corpus, pool)
    expected = _pytrec(run_dir / f"{entry.name}.trec", qrels)
    values = pl.read_parquet(run_dir / f"{entry.name}.metrics.parquet").filter(
        pl.col("negatives") == "all")
    assert sorted(values["query"]) == sorted(expected) and values.height == 8  # every query
    for query, ndcg, recall in values.select("query", "ndcg@10", "recall@100").iter_rows():
        assert ndcg == pytest.approx(expected[query]["ndcg_cut_10"], abs=1e-9)
        assert recall == pytest.approx(expected[query]["recall_100"], abs=1e-9)
    assert info["means"]["recall@100"] > 0  # judged documents were retrieved
    if kind == "bm25":
        assert info["means"]["ndcg@10"] > 0  # (the tiny BERT is untrained)
        return
    # dense: the query texts were encoded once and kept beside the store; they are the
    # model's vectors of the query texts (encoded here again on the CPU; a GPU's half
    # precision within rounding), and each run score is that vector's inner product with the
    # document's stored vector
    store = store_dir(root / "indexes", corpus.name, entry.name)
    [cache] = (store / "queries").glob("*.npy")
    cached = np.load(cache)
    texts = queries.sort("corpusid").select("corpusid", pl.col("title", "abstract")
                                            .fill_null(""))
    encoder = Encoder(entry, device="cpu")
    fresh, _ = encoder.encode([encoder.format(t, a) for _, t, a in texts.iter_rows()],
                              progress=False)
    assert cached.shape == fresh.shape == (8, encoder.dim)
    cosine = (cached * fresh).sum(1) / np.linalg.norm(cached, axis=1) / np.linalg.norm(
        fresh, axis=1)
    assert (cosine > 0.99).all(), cosine
    doc_ids = candidates["corpusid"].to_list()
    scores = cached @ load_vectors(store, np.array(doc_ids, dtype=object)).T
    row = {q: i for i, q in enumerate(texts["corpusid"])}
    col = {d: j for j, d in enumerate(doc_ids)}
    want = [scores[row[q], col[d]] for q, d in run.select("query", "doc").iter_rows()]
    np.testing.assert_allclose(run["score"].to_numpy(), want, rtol=1e-5, atol=1e-5)
    assert run.group_by("query").len()["len"].min() >= 100  # a full list per query


def test_report_has_the_collections_main_table(imported, tmp_path):
    """Issue 29: `make report` of a BEIR-layout corpus printed only significance and intervals.
    Its main table: models x nDCG@10 / R@100, the mean over the pool's queries as BEIR and
    MTEB print it (0-1, 4 decimals), equal to each evaluation's means; bold: best nDCG@10."""
    corpus, root, _ = imported
    [pool] = pool_names(corpus)
    indexes, runs = root / "indexes", tmp_path / "runs"  # runs of these two models only
    means = {}
    place = Place(corpus, indexes, runs)
    for name in ("bm25", "random"):
        search_pool(place, pool, get_model(name))
        means[name] = eval_run(place, pool, name, pool_metrics(corpus, pool))[
            "means"]
    collect_results(root / "corpora", indexes, runs)
    text = report(runs, corpus.name, corpora_root=root / "corpora")
    lines = text.splitlines()
    start = lines.index("| model | NDCG@10 | R@100 |")
    assert lines[start - 2].startswith(f"## {corpus.name}: BEIR-layout collection ({pool}), "
                                       "NDCG@10 / R@100")
    assert start < next(at for at, line in enumerate(lines) if line.startswith("## ")
                        and "paired tests of every two models" in line)  # significance
    rows = {line.split(" | ")[0].removeprefix("| "): line.removesuffix(" |").split(" | ")[1:]
            for line in lines[start + 2:] if line.startswith("| ")
            and line.split(" | ")[0].removeprefix("| ") in means}
    assert rows["bm25"] == [f"**{means['bm25']['ndcg@10']:.4f}**",
                            f"{means['bm25']['recall@100']:.4f}"]
    assert rows["random"][0].removesuffix("†") == f"{means['random']['ndcg@10']:.4f}"
    assert rows["random"][1] == f"{means['random']['recall@100']:.4f}"
    assert (runs / "reports" / f"{corpus.name}-collection.tex").exists()


def test_bad_collections_are_refused(collection, tmp_path):
    with pytest.raises(InputError, match="corpus.jsonl does not exist"):
        import_beir(tmp_path, tmp_path / "out")
    with pytest.raises(InputError, match="qrels/dev.tsv does not exist"):
        import_beir(collection, tmp_path / "out", "dev")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "corpus.jsonl").write_text('{"_id": "a b", "title": "t", "text": "x"}\n')
    (bad / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
    with pytest.raises(InputError, match=rf"^{bad / 'corpus.jsonl'}: 1 document ids are empty "
                                         "or hold whitespace"):  # the file named first
        import_beir(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_judgment_of_the_query_itself_is_left_out_and_counted(collection, tmp_path, caplog):
    """A query is never its own candidate: a judgment of the query's own id as a document
    (q0 judges q0) is left out of the pool's qrels, counted in the manifest and logged; a
    query judged only on itself then has no judgment and is left out (counted)."""
    src = tmp_path / "src"
    shutil.copytree(collection, src)
    with (src / "qrels" / "test.tsv").open("a") as handle:
        handle.write("q0\tq0\t2\n")
    with (src / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "q-unjudged", "title": "t", "text": "x"}) + "\n")
    with (src / "qrels" / "test.tsv").open("a") as handle:
        handle.write("q-unjudged\tq-unjudged\t1\n")
    corpus = tmp_path / "corpora" / "self"
    with caplog.at_level("WARNING", logger="pipeline.external.beir"):
        info = import_beir(src, corpus)
    counts = info["collection"]["counts"]
    assert counts["qrels_of_the_query_itself_left_out"] == 2
    assert counts["qrels_of_the_query_itself_relevant"] == 2
    assert counts["queries_whose_id_is_a_document"] == 1  # q-unjudged has no judgment left
    assert counts["queries_without_qrels_left_out"] == 1
    [pool] = pool_names(corpus)
    queries, candidates, qrels = load_pool(corpus, pool)
    assert qrels.filter(pl.col("query") == pl.col("doc")).is_empty()
    assert "q-unjudged" not in queries["corpusid"].to_list() and queries.height == 8
    assert candidates.height == 302  # documents stay candidates of the other queries
    assert "2 judgments of a query's own id as a document (2 relevant, e.g. q-unjudged) " \
        "left out" in caplog.text
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["collection"]["counts"]["qrels_of_the_query_itself_left_out"] == 2


PYSERINI_GRID = PYSERINI_IMPORT + """
import json, sys
from jnius import autoclass
job = json.load(open(sys.argv[1]))
autoclass("io.anserini.index.IndexCollection").main([
    "-collection", "JsonCollection", "-input", job["docs"], "-index", job["index"],
    "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1", "-storeRaw"])
searcher = LuceneSearcher(job["index"])
runs = {}
for k1, b in job["grid"]:
    searcher.set_bm25(k1, b)
    hits = searcher.batch_search(job["texts"], job["qids"], k=job["k"], threads=1)
    runs[f"{k1} {b}"] = {q: {h.docid: h.score for h in hits[q]} for q in job["qids"]}
json.dump(runs, open(job["out"], "w"))  # stdout holds Anserini's log
"""


def grid_maps(runs_file: Path, qrels: pl.DataFrame) -> dict[str, float]:
    """"k1 b" -> mean MAP by pytrec_eval of PYSERINI_GRID's runs, over the top 500 without the
    query's own id (as the pipeline scores a run)."""
    judged: dict = {}
    for q, d, r in qrels.iter_rows():
        judged.setdefault(q, {})[d] = int(r)
    maps = {}
    for pair, run in json.loads(runs_file.read_text()).items():
        top = {q: dict(sorted(((d, s) for d, s in hits.items() if d != q),
                              key=lambda h: -h[1])[:500]) for q, hits in run.items()}
        values = pytrec_eval.RelevanceEvaluator(judged, {"map"}).evaluate(top)
        maps[pair] = sum(v["map"] for v in values.values()) / len(values)
    return maps


@pytest.mark.slow
def test_dev_split_tunes_bm25_as_a_pyserini_grid_search(collection, tmp_path):
    """Issue 21: the dev split's pool tunes k1 and b on the queries' own texts. The chosen pair
    and its validation MAP equal a grid search done independently: pyserini indexes the
    documents (Anserini's IndexCollection), searches every pair with `batch_search`, and
    pytrec_eval scores MAP over the top 500 (a query never retrieves its own id)."""
    from pipeline.retrieval.bm25.tuning import B_GRID, K1_GRID, bm25_params

    src = tmp_path / "src"
    shutil.copytree(collection, src)
    test_lines = (src / "qrels" / "test.tsv").read_text().splitlines()
    dev = [line for line in test_lines[1:] if line.split("\t")[0] in ("q2", "q3", "q4", "q5")]
    (src / "qrels" / "dev.tsv").write_text("\n".join([test_lines[0], *dev]) + "\n")
    corpus = tmp_path / "corpora" / "beir-dev"
    import_beir(src, corpus, "test")
    import_beir(src, corpus, "dev")
    test_pool, val_pool = pool_names(corpus)
    assert val_pool == f"{test_pool}-val"
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    chosen = bm25_params(place, test_pool, get_model("bm25"))
    assert chosen["tuned_on"] == [val_pool]

    queries, candidates, qrels = load_pool(corpus, val_pool)
    docs = tmp_path / "pyserini-docs"
    docs.mkdir()
    with (docs / "docs.jsonl").open("w") as handle:
        for d, t, a in pl.read_parquet(corpus / "prefiltered.parquet").select(
                "corpusid", "title", "abstract").iter_rows():
            handle.write(json.dumps({"id": d, "contents": f"{t} {a}"}) + "\n")
    grid = [[k1, b] for k1 in K1_GRID for b in B_GRID]
    job = {"docs": str(docs), "index": str(tmp_path / "pyserini-index"), "grid": grid,
           "k": 501, "texts": queries["title"].to_list(), "qids": queries["corpusid"].to_list(),
           "out": str(tmp_path / "runs.json")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": f"{side_packages('pyserini-env', PYSERINI_SIDE)}"
                                       f"{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-c", PYSERINI_GRID, str(tmp_path / "job.json")],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    maps = grid_maps(tmp_path / "runs.json", qrels)
    assert len(set(maps.values())) > 1  # the grid matters on this split
    best = max(maps, key=lambda p: maps[p])  # the first of the grid among ties
    assert f"{chosen['k1']} {chosen['b']}" == best
    assert chosen["validation_map"] == pytest.approx(maps[best], abs=1e-6)
    assert chosen["validation_map"] > 0


def test_importing_again_repairs_a_damaged_pool(collection, tmp_path):
    """A pool file overwritten at the same size is put back by the import that made it (the
    repair command the reading stage names), and nothing else changes."""
    corpus = tmp_path / "corpora" / "again"
    import_beir(collection, corpus)
    [pool] = pool_names(corpus)
    qrels = corpus / "pools" / pool / "qrels.parquet"
    good = qrels.read_bytes()
    with qrels.open("r+b") as handle:
        handle.seek(100)
        handle.write(b"XXXX")
    with pytest.raises(InputError, match="corrupt"):
        load_pool(corpus, pool)
    assert import_beir(collection, corpus)["collection"]["installed"] == "repaired"
    assert qrels.read_bytes() == good
    assert import_beir(collection, corpus)["collection"]["installed"] == "unchanged"


def _copy(collection: Path, dest: Path) -> Path:
    shutil.copytree(collection, dest)
    return dest


def test_repeated_and_textless_queries_are_counted_and_reconcile(collection, tmp_path,
                                                                 caplog):
    """Issue 30.10: a query record repeated exactly is read once, counted; a query with an
    empty, null or missing text is left out with its judgments, counted and logged (it would
    score 0 without a word); a document repeated exactly is counted. Every count reconciles:
    read = kept + each reason."""
    src = _copy(collection, tmp_path / "src")
    lines = (src / "queries.jsonl").read_text().splitlines()
    q2, q3, q4 = (json.loads(lines[n]) for n in (2, 3, 4))
    lines += [lines[2],  # q2 again, the same record
              json.dumps({"_id": q3["_id"], "text": ""}).replace(q3["_id"], "q3-empty"),
              json.dumps({"_id": "q-null", "text": None}), json.dumps({"_id": "q-none"})]
    lines[4] = json.dumps({"_id": q4["_id"], "text": "   "})  # q4: only whitespace
    (src / "queries.jsonl").write_text("\n".join(lines) + "\n")
    docs = (src / "corpus.jsonl").read_text().splitlines()
    (src / "corpus.jsonl").write_text("\n".join([*docs, docs[5]]) + "\n")
    qrels = (src / "qrels" / "test.tsv").read_text().splitlines()
    extra = ["q3-empty\td1\t1", "q-null\td1\t2", "q-none\td1\t1"]
    (src / "qrels" / "test.tsv").write_text("\n".join([*qrels, *extra]) + "\n")
    with caplog.at_level("WARNING"):
        info = import_beir(src, tmp_path / "corpora" / "c")
    counts = info["collection"]["counts"]
    assert counts["duplicate_queries_dropped"] == 1 and counts["duplicate_documents_dropped"] == 1
    assert counts["queries_without_text_left_out"] == 4  # q4, q3-empty, q-null, q-none
    q4_judged = sum(line.startswith(f"{q4['_id']}\t") for line in qrels)
    assert counts["qrels_of_queries_without_text_dropped"] == q4_judged + 3
    assert counts["queries_read"] == len(lines) == (
        counts["queries"] + counts["duplicate_queries_dropped"]
        + counts["queries_without_text_left_out"] + counts["queries_without_qrels_left_out"])
    assert counts["documents_read"] == len(docs) + 1 == (
        counts["candidates"] + counts["duplicate_documents_dropped"])
    assert counts["qrels_read"] == counts["qrels"] + sum(
        counts[k] for k in ("qrels_duplicate_pairs_dropped",
                            "qrels_of_queries_without_text_dropped",
                            "qrels_dropped_unknown_document_or_query",
                            "qrels_of_the_query_itself_left_out"))
    queries, _, pool_qrels = load_pool(tmp_path / "corpora" / "c", info["collection"]["pools"][0])
    assert q4["_id"] not in queries["corpusid"].to_list() and q2["_id"] in queries["corpusid"]
    assert queries["title"].str.strip_chars().str.len_chars().min() > 0
    assert q4["_id"] not in pool_qrels["query"].to_list()
    assert "4 queries without text" in caplog.text


@pytest.mark.parametrize("file, record, match", [
    ("queries.jsonl", {"_id": "q1", "text": "another text"},
     r"queries.jsonl: the query id 'q1' is given twice with different contents \(records 2 "
     r"and 10\): keep one"),
    ("corpus.jsonl", {"_id": "d-dup", "title": "t", "text": "other"},
     r"corpus.jsonl: the document id 'd-dup' is given twice with different contents"),
])
def test_an_id_given_twice_with_other_contents_is_refused(collection, tmp_path, file, record,
                                                         match):
    src = _copy(collection, tmp_path / "src")
    if file == "corpus.jsonl":
        with (src / file).open("a") as handle:
            handle.write(json.dumps({"_id": "d-dup", "title": "t", "text": "x"}) + "\n")
    with (src / file).open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    with pytest.raises(InputError, match=match):
        import_beir(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_byte_order_mark_is_read_and_bad_bytes_are_named(collection, tmp_path):
    """Issue 30.11: a file saved with a byte-order mark (as Windows tools write UTF-8) imports
    as without one; a byte that is not UTF-8, or a line that is not JSON, is refused in one
    line naming the file, the line, the column and the cause."""
    plain = import_beir(collection, tmp_path / "plain")["collection"]["counts"]
    src = _copy(collection, tmp_path / "src")
    for name in ("corpus.jsonl", "queries.jsonl"):
        (src / name).write_bytes(b"\xef\xbb\xbf" + (src / name).read_bytes())
    assert import_beir(src, tmp_path / "bom")["collection"]["counts"] == plain
    assert (pl.read_parquet(tmp_path / "bom" / "prefiltered.parquet").equals(
        pl.read_parquet(tmp_path / "plain" / "prefiltered.parquet")))
    lines = (collection / "queries.jsonl").read_bytes().splitlines(keepends=True)
    bad = src / "queries.jsonl"
    bad.write_bytes(b"".join([*lines[:3], b'{"_id": "qx", "text": "caf\xe9"}\n', *lines[3:]]))
    with pytest.raises(InputError, match=r"queries.jsonl: line 4, column 27: byte 0xe9 is not "
                                         r"UTF-8 \(save the file as UTF-8\)"):
        import_beir(src, tmp_path / "out")
    bad.write_bytes(b"".join([*lines[:5], b'{"_id": "qx", "text": }\n', *lines[5:]]))
    with pytest.raises(InputError, match=r"queries.jsonl: line 6, column 23: not JSON"):
        import_beir(src, tmp_path / "out")
    bad.write_bytes(b"".join([*lines[:1], b'["qx", "text"]\n', *lines[1:]]))
    with pytest.raises(InputError, match=r"queries.jsonl: line 2: not a JSON object"):
        import_beir(src, tmp_path / "out")
    bad.write_bytes(b"".join(lines))
    qrels = src / "qrels" / "test.tsv"
    qrels.write_bytes(qrels.read_bytes() + b"q1\td\xe91\t1\n")
    with pytest.raises(InputError, match=r"test.tsv: line \d+, column 5: byte 0xe9 is not "
                                         "UTF-8"):
        import_beir(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_dev_split_judging_nothing_relevant_is_one_line(collection, tmp_path):
    """Issue 30.8: tuning on a dev split whose grades are all 0 scores MAP 0 for every pair:
    one line naming the validation pool (InputError, exit 2 at the CLI), not a TypeError."""
    from pipeline.retrieval.bm25.tuning import bm25_params

    src = tmp_path / "src"
    shutil.copytree(collection, src)
    test_lines = (src / "qrels" / "test.tsv").read_text().splitlines()
    zeros = [f"{q}\t{d}\t0" for q, d, _ in (line.split("\t") for line in test_lines[1:])]
    (src / "qrels" / "dev.tsv").write_text("\n".join([test_lines[0], *zeros]) + "\n")
    corpus = tmp_path / "corpora" / "beir-zero"
    import_beir(src, corpus, "test")
    import_beir(src, corpus, "dev")
    test_pool, val_pool = pool_names(corpus)
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    with pytest.raises(InputError, match=f"validation pool.*{val_pool}.*MAP") as error:
        bm25_params(place, test_pool, get_model("bm25"))
    assert "\n" not in str(error.value)


def test_an_import_logs_what_it_kept_and_left_out(collection, tmp_path, caplog):
    """The library call logs the summary make import-beir shows: its counts add up."""
    corpus = tmp_path / "corpora" / "logged-beir"
    with caplog.at_level("INFO", logger="pipeline"):
        info = import_beir(collection, corpus)
    counts = info["collection"]["counts"]
    assert (f"[import-beir] corpus logged-beir (new), pool {info['collection']['pools'][0]}: "
            f"{counts['candidates']} documents of {counts['documents_read']} read") in caplog.text
    assert f"{counts['queries']} queries of {counts['queries_read']} read" in caplog.text
    assert "1 naming an unknown document or query" in caplog.text


def _small(src: Path, docs: list[str] | None = None, qrels: str | None = None) -> Path:
    """A BEIR folder of 3 documents, 2 queries and their judgments (`docs`: extra corpus
    lines; `qrels`: the judgment lines in place of the default ones)."""
    (src / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": f"d{n}", "title": f"t{n}", "text": f"text {n}"})
             for n in (1, 2, 3)]
    (src / "corpus.jsonl").write_text("\n".join([*lines, *(docs or [])]) + "\n")
    (src / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha"}\n'
                                       '{"_id": "q2", "text": "gamma"}\n')
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + (
        qrels or "q1\td1\t1\nq2\td2\t2\nq2\td3\t0\n"))
    return src


@pytest.mark.parametrize("record, said", [
    ('{"_id": "d1", "_id": "d9", "title": "t", "text": "alpha"}',
     "line 4: the key '_id' appears twice with different values"),
    ('{"_id": 7.0, "title": "t", "text": "alpha"}', "line 4: its _id is the number 7.0, not a "
                                                     "string"),
    ('{"_id": "d7", "title": ["a", "b"], "text": "alpha"}', "line 4: its title is a list"),
])
def test_a_record_beirs_loader_reads_otherwise_is_refused_naming_the_line(record, said,
                                                                          tmp_path):
    """Findings 1 and 7: polars kept the first of two _id values (BEIR's loader the last) and
    wrote 7.0 as "7" or a list as its JSON text: a judgment of d9 was dropped as unknown."""
    src = _small(tmp_path / "src", [record], "q1\td1\t1\nq1\td9\t1\nq2\td2\t2\n")
    with pytest.raises(InputError, match=rf"corpus.jsonl: {said}") as error:
        import_beir(src, tmp_path / "out")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out").exists()


def test_quotes_in_qrels_are_part_of_the_ids(tmp_path):
    """Finding 2: a corpus-id starting with a quote opened a quoted field that swallowed the
    next lines ("1 judgments of 2 read" of 5), one with a quote inside was "CSV malformed".
    Every line is one judgment, its quotes literal."""
    quoted = [json.dumps({"_id": i, "title": "x", "text": "y"}) for i in ('"x', 'y"', 'd"9')]
    src = _small(tmp_path / "src", quoted, 'q1\t"x\t1\nq1\td2\t1\nq2\td3\t0\nq2\ty"\t1\n'
                                           'q2\td2\t2\nq1\td"9\t2\n')
    info = import_beir(src, tmp_path / "corpora" / "q")
    assert info["collection"]["counts"]["qrels_read"] == 6
    _, _, qrels = load_pool(tmp_path / "corpora" / "q", info["collection"]["pools"][0])
    assert sorted(qrels.select("query", "doc").iter_rows()) == [
        ("q1", '"x'), ("q1", 'd"9'), ("q1", "d2"), ("q2", "d2"), ("q2", "d3"), ("q2", 'y"')]


@pytest.mark.parametrize("file", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_file_that_is_no_regular_file_is_refused_in_one_line(file, kind, tmp_path):
    """Findings 3 and 4: a FIFO hung the import, a link to /dev/zero read as empty (then
    "no query has judgments"), a folder was an IsADirectoryError traceback."""
    from tests.core.test_textfiles import refusal

    src = _small(tmp_path / "src")
    path = src / file
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    error = refusal(lambda src: import_beir(src, tmp_path / "out"), src)
    assert isinstance(error, InputError), repr(error)
    what = "is a folder" if kind == "folder" else "is not a regular file"
    assert str(error).startswith(f"{path} {what}") and ": give " in str(error)
    assert "\n" not in str(error)
    assert not (tmp_path / "out").exists()
