"""Same-size damage, for every kind of artifact: bytes overwritten in place, the size kept (what
a flipped disk block, a bad copy or a stray `dd` leaves).

For each kind, on a copy of one complete data root (corpus, pools, embeddings, a Lucene index,
runs, evaluations, results): the next stage that reads the damaged file refuses it, exit
status 2, with one line naming the file and the command that repairs it; `verify` names it
with the same command; running that command (as a user would, through make) restores every
data file byte for byte (Lucene's own files carry a random segment id: checked through the
runs searched from them) and leaves `verify` clean.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.inputs import Roots
from pipeline.verify import verify

ROOT = Path(__file__).resolve().parents[1]
POOL = "all-800-r0"
MODEL_PATH: Path  # the tiny BERT of the fixture below


def cli(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
            "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *args]


def make(root: Path, *args: str) -> list[str]:
    return ["make", "--no-print-directory", f"DATA={root}", "THREADS=1", f"PY={sys.executable}",
            f"STAMP={root / 'installed'}", *args]


ENV = {**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=600)


def ok(cmd: list[str]) -> str:
    done = run(cmd)
    assert done.returncode == 0, (cmd, done.stdout[-1500:], done.stderr[-3000:])
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def reference(raw_corpus, tiny_bert, tmp_path_factory) -> Path:
    """A complete data root built through make: the corpus c from its raw shards, one pool,
    BM25 on Lucene, a dense encoder (the tiny BERT, as `scibert`), evaluations and results."""
    global MODEL_PATH
    MODEL_PATH = tiny_bert
    root = tmp_path_factory.mktemp("reference")
    shutil.copytree(raw_corpus, root / "corpora" / "c" / "s2orc")
    (root / "installed").touch()
    ok(make(root, "pool", "CORPUS=c", "SIZE=800", "QUERIES=10"))
    ok(make(root, "eval", "CORPUS=c", "MODEL=bm25", "BM25_ENGINE=lucene"))
    ok(make(root, "index", "CORPUS=c", "MODEL=bm25"))  # the arrays engine's analysed-text store
    ok(make(root, "eval", "CORPUS=c", "MODEL=scibert", f"MODEL_PATH={tiny_bert}"))
    ok(make(root, "report", "CORPUS=c"))
    assert verify(Roots(root / "corpora", root / "indexes", root / "runs")) == []
    return root


def data_files(root: Path) -> dict[str, bytes]:
    """Every data file's bytes: not manifests (they hold times), logs, caches or reports."""
    skip = ("manifest.json", ".eval.json", "stage-times.jsonl", ".lock", ".checksums.json",
            ".spec.json")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(skip) and "/bm25/lucene/" not in p.as_posix()
            and "/reports/" not in p.as_posix() and "/slurm/" not in p.as_posix()
            and p.name != "installed"}


