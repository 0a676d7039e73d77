"""A served model's refusal names a repair that runs as printed and finishes what it starts
(issue 69): `make eval MODEL=api:<model> ... REPLACE=1` carries EMBEDDINGS_URL (and the
request settings given), never the key, and REPLACE=1 searches every pool whose runs it
removed before scoring them. Against the local server of tests/servers.py, whose "model"
is a seeded vector per text (what is checked is the pipeline's, not a model's): another
model behind the same URL is the same vectors rotated."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.files import write_json
from pipeline.layout import run_paths
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.runs import ENDPOINT, run_repair
from tests.conftest import CHILD_BOUND_S, POOL_SEED, copy_corpus, make_ok
from tests.servers import EMBEDDINGS, LocalServer, running

ROOT = Path(__file__).resolve().parents[2]
SERVED, DIM = "ok", 32
MODEL = f"api:{SERVED}"
NAME = f"api--{SERVED}"
KEY = "sk-replace-0123456789-never-shown"


def vectors(texts: list[str]) -> np.ndarray:
    """Each text's own seeded vector: the same text, the same vector, in any batch."""
    return np.stack([np.random.default_rng(int.from_bytes(hashlib.sha256(
        text.encode()).digest()[:8], "little")).normal(size=DIM) for text in texts]
        ).astype(np.float32)


def rotation() -> np.ndarray:
    """An orthogonal matrix: the vectors through it are "another model's"."""
    return np.linalg.qr(np.random.default_rng(7).normal(size=(DIM, DIM)))[0].astype(np.float32)


def make(root: Path, stamp: Path, *args: str) -> subprocess.CompletedProcess:
    """make as a user types it (`args`: its target and variables), on the test's Python."""
    return subprocess.run(
        ["make", "--no-print-directory", f"PY={sys.executable}", f"STAMP={stamp}", "THREADS=1",
         *args], cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": ""})


def refused(done: subprocess.CompletedProcess) -> str:
    """The one `error: ` line of a make call refused (exit status 2)."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    return errors[0]


def printed_repair(line: str) -> list[str]:
    """The words of the repair a refusal or verify's line prints, as a shell reads them."""
    assert "; repair: " in line, line
    words = shlex.split(line.rsplit("; repair: ", 1)[1])
    assert words[0] == "make", line
    return words


@pytest.mark.slow  # make, five times over a corpus of two or three pools
@pytest.mark.parametrize("change", ["pool", "prompt"])
def test_a_served_models_repair_runs_as_printed_and_evaluates_every_pool(
        corpus_dir, raw_corpus, tmp_path, monkeypatch, change):
    """Two pools evaluated through the endpoint, then the model behind the URL swapped and
    `make eval` asked for what sends requests: a third pool's papers (the probes checked in
    the embed), or a QUERY_PROMPT's queries (checked where the queries are encoded). Each is
    refused in one line whose repair, run word for word as printed (the key in the
    environment only), exits 0 with every pool's run searched again and scored; the model's
    runs are then current. A run lost later: verify's repair, run as printed, searches it
    again at the endpoint its manifest records. No byte of the key is shown."""
    root = tmp_path / "data"
    corpus = copy_corpus(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, corpus / "s2orc")
    pools = [build_pool(corpus, PoolSpec(size=100, queries=5, seed=POOL_SEED + i))["name"]
             for i in range(2)]
    stamp = tmp_path / "installed"
    stamp.touch()
    for variable in ("EMBEDDINGS_URL", "EMBEDDINGS_BATCH", "EMBEDDINGS_CONCURRENCY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with running(LocalServer(SERVED, encode=vectors, path=EMBEDDINGS)) as server:
        given = (f"MODEL={MODEL}", f"EMBEDDINGS_URL={server.url}", "EMBEDDINGS_BATCH=16")
        make_ok(root, stamp, "eval", *given)
        if change == "pool":
            pools.append(build_pool(corpus, PoolSpec(size=100, queries=5,
                                                     seed=POOL_SEED + 2))["name"])
        else:
            given += ("QUERY_PROMPT=Find the papers it cites:\\n",)
        server.transform = lambda found: found @ rotation()
        done = make(root, stamp, f"DATA={root}", "CORPUS=small", "eval", *given)
        line = refused(done)
        assert "was embedded by another model named api--ok" in line, line
        words = printed_repair(line)
        assert words[1] == "eval" and "REPLACE=1" in words, words
        assert {f"EMBEDDINGS_URL={server.url}", "EMBEDDINGS_BATCH=16"} <= set(words), words
        if change == "prompt":
            assert "QUERY_PROMPT=Find the papers it cites:\\n" in words, words
        repaired = make(root, stamp, *words[1:])
        assert repaired.returncode == 0, repaired.stderr[-3000:]
        name = next(word for word in words if word.startswith("MODEL=")).split("=", 1)[1]
        for pool in pools:
            run = run_paths(root / "runs", "small", pool, name)
            assert run.evaluation.exists() and pl.read_parquet(run.parquet).height > 0, pool
        again = make(root, stamp, f"DATA={root}", "CORPUS=small", "eval", *given)
        assert again.returncode == 0, again.stderr[-2000:]
        assert f"{len(pools)} current runs kept, 0 to search" in again.stderr
        run_paths(root / "runs", "small", pools[0], name).trec.unlink()
        checked = make(root, stamp, f"DATA={root}", "verify")
        lost = [line for line in checked.stdout.splitlines() if pools[0] in line]
        assert checked.returncode != 0 and lost, checked.stdout[-2000:]
        words = printed_repair(lost[0])
        assert f"EMBEDDINGS_URL={server.url}" in words, lost
        rerun = make(root, stamp, *words[1:])
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        assert run_paths(root / "runs", "small", pools[0], name).trec.exists()
    said = "".join(out.stdout + out.stderr for out in (done, repaired, again, checked, rerun))
    assert KEY not in said and KEY[:8] not in said


def test_a_served_runs_repair_names_the_url_it_was_searched_at(tmp_path):
    """run_repair (verify's, eval's) of a served model's run: the EMBEDDINGS_URL its manifest
    records, shown as a URL is (never a password); a run that records none (searched
    before runs recorded it, or its manifest gone): a placeholder to fill in, never a
    command that is refused for want of it."""
    paths = run_paths(tmp_path, "small", "p", f"{NAME}+q1234abcd")
    paths.manifest.parent.mkdir(parents=True)
    url = "http://127.0.0.1:8000/v1/embeddings"
    for recorded, shown in ((url, f"EMBEDDINGS_URL={url}"),
                            ("http://u:pw-secret@h/v1", "EMBEDDINGS_URL='http://<user:password>@h/v1'"),
                            (None, "EMBEDDINGS_URL=<its endpoint's URL>")):
        details = {"query_prompt": "Find:\n", **({ENDPOINT: recorded} if recorded else {})}
        write_json({"stage": "search", "details": details}, paths.manifest)
        command = run_repair("small", f"{NAME}+q1234abcd", tmp_path, "p").command()
        assert command == (f"make eval CORPUS=small MODEL={NAME}+q1234abcd "
                           f"QUERY_PROMPT='Find:\\n' {shown}"), command
    assert "EMBEDDINGS_URL" not in run_repair("small", "minilm", tmp_path, "p").command()
