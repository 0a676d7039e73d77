"""Served rerankers (pipeline/encoding/served_rerank.py) through the API: a local server
(tests/servers.py) speaking Cohere's /v1/rerank and TEI's /rerank, scoring with the tiny
CrossEncoder folder (cross_folder) by CrossEncoder.predict; and infinity-emb, a real serving
package, serving the same folder. A served reranker's run equals the local cross-encoder's; a
reply that is not each document's one score is refused in one line, nothing written; another
endpoint makes the run stale, and its repair names RERANK_URL, never the key."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding import served_rerank
from pipeline.layout import Place, run_paths
from pipeline.models import get_model, rerank_parts, reranked_name
from pipeline.retrieval.runs import recorded_run_problem, run_repair
from tests.conftest import CROSS_ENCODER, POOL_SIZES, cross_reranked, pool_of
from tests.servers import RERANK, TEI_RERANK, LocalServer, infinity, killed_when_held, running

POOL = pool_of(POOL_SIZES[0])
SERVED = "local/ce"  # the name the server serves the cross-encoder under
RERANKER = f"rerank-api:{SERVED}"
RERANKED = reranked_name(RERANKER, "bm25")
LOCAL = reranked_name(CROSS_ENCODER, "bm25")  # the same folder, run here
K, DEPTH = 20, 8
KEY = "sk-test-rerank-0123456789-never-written"


@pytest.fixture(scope="module")
def cross_encoder(cross_folder):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(cross_folder), device="cpu")


@pytest.fixture(scope="module")
def server(cross_encoder):
    """The local server scoring each request's documents by CrossEncoder.predict."""
    def rank(query: str, documents: list[str]) -> np.ndarray:
        return cross_encoder.predict([(query, doc) for doc in documents], batch_size=8)

    with running(LocalServer(SERVED, rank=rank)) as server:
        yield server


@pytest.fixture
def endpoint(server, monkeypatch) -> LocalServer:
    """The server at Cohere's path as make passes it (the environment), with a key, five
    documents a request, two requests at once; retry waits counted, not slept."""
    monkeypatch.setenv("RERANK_URL", f"{server.url}{RERANK}")
    monkeypatch.setenv("EMBEDDINGS_BATCH", "5")
    monkeypatch.setenv("EMBEDDINGS_CONCURRENCY", "2")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.faults, server.always, server.waits, server.hold_at = [], "", [], None
    server.held.clear()
    server.release.clear()
    monkeypatch.setattr(served_rerank, "pause", server.waits.append)
    return server


@pytest.fixture(scope="module")
def first_stage(corpus_dir, cross_folder, tmp_path_factory) -> tuple[pipeline.Data, Place]:
    """BM25 searched, and its top DEPTH reranked by the cross-encoder run here (LOCAL)."""
    return cross_reranked(corpus_dir, cross_folder, tmp_path_factory.mktemp("served-rerank"),
                          POOL, K, DEPTH)


def run_of(data: pipeline.Data, corpus: str, model: str) -> pl.DataFrame:
    return pl.read_parquet(run_paths(data.runs, corpus, POOL, model).parquet)


def rerank(data: pipeline.Data, corpus: str) -> None:
    pipeline.search(data, corpus, POOL, RERANKED, k=K, threads=1, rerank_depth=DEPTH)


def test_the_name_splits_back_with_or_without_an_org():
    """The file name keeps an org part (NO_ORG where the served name has none), so the
    reranked run's name splits into its two stages, a fused first stage too."""
    assert rerank_parts(RERANKED) == ("rerank-api--local--ce", "bm25")
    cohere = reranked_name("rerank-api:rerank-v3.5", "fuse--rrf--bm25--minilm")
    assert cohere == "rerank--rerank-api--_--rerank-v3.5--fuse--rrf--bm25--minilm"
    reranker, first = rerank_parts(cohere)
    assert (get_model(reranker).hf_id, first) == ("rerank-v3.5", "fuse--rrf--bm25--minilm")


def test_a_served_reranker_equals_the_same_cross_encoder_run_here(endpoint, first_stage,
                                                                   corpus_dir):
    """Cohere's protocol, then TEI's: the run holds the local cross-encoder's rows in its
    order and its scores (1e-5); each request carries the key in its header, at most five
    documents; the key is in no file written; the second endpoint made the first run stale,
    naming it, and its repair names RERANK_URL."""
    data, place = first_stage
    corpus = corpus_dir.name
    rerank(data, corpus)
    local, served = run_of(data, corpus, LOCAL), run_of(data, corpus, RERANKED)
    assert served.select("query", "doc").equals(local.select("query", "doc"))
    np.testing.assert_allclose(served["score"], local["score"], atol=1e-5)
    documents = [body["documents"] for body in endpoint.bodies if "documents" in body]
    assert max(map(len, documents)) == 5 and len(documents) > served["query"].n_unique()
    assert set(endpoint.authorizations) == {f"Bearer {KEY}"}
    paths = run_paths(data.runs, corpus, POOL, RERANKED)
    assert all(KEY not in path.read_text(errors="replace")
               for path in paths.trec.parent.rglob("*") if path.is_file())
    repair = str(run_repair(corpus, RERANKED, data.runs, POOL))
    assert f"RERANK_URL={endpoint.url}{RERANK}" in repair and KEY not in repair

    tei = f"{endpoint.url}{TEI_RERANK}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RERANK_URL", tei)
        problem, repair = recorded_run_problem(place, POOL, RERANKED)
        assert f"endpoint {endpoint.url}{RERANK} -> {tei}" in problem
        assert ("RERANK_URL", f"{endpoint.url}{RERANK}") in repair.variables
        rerank(data, corpus)
        assert recorded_run_problem(place, POOL, RERANKED) is None
    again = run_of(data, corpus, RERANKED)
    assert again.select("query", "doc").equals(local.select("query", "doc"))
    np.testing.assert_allclose(again["score"], local["score"], atol=1e-5)
    assert any("texts" in body and "documents" in body for body in endpoint.bodies)


