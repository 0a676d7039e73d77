"""make export-beir: a pool written as a BEIR folder that BEIR's own loader, MTEB and this
project's import-beir read; imported back, BM25 gives the same lists and scores."""

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

import pipeline
from pipeline.core.errors import InputError
from pipeline.external.beir import import_beir
from pipeline.layout import Place, pool_names, run_paths
from pipeline.mdcr.official import import_benchmark
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool, load_pool
from pipeline.retrieval.search import search_pool
from tests.conftest import N_QUERIES, copy_corpus, make_ok, pool_of
from tests.encoding.test_objects import Hashed as Words
from tests.external.test_judged import imported, scidocs  # noqa: F401
from tests.mdcr.test_mdcr_official import BENCHMARK, _official_files

ROOT = Path(__file__).resolve().parents[2]
POOL = pool_of(800)


@pytest.fixture(scope="module")
def data(corpus_dir, tmp_path_factory) -> Path:
    """A data folder holding a copy of the small corpus with its 800-candidate pool."""
    root = tmp_path_factory.mktemp("export")
    corpus = copy_corpus(corpus_dir, root / "corpora" / "small")
    shutil.copytree(corpus_dir / "pools" / POOL, corpus / "pools" / POOL)
    return root


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("out") / "small-beir"
    return out, pipeline.export_beir(data, "small", POOL, out)


@pytest.mark.slow
def test_make_export_beir_then_import_beir_gives_the_same_bm25_run(data, tmp_path):
    (tmp_path / "installed").touch()
    out = tmp_path / "pool-beir"
    said = make_ok(data, tmp_path / "installed", "export-beir", f"POOL={POOL}", f"OUT={out}")
    assert f"[export-beir] pool {POOL} of corpus small -> {out}" in said, said
    said = make_ok(data, tmp_path / "installed", "import-beir", f"SRC={out}", "CORPUS=again")
    sheet = json.loads((out / "datasheet.json").read_text())
    sizes = sheet["sizes"]
    assert (f"{sizes['documents']} documents of {sizes['documents']} read" in said
            and f"{sizes['queries']} queries of {sizes['queries']} read" in said
            and f"{sizes['qrels']} judgments of {sizes['qrels']} read" in said), said
    place = Place(data / "corpora" / "small", data / "indexes", data / "runs")
    (again,) = pool_names(data / "corpora" / "again")
    for where, name in ((place, POOL), (place.sibling("again"), again)):
        search_pool(where, name, get_model("bm25"))
    original = run_paths(data / "runs", "small", POOL, "bm25").trec.read_text()
    reimported = run_paths(data / "runs", "again", again, "bm25").trec.read_text()
    assert len(original.splitlines()) > N_QUERIES * 100  # lists of hundreds, not a few lines
    assert reimported == original  # same queries, documents, ranks and scores


