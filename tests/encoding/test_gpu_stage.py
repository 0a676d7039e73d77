"""benchmarks/gpu_stage.py, the one script a GPU session runs (issue 70), end to end on a CPU
at its tiny size: every step runs and its rows, json and md are written, step 6 (issue 80) with
a 2-layer Qwen2, last-token pooled, step 7 (issue 90) with each retriever family's folder on the
2-layer BERT, beside its peer: equal to it in fp32. Its corpus is 2,500 papers, not the default
4 x the pool (4,000): 1,084 of them prefiltered, enough for the pool of 1,000 candidates and its
50 queries (1,019 papers to embed, over the 1,000 asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.encoding.encoders import GPU_BUCKET
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
ROW_FIELDS = {"device", "papers", "engine_papers_per_s", "stage_papers_per_s", "gpu_busy"}


@pytest.mark.slow
def test_the_gpu_stage_script_runs_end_to_end_on_a_cpu(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_stage.py", "--papers", "300", "--pool", "1k",
         "--device", "cpu", "--repeats", "1", "--corpus", "2500", "--out", str(out),
         "--work", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((out / "gpu_stage.json").read_text())
    assert figures["complete"] and not figures["skipped"]
    assert set(figures["steps"]) >= {"corpus", "pool", "search", "eval", "engine_on_pool",
                                     "profile", "engine_vs_peer", "decoder", "families"}
    rows = figures["rows"]
    assert set(rows) == {"engine", "stage", "fresh", "decoder", "sparse_engine", "late_engine",
                         "reranker"}
    assert all(set(row) >= ROW_FIELDS for row in rows.values())
    assert all(row["device"].startswith("cpu (") for row in rows.values())
    stage = rows["stage"]
    assert stage["papers"] > 1000 and stage["stage_papers_per_s"] > 0  # the pool's papers
    assert stage["engine_papers_per_s"] > 0 and stage["gpu_busy"] is None  # none on a CPU
    pooled = figures["steps"]["engine_on_pool"]
    assert pooled["stored_vs_engine_cosine_min"] > 0.9999
    assert pooled["bucket"] == GPU_BUCKET and pooled["bucketed_papers_per_s"] > 0
    assert pooled["bucketed_gpu_busy"] is None  # none on a CPU
    assert pooled["bucketed_vs_engine_cosine_min"] > 0.9999  # the GPU loop forced, buckets
    assert 0 < pooled["shapes_met_bucketed"] <= 2 * -(-512 // GPU_BUCKET)  # one chunk here
    assert pooled["shapes_met_mixed"] > pooled["shapes_met_bucketed"]
    assert rows["engine"]["papers"] == 300 and rows["engine"]["speedup"] > 0
    assert rows["engine"]["cosine_bf16_vs_fp32_min"] > 0.9999  # fp32 on both sides here
    assert rows["fresh"]["noop_make_eval_s"] > 0 and rows["fresh"]["eval_stage_s"] is not None
    assert figures["steps"]["profile"]["batches"] > 0 and figures["steps"]["profile"]["top"]
    decoder, decoded = rows["decoder"], figures["steps"]["decoder"]
    assert decoder["model"] == "qwen2-tiny" and decoder["papers"] == 300
    assert decoder["engine_papers_per_s"] > 0 and decoder["engine_tokens_per_s"] > 0
    assert decoder["peer_papers_per_s"] > 0 and decoder["speedup"] > 0
    assert decoder["cosine_bf16_vs_fp32_min"] > 0.9999  # fp32 on both sides here
    assert decoded["cosine_engine_vs_peer_mean"] > 0.9999  # both read the [SEP]'s state
    assert (decoded["padding_side"], decoded["eos_appended"]) == ("left", False)
    infinity = decoded["infinity"]  # measured where infinity_emb imports, else why not
    assert (infinity["papers_per_s"] > 0 if isinstance(infinity, dict)
            else infinity.startswith("not installed: "))
    families, sparse = figures["steps"]["families"], rows["sparse_engine"]
    assert sparse["papers"] == families["papers"] == 16  # its CPU default
    assert sparse["engine_papers_per_s"] > 0 and sparse["peer_papers_per_s"] > 0
    assert sparse["speedup"] > 0 and sparse["max_weight_difference"] <= 1e-5
    assert 0 < sparse["terms_per_paper"] < 1000  # sparse: a few hundred of 30,522 terms
    late = rows["late_engine"]
    assert late["papers"] == 16 and late["engine_papers_per_s"] > 0
    # the skiplist's punctuation dropped: fewer tokens kept than the papers' tokens
    assert 0 < late["kept_tokens_per_paper"] < families["late"]["mean_tokens_per_paper"]
    assert late["peer"].startswith("none: PyLate is not installed")
    reranker = rows["reranker"]
    assert reranker["pairs"] == 3 * 8 and reranker["speedup"] > 0
    assert reranker["engine_pairs_per_s"] > 0 and reranker["peer_pairs_per_s"] > 0
    assert reranker["max_score_difference"] <= 1e-5
    assert families["reranker"]["score_spread"] > 0.1  # the pairs' scores differ
    md = (out / "gpu_stage.md").read_text()
    assert "A CPU run at a tiny size" in md and figures["machine"] in md
    assert "Decoder embedder (issue 80" in md and "Length buckets (issue 80" in md
    assert "Retriever families (issue 90" in md
    assert all(f"| {name} |" in md for name in ("sparse_engine", "late_engine", "reranker"))
    assert (out / "gpu_stage_profile.txt").exists() and (out / "gpu_stage_log.txt").exists()
    assert not list(tmp_path.glob("gpu_stage-*"))  # the scratch folder removed
