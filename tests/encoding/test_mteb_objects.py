"""Objects of MTEB's encoder protocol given to pipeline.Encoder (called as MTEB calls them:
a DataLoader, a task's metadata, the document prompt type for stored papers and the query one
for query papers), and the embed stage's progress lines for every kind of object, in a test's
log and in a Python session that configured no logging (issue 49, items 4 and 5)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.logs import INTERVAL_ENV
from pipeline.encoding.coverage import pool_ids
from pipeline.layout import store_dir
from tests.conftest import CHILD_BOUND_S
from tests.encoding.test_objects import POOL, Hashed, data_of, run_of

ROOT = Path(__file__).resolve().parents[2]


class Protocol:
    """A model of MTEB's encoder protocol, numpy only: the Hashed vectors of each batch's
    texts, salted by the prompt type (a query paper's vector is not its stored one)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str,
               prompt_type=None, **kwargs) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        if texts != ["dimension probe"]:  # the one text each ObjectEncoder starts with
            self.calls.append((task_metadata.name, hf_split, hf_subset, prompt_type.value,
                               len(texts)))
        return Hashed(salt=prompt_type.value).encode(texts)


def papers_text(corpus_dir: Path) -> dict[int, str]:
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    return {i: f"{t or ''} {a or ''}".strip() for i, t, a in
            papers.select("corpusid", "title", "abstract").iter_rows()}


def test_an_mteb_object_embeds_papers_as_documents_and_queries_as_queries(corpus_dir,
                                                                          tmp_path):
    data = data_of(corpus_dir, tmp_path)
    obj = Protocol()
    model = pipeline.Encoder(obj, name="proto", similarity="ip", fingerprint="v1")
    assert model.describe()["protocol"] == "mteb" and model.describe()["task"] == "SCIDOCS"
    pipeline.search(data, corpus_dir.name, POOL, model, k=10, threads=1)
    queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet")["corpusid"]
    candidates = pl.read_parquet(corpus_dir / "pools" / POOL / "candidates.parquet")["corpusid"]
    kinds = {kind for *_, kind, _ in obj.calls}
    assert kinds == {"query", "document"}
    assert {call[:3] for call in obj.calls} == {("SCIDOCS", "test", "default")}
    # every pool paper stored as a document, each query paper encoded as a query
    stored = sum(n for *_, kind, n in obj.calls if kind == "document")
    assert stored == len(pool_ids(corpus_dir, POOL))
    assert sum(n for *_, kind, n in obj.calls if kind == "query") == len(queries)
    # each query's first hit: the largest inner product of its query vector with the
    # candidates' document vectors (its own paper left out)
    text, run = papers_text(corpus_dir), run_of(data, corpus_dir, "proto")
    docs = Hashed("document").encode([text[c] for c in candidates]).astype(np.float32)
    for query in queries.to_list()[:5]:
        scores = docs @ Hashed("query").encode([text[query]])[0].astype(np.float32)
        scores[candidates.to_numpy() == query] = -np.inf
        top = run.filter(pl.col("query") == query).sort("rank")
        assert top["score"][0] == pytest.approx(scores.max(), rel=1e-5)


def test_an_mteb_objects_task_is_in_its_stores_identity(corpus_dir, tmp_path):
    """The task chooses an MTEB object's prompts: a store made with another task's metadata
    is refused, never mixed."""
    data = data_of(corpus_dir, tmp_path)
    pipeline.search(data, corpus_dir.name, POOL,
                    pipeline.Encoder(Protocol(), name="proto", fingerprint="v1"),
                    k=10, threads=1)
    store = store_dir(data.indexes, corpus_dir.name, "proto")
    before = {p.name: p.read_bytes() for p in sorted(store.glob("part-*.arrow"))}
    other = pipeline.Encoder(Protocol(), name="proto", fingerprint="v1", task="SciFact")
    with pytest.raises(InputError, match="other settings.*model task"):
        pipeline.search(data, corpus_dir.name, POOL, other, k=10, threads=1)
    assert {p.name: p.read_bytes() for p in sorted(store.glob("part-*.arrow"))} == before


def test_an_mteb_object_is_checked_when_it_is_wrapped():
    with pytest.raises(InputError, match="no MTEB task"):
        pipeline.Encoder(Protocol(), name="proto", fingerprint="v1", task="NoSuchTask")
    with pytest.raises(InputError, match="MTEB's encoder protocol"):
        pipeline.Encoder(Hashed(), name="mine", fingerprint="v1", task="SCIDOCS")
    with pytest.raises(InputError, match="fingerprint="):  # it wraps no torch module
        pipeline.Encoder(Protocol(), name="proto")


@pytest.mark.parametrize("make", [Hashed, Protocol], ids=["texts", "mteb"])
def test_every_object_logs_the_embed_stages_progress_lines(corpus_dir, tmp_path, caplog,
                                                           monkeypatch, make):
    """The registry's encoders' lines ('[embed] 64/817 papers (7.8%), ... papers/s, ETA'),
    one a batch here (interval 0), for the stored papers and for an MTEB object's queries."""
    monkeypatch.setenv(INTERVAL_ENV, "0")
    caplog.set_level(logging.INFO, logger="pipeline")
    model = pipeline.Encoder(make(), name="logged", fingerprint="v1", batch_size=50)
    pipeline.search(data_of(corpus_dir, tmp_path), corpus_dir.name, POOL, model, k=10,
                    threads=1)
    lines = [r.getMessage() for r in caplog.records if r.name == "pipeline.progress"]
    papers = len(pool_ids(corpus_dir, POOL))
    assert lines[0].startswith(f"[embed] 50/{papers} papers (")
    assert f"[embed] {papers}/{papers} papers (100.0%)" in "\n".join(lines)
    assert all(" papers/s, " in line for line in lines)
    n_queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet").height
    queries = [line for line in lines if f"/{n_queries} papers" in line]
    assert bool(queries) == (make is Protocol)  # queries apart: an MTEB object's only


SCRIPT = """
import sys
import pipeline
from tests.encoding.test_objects import Hashed

corpora, indexes, runs, corpus, pool = sys.argv[1:]
data = pipeline.Data(corpora=corpora, indexes=indexes, runs=runs)
model = pipeline.Encoder(Hashed(), name="mine", fingerprint="v1")
pipeline.search(data, corpus, pool, model, k=10, threads=1)
"""


def test_a_python_session_without_logging_sees_the_progress_lines(corpus_dir, tmp_path):
    """`pipeline.search` in a script that configured no logging: the embed stage's lines on
    stderr, as on the command line (logging's defaults would drop them)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(corpus_dir.parent),
         str(tmp_path / "indexes"), str(tmp_path / "runs"), corpus_dir.name, POOL],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "PYTHONPATH": str(ROOT), INTERVAL_ENV: "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    papers = len(pool_ids(corpus_dir, POOL))
    assert f"[embed] {papers}/{papers} papers (100.0%)" in done.stderr, done.stderr[-3000:]


def test_an_mteb_wrappers_prompts_are_in_its_fingerprint(tiny_bert):
    """Two wrappers of the same weights with other prompts make other vectors: two
    fingerprints, so never one store; the same wrapper again: the same one."""
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_bert), device="cpu")
    plain = SentenceTransformerEncoderWrapper(st)
    prompted = SentenceTransformerEncoderWrapper(
        st, model_prompts={"query": "query: ", "document": "passage: "})
    fingerprints = [pipeline.Encoder(w, name="w").fingerprint for w in (plain, prompted)]
    assert fingerprints[0] != fingerprints[1]
    assert pipeline.Encoder(plain, name="w").fingerprint == fingerprints[0]