def test_the_files_are_beirs_and_their_bytes_are_the_same_again(data, exported, tmp_path):
    out, sheet = exported
    queries, candidates, qrels = load_pool(data / "corpora" / "small", POOL)
    assert sheet["sizes"] == {"documents": candidates.height, "queries": queries.height,
                              "qrels": qrels.height, "relevant": qrels.height}
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "corpus.jsonl", "datasheet.json", "qrels", "qrels/test.tsv", "queries.jsonl"]
    assert (out / "qrels" / "test.tsv").read_text().splitlines()[0] == \
        "query-id\tcorpus-id\tscore"
    papers = pl.read_parquet(data / "corpora" / "small" / "prefiltered.parquet")
    first = json.loads((out / "queries.jsonl").read_text().splitlines()[0])
    paper = papers.filter(pl.col("corpusid") == int(first["_id"])).row(0, named=True)
    assert first == {"_id": first["_id"], "text": " ".join(
        f"{paper['title']} {paper['abstract']}".split())}  # as BM25 searches the query paper
    assert sheet["seed"] == 1 and sheet["pool"] == POOL and sheet["prefilter"]
    assert sheet["source"]["reader"] == "s2orc"
    # again, over the first export (its own files): the same bytes
    again = tmp_path / "again"
    shutil.copytree(out, again)
    pipeline.export_beir(data, "small", POOL, again)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "datasheet.json"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_the_datasheet_names_the_exclusion_list_by_its_digest_only(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    listed = load_pool(corpus_dir, POOL)[0]["corpusid"].head(3).to_list()
    (tmp_path / "training.txt").write_text("".join(f"{i}\n" for i in listed))
    built = build_pool(corpus, PoolSpec(size=800, queries=N_QUERIES, seed=1,
                                        exclude=str(tmp_path / "training.txt")))
    sheet = pipeline.export_beir(tmp_path, "small", built["name"], tmp_path / "out")
    assert sheet["exclusion"] == {"ids": 3, "ids_sha256": built["exclusion"]["ids_sha256"]}
    assert "training.txt" not in (tmp_path / "out" / "datasheet.json").read_text()
    exported = {json.loads(line)["_id"]
                for line in (tmp_path / "out" / "queries.jsonl").read_text().splitlines()}
    assert len(exported) == sheet["sizes"]["queries"] and not exported & set(map(str, listed))


def test_beirs_own_loader_reads_the_export(exported):
    from beir.datasets.data_loader import GenericDataLoader

    out, sheet = exported
    corpus, queries, qrels = GenericDataLoader(data_folder=str(out)).load(split="test")
    assert (len(corpus), len(queries), sum(map(len, qrels.values()))) == (
        sheet["sizes"]["documents"], sheet["sizes"]["queries"], sheet["sizes"]["qrels"])
    query = sorted(qrels)[0]
    doc = sorted(qrels[query])[0]
    assert qrels[query][doc] == 1 and doc in corpus and query in queries


class Hashed:
    """A model of MTEB's encoder protocol, numpy only (tests/encoding/test_objects.py's
    Hashed vectors, salted by the prompt type), compared by inner product."""

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str,
               prompt_type=None, **kwargs) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        return Words(salt=prompt_type.value).encode(texts)

    def similarity(self, a, b) -> np.ndarray:
        return np.asarray(a) @ np.asarray(b).T

    def similarity_pairwise(self, a, b) -> np.ndarray:
        return (np.asarray(a) * np.asarray(b)).sum(-1)

    @property
    def mteb_model_meta(self):
        from mteb.models.model_meta import ModelMeta

        return ModelMeta.create_empty({"name": "local/hashed", "similarity_fn_name": "dot"})


def mteb_task(out: Path):
    """The export as a custom MTEB retrieval task: `load_data` reads the folder with BEIR's
    loader; identical ids ignored, as BEIR's evaluation does (a query paper cited by another
    query is a document too: never its own hit)."""
    from beir.datasets.data_loader import GenericDataLoader
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

    class Pool(AbsTaskRetrieval):
        ignore_identical_ids = True
        metadata = TaskMetadata(
            name="ExportedPool", description="a pool exported by make export-beir",
            reference="https://github.com/embeddings-benchmark/mteb",
            dataset={"path": str(out), "revision": "local"}, type="Retrieval",
            category="t2t", eval_splits=["test"], eval_langs=["eng-Latn"],
            main_score="ndcg_at_10", date=("2019-01-01", "2019-12-31"), dialect=[],
            domains=["Academic"], task_subtypes=[], license="not specified",
            annotations_creators="derived", modalities=["text"], sample_creation="found",
            bibtex_citation="")

        def load_data(self, num_proc: int | None = None, **kwargs) -> None:
            corpus, queries, qrels = GenericDataLoader(str(out)).load(split="test")
            self.dataset = {"default": {"test": RetrievalSplitData(
                corpus=Dataset.from_list([{"id": k, **v} for k, v in corpus.items()]),
                queries=Dataset.from_list([{"id": k, "text": v} for k, v in queries.items()]),
                relevant_docs=qrels, top_ranked=None)}}
            self.data_loaded = True

    return Pool()


