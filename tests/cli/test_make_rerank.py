"""The new families through make, on a private copy of the test corpus with one pool: make eval
of a tiny SparseEncoder folder (st:), and make rerank of BM25 by a tiny CrossEncoder folder
(BM25's top RERANK_DEPTH in CrossEncoder.predict's order); a second run of each a no-op, verify
clean; once the first stage is searched again, verify names the reranked run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import CHILD_BOUND_S, refusal
from tests.test_errors import POOL, with_pool

ROOT = Path(__file__).resolve().parents[2]
DEPTH = 6
RERANKED = "rerank--st--local--ce--bm25"


def make(root: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = ["make", "--no-print-directory", f"DATA={root}", "CORPUS=c", "THREADS=1",
           f"PY={sys.executable}", f"STAMP={root / 'installed'}", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**os.environ, "MAKEFLAGS": ""})


@pytest.mark.slow
def test_make_eval_of_a_sparse_folder_and_make_rerank_then_verify(corpus_dir, cross_folder,
                                                                  splade_folder, tmp_path):
    from sentence_transformers import CrossEncoder

    root = tmp_path / "data"
    corpus = with_pool(root, corpus_dir)
    (root / "installed").touch()
    sparse = ("eval", "MODEL=st:local/sp", f"MODEL_PATH={splade_folder}")
    done = make(root, *sparse)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = root / "runs" / "c" / POOL
    evaluated = (runs / "st--local--sp.eval.json").read_bytes()
    again = make(root, *sparse)
    assert again.returncode == 0 and "0 to search" in again.stderr, again.stderr[-2000:]
    assert (runs / "st--local--sp.eval.json").read_bytes() == evaluated
    given = ("rerank", "MODEL=st:local/ce", f"MODEL_PATH={cross_folder}", "FIRST_STAGE=bm25",
             f"RERANK_DEPTH={DEPTH}", "K=30")
    done = make(root, *given)
    assert done.returncode == 0, done.stderr[-2000:]
    first, run = (pl.read_parquet(runs / f"{m}.parquet") for m in ("bm25", RERANKED))
    papers = pl.read_parquet(corpus / "prefiltered.parquet")
    text = {i: f"{t or ''} {a or ''}".strip() for i, t, a in
            papers.select("corpusid", "title", "abstract").iter_rows()}
    model = CrossEncoder(str(cross_folder), device="cpu")
    for query in np.sort(first["query"].unique().to_numpy())[:3]:
        theirs = first.filter(pl.col("query") == query).sort("rank")["doc"].to_list()
        mine = run.filter(pl.col("query") == query).sort("rank")["doc"].to_list()
        assert sorted(mine[:DEPTH]) == sorted(theirs[:DEPTH]) and mine[DEPTH:] == theirs[DEPTH:]
        scores = model.predict([(text[query], text[d]) for d in mine[:DEPTH]])
        assert (np.diff(scores) <= 1e-6).all()  # predict's order
    assert (runs / f"{RERANKED}.eval.json").is_file()
    manifest = (runs / f"{RERANKED}.manifest.json").read_bytes()
    again = make(root, *given)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (runs / f"{RERANKED}.manifest.json").read_bytes() == manifest
    assert "0 to search" in again.stderr
    clean = make(root, "verify")
    assert clean.returncode == 0, clean.stdout[-2000:] + clean.stderr[-2000:]
    searched = make(root, "search", "MODEL=bm25", "K=20")
    assert searched.returncode == 0, searched.stderr[-2000:]
    stale = make(root, "verify")
    said = stale.stdout + stale.stderr
    assert stale.returncode != 0
    assert any(RERANKED in line and "STALE" in line for line in said.splitlines()), said[-3000:]
    assert f"MODEL_PATH={cross_folder}" in said  # the repair loads the same reranker


@pytest.mark.parametrize("given, said", [
    (("MODEL=bm25",), "error: MODEL 'bm25' is a bm25 model, which reranks nothing: give one of "
                      "colbertv2, answerai-colbert-small, ms-marco-minilm"),
    (("MODEL=ms-marco-minilm", "FIRST_STAGE=ms-marco-minilm"),
     "error: FIRST_STAGE=ms-marco-minilm: a cross-encoder has no run of its own to rerank"),
    (("MODEL=ms-marco-minilm", "FIRST_STAGE=bm25~title"),
     "error: FIRST_STAGE: 'bm25~title' is a run of perturbed queries ('~'): a reranked run "
     "takes full queries"),
    (("MODEL=ms-marco-minilm", "FIRST_STAGE=no/such"), "error: FIRST_STAGE: 'no/such': a model "
                                                       "name is"),
    (("MODEL=ms-marco-minilm", "FIRST_STAGE=nosuch"), "error: FIRST_STAGE=nosuch: no model has "
                                                      "this name, and no run of corpus demo was "
                                                      "imported under it"),
    (("MODEL=ms-marco-minilm", "RERANK_DEPTH=0"), "error: RERANK_DEPTH: 0 is too small"),
    (("MODEL=st:local/x", "MODEL_PATH={tiny_bert}"),
     "error: MODEL st:local/x: its folder {tiny_bert} is a st model's, which reranks nothing"),
    (("MODEL=rerank-api:rerank-v3.5",), "error: MODEL=rerank-api:rerank-v3.5 is served: give "
                                        "RERANK_URL, its endpoint's URL"),
    (("MODEL=rerank-api:x", "RERANK_URL=http://u:pw-secret@host/rerank"),
     "error: RERANK_URL='http://<user:password>@host/rerank' holds a user and password"),
])
def test_what_make_rerank_cannot_do_is_one_line_before_anything_runs(given, said, tiny_bert,
                                                                      tmp_path):
    """Each refused before the corpus stage (make -n: the checks, no stage), exit status 2."""
    (tmp_path / "installed").touch()
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "rerank", f"DATA={tmp_path / 'data'}",
         f"PY={sys.executable}", f"STAMP={tmp_path / 'installed'}",
         *(g.format(tiny_bert=tiny_bert) for g in given)], cwd=ROOT, capture_output=True,
        text=True, env={**os.environ, "MAKEFLAGS": ""}, timeout=CHILD_BOUND_S)
    assert done.returncode == 2
    assert refusal(done).startswith(said.format(tiny_bert=tiny_bert))
    assert not (tmp_path / "data").exists()
