"""MaxSim reranking: the pipeline's late-interaction scorer against PyLate's `rank.rerank`
(issue 90), on the same token vectors.

The vectors: PyLate's own (`ColBERT.encode`, in its environment: tests/conftest.py
install_pylate) of a ColBERT model of realistic shape that PyLate itself builds: a BERT-mini
encoder (4 layers, hidden 256; random weights, seeded, all-MiniLM-L6-v2's uncased vocabulary)
and PyLate's Dense projection to 128 dimensions (ColBERTv2's width), query_length 32 and
document_length 180 (ColBERTv2's). Texts: "title abstract" of the synthetic generator's papers
with an abstract (seed 3), so query papers are cut at 32 tokens and most documents at 180.
Each of `--queries` query papers gets `--depth` candidates drawn (seeded) from a pool of
`--pool` papers: the first stage's top k that a reranker scores.

Systems, each in a fresh process of its own, timed from the vectors in memory to the scores:
- PyLate 1.6: `rank.rerank(documents_ids, queries_embeddings, documents_embeddings)` (per query
  its candidates padded and scored by colbert_scores, then sorted);
- the pipeline: `LateScorer.score` (pipeline/encoding/late.py, what make rerank runs for a
  late-interaction model), its encoder replaced by one that hands back PyLate's vectors, so
  only its MaxSim of each pair is timed, then each query's candidates sorted by that score.
Each runs `--repeats` times in its process; its best time is reported, with its peak memory
(its own VmHWM). Scores are compared pair by pair (1e-5) and each query's order as lists.
Writes benchmarks/results/maxsim.json and .md.

Usage: .venv/bin/python benchmarks/maxsim.py [--queries 40] [--depth 100] [--pool 300]
       [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.embed_throughput import synthetic_papers  # noqa: E402
from benchmarks.machine import machine  # noqa: E402
from pipeline.encoding.encoders import model_source  # noqa: E402
from pipeline.models import get_model  # noqa: E402
from tests.conftest import install_pylate  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
QUERY_LENGTH, DOCUMENT_LENGTH, DIM = 32, 180, 128

# PyLate's environment: build the model (BERT-mini + Dense 128) and encode the texts
ENCODE = """
import json, sys
import numpy as np, torch
from transformers import AutoTokenizer, BertConfig, BertModel
from pylate import models
job = json.load(open(sys.argv[1]))
torch.manual_seed(0)
AutoTokenizer.from_pretrained(job["vocab"]).save_pretrained(job["bert"])
BertModel(BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                     num_attention_heads=4, intermediate_size=1024)).save_pretrained(job["bert"])
model = models.ColBERT(model_name_or_path=job["bert"], embedding_size=job["dim"], device="cpu",
                       query_length=job["query_length"], document_length=job["document_length"])
texts = json.load(open(job["texts"]))
queries = model.encode(texts["queries"], is_query=True, batch_size=32)
docs = model.encode(texts["docs"], is_query=False, batch_size=32)
np.savez(job["vectors"], queries=np.stack(queries), docs=np.concatenate(docs),
         lengths=[len(d) for d in docs])
print("{}")
"""

# the process's peak resident memory (its own: VmHWM, not ru_maxrss, which Linux carries over
# from the parent a vfork'd child ran in before exec)
PEAK = """
def peak_mib():
    status = open("/proc/self/status").read().split("VmHWM:")[1]
    return int(status.split()[0]) / 1024
"""

# PyLate's rank.rerank, timed
PEER = PEAK + """
import json, sys, time
import numpy as np
from pylate import rank
job = json.load(open(sys.argv[1]))
data = dict(np.load(job["vectors"]))  # each array read once
offsets = np.r_[0, np.cumsum(data["lengths"])]
docs = [data["docs"][offsets[i]:offsets[i + 1]] for i in range(len(data["lengths"]))]
candidates = job["candidates"]
seconds = []
for _ in range(job["repeats"]):
    start = time.perf_counter()
    ranked = rank.rerank(documents_ids=candidates, queries_embeddings=list(data["queries"]),
                         documents_embeddings=[[docs[d] for d in row] for row in candidates])
    seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds,
                  "lists": [[[r["id"], r["score"]] for r in row] for row in ranked],
                  "peak_mib": peak_mib()}))
