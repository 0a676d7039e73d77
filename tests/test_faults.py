"""Fault injection: every stage is killed with SIGKILL at seeded random moments, rerun, and
must end byte-identical to an uninterrupted run, with no debris and no orphaned Java.

The reference and the faulted data roots run the same commands (`python -m pipeline ...`) on
the same small synthetic corpus; only the kills differ. Lucene's own index files carry a
random segment id, so for BM25 the index is checked by `verify` and by its search results.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.verify import verify

SEED = 20261122
POOL = "all-1600-s1-r0"
# (label, stage arguments, kills)
STAGES: list[tuple[str, list[str], int]] = [
    ("ingest", ["ingest", "--corpus", "c", "--raw", "{raw}"], 4),
    ("prefilter", ["prefilter", "--corpus", "c"], 2),
    ("pool", ["pool", "--corpus", "c", "--size", "1600", "--queries", "20", "--seed", "1"], 3),
    ("embed", ["embed", "--corpus", "c", "--model", "scibert", "--model-path", "{model}",
               "--part-size", "200", "--batch-size", "32"], 5),
    ("index", ["index", "--corpus", "c", "--model", "bm25", "--threads", "1"], 3),
    ("search-bm25", ["search", "--corpus", "c", "--model", "bm25", "--threads", "1"], 2),
    ("search-dense", ["search", "--corpus", "c", "--model", "scibert"], 2),
    ("eval", ["eval", "--corpus", "c", "--model", "bm25"], 3),
]
VOLATILE = ("manifest.json", ".eval.json", "stage-times.jsonl", ".lock")


def _command(root: Path, args: list[str], raw: Path, model: Path) -> list[str]:
    filled = [a.format(raw=raw, model=model) for a in args]
    return [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
            "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *filled]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


def _run(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return time.perf_counter() - start


def _java_children(root: Path) -> list[str]:
    """Command lines of running processes that work on `root` with Java (Anserini)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "anserini" in cmdline and str(root) in cmdline:
            found.append(cmdline)
    return found


def _kill_at(cmd: list[str], delay: float) -> bool:
    """Start `cmd`, SIGKILL it after `delay` seconds; True if it was still running."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def _data_files(root: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if (path.is_dir() or rel.endswith(VOLATILE) or "/.params/" in rel
                or "/bm25/lucene/" in rel or "/reports/" in rel):
            continue
        files[rel] = path.read_bytes()
    return files


def test_stages_survive_kills_byte_identical(raw_corpus, tiny_bert, tmp_path):
    rng = random.Random(SEED)
    ref, faulted = tmp_path / "reference", tmp_path / "faulted"
    kills = 0
    report = []
    for label, args, n_kills in STAGES:
        seconds = _run(_command(ref, args, raw_corpus, tiny_bert))
        survived = 0
        for _ in range(n_kills):
            # a moment inside the stage's own run time (the interpreter start included)
            if _kill_at(_command(faulted, args, raw_corpus, tiny_bert),
                        rng.uniform(0.15, 0.95) * seconds):
                survived += 1
                time.sleep(0.3)  # the kernel delivers PDEATHSIG to the Java child
                assert not _java_children(faulted), f"{label}: Anserini outlived its parent"
        _run(_command(faulted, args, raw_corpus, tiny_bert))
        kills += survived
        report.append(f"{label}: {survived} kills, reference {seconds:.1f}s")
    print("\n".join(report))
    assert kills >= 20, report
    reference, after = _data_files(ref), _data_files(faulted)
    assert sorted(after) == sorted(reference)
    different = [name for name in reference if reference[name] != after[name]]
    assert not different, different
    assert not [p for p in faulted.rglob("*.tmp")], "debris left behind"
    assert verify([faulted / "corpora", faulted / "indexes", faulted / "runs"],
                  faulted / "corpora") == []
