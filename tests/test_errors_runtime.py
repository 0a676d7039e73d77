"""Runtime failures that used to mislead or crash, each run as a user would run it.

- `make report` after evaluations scored with different metric sets (METRICS=map for one
  model, the large-scale set for another, BEIR's ndcg@10/recall@100 on one pool): exit 0, the
  metrics that exist, "-" where one was not computed; never a traceback.
- EXECUTOR=slurm where sbatch exists but cannot reach a controller (SLURM not configured here)
  is told so, quoting sbatch; a request the cluster rejects names PARTITION, GPUS_PER_TASK and
  the time limit. A fake `sbatch` first on PATH plays both (the real-cluster tests are in
  test_slurm.py); nothing is left behind.
- `embed --device cuda` on a machine without a GPU is refused up front even when every paper
  is already stored (the device used to be checked only when a model was loaded).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from pipeline.layout import Place
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.report.build import report
from pipeline.slurm import missing_per_shard
from tests.conftest import CHILD_BOUND_S, built_once
from tests.test_errors import POOL, ROOT, _snapshot, cli, with_pool


def _run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1",
                               **(env or {})})


def _one_line(done: subprocess.CompletedProcess) -> str:
    """The single line of a refusal (exit 2)."""
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "Traceback" not in lines[0], lines[0]
    return lines[0]




def _row(text: str, model: str, marker: str = "") -> list[str]:
    """The cells of the first markdown row of `model` whose line contains `marker`."""
    line = next(line for line in text.splitlines()
                if line.startswith(f"| {model} |") and marker in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


# ---- 1. the report, with evaluations of different metric sets --------------------------------

@pytest.mark.slow
def test_report_shows_what_each_evaluation_computed(corpus_dir, tmp_path):
    root = tmp_path / "data"
    corpus = with_pool(root, corpus_dir)  # all-800-r0, 10 queries
    for spec in (PoolSpec(size=800, queries=10, repeat=1),
                 PoolSpec(size=400, field="Medicine", queries=10)):
        build_pool(corpus, spec)
    second, field = "all-800-r1", "medicine-400-r0"
    runs = root / "runs"
    for command in (
            ["search", "--model", "bm25"], ["search", "--model", "random"],  # every pool
            ["eval", "--model", "bm25", "--metrics", "map"],  # make eval METRICS=map
            ["eval", "--model", "random", "--pool", POOL],  # large-scale: map ndcg recall@30
            ["eval", "--model", "random", "--pool", second, "--metrics", "beir"],  # no MAP
            ["eval", "--model", "random", "--pool", field, "--metrics", "ndcg"]):
        done = _run(cli(root, *command[:1], "--corpus", "c", *command[1:]))
        assert done.returncode == 0, (command, done.stderr[-3000:])

    done = _run(cli(root, "report", "--corpus", "c"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    text = done.stdout
    # dataset level: every metric some run has, MAP first; "-" where a run lacks one
    header = _row(text, "model", "800 (")
    assert header[1] == "800 (MAP / NDCG / R@30 / NDCG@10 / R@100)", header
    bm25 = _row(text, "bm25", " / ")[1].split(" / ")
    assert re.fullmatch(r"\*\*\d+\.\d ± \d+\.\d\*\*", bm25[0]), bm25  # two repeats, best MAP
    assert bm25[1:] == ["-", "-", "-", "-"]
    rand = _row(text, "random", " / ")[1].split(" / ")
    # MAP from the one repeat scored with it (no ±), each BEIR metric from the other
    assert all(re.fullmatch(r"\d+\.\d†?", cell) for cell in rand), rand
    assert "-: not computed" in text
    # field level: MAP; the random run was scored with NDCG only
    assert "field-level pools of 400, MAP x100" in text
    field_rows = text[text.index("field-level pools of 400"):].split("\n## ")[0]
    assert "| random | - | - |" in field_rows, field_rows
    # the average is over the fields every model has: random has none, so no average
    assert re.search(r"^\| bm25 \| \d+\.\d \| - \|$", field_rows, re.M), field_rows
    assert "avg: -, no field has every model's runs" in field_rows
    reports = runs / "reports"
    assert (reports / "c-map-vs-pool-size.png").read_bytes()[:4] == b"\x89PNG"
    assert (reports / "c-fields-400.png").exists() and (reports / "c-dataset.tex").exists()
    assert not list(root.rglob("*.tmp"))


def _results(rows: list[dict]) -> pl.DataFrame:
    base = {"corpus": "demo", "scope": "all", "field": None, "repeat": 0, "seed": 0,
            "split": "test", "negatives": "all"}
    return pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)


def test_report_without_map_anywhere(tmp_path):
    """BEIR-style pools (ndcg@10, recall@100 only), MDCR pools scored with MAP alone for one
    model, and query variants scored without MAP: tables of what exists, no traceback."""
    rows = []
    for model, value in (("bm25", 0.6), ("minilm", 0.4)):
        for query, spread in (("1", 0.05), ("2", -0.05), ("3", 0.0)):
            for metric in ("ndcg@10", "recall@100"):
                rows.append({"pool": "all-5k-r0", "level": "dataset", "size": 5000,
                             "model": model, "query": query, "metric": metric,
                             "value": value + spread})
                rows.append({"pool": "all-5k-r0", "level": "dataset", "size": 5000,
                             "model": f"{model}~title", "query": query, "metric": metric,
                             "value": value + spread - 0.1})
    for model, metrics in (("bm25", ("map", "ndcg", "recall@5")), ("specter", ("map",))):
        for field in ("Medicine", "Biology"):
            for query in ("a", "b"):
                for metric in metrics:
                    for negatives in ("all", "official", "random"):
                        rows.append({"pool": f"mdcr-{field.lower()}", "level": "mdcr",
                                     "scope": field.lower(), "field": field, "size": 40,
                                     "model": model, "query": f"{field}{query}",
                                     "metric": metric, "negatives": negatives,
                                     "value": 0.5 if model == "bm25" else 0.3})
    _results(rows).write_parquet(tmp_path / "results.parquet")
    text = report(tmp_path, "demo")
    assert "5k (NDCG@10 / R@100)" in text and "bold: best NDCG@10" in text
    assert _row(text, "bm25", "**60.0**")[1:] == ["**60.0** / 60.0"]
    assert _row(text, "minilm", " / ")[1:] == ["40.0† / 40.0"]
    # MDCR Table 3: the specter runs have no R@5 / NDCG: "-", never a crash
    assert _row(text, "specter", "30.0 / -")[1:] == ["30.0 / -", "30.0 / -", "30.00", "-",
                                                     "-"]
    assert _row(text, "bm25", "50.0 / 50.0")[-3:] == ["**50.00**", "50.00", "50.00"]
    assert "query robustness, NDCG@10 x100" in text
    assert _row(text, "bm25", "(-10.0)")[1:] == ["60.0", "50.0 (-10.0)"]
    assert (tmp_path / "reports" / "demo-ndcg10-vs-pool-size.png").exists()


# ---- 2. sbatch that cannot reach a controller, or that the cluster refuses --------------------

UNREACHABLE = [
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)",
    "sbatch: error: Unable to establish a connection to slurmctld\n"
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller",
    "slurm_load_partitions: Unable to contact slurm controller (connect failure)",
    "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
    "sbatch: fatal: Could not establish a configuration source",
    "sbatch: error: s_p_parse_file: unable to status file /etc/slurm/slurm.conf: No such file "
    "or directory\nsbatch: fatal: Unable to process configuration file",
]
REJECTED = [
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "sbatch: error: invalid partition specified: gpu\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
    "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or "
    "exceeds some limit)",
]


def _fake_sbatch(folder: Path) -> dict[str, str]:
    """An `sbatch` first on PATH: prints $FAKE_SBATCH_ERR to stderr and exits 1, or with
    FAKE_SBATCH_ID set prints it (--parsable) and exits 0."""
    folder.mkdir()
    tool = folder / "sbatch"
    tool.write_text('#!/bin/sh\nif [ -n "$FAKE_SBATCH_ID" ]; then echo "$FAKE_SBATCH_ID"; '
                    'exit 0; fi\nprintf \'%s\\n\' "$FAKE_SBATCH_ERR" >&2\nexit 1\n')
    tool.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def _submit(root: Path) -> list[str]:
    return cli(root, "submit-embed", "--corpus", "c", "--model", "minilm", "--pool", POOL,
               "--shards", "2", "--partition", "gpu", "--slurm-time", "1:00:00")


@pytest.mark.parametrize("stderr", UNREACHABLE + REJECTED,
                         ids=[f"unreachable-{i}" for i in range(len(UNREACHABLE))]
                         + [f"rejected-{i}" for i in range(len(REJECTED))])
def test_sbatch_failure_says_why(stderr, corpus_dir, tmp_path):
    root = tmp_path / "data"
    with_pool(root, corpus_dir)
    env = {**_fake_sbatch(tmp_path / "bin"), "FAKE_SBATCH_ERR": stderr}
    before = _snapshot(root)
    line = _one_line(_run(_submit(root), env))
    lines = stderr.splitlines()
    first = next((x for x in lines if re.search(r"\b(error|fatal)\b", x)), lines[0])
    assert first in line, line  # sbatch's own first error line, quoted
    if stderr in UNREACHABLE:
        assert "cannot reach a SLURM controller" in line, line
        assert "login node of a configured SLURM cluster" in line and "EXECUTOR=local" in line
        assert "PARTITION" not in line, line
    else:
        assert "rejected" in line and "PARTITION, GPUS_PER_TASK or the time limit" in line
        assert "--partition=gpu" in line and "--gres=gpu:1" in line and "--time=1:00:00" in line
        assert "cannot reach" not in line, line
    assert _snapshot(root) == before  # no script, record or log left behind
    assert not (root / "runs" / "slurm").exists()


def test_refused_resubmission_keeps_the_earlier_script(corpus_dir, tmp_path):
    root = tmp_path / "data"
    with_pool(root, corpus_dir)
    env = _fake_sbatch(tmp_path / "bin")
    done = _run(_submit(root), {**env, "FAKE_SBATCH_ID": "4242"})
    assert done.returncode == 0 and done.stdout.split() == ["4242"], done.stderr
    script = root / "runs" / "slurm" / "embed-c-minilm.sbatch"
    assert "#SBATCH --partition=gpu" in script.read_text()
    before = _snapshot(root)
    again = cli(root, "submit-embed", "--corpus", "c", "--model", "minilm", "--pool", POOL,
                "--partition", "other")
    line = _one_line(_run(again, {**env, "FAKE_SBATCH_ERR": REJECTED[0]}))
    assert "--partition=other" in line
    assert "#SBATCH --partition=gpu" in script.read_text()  # the submitted one, as it was
    assert {p for p, t in _snapshot(root).items() if before.get(p) != t} <= {
        "runs/slurm/embed-c-minilm.sbatch"}  # put back (same bytes; a new mtime at most)
    assert not list(root.rglob("*.tmp"))


# ---- 3. --device cuda without a GPU, with nothing left to embed -------------------------------

def _embed(root: Path, tiny_bert: Path, device: str) -> list[str]:
    return cli(root, "embed", "--corpus", "c", "--model", "scibert", "--model-path",
               str(tiny_bert), "--pool", POOL, "--device", device)


def _embedded(place: Path, corpus_dir: Path, tiny_bert: Path) -> None:
    """Fill `place` with a data root `data` whose pool's papers the tiny BERT (`tiny-bert`,
    copied: the store records its path) embedded on the CPU, then embedded again with nothing
    left to embed (still fine)."""
    root, model = place / "data", Path(shutil.copytree(tiny_bert, place / "tiny-bert"))
    with_pool(root, corpus_dir)
    first = _run(_embed(root, model, "cpu"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert _run(_embed(root, model, "cpu")).returncode == 0  # nothing left: still fine


@pytest.mark.slow
@pytest.mark.cpu_only  # a GPU node has --device cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_absent_gpu_is_refused_when_nothing_is_left_to_embed(device, request, tmp_path_factory,
                                                             tmp_path):
    """The embedded data root is built once per test run, for both devices and both of make
    test's workers (conftest's built_once); each device is refused on a copy of it, whose
    store is checked to hold every paper of the pool first."""
    place = built_once(tmp_path_factory, "gpu-refusal", lambda place: _embedded(
        place, request.getfixturevalue("corpus_dir"), request.getfixturevalue("tiny_bert")))
    root = Path(shutil.copytree(place / "data", tmp_path / "data", symlinks=True))
    corpus = root / "corpora" / "c"
    assert missing_per_shard(Place(corpus, root / "indexes", root / "runs"),
                             get_model("scibert"), [POOL], 1) == [0]  # nothing left
    before = _snapshot(root)
    line = _one_line(_run(_embed(root, place / "tiny-bert", device)))
    assert re.search(rf"--device {device}: no CUDA GPU", line), line
    assert _snapshot(root) == before  # no stage time, no store change


@pytest.mark.gpu
def test_gpu_index_past_the_visible_ones_is_refused():
    """On a GPU node: cuda:<n> for n >= the number of GPUs is refused up front, by name."""
    import torch

    from pipeline.encoding.encoders import check_device

    check_device(None)
    check_device("cpu")
    count = torch.cuda.device_count()
    check_device("cuda")
    check_device(f"cuda:{count - 1}")
    from pipeline.core.errors import InputError

    with pytest.raises(InputError, match=rf"--device cuda:{count}: only {count} CUDA GPU"):
        check_device(f"cuda:{count}")


# ---- a GPU backend asked of make, without a GPU: before any work, in make's words ------------

@pytest.mark.cpu_only  # a GPU node has the backend
@pytest.mark.parametrize("backend", ["faiss-gpu", "torch-cuda"])
def test_make_eval_refuses_an_absent_gpu_backend_before_embedding(backend, corpus_dir,
                                                                  tiny_bert, tmp_path):
    """It embedded for minutes, then refused, naming `--backend`: now refused before any work
    (no store), naming the variable the user set."""
    import sys

    root = tmp_path / "data"
    with_pool(root, corpus_dir)
    (tmp_path / "installed").touch()
    environ = {k: v for k, v in os.environ.items() if k not in ("MODEL", "BACKEND", "DATA")}
    done = subprocess.run(
        ["make", "--no-print-directory", "eval", f"DATA={root}", "CORPUS=c", "MODEL=scibert",
         f"MODEL_PATH={tiny_bert}", f"BACKEND={backend}", f"PY={sys.executable}",
         f"STAMP={tmp_path / 'installed'}"], cwd=ROOT, capture_output=True, text=True,
        env={**environ, "MAKEFLAGS": ""}, timeout=CHILD_BOUND_S)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"BACKEND={backend}: no CUDA GPU" in errors[0], errors
    assert "--backend" not in done.stderr
    assert not list((root / "indexes").rglob("embeddings"))  # nothing was embedded


def test_the_console_script_names_itself(tmp_path):
    """`mdcr-pipeline`'s errors say mdcr-pipeline, not python -m pipeline."""
    import sys

    script = Path(sys.executable).parent / "mdcr-pipeline"
    done = subprocess.run([str(script), "search", "--corpus", "c", "--backend", "bogus"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: mdcr-pipeline search: ") and \
        "python -m pipeline" not in done.stderr


# ---- 4. a dense model's current store, checked without loading the model ---------------------

def _imported(done: subprocess.CompletedProcess) -> set[str]:
    """The top-level packages a process run with PYTHONPROFILEIMPORTTIME=1 imported."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.slow
def test_a_current_store_and_another_models_store_are_told_without_torch(corpus_dir, tiny_bert,
                                                                        tmp_path):
    """A no-op `make eval` of a dense model used to import torch and transformers (seconds per
    process) only to look for an encoder hook that served models alone have: the store's
    identity is its weights' digests. Now a current store is kept, and a store of other
    weights refused in one line, by a process that never imports torch; a no-op make embed
    too (it imported the encoder's module for settings a dense model's store never has)."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    root = tmp_path / "data"
    with_pool(root, corpus_dir)
    search = ["search", "--corpus", "c", "--model", "scibert", "--index", "--stale-only",
              "--repair-pools"]  # as make eval runs it
    first = _run(cli(root, *search, "--model-path", str(tiny_bert)))
    assert first.returncode == 0, first.stderr[-3000:]
    again = _run(cli(root, *search, "--model-path", str(tiny_bert)),
                 env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 current runs kept, 0 to search" in again.stderr
    assert "numpy" in _imported(again) and "torch" not in _imported(again)
    embedded = _run(cli(root, "embed", "--corpus", "c", "--model", "scibert", "--model-path",
                        str(tiny_bert)), env={"PYTHONPROFILEIMPORTTIME": "1"})  # make embed's
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    assert "embedded=0 reused=0" in embedded.stderr and "torch" not in _imported(embedded)
    other = Path(shutil.copytree(tiny_bert, tmp_path / "other"))
    tensors = load_file(other / "model.safetensors")
    key = next(k for k in sorted(tensors) if "word_embeddings" in k)
    tensors[key] = tensors[key] + np.float32(0.5)
    save_file(tensors, other / "model.safetensors", metadata={"format": "pt"})
    refused = _run(cli(root, *search, "--model-path", str(other)),
                   env={"PYTHONPROFILEIMPORTTIME": "1"})
    lines = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr[-3000:]
    assert "was embedded by another model named scibert" in lines[0], lines[0]
    assert "files changed: model.safetensors" in lines[0], lines[0]
    assert "torch" not in _imported(refused)