def test_mteb_scores_the_export_as_the_pipeline_scores_the_pool(data, exported):
    out, sheet = exported
    task = mteb_task(out)
    task.load_data()
    stats = task.calculate_descriptive_statistics()["test"]  # MTEB's own reading of the split
    assert (stats["num_documents"], stats["num_queries"]) == (
        sheet["sizes"]["documents"], sheet["sizes"]["queries"])
    assert stats["relevant_docs_statistics"]["num_relevant_docs"] == sheet["sizes"]["qrels"]
    scores = task.evaluate(Hashed(), "test", encode_kwargs={"batch_size": 64})["default"]
    # the same object through the pipeline, on the pool itself
    model = pipeline.Encoder(Hashed(), name="hashed", similarity="ip", fingerprint="v1")
    pipeline.search(data, "small", POOL, model, k=1000, threads=1)
    ours = pipeline.evaluate(data, "small", POOL, model, means=True,
                             metrics=["ndcg@10", "recall@100", "map"]).row(0, named=True)
    assert 0 < ours["recall@100"] < 1  # a model that finds some, not all
    for theirs, metric in (("ndcg_at_10", "ndcg@10"), ("recall_at_100", "recall@100"),
                           ("map_at_1000", "map")):
        assert scores[theirs] == pytest.approx(ours[metric], abs=5e-6), metric  # MTEB: 5 digits


def test_ir_datasets_beir_classes_read_the_export(exported, tmp_path, monkeypatch):
    """ir_datasets has no public loader of a local folder (its BEIR collections are ids it
    downloads; docs/collections.md says so), but its own BEIR readers, given the export's
    files, read every query, document and judgment."""
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import LocalDownload

    out, sheet = exported
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path))  # its document store goes here
    docs = list(BeirDocs("export", LocalDownload(out / "corpus.jsonl"), BeirTitleDoc)
                .docs_iter())
    queries = list(BeirQueries("export", LocalDownload(out / "queries.jsonl"), GenericQuery)
                   .queries_iter())
    qrels = list(BeirQrels(LocalDownload(out / "qrels" / "test.tsv"), {}).qrels_iter())
    assert (len(docs), len(queries), len(qrels)) == (
        sheet["sizes"]["documents"], sheet["sizes"]["queries"], sheet["sizes"]["qrels"])
    assert {q.relevance for q in qrels} == {1}
    assert {q.query_id for q in qrels} == {q.query_id for q in queries}


def test_a_judged_only_pool_is_exported_as_scidocs_is_distributed(imported, tmp_path):  # noqa: F811
    """Issue 56: a judged-only pool (JUDGED=1) was refused. Exported, BEIR's loader reads each
    query's 30 judged documents with their grades (the 25 negatives as score 0 lines), and
    import-beir JUDGED=1 of the folder gives the same judged-only pool, file for file."""
    from beir.datasets.data_loader import GenericDataLoader

    corpus, root, _ = imported
    out = tmp_path / "judged"
    sheet = pipeline.export_beir(root, corpus.name, "judged-30-r0", out)
    assert sheet["judged_only"] and sheet["sizes"]["documents"] == 180
    docs, queries, qrels = GenericDataLoader(data_folder=str(out)).load(split="test")
    original = load_pool(corpus, "judged-30-r0")
    assert len(docs) == 180 and len(queries) == 6
    assert {q: sorted(grades.values()) for q, grades in qrels.items()} == {
        f"q{n}": [0] * 25 + [1] * 5 for n in range(6)}
    again = tmp_path / "corpora" / "again"
    info = import_beir(out, again, judged=True)
    assert info["collection"]["pools"] == ["beir-180-r0", "judged-30-r0"]
    for before, after in zip(original, load_pool(again, "judged-30-r0"), strict=True):
        assert after.equals(before)