"""

# the pipeline's LateScorer.score, its encoder handing back PyLate's vectors
OURS = PEAK + """
import json, sys, time
import numpy as np
from pipeline.encoding.late import LateScorer, TokenVectors
job = json.load(open(sys.argv[1]))
data = dict(np.load(job["vectors"]))  # each array read once

def token_vectors(vectors, lengths):
    out = TokenVectors(len(lengths), vectors.shape[1])
    offsets = np.r_[0, np.cumsum(lengths)]
    for i, length in enumerate(lengths):
        row = np.ones((1, length, vectors.shape[1] + 1), np.float32)
        row[0, :, :-1] = vectors[offsets[i]:offsets[i + 1]]
        out[np.array([i])] = row
    return out

queries = data["queries"]
query_vectors = token_vectors(queries.reshape(-1, queries.shape[2]),
                              [queries.shape[1]] * len(queries))
candidates = job["candidates"]
used = sorted({d for row in candidates for d in row})  # the documents score() asks for
offsets = np.r_[0, np.cumsum(data["lengths"])]
doc_vectors = token_vectors(np.concatenate([data["docs"][offsets[d]:offsets[d + 1]]
                                            for d in used]), data["lengths"][used])

class Given:  # the encoder's two calls, answered with the vectors above
    def encode_queries(self, texts):
        assert texts == [f"q{i}" for i in range(len(queries))]
        return query_vectors, 0
    def tokenize(self, texts):
        return texts
    def encode_ids(self, texts, progress):
        assert texts == [f"d{d}" for d in used]
        return doc_vectors, 0

scorer = LateScorer.__new__(LateScorer)
scorer.encoder = Given()
pairs = [(q, d) for q, row in enumerate(candidates) for d in row]
seconds = []
for _ in range(job["repeats"]):
    start = time.perf_counter()
    scores = scorer.score({q: f"q{q}" for q in range(len(candidates))},
                          {d: f"d{d}" for d in range(len(data["lengths"]))}, pairs)
    lists, at = [], 0
    for row in candidates:
        part = scores[at:at + len(row)]
        order = np.argsort(-part, kind="stable")
        lists.append([[row[i], float(part[i])] for i in order])
        at += len(row)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds, "lists": lists,
                  "peak_mib": peak_mib()}))
