"""Corpus and pools at S2ORC scale: ingest, prefilter and pool building on a large synthetic
S2ORC written by the generator (issue 10).

Measures, each stage as its own `python -m pipeline` process, wall time and peak RSS of the
whole process tree (the sum of PSS over the process and its workers, sampled from /proc every
50 ms):
- the synthetic corpus: papers, shards, generation time;
- ingest of the whole corpus, and of subsets of its shards (peak RSS against corpus size), and
  one shard of 800k papers against the same papers split into 8 shards (against shard size);
- the peer, side by side: polars `scan_ndjson` of the same files into one parquet file of the
  same columns (no checks, no dedupe, no citations file);
- prefilter; a dataset-level 2M pool (3,800 queries) and a field-level pool (Medicine, 100k,
  200 queries).
Writes benchmarks/results/corpus_scale.json and .md.

Usage: .venv/bin/python benchmarks/corpus_scale.py --raw /scratch/raw16m --work /scratch/bench
       [--papers 16M --shards 20]   (generates the raw corpus first when it is not there)
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
PY = sys.executable
PAGE = os.sysconf("SC_PAGE_SIZE")


def _pss(pid: int) -> int:
    """Proportional set size: resident bytes, pages shared with other processes (a forked
    worker's copy-on-write pages) divided among them, so a sum over processes is honest."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def _tree_rss(root: int) -> int:
    """Resident bytes (PSS) of `root` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):  # it just ended
            total += _pss(pid)
        todo += children.get(pid, [])
    return total


def measure(cmd: list[str], env: dict | None = None) -> dict:
    """Run `cmd`; its wall seconds and the peak RSS (GB) of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.5)  # a scan of /proc costs CPU: sample twice a second

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    print(f"[bench] {' '.join(cmd[2:6])}: {seconds:.1f} s, peak {peak / 1e9:.2f} GB",
          file=sys.stderr)
    return {"seconds": round(seconds, 1), "peak_rss_gb": round(peak / 1e9, 2),
            "stdout": out[-2000:]}


def pipe(work: Path, *args: str) -> list[str]:
    return [PY, "-m", "pipeline", "--corpora-root", str(work / "corpora"),
            "--index-root", str(work / "indexes"), "--runs-root", str(work / "runs"), *args]


def corpus_manifest(work: Path, corpus: str) -> dict:
    return json.loads((work / "corpora" / corpus / "manifest.json").read_text())


def subset(raw: Path, shards: list[Path], dest: Path) -> Path:
    """A raw folder whose metadata/ links to some of the shards."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "metadata").mkdir(parents=True)
    for shard in shards:
        (dest / "metadata" / shard.name).symlink_to(shard)
    return dest


def split_shard(shard: Path, parts: int, dest: Path) -> Path:
    """The papers of one shard re-split into `parts` shards (same lines, same order)."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "metadata").mkdir(parents=True)
    with gzip.open(shard, "rb") as handle:
        lines = handle.readlines()
    step = -(-len(lines) // parts)
    for k in range(parts):
        with gzip.open(dest / "metadata" / f"metadata_{k}.jsonl.gz", "wb", compresslevel=1) as f:
            f.writelines(lines[k * step:(k + 1) * step])
    return dest


POLARS_PEER = """
import sys, polars as pl
files, out = sys.argv[1], sys.argv[2]
(pl.scan_ndjson(files, schema={"paper_id": pl.String, "title": pl.String,
    "abstract": pl.String, "year": pl.Int64, "mag_field_of_study": pl.List(pl.String),
    "outbound_citations": pl.List(pl.String), "inbound_citations": pl.List(pl.String)})
 .select(corpusid=pl.col("paper_id").cast(pl.Int64), title="title", abstract="abstract",
         year=pl.col("year").cast(pl.Int32), fields="mag_field_of_study",
         n_inbound=pl.col("inbound_citations").list.len().cast(pl.Int32),
         n_outbound=pl.col("outbound_citations").list.len().cast(pl.Int32))
 .sink_parquet(out, compression="zstd"))
"""


def ingest_run(work: Path, corpus: str, raw: Path, threads: int) -> dict:
    shutil.rmtree(work / "corpora" / corpus, ignore_errors=True)
    run = measure(pipe(work, "ingest", "--corpus", corpus, "--raw", str(raw),
                       "--threads", str(threads)))
    section = corpus_manifest(work, corpus)["ingest"]
    counts = section["counts"]
    run |= {"papers": counts["papers"], "edges": counts["edges"],
            "phase_seconds": section["phase_seconds"], "buckets": section["buckets"],
            "papers_per_s": round(counts["lines_read"] / run["seconds"]),
            "raw_gb": round(sum(p.stat().st_size for p in (raw / "metadata").iterdir()) / 1e9,
                            2)}
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--papers", default="16M")
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--generated", type=float, nargs=2, metavar=("SECONDS", "PEAK_GB"),
                        help="figures of a generation run beforehand (/usr/bin/time -v)")
    args = parser.parse_args()
    work, raw = args.work, args.raw
    work.mkdir(parents=True, exist_ok=True)
    figures: dict = {"machine": machine(),
                     "date": time.strftime("%Y-%m-%d"), "threads": args.threads}
    if not (raw / "manifest.json").exists():
        figures["generate"] = measure([PY, "-m", "pipeline", "--corpora-root", str(raw.parent),
                                       "synth", "--corpus", raw.name, "--papers", args.papers,
                                       "--shards", str(args.shards),
                                       "--threads", str(args.threads)])
        (raw.parent / raw.name / "s2orc").rename(raw.with_suffix(".tmp"))
        shutil.rmtree(raw, ignore_errors=True)
        raw.with_suffix(".tmp").rename(raw)
    if args.generated:
        figures["generate"] = {"seconds": args.generated[0], "peak_rss_gb": args.generated[1],
                               "note": "measured beforehand with /usr/bin/time -v"}
    synth = json.loads((raw / "manifest.json").read_text())
    shards = sorted((raw / "metadata").glob("*.jsonl.gz"),
                    key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    figures["corpus"] = {"papers": synth["counts"]["papers"], "shards": len(shards),
                         "raw_gb": round(sum(p.stat().st_size for p in shards) / 1e9, 2),
                         "generator": synth["parameters"], "code": synth.get("code_version")}

    # memory against corpus size (1, 5, all shards) and against shard size (1 x 800k, 8 x 100k)
    scaling = {}
    for count in (1, 5):
        if count < len(shards):
            part = subset(raw, shards[:count], work / f"raw-{count}")
            scaling[f"{count}_shards"] = ingest_run(work, "subset", part, args.threads)
    split = split_shard(shards[0], 8, work / "raw-split")
    scaling["1_shard_as_8"] = ingest_run(work, "subset", split, args.threads)
    shutil.rmtree(work / "corpora" / "subset", ignore_errors=True)
    figures["ingest_scaling"] = scaling

    figures["ingest"] = ingest_run(work, "big", raw, args.threads)
    peer_out = work / "polars-peer.parquet"
    figures["polars_scan_ndjson"] = measure([PY, "-c", POLARS_PEER,
                                             str(raw / "metadata" / "*.jsonl.gz"), str(peer_out)])
    figures["polars_scan_ndjson"]["papers_per_s"] = round(
        figures["corpus"]["papers"] / figures["polars_scan_ndjson"]["seconds"])
    peer_out.unlink(missing_ok=True)
    figures["prefilter"] = measure(pipe(work, "prefilter", "--corpus", "big"))
    figures["prefilter"]["kept"] = corpus_manifest(work, "big")["prefilter"]["counts"]["kept"]
    figures["pool_dataset_2M"] = measure(pipe(work, "pool", "--corpus", "big", "--size", "2M",
                                              "--queries", "3800"))
    figures["pool_field_medicine_100k"] = measure(pipe(
        work, "pool", "--corpus", "big", "--field", "Medicine", "--size", "100k",
        "--queries", "200"))
    for name in ("pool_dataset_2M", "pool_field_medicine_100k"):
        pool = next(p for p in (work / "corpora" / "big" / "pools").iterdir()
                    if p.name.startswith("all-2M" if "dataset" in name else "medicine-100k"))
        figures[name]["counts"] = json.loads((pool / "manifest.json").read_text())["counts"]
    for value in figures.values():
        if isinstance(value, dict):
            value.pop("stdout", None)
            for inner in value.values():
                if isinstance(inner, dict):
                    inner.pop("stdout", None)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "corpus_scale.json").write_text(json.dumps(figures, indent=2) + "\n")
    (OUT / "corpus_scale.md").write_text(report(figures))
    print(report(figures))


