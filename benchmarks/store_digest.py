"""What a store's per-paper text digest costs (issue 39.4: a store serves a vector only for the
exact text it embedded).

Each stored row keeps the digest of the text fields it was embedded from
(`pipeline.corpus.files.text_digests`: sha256 of the fields as one JSON object, first 8 bytes).
`make embed` computes it for every part it writes, and for every stored paper when the corpus's
prefiltered.parquet changed (`reconcile`). This times it on a synthetic text column of N papers
(default 1M; titles of about 11 words, abstracts of about 120, so about 1,100 bytes a paper),
side by side with polars' own `hash` of the same struct (not usable for a store: polars does not
promise the same hash across versions; here as the speed of a vectorised hash) and with what
embedding those papers costs at the measured CPU throughput (benchmarks/results/
embed_throughput.json). Writes benchmarks/results/store_digest.md and store_digest.json.
Usage: .venv/bin/python benchmarks/store_digest.py [--papers 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.corpus.files import text_digests

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import machine  # noqa: E402


def texts(n: int, seed: int = 0) -> pl.DataFrame:
    """n papers: titles of 8-14 words, abstracts of 90-150 words, from a 5,000-word vocabulary."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i:04d}{'abcdefghij'[i % 10] * (i % 7)}" for i in range(5000)])

    def column(low: int, high: int) -> pl.Series:
        lengths = rng.integers(low, high + 1, n)
        words = vocabulary[rng.integers(0, len(vocabulary), int(lengths.sum()))]
        return pl.Series(np.split(words, np.cumsum(lengths)[:-1])).list.join(" ")

    return pl.DataFrame({"corpusid": np.arange(n, dtype=np.int64), "title": column(8, 14),
                         "abstract": column(90, 150)})


def best(repeats: int, step) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    papers = texts(args.papers)
    size = papers.select(pl.col("title").str.len_bytes() + pl.col("abstract").str.len_bytes()
                         ).to_series().mean()
    digest_s = best(args.repeats, lambda: text_digests(papers))
    polars_s = best(args.repeats, lambda: papers.select(
        pl.struct("title", "abstract").hash(seed=0)))
    assert np.array_equal(text_digests(papers), text_digests(papers))  # deterministic
    throughput = json.loads((OUT / "embed_throughput.json").read_text())
    cpu = next(row for row in throughput["cpu"]["results"] if row["model"] == "minilm")
    cpu = {"papers_per_s": cpu["pipeline"]["papers_per_s"]}
    embed_s = args.papers / cpu["papers_per_s"]
    result = {"machine": machine(), "papers": args.papers, "bytes_per_paper": round(size),
              "digest_s": round(digest_s, 3), "polars_hash_s": round(polars_s, 3),
              "digest_per_million_s": round(digest_s * 1e6 / args.papers, 3),
              "minilm_cpu_papers_per_s": cpu["papers_per_s"],
              "embed_same_papers_s": round(embed_s, 1),
              "digest_share_of_embedding": f"{digest_s / embed_s:.2e}"}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "store_digest.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / "store_digest.md").write_text(f"""# A store's per-paper text digest: its cost

Machine: {result['machine']}. {args.papers:,} synthetic papers of {result['bytes_per_paper']:,}
bytes of title and abstract on average; best of {args.repeats}. Command:
`.venv/bin/python benchmarks/store_digest.py --papers {args.papers} --repeats {args.repeats}`.

| what | seconds |
|---|---|
| `text_digests` (sha256 of the fields as JSON, 8 bytes): what a store keeps | {digest_s:.2f} |
| polars' `hash` of the same struct (vectorised; not stable across versions) | {polars_s:.2f} |
| embedding them with MiniLM on this CPU ({cpu['papers_per_s']} papers/s) | {embed_s:,.0f} |

The digest costs {result['digest_per_million_s']:.2f} s per million papers, one core:
{result['digest_share_of_embedding']} of what embedding them costs on the CPU. On a GPU at 100
times the CPU's throughput it would still be under 1%. `make embed` computes it once per part it
writes, and again for every stored paper only when the corpus's prefiltered.parquet changed.
""")
    print((OUT / "store_digest.md").read_text())


if __name__ == "__main__":
    main()