"""


def compare(args: argparse.Namespace, work: Path) -> dict:
    pylate = str(install_pylate() / "bin" / "python")
    papers = synthetic_papers(args.queries + args.pool, work / "raw")
    texts = {"queries": [f"{t} {a}" for t, a in papers[:args.queries]],
             "docs": [f"{t} {a}" for t, a in papers[args.queries:]]}
    rng = np.random.default_rng(0)
    candidates = [sorted(rng.choice(args.pool, args.depth, replace=False).tolist())
                  for _ in range(args.queries)]
    job = {"vocab": model_source(get_model("minilm")), "bert": str(work / "bert-mini"),
           "dim": DIM, "query_length": QUERY_LENGTH, "document_length": DOCUMENT_LENGTH,
           "texts": str(work / "texts.json"), "vectors": str(work / "vectors.npz"),
           "candidates": candidates, "repeats": args.repeats}
    (work / "texts.json").write_text(json.dumps(texts))
    (work / "job.json").write_text(json.dumps(job))
    start = time.perf_counter()
    measured(pylate, ENCODE, work / "job.json", None)
    encoded = time.perf_counter() - start
    lengths = np.load(work / "vectors.npz")["lengths"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    systems = {"PyLate 1.6 rank.rerank": (pylate, PEER, None),
               "pipeline LateScorer.score": (sys.executable, OURS, env)}
    answers = {label: measured(python, code, work / "job.json", child_env)
               for label, (python, code, child_env) in systems.items()}
    peer, ours = (answers[label] for label in systems)
    pairs = args.queries * args.depth
    differences = [abs(a[1] - b[1]) for row_a, row_b in zip(ours["lists"], peer["lists"],
                                                            strict=True)
                   for a, b in zip(sorted(row_a), sorted(row_b), strict=True)]
    same_order = all([a[0] for a in row_a] == [b[0] for b in row_b]
                     for row_a, row_b in zip(ours["lists"], peer["lists"], strict=True))
    rows = {label: {"seconds": [round(s, 4) for s in a["seconds"]],
                    "pairs_per_s": round(pairs / min(a["seconds"])),
                    "peak_mib": round(a["peak_mib"])} for label, a in answers.items()}
    ratio = rows["pipeline LateScorer.score"]["pairs_per_s"] / \
        rows["PyLate 1.6 rank.rerank"]["pairs_per_s"]
    return {"queries": args.queries, "depth": args.depth, "pool": args.pool, "pairs": pairs,
            "dim": DIM, "query_length": QUERY_LENGTH, "document_length": DOCUMENT_LENGTH,
            "mean_document_tokens": round(float(lengths.mean()), 1),
            "encode_seconds": round(encoded, 1), "repeats": args.repeats, "runs": rows,
            "ratio_to_pylate": round(ratio, 2), "max_abs_difference": max(differences),
            "same_order": same_order}


def measured(python: str, code: str, job: Path, env: dict[str, str] | None) -> dict:
    """A fresh process running `code` on `job`: its answer (the last line of its output)."""
    done = subprocess.run([python, "-c", code, str(job)], capture_output=True, text=True,
                          env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{python}: failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(result: dict, when: str, where: str) -> str:
    lines = ["# MaxSim reranking: `LateScorer.score` vs PyLate's `rank.rerank`", "",
             "The same token vectors (PyLate's own encoding by a ColBERT of realistic shape "
             "built by PyLate: BERT-mini, random weights, Dense projection to "
             f"{result['dim']} dimensions, query_length {result['query_length']}, "
             f"document_length {result['document_length']}), the same candidates; each "
             "system in a fresh process, its best of its runs, from vectors in memory to each "
             "query's scored and sorted candidates. max |Δ|: the largest difference of a "
             "pair's score. How each computes: PyLate pads a query's candidates to one "
             "tensor and scores them in one einsum; `LateScorer.score` computes one "
             "matrix product per (query, candidate) pair in a Python loop. Written by "
             "benchmarks/maxsim.py.", "",
             f"## {when}", "", f"Machine: {where}.", "",
             f"{result['queries']} query papers x {result['depth']} candidates = "
             f"{result['pairs']} pairs, from a pool of {result['pool']} papers "
             f"({result['mean_document_tokens']} token vectors per document on average); "
             f"best of {result['repeats']}.", "",
             "| system | seconds | pairs/s (best) | peak memory (MiB) |", "|---|---|---|---|"]
    for label, row in result["runs"].items():
        lines.append(f"| {label} | {', '.join(map(str, row['seconds']))} | "
                     f"{row['pairs_per_s']} | {row['peak_mib']} |")
    lines += ["", f"Ours: **{result['ratio_to_pylate']:.2f}x** PyLate's pairs/s; scores "
              f"equal within {result['max_abs_difference']:.1e}; each query's order "
              f"{'the same' if result['same_order'] else 'NOT the same'}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--pool", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = compare(args, Path(tmp))
    when = time.strftime("%Y-%m-%d %H:%M")
    where = machine()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "maxsim.json").write_text(json.dumps({"date": when, "machine": where,
                                                 "result": result}, indent=2) + "\n")
    (OUT / "maxsim.md").write_text(report(result, when, where))
    print(report(result, when, where))
    if result["max_abs_difference"] > 1e-5 or not result["same_order"]:
        raise SystemExit("the scores or orders differ from PyLate's (see maxsim.md)")


if __name__ == "__main__":
    main()