def report(f: dict) -> str:
    c, ing, peer = f["corpus"], f["ingest"], f["polars_scan_ndjson"]
    gen = f.get("generate")
    rows = [f"| generate the synthetic corpus ({f['threads']} workers) | {gen['seconds']} | "
            f"{round(c['papers'] / gen['seconds']):,} | {gen['peak_rss_gb']} |"] if gen else []
    rows += [
        f"| ingest (this pipeline, {f['threads']} workers; read "
        f"{ing['phase_seconds']['read']} s, merge {ing['phase_seconds']['merge']} s) | "
        f"{ing['seconds']} | "
        f"{ing['papers_per_s']:,} | {ing['peak_rss_gb']} |",
        f"| polars `scan_ndjson` → parquet (peer) | {peer['seconds']} | "
        f"{peer['papers_per_s']:,} | {peer['peak_rss_gb']} |",
        f"| prefilter ({f['prefilter']['kept']:,} kept) | {f['prefilter']['seconds']} | "
        f"{round(c['papers'] / f['prefilter']['seconds']):,} | {f['prefilter']['peak_rss_gb']} |",
    ]
    for name, label in (("pool_dataset_2M", "dataset-level pool 2M, 3,800 queries"),
                        ("pool_field_medicine_100k", "field-level pool Medicine 100k, 200 q.")):
        rows.append(f"| {label} | {f[name]['seconds']} | | {f[name]['peak_rss_gb']} |")
    scaling = [f"| {name.replace('_', ' ')} | {r['papers']:,} | {r['seconds']} | "
               f"{r['papers_per_s']:,} | {r['peak_rss_gb']} |"
               for name, r in [*f["ingest_scaling"].items(), ("all shards", ing)]]
    return "\n".join([
        f"# Corpus and pools at scale ({f['date']})", "",
        f"Machine: {f['machine']}. Synthetic S2ORC written by the generator: "
        f"{c['papers']:,} papers in {c['shards']} shards, {c['raw_gb']} GB gzipped "
        f"(generator code {c['code']}). Peak RSS is the whole process tree (workers included; "
        "PSS, so pages a forked worker shares are counted once).",
        "", "| stage | seconds | papers/s | peak RSS (GB) |", "|---|---|---|---|", *rows, "",
        "Targets (issue 10): ingest >= 25k papers/s with peak RSS under 4 GB that does not grow",
        "with corpus or shard size; prefilter under 4 GB; a 2M pool in under 60 s and 8 GB.", "",
        "## Ingest peak memory against corpus size and shard size", "",
        "| input | papers | seconds | papers/s | peak RSS (GB) |", "|---|---|---|---|---|",
        *scaling, "",
        "`1 shard as 8` is the first 800k-paper shard re-split into 8 shards of 100k.", "",
    ])


if __name__ == "__main__":
    main()