def test_killed_mid_rerank_no_run_then_the_same_bytes_and_damage_is_refused(
        endpoint, first_stage, corpus_dir, tmp_path):
    """`python -m pipeline search` of the reranked model killed (SIGKILL) while a request is
    unanswered leaves no run; searched again from the start (four threads, another folder),
    its files are those of the run made above byte for byte; a byte of it changed (the
    same size) makes it CORRUPT, naming the file, and the repair searches it again."""
    data, place = first_stage
    corpus = corpus_dir.name
    rerank(data, corpus)  # the run of the module's folder, at this endpoint
    runs = tmp_path / "runs"
    own = pipeline.Data(corpora=data.corpora, indexes=data.indexes, runs=runs)
    pipeline.search(own, corpus, POOL, "bm25", k=K, threads=1)
    endpoint.hold_at = len(endpoint.bodies) + 3  # the probe, one batch, then held
    killed_when_held(endpoint, ["--corpora-root", str(data.corpora), "--index-root",
                                str(data.indexes), "--runs-root", str(runs), "search",
                                "--corpus", corpus, "--model", RERANKED, "--pool", POOL,
                                "--k", str(K), "--rerank-depth", str(DEPTH), "--threads", "1"],
                     "rerank")
    paths = run_paths(runs, corpus, POOL, RERANKED)
    assert not paths.parquet.exists() and not paths.trec.exists()
    pipeline.search(own, corpus, POOL, RERANKED, k=K, threads=4, rerank_depth=DEPTH)
    made = run_paths(data.runs, corpus, POOL, RERANKED)
    assert paths.parquet.read_bytes() == made.parquet.read_bytes()
    assert paths.trec.read_bytes() == made.trec.read_bytes()
    text = bytearray(paths.trec.read_bytes())
    text[len(text) // 2] ^= 1  # one bit: the same size
    paths.trec.write_bytes(bytes(text))
    problem, repair = recorded_run_problem(Place(corpus_dir, data.indexes, runs), POOL,
                                           RERANKED)
    assert paths.trec.name in problem and repair.model == RERANKED


@pytest.mark.parametrize(("fault", "words"), [
    ("short", "came back for 4 documents"), ("twice", "dropped or repeated"),
    ("nan", "a finite number"), ("true", "a finite number"), ("string", "a finite number"),
    ("notjson", "is not a reranking"), ("401", "set OPENAI_API_KEY")])
def test_a_reply_that_is_not_each_documents_score_is_refused(endpoint, first_stage,
                                                             corpus_dir, tmp_path, fault, words):
    """Each fault of every reply (the first, the fingerprint's four probes, meets it): one
    line naming the model and what to do, the key not in it, and no run written."""
    data, _ = first_stage
    runs = tmp_path / "runs"
    pipeline.search(pipeline.Data(corpora=data.corpora, indexes=data.indexes, runs=runs),
                    corpus_dir.name, POOL, "bm25", k=K, threads=1)
    endpoint.always = fault
    own = pipeline.Data(corpora=data.corpora, indexes=data.indexes, runs=runs)
    with pytest.raises(InputError) as raised:
        rerank(own, corpus_dir.name)
    line = str(raised.value)
    assert words in line and "MODEL rerank-api--local--ce at" in line
    assert "\n" not in line and KEY not in line
    assert not run_paths(runs, corpus_dir.name, POOL, RERANKED).parquet.exists()


def test_results_in_any_order_are_placed_by_their_index(endpoint, cross_encoder):
    """A reply whose results come in reverse order gives the same scores: each is placed by
    its index, not its place in the list."""
    scorer = served_rerank.ServedScorer(get_model(RERANKER))
    docs = {i: f"paper {i} on graph networks" * (i + 1) for i in range(7)}
    pairs = [(0, d) for d in range(1, 7)]
    endpoint.always = "reverse"
    mine = scorer.score(docs, docs, pairs)
    theirs = cross_encoder.predict([(docs[0], docs[d]) for _, d in pairs])
    np.testing.assert_allclose(mine, theirs, atol=1e-5)  # the server's batches: other padding
    assert np.ptp(theirs) > 1e-3


@pytest.mark.slow
def test_infinity_emb_reranks_as_cross_encoder_predict(cross_folder, cross_encoder,
                                                      monkeypatch):
    """infinity-emb serving the CrossEncoder folder at its /rerank: the scores equal
    CrossEncoder.predict's (1e-5) for each document of a request."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    docs = [f"paper {i} on protein structure prediction" * (i + 1) for i in range(6)]
    with infinity(cross_folder, SERVED) as url:
        monkeypatch.setenv("RERANK_URL", f"{url}/rerank")
        scorer = served_rerank.ServedScorer(get_model(RERANKER))
        mine = scorer.score({0: "graph neural networks"}, dict(enumerate(docs, 1)),
                            [(0, d) for d in range(1, 7)])
    theirs = cross_encoder.predict([("graph neural networks", doc) for doc in docs])
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert np.ptp(theirs) > 0
