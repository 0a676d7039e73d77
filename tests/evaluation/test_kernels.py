"""ranx's kernels as pipeline/metrics.py calls them (without ranx's package) and what a fresh
process pays before it scores: the values ranx.evaluate gives, none of ranx's heavy imports,
and nothing left to compile after `python -m pipeline warm`'s part for scoring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ranx.meta.evaluate import extract_metric_and_params

import pipeline
from pipeline import metrics
from pipeline.glossary import METRIC_SETS
from tests.conftest import POOL_SIZES, pool_of

ROOT = Path(__file__).resolve().parents[2]
# Every kernel of ranx the pipeline can ask for (glossary._KNOWN), with cutoffs and levels
NAMES = ["map", "map@10", "map-l2", "ndcg", "ndcg@5", "ndcg@10-l2", "recall@5", "recall@30",
         "precision@10", "mrr", "mrr@5", "r-precision", "hit_rate@5", "hits@10",
         "ndcg_burges@10", "f1@10", "recall@100-l3"]


def typed_lists(queries: int, seed: int = 0):
    """ranx's typed lists of an adversarial run and qrels: ties in the run's scores, graded and
    judged non-relevant (grade 0) documents, unjudged ones, queries with a short list or none
    ranked relevant."""
    rng = np.random.default_rng(seed)
    run_parts, qrel_parts = [], []
    for _ in range(queries):
        docs = rng.choice(200, size=rng.integers(1, 60), replace=False)
        run_parts.append((docs, -rng.integers(0, 8, size=len(docs)).astype(float)))
        judged = rng.choice(200, size=rng.integers(1, 25), replace=False)
        qrel_parts.append((judged, rng.integers(0, 4, size=len(judged)).astype(float)))

    def cut(parts):
        offsets = np.cumsum([0] + [len(d) for d, _ in parts])
        return metrics.cut(np.concatenate([d for d, _ in parts]).astype(float),
                           np.concatenate([v for _, v in parts]), offsets)
    return cut(qrel_parts), cut(run_parts)


@pytest.mark.parametrize("queries", [4, 40])  # below ranx's 10 (one thread) and above
def test_the_kernels_give_what_ranx_evaluate_gives(queries):
    """The values `ranx_per_query` computes from ranx's kernels equal `ranx.evaluate`'s, bit
    for bit, for every metric of ranx the pipeline asks for, and the metric names are read
    as ranx reads them."""
    qrels, run = typed_lists(queries)
    assert metrics.ranx_kernels() is not None  # this ranx: its kernels reached directly
    direct = metrics.ranx_per_query(qrels, run, NAMES)
    public = metrics._ranx_evaluate(qrels, run, NAMES)
    for name in NAMES:
        assert np.array_equal(direct[name], public[name]), name
        assert metrics.ranx_metric(name) == extract_metric_and_params(name)
    assert metrics.ranx_metric("rbp.95") == extract_metric_and_params("rbp.95")


def test_without_the_kernels_ranx_evaluate_scores(monkeypatch):
    """A ranx whose kernels are laid out otherwise (`ranx_kernels` None): ranx.evaluate gives
    the same values, a lone metric with a cutoff included."""
    qrels, run = typed_lists(12, seed=1)
    direct = metrics.ranx_per_query(qrels, run, ["recall@30"])
    monkeypatch.setattr(metrics, "ranx_kernels", lambda: None)
    assert np.array_equal(metrics.ranx_per_query(qrels, run, ["recall@30"])["recall@30"],
                          direct["recall@30"])


def test_the_cut_has_one_signature_whatever_polars_hands_over():
    """`cut` gives `_cut` read-only C arrays whether the columns came writable, read-only or
    strided, so that warm_up's one compiled signature is the one every run uses."""
    writable = np.arange(6, dtype=float)
    frozen = writable.copy()
    frozen.flags.writeable = False
    offsets = np.array([0, 2, 3], dtype=np.int64)
    for ids, values in [(writable[:3], frozen[:3]), (frozen[:3], writable[:3]),
                        (writable[::2], writable[1::2])]:
        metrics.cut(ids, values, offsets)
    assert len(metrics._cut.signatures) == 1
    assert all(not a.mutable and a.layout == "C" for a in metrics._cut.signatures[0])
    assert writable.flags.writeable  # the caller's arrays are left as they were


# A fresh process: the eval stage of one pool through the command line, numba's compiles
# recorded, then which heavy modules it imported; then ranx's package imported after it
STAGE = """
import json, sys
from pipeline import metrics
from pipeline.cli.main import main
with metrics.compilations() as compiled:
    status = main(sys.argv[1:])
heavy = sorted(m for m in ("ranx", "pandas", "scipy.stats", "matplotlib", "ir_datasets")
               if m in sys.modules)
print(json.dumps({"status": status, "compiled": compiled, "heavy": heavy}))
"""
# ranx's package imported after its kernels were loaded on their own: fuses and evaluates as ever
AFTER = """
from pipeline import metrics
assert metrics.ranx_kernels() is not None
import ranx
assert ranx.evaluate({"q": {"a": 1}}, {"q": {"a": 0.5, "b": 0.1}}, "map") == 1.0
fused = ranx.fuse([ranx.Run({"q": {"a": 1.0, "b": 0.5}}), ranx.Run({"q": {"b": 1.0}})],
                  method="rrf")
assert sorted(fused["q"]) == ["a", "b"]
"""


@pytest.mark.slow
def test_an_eval_stage_after_warm_compiles_nothing(corpus_dir, tmp_path):
    """`python -m pipeline warm`'s part for scoring (metrics.warm_up), run in a process of its
    own on an empty numba cache, leaves nothing for an eval stage to compile: a fresh process
    scoring a pool's run loads every kernel from the cache (no numba compile at all), and
    imports neither ranx's package nor pandas, scipy.stats, matplotlib or ir_datasets."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    subprocess.run([sys.executable, "-c", "from pipeline import metrics; metrics.warm_up()"],
                   env=env, cwd=ROOT, check=True, capture_output=True)
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    pool = pool_of(POOL_SIZES[0])
    pipeline.search(data, corpus_dir.name, pool, "random", threads=1)
    done = subprocess.run(
        [sys.executable, "-c", STAGE, "--corpora-root", str(corpus_dir.parent), "--index-root",
         str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs"), "eval",
         "--corpus", corpus_dir.name, "--model", "random", "--pool", pool],
        env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"status": 0, "compiled": [], "heavy": []}
    scored = tmp_path / "runs" / corpus_dir.name / pool / "random.metrics.parquet"
    assert scored.is_file()
    assert set(METRIC_SETS["large-scale"]) <= set(json.loads(
        scored.with_name("random.eval.json").read_text())["means"])


@pytest.mark.slow
def test_ranx_imported_after_its_kernels_fuses_and_evaluates():
    """ranx's package imported in a process that loaded `ranx.metrics` on its own first
    (metrics.ranx_kernels): its evaluate and fuse work as ever (numba's cache as installed)."""
    done = subprocess.run([sys.executable, "-c", AFTER], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
