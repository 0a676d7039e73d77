"""Extension points are registries: a new retriever kind is one module plus one registry
line (and a model of that kind one line in the model registry), and `make eval` runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.retrieval.registry import RETRIEVERS, retriever
from tests.conftest import CHILD_BOUND_S, copy_corpus

ROOT = Path(__file__).resolve().parents[2]

TOY = '''"""A toy retriever: candidates ranked by how close their id is to the query's."""

import polars as pl

from pipeline.retrieval.base import Query, Retriever


class Toy(Retriever):
    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        pairs = query.queries.select(query="corpusid").join(
            query.candidates.select(doc="corpusid"), how="cross")
        hits = (pairs.with_columns(score=-(pl.col("query") - pl.col("doc")).abs()
                                   .cast(pl.Float64))
                .sort(["query", "score"], descending=[False, True])
                .group_by("query", maintain_order=True).head(query.depth))
        return hits, {"toy": True}


RETRIEVER = Toy()
'''


def test_every_model_kind_has_a_retriever():
    from pipeline.models import REGISTRY

    for entry in REGISTRY.values():
        assert entry.kind in RETRIEVERS, entry
        assert hasattr(retriever(entry.kind), "hits")
    with pytest.raises(InputError, match="no retriever is registered for model kind 'nope'"):
        retriever("nope")


def _add_line(path: Path, anchor: str, line: str) -> None:
    text = path.read_text()
    assert anchor in text, f"{anchor!r} not in {path}"
    path.write_text(text.replace(anchor, anchor + line, 1))


@pytest.fixture(scope="module")
def toy_checkout(tmp_path_factory) -> Path:
    """A copy of the project with a toy retriever: one module and two registry lines."""
    work = tmp_path_factory.mktemp("checkout")
    for name in ("pipeline", "Makefile", "pyproject.toml", "constraints.txt"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, copy_function=shutil.copy2,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, work / name)
    (work / "pipeline" / "retrieval" / "toy.py").write_text(TOY)
    _add_line(work / "pipeline" / "retrieval" / "registry.py",
              "RETRIEVERS: dict[str, str] = {\n", '    "toy": "pipeline.retrieval.toy",\n')
    models = work / "pipeline" / "models.py"  # a model of that kind: one line
    models.write_text(models.read_text() + '\nregister(ModelEntry("toy", "toy"))\n')
    return work


def test_a_toy_retriever_runs_through_make_eval(toy_checkout, corpus_dir, tmp_path):
    data = tmp_path / "data"
    copy_corpus(corpus_dir, data / "corpora" / "small")
    (data / "installed").touch()  # newer than pyproject.toml and constraints.txt: no reinstall

    def make(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["make", "--no-print-directory", f"DATA={data}", "CORPUS=small", "THREADS=1",
             f"PY={sys.executable}", f"STAMP={data / 'installed'}", *args],
            cwd=toy_checkout, capture_output=True, text=True, timeout=CHILD_BOUND_S,
            env={**os.environ, "MAKEFLAGS": "", "PYTHONPATH": str(toy_checkout)})
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    make("pool", "SIZE=800", "QUERIES=10")
    make("eval", "MODEL=toy")
    run = pl.read_parquet(data / "runs" / "small" / "all-800-r0" / "toy.parquet")
    queries = pl.read_parquet(data / "corpora" / "small" / "pools" / "all-800-r0"
                              / "queries.parquet")
    assert run["query"].n_unique() == queries.height
    first = run.filter(pl.col("rank") == 1).join(queries.select(query="corpusid"), on="query")
    # the toy's own ranking: the nearest id first
    candidates = pl.read_parquet(data / "corpora" / "small" / "pools" / "all-800-r0"
                                 / "candidates.parquet")["corpusid"]
    for query, doc in first.select("query", "doc").iter_rows():
        others = candidates.filter(candidates != query)
        assert abs(doc - query) == (others - query).abs().min()
    metrics = pl.read_parquet(data / "runs" / "small" / "all-800-r0" / "toy.metrics.parquet")
    assert metrics.height > 0 and "map" in metrics.columns
    results = pl.read_parquet(data / "runs" / "results.parquet")
    assert "toy" in results["model"].to_list()