def damage(path: Path) -> None:
    """64 bytes in the middle inverted, size and everything else kept."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def first(root: Path, pattern: str) -> Path:
    return max(root.glob(pattern), key=lambda p: p.stat().st_size)


# (kind, the damaged file (a glob under the data root: the largest match), the reading stage,
# the repair command it must name)
KINDS = [
    ("raw-shard", "corpora/c/s2orc/metadata/metadata_0.jsonl.gz",
     ["ingest", "--corpus", "c"], "python -m pipeline synth --corpus c --repair"),
    ("papers", "corpora/c/papers.parquet", ["prefilter", "--corpus", "c"],
     "make corpus CORPUS=c"),
    ("citations", "corpora/c/citations.parquet", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c"),
    ("prefiltered", "corpora/c/prefiltered.parquet", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c"),
    ("corpus-manifest", "corpora/c/manifest.json", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c"),
    ("pool-file", f"corpora/c/pools/{POOL}/candidates.parquet",
     ["search", "--corpus", "c", "--model", "random"], "make pools CORPUS=c"),
    ("pool-manifest", f"corpora/c/pools/{POOL}/manifest.json",
     ["search", "--corpus", "c", "--model", "random"], "make pools CORPUS=c"),
    ("embedding-part", "indexes/c/embeddings/scibert/part-*.arrow",
     ["search", "--corpus", "c", "--model", "scibert"], "make embed CORPUS=c MODEL=scibert"),
    ("store-manifest", "indexes/c/embeddings/scibert/manifest.json",
     ["search", "--corpus", "c", "--model", "scibert"], "make embed CORPUS=c MODEL=scibert"),
    ("analysed-part", "indexes/c/bm25-analysed/anserini-english/part-*.arrow",
     ["search", "--corpus", "c", "--model", "bm25"], "make index CORPUS=c MODEL=bm25"),
    ("analysed-manifest", "indexes/c/bm25-analysed/anserini-english/manifest.json",
     ["search", "--corpus", "c", "--model", "bm25"], "make index CORPUS=c MODEL=bm25"),
    ("lucene-index", f"indexes/c/{POOL}/bm25/lucene/*",
     ["search", "--corpus", "c", "--model", "bm25", "--bm25-engine", "lucene"],
     "make index CORPUS=c MODEL=bm25 BM25_ENGINE=lucene"),
    ("run-parquet", f"runs/c/{POOL}/bm25.parquet", ["eval", "--corpus", "c", "--model", "bm25"],
     "make eval CORPUS=c MODEL=bm25"),
    ("trec", f"runs/c/{POOL}/bm25.trec", ["eval", "--corpus", "c", "--model", "bm25"],
     "make eval CORPUS=c MODEL=bm25"),
    ("run-manifest", f"runs/c/{POOL}/scibert.manifest.json",
     ["eval", "--corpus", "c", "--model", "scibert"], "make eval CORPUS=c MODEL=scibert"),
    ("metrics", f"runs/c/{POOL}/bm25.metrics.parquet", ["report", "--corpus", "c"],
     "make eval CORPUS=c MODEL=bm25"),
    ("eval-manifest", f"runs/c/{POOL}/bm25.eval.json", ["report", "--corpus", "c"],
     "make eval CORPUS=c MODEL=bm25"),
]


@pytest.mark.parametrize("kind, pattern, reader, repair", KINDS, ids=[k[0] for k in KINDS])
def test_same_size_damage_is_refused_named_and_repaired(reference, tmp_path, kind, pattern,
                                                         reader, repair):
    root = tmp_path / "data"
    shutil.copytree(reference, root, symlinks=True)
    before = data_files(root)
    target = first(root, pattern)
    size = target.stat().st_size
    damage(target)
    assert target.stat().st_size == size
    done = run(cli(root, *reader))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()
             and not line.startswith("[")]  # progress lines of the stage before it refused
    assert done.returncode == 2, (done.stdout[-1000:], done.stderr[-2000:])
    assert len(lines) == 1, lines
    assert target.name in lines[0] and f"repair: {repair}" in lines[0], lines[0]
    problems = verify(Roots(root / "corpora", root / "indexes", root / "runs"))
    assert any(target.name in line and f"repair: {repair}" in line for line in problems), \
        problems
    # the repair, as printed (python -m pipeline with this data root's folders, make with DATA)
    words = repair.split()
    if words[0] == "make":
        extra = [f"MODEL_PATH={MODEL_PATH}"] if "MODEL=scibert" in words else []
        ok(make(root, *words[1:], *extra))
    else:
        ok(cli(root, *words[3:]))
    # and what the user runs next: the whole chain, which finds nothing else to redo
    ok(make(root, "eval", "CORPUS=c", "MODEL=bm25", "BM25_ENGINE=lucene"))
    ok(make(root, "eval", "CORPUS=c", "MODEL=scibert", f"MODEL_PATH={MODEL_PATH}"))
    ok(make(root, "report", "CORPUS=c"))
    after = data_files(root)
    assert sorted(after) == sorted(before)
    assert [name for name in before if before[name] != after[name]] == []
    assert verify(Roots(root / "corpora", root / "indexes", root / "runs")) == []


def test_results_damage_is_named_and_repaired_by_report(reference, tmp_path):
    """results.parquet is read by the report after `collect` writes it anew: verify names the
    damage and `make report` repairs it."""
    root = tmp_path / "data"
    shutil.copytree(reference, root, symlinks=True)
    before = data_files(root)
    damage(root / "runs" / "results.parquet")
    problems = verify(Roots(root / "corpora", root / "indexes", root / "runs"))
    assert [p for p in problems if re.search(r"results\.parquet: .*repair: make report", p)]
    ok(make(root, "report", "CORPUS=c"))
    assert data_files(root) == before
    assert verify(Roots(root / "corpora", root / "indexes", root / "runs")) == []
