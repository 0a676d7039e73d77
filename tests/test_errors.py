"""The errors suite: one test per row of the "Errors" table (docs/errors.md).

Each case prepares a data root, runs one command as a user would (`python -m pipeline ...` or
`make ...`), and checks the outcome: for bad input, exit status 2, one line naming the input
and the fix, and nothing half-written (no temporary, no output that was not there before);
for the inputs we accept (duplicates, bad lines, dangling citations), exit 0 and a count.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import CHILD_BOUND_S, MAKE_STOPPED, copy_corpus

ROOT = Path(__file__).resolve().parents[1]
POOL = "all-800-r0"


@dataclass(frozen=True)
class Case:
    id: str
    setup: Callable[[Path, Path], list[str]]  # (data root, raw corpus) -> command
    exit: int
    message: str  # a regular expression the one-line message must match
    env: tuple[tuple[str, str], ...] = ()
    limit_file_size: int | None = None
    cpu_only: bool = False  # what a machine without a GPU says: skipped on a GPU node


def cli(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
            "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *args]


def make(root: Path, *args: str) -> list[str]:
    return ["make", "--no-print-directory", f"DATA={root}", "CORPUS=c", *args]


def raw_copy(root: Path, raw: Path) -> Path:
    dest = root / "raw"
    shutil.copytree(raw, dest)
    return dest


def append_line(raw: Path, shard: int, line: bytes) -> None:
    with gzip.open(raw / "metadata" / f"metadata_{shard}.jsonl.gz", "ab") as handle:
        handle.write(line)


def with_pool(root: Path, corpus: Path) -> Path:
    """A private copy of the ingested corpus with one small pool."""
    copy = copy_corpus(corpus, root / "corpora" / "c")
    build_pool(copy, PoolSpec(size=800, queries=10))
    return copy


def with_run(root: Path, corpus: Path) -> Path:
    copy = with_pool(root, corpus)
    subprocess.run(cli(root, "search", "--corpus", "c", "--model", "random"), check=True,
                   capture_output=True)
    return copy


def rewrite_run(root: Path, change: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    """Replace the run's rows (and its manifest's fingerprints) as a foreign tool would."""
    from pipeline.core.checksums import fingerprint
    from pipeline.core.files import read_json, write_json

    folder = root / "runs" / "c" / POOL
    change(pl.read_parquet(folder / "random.parquet")).write_parquet(folder / "random.parquet")
    info = read_json(folder / "random.manifest.json")
    info["outputs"]["random.parquet"] = fingerprint(folder / "random.parquet")
    write_json(info, folder / "random.manifest.json")  # a consistent manifest, self checksum


CORPUS: Path  # set by the fixture below: the session's ingested small corpus


def _bad_json(root: Path, raw: Path) -> list[str]:
    append_line(raw_copy(root, raw), 1, b'{"paper_id": "1", "title": \n')
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"), "--strict")


def _bad_json_default(root: Path, raw: Path) -> list[str]:
    append_line(raw_copy(root, raw), 1, b'{"paper_id": "1", "year": "2019"}\n')
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"))


def _non_utf8(root: Path, raw: Path) -> list[str]:
    append_line(raw_copy(root, raw), 0, b'{"paper_id": "77", "title": "caf\xe9"}\n')
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"), "--strict")


def _damaged_gzip(damage: str):
    """A shard cut in half (an incomplete download) or with bytes overwritten mid-stream."""
    def case(root: Path, raw: Path) -> list[str]:
        shard = raw_copy(root, raw) / "metadata" / "metadata_0.jsonl.gz"
        data = bytearray(shard.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        else:
            data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
        shard.write_bytes(bytes(data))
        return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"))
    return case


def _duplicates(root: Path, raw: Path) -> list[str]:
    copy = raw_copy(root, raw)
    shard = copy / "metadata" / "metadata_0.jsonl.gz"
    shard.write_bytes(shard.read_bytes() * 2)  # the shard appended to itself
    return cli(root, "ingest", "--corpus", "c", "--raw", str(copy))


def _dangling(root: Path, raw: Path) -> list[str]:
    """Three hand-written papers; one cites 2 papers, one of them outside the corpus."""
    rows = [{"paper_id": str(i), "title": f"T{i}", "abstract": None, "year": 2019,
             "mag_field_of_study": None, "outbound_citations": cites,
             "inbound_citations": []} for i, cites in ((1, ["2", "123456789"]), (2, []), (3, []))]
    (root / "raw" / "metadata").mkdir(parents=True)
    with gzip.open(root / "raw" / "metadata" / "metadata_0.jsonl.gz", "wb") as handle:
        handle.write(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"))


def _empty(root: Path, raw: Path) -> list[str]:
    (root / "raw" / "metadata").mkdir(parents=True)
    with gzip.open(root / "raw" / "metadata" / "metadata_0.jsonl.gz", "wb"):
        pass
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"))


def _s2ag_quarantined(root: Path, raw: Path) -> list[str]:
    """An S2AG download whose citations are all bad (ids that are not ids)."""
    for dataset, record in (("papers", {"corpusid": 1, "title": "A paper"}),
                            ("abstracts", {"corpusid": 1, "abstract": "An abstract."}),
                            ("citations", {"citingcorpusid": "1x", "citedcorpusid": 1})):
        (root / "raw" / dataset).mkdir(parents=True)
        (root / "raw" / dataset / "part-0.jsonl.gz").write_bytes(
            gzip.compress(json.dumps(record).encode() + b"\n"))
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"), "--source", "s2ag")


def _no_shards(root: Path, raw: Path) -> list[str]:
    (root / "raw" / "metadata").mkdir(parents=True)
    return cli(root, "ingest", "--corpus", "c", "--raw", str(root / "raw"))


def _disk_full(root: Path, raw: Path) -> list[str]:
    return cli(root, "ingest", "--corpus", "c", "--raw", str(raw_copy(root, raw)))


def _truncated_prefiltered(root: Path, raw: Path) -> list[str]:
    path = copy_corpus(CORPUS, root / "corpora" / "c") / "prefiltered.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    return cli(root, "pool", "--corpus", "c", "--size", "800", "--queries", "10")


def _truncated_candidates(root: Path, raw: Path) -> list[str]:
    path = with_pool(root, CORPUS) / "pools" / POOL / "candidates.parquet"
    path.write_bytes(path.read_bytes()[:-40])
    return cli(root, "search", "--corpus", "c", "--model", "random")


def _corrupt_manifest(root: Path, raw: Path) -> list[str]:
    path = with_pool(root, CORPUS) / "pools" / POOL / "manifest.json"
    path.write_text(path.read_text()[:100])
    return cli(root, "search", "--corpus", "c", "--model", "random", "--pool", POOL)


def _stale_pool(root: Path, raw: Path) -> list[str]:
    copy = with_pool(root, CORPUS)
    subprocess.run(cli(root, "prefilter", "--corpus", "c", "--citations", "either"),
                   check=True, capture_output=True)
    assert (copy / "pools" / POOL).exists()
    return cli(root, "search", "--corpus", "c", "--model", "random")


def _java(root: Path, raw: Path) -> list[str]:
    with_pool(root, CORPUS)
    return cli(root, "search", "--corpus", "c", "--model", "bm25")


def _offline_model(root: Path, raw: Path) -> list[str]:
    with_pool(root, CORPUS)
    return cli(root, "embed", "--corpus", "c", "--model", "scincl")


def _no_gpu_device(root: Path, raw: Path) -> list[str]:
    with_pool(root, CORPUS)
    return cli(root, "embed", "--corpus", "c", "--model", "minilm", "--device", "cuda")


def _no_gpu_backend(root: Path, raw: Path) -> list[str]:
    with_pool(root, CORPUS)
    return cli(root, "search", "--corpus", "c", "--model", "minilm", "--backend", "torch-cuda")


def _foreign_docs(root: Path, raw: Path) -> list[str]:
    with_run(root, CORPUS)
    rewrite_run(root, lambda run: run.with_columns(
        doc=pl.when(pl.col("rank") == 1).then(pl.lit(-5, pl.Int64)).otherwise("doc")))
    return cli(root, "eval", "--corpus", "c", "--model", "random")


def _other_queries(root: Path, raw: Path) -> list[str]:
    with_run(root, CORPUS)
    rewrite_run(root, lambda run: run.with_columns(query=pl.col("query") + 1))
    return cli(root, "eval", "--corpus", "c", "--model", "random")


def _make(*args: str) -> Callable[[Path, Path], list[str]]:
    return lambda root, raw: make(root, *args)


def _cli(*args: str) -> Callable[[Path, Path], list[str]]:
    return lambda root, raw: cli(root, *args)


CASES = [
    Case("bad-line-strict", _bad_json, 2, r"metadata_1\.jsonl\.gz:\d+: .*--strict"),
    Case("bad-line", _bad_json_default, 0,
         r"\[ingest\] metadata: 1 of [\d,]+ lines quarantined \(year 1\), written to "
         r".*/corpora/c/quarantine\.jsonl"),
    Case("non-utf8-strict", _non_utf8, 2, r"metadata_0\.jsonl\.gz:\d+: .*UTF-8"),
    Case("truncated-gzip", _damaged_gzip("truncated"), 2,
         r"metadata_0\.jsonl\.gz: cannot read it .*incomplete download"),
    Case("corrupt-gzip", _damaged_gzip("corrupt"), 2,
         r"metadata_0\.jsonl\.gz: cannot read it .*incomplete download"),
    Case("duplicate-ids", _duplicates, 0, r"duplicate_records=[1-9]"),
    Case("dangling-citations", _dangling, 0, r"edges=2 .*dangling_edges=1\b"),
    Case("empty-corpus", _empty, 2, r"no papers in .*raw"),
    Case("s2ag-quarantined", _s2ag_quarantined, 2,
         r"raw/citations: 1 of its 1 lines \(100\.0%\) are bad, more than the 50% ingest "
         r"accepts \(the first: .*citations/part-0\.jsonl\.gz:1: citingcorpusid '1x' is not "
         r"an integer id\); nothing was written"),
    Case("no-shards", _no_shards, 2, r"no S2ORC metadata shards under"),
    Case("disk-full", _disk_full, 2, r"no space left writing in .*/corpora/c/ ",
         limit_file_size=200_000),
    Case("truncated-prefiltered", _truncated_prefiltered, 2,
         r"prefiltered\.parquet: .*truncated"),
    Case("truncated-candidates", _truncated_candidates, 2,
         r"candidates\.parquet: .*truncated"),
    Case("corrupt-manifest", _corrupt_manifest, 2, r"pools/all-800-r0/manifest\.json is corrupt"),
    Case("stale-pool", _stale_pool, 2, r"pool all-800-r0 is stale: .*prefiltered\.parquet"),
    Case("java-missing", _java, 2, r"JAVA=/nonexistent/java is not an executable",
         env=(("JAVA", "/nonexistent/java"),)),
    Case("model-offline", _offline_model, 2,
         r"cannot load MODEL scincl from malteos/scincl.*MODEL_PATH=.*HF_HOME=",
         env=(("HF_HUB_OFFLINE", "1"), ("HF_HOME", "{root}/hf"))),
    Case("gpu-absent-embed", _no_gpu_device, 2, r"--device cuda: no CUDA GPU", cpu_only=True),
    Case("gpu-absent-search", _no_gpu_backend, 2, r"--backend torch-cuda: no CUDA GPU",
         cpu_only=True),
    Case("run-foreign-docs", _foreign_docs, 2, r"ranks 1 papers that are not candidates"),
    Case("run-other-queries", _other_queries, 2, r"answers \d+ queries that the pool"),
    Case("cli-k", _cli("search", "--k", "-1"), 2, r"--k: -1 is too small"),
    Case("cli-batch-size", _cli("embed", "--batch-size", "0"), 2,
         r"--batch-size: 0 is too small"),
    Case("make-repeats", _make("pool", "REPEATS=-1"), 2, r"REPEATS: -1 is too small"),
    Case("make-repeats-text", _make("pool", "REPEATS=abc"), 2, r"REPEATS: 'abc' is not a whole"),
    Case("make-size-empty", _make("pool", "SIZE="), 2, r"SIZE: empty: give one or more sizes"),
    Case("make-queries", _make("pool", "QUERIES=0"), 2, r"QUERIES: 0 is too small"),
    Case("make-queries-negative", _make("pool", "QUERIES=-3"), 2, r"QUERIES: -3 is too small"),
    Case("make-threads", _make("eval", "THREADS=0"), 2, r"THREADS: 0 is too small"),
    Case("make-seed", _make("pool", "SEED=abc"), 2, r"SEED: 'abc' is not a whole number"),
    Case("make-citations", _make("corpus", "CITATIONS=bogus"), 2,
         r"CITATIONS: 'bogus': use one of inbound, outbound, either"),
    Case("make-quote", _make("models", "FIELD=x' --size 1k; touch {root}/owned; echo '"), 2,
         r"unknown FIELD"),
    Case("make-dollar", _make("models", "FIELD=$(shell touch {root}/owned)"), 2,
         r"make's command line .*holds a '\$', which make would run as code"),
    Case("make-model", _make("eval", "MODEL=bert-huge"), 2, r"unknown MODEL 'bert-huge'"),
    Case("make-data-space", _make("pool", "DATA=/tmp/a b"), 2, r"DATA: .*no spaces"),
]


@pytest.fixture(scope="module", autouse=True)
def _corpus(corpus_dir):
    global CORPUS
    CORPUS = corpus_dir


def _snapshot(root: Path) -> dict[str, int]:
    """Every file and its mtime; lock files and the checksum caches of good files
    (`.checksums.json`, what a stage learnt while checking its inputs) are not artifacts."""
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns
            for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"
            and p.name != ".checksums.json"}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.id, marks=[pytest.mark.cpu_only] * c.cpu_only) for c in CASES])
def test_error_case(case: Case, raw_corpus, tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    cmd = [part.replace("{root}", str(root)) for part in case.setup(root, raw_corpus)]
    before = _snapshot(root)
    env = {**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1",
           **{k: v.replace("{root}", str(root)) for k, v in case.env}}

    def limit() -> None:
        if case.limit_file_size:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.limit_file_size,) * 2)

    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=CHILD_BOUND_S, preexec_fn=limit)
    assert done.returncode == case.exit, done.stderr[-3000:]
    if case.exit == 2:
        lines = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.strip() and not MAKE_STOPPED.fullmatch(line)]  # make's own trailer
        assert len(lines) == 1, lines
        assert re.search(case.message, lines[0]), lines[0]
        after = _snapshot(root)  # nothing new, nothing rewritten (stamps aside)
        changed = {p for p in after if before.get(p) != after[p] and "/.params/" not in p}
        assert not changed, changed
    else:
        assert re.search(case.message, done.stderr), done.stderr[-2000:]
    assert not list(root.rglob("*.tmp")), "half-written temporaries left behind"
    assert not (root / "owned").exists(), "a make variable ran as shell code"


def test_readme_lists_every_case():
    """docs/errors.md's Errors table has one row per case, in the same order."""
    text = (ROOT / "docs" / "errors.md").read_text()
    table = text[text.index("## Errors"):].split("\n\n")[2]
    ids = re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M)
    assert ids == [c.id for c in CASES]