def test_a_collections_queries_are_exported_as_their_own_text(tmp_path):
    """Issue 56: export-beir normalised whitespace in a collection's queries (2 of SciFact's
    300 hold double spaces), where the docs promise their own text."""
    texts = {"q1": "protein  folding", "q2": "\tsoil\tcarbon ", "q3": "  graphs\n of  words"}
    src = tmp_path / "src"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text("".join(json.dumps(
        {"_id": d, "title": d, "text": f"text of {d}"}) + "\n" for d in ("a", "b", "c")))
    (src / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                               for q, t in texts.items()))
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\n"
                                            "q2\tb\t1\nq3\tc\t1\n")
    import_beir(src, tmp_path / "corpora" / "c")
    sheet = pipeline.export_beir(tmp_path, "c", "beir-3-r0", tmp_path / "out")
    exported = [json.loads(line) for line in
                (tmp_path / "out" / "queries.jsonl").read_text().splitlines()]
    assert {q["_id"]: q["text"] for q in exported} == texts
    assert sheet["query_text"] == "the query's own text, as the collection was imported"
    import_beir(tmp_path / "out", tmp_path / "corpora" / "again")  # and back: the same text
    queries = load_pool(tmp_path / "corpora" / "again", "beir-3-r0")[0]
    assert dict(queries.select("corpusid", "title").iter_rows()) == texts


def test_an_mdcr_style_pool_is_refused(tmp_path):
    _official_files(tmp_path)
    ids = {i for queries in BENCHMARK.values() for q, lists in queries.items()
           for i in [q, *(d for docs in lists.values() for d in docs)]}
    (tmp_path / "mdcr_test_data.jsonl").write_text("".join(
        json.dumps({"paper_id": i, "title": f"Paper {i}", "abstract": "text"}) + "\n"
        for i in sorted(ids)))
    import_benchmark(tmp_path, tmp_path / "corpora" / "b")
    pool = pool_names(tmp_path / "corpora" / "b")[0]
    with pytest.raises(InputError,
                       match=r"pool .*: each query ranks its own list .* make export-mdcr$"):
        pipeline.export_beir(tmp_path, "b", pool, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(data / "corpora"), "--index-root", str(data / "indexes"),
                           "--runs-root", str(data / "runs"), "export-beir", "--corpus",
                           "small", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _files(folder: Path) -> list[str]:
    return sorted(p.as_posix() for p in folder.rglob("*")) if folder.exists() else []


def test_bad_input_is_one_line_and_writes_nothing(data, tmp_path):
    held = tmp_path / "held"
    held.mkdir()
    (held / "notes.txt").write_text("mine")
    cases = [
        ((["--out", str(tmp_path / "o")]), "--pool"),
        ((["--pool", "all-9k-r0", "--out", str(tmp_path / "o")]),
         f"pool 'all-9k-r0' does not exist under .* \\(existing: {POOL}\\)"),
        ((["--pool", POOL, "--out", str(data / "corpora" / "x")]),
         r"OUT .*/corpora/x is inside the data folder's corpora/"),
        ((["--pool", POOL, "--out", str(held)]),
         r"OUT .*/held holds files that export-beir did not write \(notes.txt\)"),
    ]
    before = _files(data), _files(tmp_path)
    for args, message in cases:
        done = _cli(data, *args)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1 or "usage:" in lines[0], lines
        assert __import__("re").search(message, lines[-1]), lines
    assert (_files(data), _files(tmp_path)) == before
    assert (held / "notes.txt").read_text() == "mine"


def test_ids_holding_quotes_go_out_and_back_the_same(tmp_path):
    """Finding 2: export-beir writes ids as they are, quotes included; import-beir read a
    leading quote as a CSV quoted field, so the export did not import back."""
    from tests.external.test_beir import _small

    quoted = [json.dumps({"_id": i, "title": "x", "text": "y"}) for i in ('"x', 'y"', 'd"9')]
    src = _small(tmp_path / "src", quoted, 'q1\t"x\t1\nq1\td2\t1\nq2\td3\t0\nq2\ty"\t1\n'
                                           'q1\td"9\t2\n')
    name = import_beir(src, tmp_path / "corpora" / "c")["collection"]["pools"][0]
    pipeline.export_beir(tmp_path, "c", name, tmp_path / "out")
    import_beir(tmp_path / "out", tmp_path / "corpora" / "again")
    before, after = (load_pool(tmp_path / "corpora" / c, name) for c in ("c", "again"))
    assert after[2].height == 5 and after[2].equals(before[2])
    assert after[1].equals(before[1])
