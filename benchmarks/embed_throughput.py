"""Embedding throughput: the pipeline's engine against sentence-transformers `encode()` (issue 6).

Same texts (title [SEP] abstract of synthetic papers: the generator's realistic length mix),
same model, precision and max length, one process, alternating runs after a warm-up. Reports
papers/s and tokens/s (tokens: non-padding tokens after truncation, the same for both), and on
a GPU the achieved TFLOP/s (useful FLOPs: 2 x non-embedding parameters per token plus
4 x layers x length^2 x hidden per sequence for attention) as a share of the GPU's dense bf16
peak.

Models: `minilm` (the embedded default, real weights) and `bert-base` (BERT-base with random
weights and MiniLM's uncased vocabulary: costs what SciNCL/SPECTER cost).
Writes benchmarks/results/embed_throughput.json (one entry per device) and .md.
Usage: .venv/bin/python benchmarks/embed_throughput.py [--papers 2000] [--models minilm]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.machine import machine  # noqa: E402
from pipeline.encoding.encoders import Encoder, model_dtype, model_source
from pipeline.ingest.synthetic import SyntheticConfig, generate
from pipeline.models import ModelEntry, get_model, with_precision

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
PEER_BATCH_SIZES = (16, 32, 64, 128)  # sentence-transformers' default is 32
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.4, "H200": 989.4, "A100": 312.0,
                    "L40S": 362.0, "A10": 125.0}


def synthetic_papers(n: int, work: Path) -> list[tuple[str, str]]:
    """(title, abstract) of the first n papers with a long abstract of a generated corpus."""
    generate(work, SyntheticConfig(n_papers=max(4 * n, 4000), n_shards=1, seed=3))
    papers = []
    for path in sorted((work / "metadata").glob("*.jsonl.gz")):
        with gzip.open(path, "rb") as handle:
            for line in handle:
                row = orjson.loads(line)
                if row["title"] and row["abstract"] and len(row["abstract"]) > 100:
                    papers.append((row["title"], row["abstract"]))
                    if len(papers) == n:
                        return papers
    raise SystemExit(f"only {len(papers)} papers with an abstract; ask for fewer")


def model_entry(name: str, work: Path) -> tuple[ModelEntry, str]:
    """The registry entry and the folder its weights load from."""
    if name == "minilm":
        entry = get_model("minilm")
        return entry, model_source(entry)
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = work / "bert-base-random"
    AutoTokenizer.from_pretrained(model_source(get_model("minilm"))).save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig(), add_pooling_layer=False).save_pretrained(folder)
    return ModelEntry("bert-base", "dense", str(folder), "cls", "l2", max_length=512), str(folder)


def useful_flops(model: torch.nn.Module, lengths: np.ndarray) -> float:
    """The docstring's useful FLOPs of `model` on sequences of `lengths` tokens. Embedding
    tables (BERT's `embeddings.*`, a decoder's `embed_tokens`) are looked up, not multiplied;
    attention is counted as the full square, a causal decoder's too."""
    config = model.config
    params = sum(p.numel() for n, p in model.named_parameters()
                 if "embeddings" not in n and "embed_tokens" not in n)
    attention = 4 * config.num_hidden_layers * config.hidden_size * float((lengths ** 2).sum())
    return 2.0 * params * float(lengths.sum()) + attention


def peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def timed(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def best_peer_batch(run_peer: Callable[[int, list[str]], object],
                    texts: list[str]) -> tuple[int, dict[int, float]]:
    """sentence-transformers' fastest batch size of PEER_BATCH_SIZES on a quarter of the
    texts (after a warm-up call), and the seconds each took."""
    sample = texts[: max(len(texts) // 4, 64)]
    run_peer(32, sample[:64])
    tried = {size: round(timed(lambda s=size: run_peer(s, sample)), 3)
             for size in PEER_BATCH_SIZES}
    return min(tried, key=tried.get), tried


def interleaved(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """The seconds of each run, `repeats` times, interleaved, the first to run alternating
    (ABBA...), so a machine that slows down or warms up weighs on each alike."""
    times: dict[str, list[float]] = {label: [] for label in runs}
    for round_ in range(repeats):
        for label in list(runs)[:: 1 if round_ % 2 == 0 else -1]:
            times[label].append(timed(runs[label]))
    return times


def speed(seconds: list[float], papers: int, tokens: int, flops: float,
          peak: float | None) -> dict:
    """A run's row: its seconds, their spread (slowest over best, minus 1), papers/s and
    tokens/s of the best, and on a GPU of known peak the TFLOP/s and their share of it."""
    best = min(seconds)
    row = {"seconds": [round(s, 3) for s in seconds],
           "spread": round((max(seconds) - best) / best, 3),
           "papers_per_s": round(papers / best, 1),
           "tokens_per_s": round(tokens / best)}
    if peak:
        row["tflops"] = round(flops / best / 1e12, 1)
        row["share_of_bf16_peak"] = round(flops / best / 1e12 / peak, 3)
    return row


def st_peer(source: str | Path, ours: Encoder):
    """sentence-transformers on the same weights, precision, max length, pooling and
    attention as the engine `ours`."""
    from sentence_transformers import SentenceTransformer, models

    entry = ours.entry
    transformer = models.Transformer(str(source), max_seq_length=ours.max_length,
                                     model_kwargs={"dtype": model_dtype(entry, ours.device),
                                                   "attn_implementation": ours.attention})
    pooling = models.Pooling(transformer.get_embedding_dimension(),
                             pooling_mode=entry.pooling if entry.pooling in ("cls", "lasttoken")
                             else "mean")
    modules = [transformer, pooling] + ([models.Normalize()] if entry.normalize else [])
    peer = SentenceTransformer(modules=modules, device=str(ours.device))
    peer.eval()
    return peer


def compare(name: str, papers: list[tuple[str, str]], work: Path, repeats: int,
            precision: str = "fp32") -> dict:
    entry, source = model_entry(name, work)
    entry = with_precision(entry, precision)
    ours = Encoder(entry, model_path=source)
    texts = [ours.format(t, a) for t, a in papers]
    lengths = np.array([len(x) for x in ours.tokenize(texts)])
    peer = st_peer(source, ours)

    def run_ours():
        return ours.encode(texts, progress=False)[0]

    def run_peer(batch_size: int, some: list[str] | None = None):
        return peer.encode(some or texts, batch_size=batch_size, convert_to_numpy=True,
                           show_progress_bar=False, normalize_embeddings=False)

    batch, tried = best_peer_batch(run_peer, texts)
    a, b = run_ours(), run_peer(batch)  # warm-up, and the two agree
    agreement = float(np.mean(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1)
                                                   * np.linalg.norm(b, axis=1))))
    times = interleaved({"pipeline": run_ours,
                         "sentence-transformers": lambda: run_peer(batch)}, repeats)
    flops = useful_flops(ours.model, lengths)
    peak = peak_tflops(ours.device)
    result = {"model": name, "max_length": ours.max_length, "dtype": str(ours.model.dtype),
              "papers": len(texts), "tokens": int(lengths.sum()),
              "mean_tokens_per_paper": round(float(lengths.mean()), 1),
              "cosine_pipeline_vs_peer": round(agreement, 5), "peer_batch_size": batch,
              "peer_batch_seconds_on_sample": tried, "repeats": repeats}
    for label, seconds in times.items():
        result[label] = speed(seconds, len(texts), int(lengths.sum()), flops, peak)
    result["speedup"] = round(result["pipeline"]["papers_per_s"]
                              / result["sentence-transformers"]["papers_per_s"], 2)
    return result


def report(entries: dict) -> str:
    lines = ["# Embedding throughput: pipeline engine vs sentence-transformers `encode()`", "",
             "Same texts, model, precision, max length and pooling; the repeats interleaved "
             "(the engine that runs first alternates), the best kept, the spread (slowest "
             "over best) shown; sentence-transformers gets its best batch size, chosen on a "
             "quarter of the texts. Targets (issue 6): on CPU with minilm at least as fast as "
             "sentence-transformers; on a GPU with BERT-base at least 1.5x and at least 40% "
             "of the bf16 peak.", ""]
    for device, entry in entries.items():
        lines += [f"## {device} ({entry['date']})", "", f"Machine: {entry['machine']}.", "",
                  "| model | dtype | papers | tokens/paper | engine | papers/s | spread | "
                  "tokens/s | TFLOP/s | share of peak |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in entry["results"]:
            for label in ("pipeline", "sentence-transformers"):
                row = r[label]
                name = label if label == "pipeline" else \
                    f"{label} (batch {r.get('peer_batch_size', 32)})"
                spread = f"{row['spread']:.1%}" if "spread" in row else ""
                lines.append(f"| {r['model']} | {r['dtype']} | {r['papers']} | "
                             f"{r['mean_tokens_per_paper']} | {name} | {row['papers_per_s']} | "
                             f"{spread} | {row['tokens_per_s']:,} | {row.get('tflops', '')} | "
                             f"{row.get('share_of_bf16_peak', '')} |")
            lines.append(f"| {r['model']} | | | | **speedup** | **{r['speedup']}x** | | | | |")
        lines.append("")
    return "\n".join(lines)


def run_benchmark(stem: str, doc: str, compare: Callable[..., dict],
                  report: Callable[[dict], str], papers: int, models: str,
                  repeats: int) -> None:
    """The command line of an embedding benchmark (this one, st_encoders.py): `compare` each
    of --models on --papers synthetic papers, --repeats times, in --precision; `save` as
    benchmarks/results/<stem>.*."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=papers)
    parser.add_argument("--models", default=models, help=models)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--precision", default="fp32", help="fp32 (the default, as the "
                        "pipeline runs), bf16 or fp16 (PRECISION=...); both sides alike")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        texts = synthetic_papers(args.papers, Path(tmp) / "raw")
        results = [compare(name, texts, Path(tmp), args.repeats, args.precision)
                   for name in args.models.split(",")]
    save(stem, results, args.precision, report)


def main() -> None:
    run_benchmark("embed_throughput", __doc__, compare, report, papers=2000,
                  models="minilm", repeats=4)


def save(stem: str, results: list[dict], precision: str,
         report: Callable[[dict], str]) -> None:
    """Record `results` in benchmarks/results/<stem>.json under this device (cpu, gpu;
    -<precision> unless fp32), beside the other devices' entries, with the date and the
    machine; rewrite <stem>.md from all entries and print this run's report."""
    device = (torch.cuda.get_device_name() if torch.cuda.is_available()
              else f"cpu ({torch.get_num_threads()} threads)")
    entry = {"date": time.strftime("%Y-%m-%d"), "results": results,
             "machine": f"{machine()}, torch {torch.__version__}, {device}"}
    path = OUT / f"{stem}.json"
    entries = json.loads(path.read_text()) if path.exists() else {}
    entry["precision"] = precision
    entries[("gpu" if torch.cuda.is_available() else "cpu")
            + ("" if precision == "fp32" else f"-{precision}")] = entry
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2) + "\n")
    (OUT / f"{stem}.md").write_text(report(entries))
    print(report({"this run": entry}))


if __name__ == "__main__":
    main()
