"""No command's delete touches a file it did not write (issue 46): every command that removes or
replaces files (make clean-demo, retire-pool, sweep, the REPLACE=1 imports and import-vectors,
the repairs: a store's parts, a pool rebuilt, a run searched again, a report written again) is
run with a user's files planted beside what it removes, in the same folders and under names
alike to its own, and each planted file is as it was after it; what the command does remove is
its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.atomic import HOST, sweep
from pipeline.core.files import read_json
from pipeline.encoding.store import repair_store
from pipeline.external.beir import import_beir
from pipeline.layout import (
    REPORT_SUFFIX,
    pool_dir,
    report_file,
    report_manifest,
    reports_dir,
    run_paths,
    store_dir,
)
from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import CHILD_BOUND_S, copy_corpus, refusal
from tests.encoding.test_objects import Hashed
from tests.test_data_safety import beir

ROOT = Path(__file__).resolve().parents[1]
MINE = b"a user's own bytes\n"


def make(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", f"DATA={root}", f"PY={sys.executable}",
         f"STAMP={root / 'installed'}", "THREADS=1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1"})


def plant(*paths: Path) -> dict[Path, bytes]:
    """A user's files at `paths` (folders made as needed): each path -> its bytes."""
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(MINE + path.name.encode())
    return {path: path.read_bytes() for path in paths}


def untouched(planted: dict[Path, bytes]) -> None:
    assert {p: p.read_bytes() if p.is_file() else None for p in planted} == planted


# ---- make clean-demo -------------------------------------------------------------------------

@pytest.fixture()
def demo_root(corpus_dir, raw_corpus, tmp_path) -> Path:
    """A data root holding the demo's own: its synthetic corpus (raw shards and their
    generator's manifest), a pool searched and scored, its report saved."""
    root = tmp_path / "data"
    corpus = copy_corpus(corpus_dir, root / "corpora" / "demo")
    shutil.copytree(raw_corpus, corpus / "s2orc")
    (root / "installed").touch()
    pool = build_pool(corpus, PoolSpec(size=800, queries=10))["name"]
    pipeline.search(root, "demo", pool, "random", threads=1)
    pipeline.evaluate(root, "demo", pool, "random")
    pipeline.build_report(root, "demo").save()
    return root


def test_clean_demo_removes_the_demos_files_and_nothing_alike(demo_root):
    """The case of the trial: `runs/reports/demo*` took make mdcr's benchmark report
    (demo-mdcr.md), another corpus's page (demographics.html) and a user's notes with it."""
    root = demo_root
    reports = reports_dir(root / "runs")
    listed = sorted(read_json(report_manifest(reports, "demo"))["outputs"])
    assert report_file(reports, "demo").name in listed and len(listed) > 2
    planted = plant(reports / "demo-mdcr.md", reports / "demo-mdcr.html",
                    reports / "demo-mdcr.manifest.json", reports / "demo-mdcr-dataset.tex",
                    reports / "demographics.html", reports / "demo_notes_by_me.txt",
                    root / "corpora" / "demo-mdcr" / "manifest.json",
                    root / "corpora" / "demo.txt", root / "indexes" / "demo2" / "notes.txt",
                    root / "runs" / "demo-old" / "notes.txt", root / "runs" / "demo.md")
    dry = make(root, "-n", "clean-demo")
    assert dry.returncode == 0, dry.stderr[-2000:]
    shown = sorted(line.split("'")[1] for line in dry.stdout.splitlines()
                   if line.startswith("rm -rf "))
    own = sorted([*(str(root / r / "demo") for r in ("corpora", "indexes", "runs")
                    if (root / r / "demo").exists()),
                  *(str(reports / name) for name in listed),
                  str(report_manifest(reports, "demo"))])
    assert shown == own
    done = make(root, "clean-demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not any(Path(path).exists() for path in own)
    untouched(planted)
    assert sorted(p.name for p in reports.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in planted if p.parent == reports)  # (hidden: the folder's checksum cache)


def test_clean_demo_refuses_a_corpus_the_demo_did_not_make(demo_root):
    """A corpus of the demo's name that is not the synthetic one (here its raw shards are a
    user's, no generator's manifest vouches for them) is refused whole: nothing is removed."""
    root = demo_root
    (root / "corpora" / "demo" / "s2orc" / "manifest.json").unlink()
    before = sorted(p for p in root.rglob("*") if p.is_file())
    line = refusal(make(root, "clean-demo"))
    assert "corpora/demo holds a corpus make demo did not synthesize" in line, line
    assert "removed nothing" in line
    assert sorted(p for p in root.rglob("*") if p.is_file()) == before


# ---- retire-pool, sweep, the store's orphan parts -------------------------------------------

def test_retire_pool_moves_its_own_folders_only(corpus_dir, tmp_path):
    root = tmp_path / "data"
    corpus = copy_corpus(corpus_dir, root / "corpora" / "c")
    (root / "installed").touch()
    listed = tmp_path / "list.txt"
    queries = pipeline.build_pool(root, "c", size=800, queries=10)
    first = pl.read_parquet(pool_dir(corpus, queries) / "queries.parquet")["corpusid"][0]
    listed.write_text(f"{first}\n")
    pool = pipeline.build_pool(root, "c", size=800, queries=10, exclude=str(listed))
    pipeline.search(root, "c", pool, "random", threads=1)
    pipeline.evaluate(root, "c", pool, "random")
    runs = root / "runs" / "c"
    planted = plant(corpus / "pools" / f"{pool}.notes", corpus / "pools" / f"{pool}x" / "a.txt",
                    runs / f"{pool}-mine.txt", runs / queries / "random-notes.trec",
                    root / "indexes" / "c" / f"{pool}.bak" / "x", corpus / "retired.txt")
    done = make(root, "retire-pool", "CORPUS=c", f"POOL={pool}")
    assert done.returncode == 0, done.stderr[-2000:]
    untouched(planted)
    assert (corpus / "retired" / pool / "manifest.json").exists()
    assert (runs / "retired" / pool / "random.eval.json").exists()
    assert not (corpus / "pools" / pool).exists() and (corpus / "pools" / queries).exists()


def test_sweep_removes_only_temporaries_of_stopped_processes(tmp_path):
    folder = tmp_path / "runs" / "c" / "all-800-r0"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = plant(folder / f".bm25.trec.{HOST}-{dead}.k3j9.tmp")
    planted = plant(folder / ".notes.tmp", folder / "bm25.trec.tmp", folder / "mine.tmp",
                    folder / f".bm25.trec.{HOST}-{os.getpid()}.k3j9.tmp",  # a live process's
                    folder / f".bm25.trec.{HOST}-{dead}.tmp.bak",
                    folder / f"bm25.{HOST}-{dead}.x.tmp")
    assert sweep(folder) == 1
    assert not any(p.exists() for p in stale)
    untouched(planted)


def test_a_stores_repair_removes_only_its_own_parts(corpus_dir, tmp_path):
    """Orphans are the store's own part names (`part-<16 hex>.arrow`) no manifest lists: a
    user's `part-mine.arrow` beside them is no part, and verify does not call it one."""
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    pool = next(iter(data.pools(corpus_dir.name)))
    model = pipeline.Encoder(Hashed(), name="hashed", similarity="ip", fingerprint="v1")
    pipeline.search(data, corpus_dir.name, pool, model, k=10, threads=1)
    store = store_dir(data.indexes, corpus_dir.name, "hashed")
    [part] = read_json(store / "manifest.json")["parts"]
    orphan = store / "part-00000000000000ff.arrow"
    shutil.copy(store / part["file"], orphan)
    planted = plant(store / "part-mine.arrow", store / "part-0000.arrow",
                    store / "part-00000000000000ff.arrow.bak", store / "notes.txt")
    assert not [line for line in pipeline.verify_data(data, store) if "mine" in line
                or "part-0000.arrow" in line or "notes" in line]
    assert repair_store(store) == {"damaged_parts": 0, "orphan_parts": 1}
    assert not orphan.exists() and (store / part["file"]).exists()
    untouched(planted)


# ---- the imports with REPLACE=1, a run and a report written again ---------------------------

def test_replacing_an_imported_run_touches_no_other_file(corpus_dir, tmp_path):
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    pool = next(iter(data.pools(corpus_dir.name)))
    pipeline.search(data, corpus_dir.name, pool, "random", k=10, threads=1)
    paths = run_paths(data.runs, corpus_dir.name, pool, "random")
    mine = tmp_path / "my runs"
    mine.mkdir()
    lines = paths.trec.read_text().splitlines()
    (mine / "a.trec").write_text("\n".join(lines) + "\n")
    (mine / "b.trec").write_text("\n".join(lines[:-3]) + "\n")
    pipeline.import_run(data, corpus_dir.name, pool, mine / "a.trec", "same")
    folder = paths.trec.parent
    planted = plant(folder / "same.trec.orig", folder / "same-old.trec", folder / "same.txt",
                    folder / "same2.parquet", folder / ".same.notes")
    before = paths.trec.read_bytes()
    pipeline.import_run(data, corpus_dir.name, pool, mine / "b.trec", "same", replace=True)
    untouched(planted)
    assert paths.trec.read_bytes() == before  # another model's run, beside it
    assert run_paths(data.runs, corpus_dir.name, pool, "same").trec.read_text().count("\n") \
        == len(lines) - 3


def test_replacing_a_collection_removes_its_own_folders_only(tmp_path):
    root = tmp_path / "data"
    corpus = root / "corpora" / "tiny"
    import_beir(beir(tmp_path / "one", {"a": "protein folding", "b": "soil", "c": "graphs"}),
                corpus)
    pipeline.search(root, "tiny", "beir-3-r0", "bm25", threads=1)
    planted = plant(root / "corpora" / "tiny.txt", root / "corpora" / "tiny2" / "manifest.json",
                    root / "indexes" / "tiny.bak" / "x", root / "runs" / "tiny_old.txt",
                    root / "runs" / "tiny-b" / "beir-3-r0" / "bm25.trec")
    derived = (root / "indexes" / "tiny", root / "runs" / "tiny")
    import_beir(beir(tmp_path / "two", {"a": "protein folding", "d": "soil"}), corpus,
                replace=True, derived=derived)
    untouched(planted)
    assert not any(d.exists() for d in derived)


def test_a_run_and_a_report_written_again_touch_no_file_beside_them(demo_root):
    root = demo_root
    pool = pipeline.Data(root).pools("demo")[0]
    paths = run_paths(root / "runs", "demo", pool, "random")
    reports = reports_dir(root / "runs")
    planted = plant(paths.trec.with_name("random.trec.bak"),
                    paths.trec.with_name("random-notes.parquet"),
                    paths.trec.with_name("random.manifest.json.orig"),
                    reports / f"demo-notes{REPORT_SUFFIX}", reports / "demo.md.bak")
    paths.manifest.unlink()  # the run is made again, its manifest removed first
    pipeline.search(root, "demo", pool, "random", threads=1)
    pipeline.build_report(root, "demo").save()
    untouched(planted)


def test_an_import_never_removes_a_hidden_file_of_a_users(tmp_path):
    """A corpus folder holding nothing but hidden files was taken for empty (bookkeeping) and
    removed whole by an import: a user's `.notes` with it. Only the pipeline's own locks,
    checksum cache and temporaries count as bookkeeping now; the import refuses the folder."""
    from pipeline.core.errors import InputError

    root = tmp_path / "data"
    corpus = root / "corpora" / "tiny"
    planted = plant(corpus / ".notes", corpus / ".tiny.lock.bak")
    with pytest.raises(InputError):
        import_beir(beir(tmp_path / "one", {"a": "protein folding", "b": "soil"}), corpus)
    untouched(planted)
    (corpus / ".notes").unlink()
    (corpus / ".tiny.lock.bak").unlink()
    (corpus / ".manifest.json.lock").touch()  # a lock of ours: the folder is empty
    import_beir(beir(tmp_path / "two", {"a": "protein folding", "b": "soil"}), corpus)


def test_importing_other_vectors_replaces_only_their_store(corpus_dir, tmp_path):
    import numpy as np

    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    ids = pl.read_parquet(corpus_dir / "prefiltered.parquet", columns=["corpusid"])
    sources = []
    for seed in (0, 1):
        vectors = np.random.default_rng(seed).normal(size=(ids.height, 4)).tolist()
        sources.append(tmp_path / f"v{seed}.parquet")
        ids.with_columns(vector=pl.Series(vectors)).write_parquet(sources[-1])
    pipeline.import_vectors(data, corpus_dir.name, "vec", sources[0])
    store = store_dir(data.indexes, corpus_dir.name, "vectors--vec")
    planted = plant(store.parent / "vectors--vec.bak" / "manifest.json",
                    store.parent / "vectors--vec2" / "part-00000000000000ff.arrow",
                    store.parent / "vectors--vec.txt")
    before = read_json(store / "manifest.json")["config"]["imported"]["sha256"]
    pipeline.import_vectors(data, corpus_dir.name, "vec", sources[1], replace=True)
    assert read_json(store / "manifest.json")["config"]["imported"]["sha256"] != before
    untouched(planted)


def test_a_pool_rebuilt_by_its_repair_touches_no_file_beside_it(corpus_dir, tmp_path):
    """`make pools` (verify's repair of a damaged pool) writes the pool's folder again whole:
    the folders and files of similar names beside it stay."""
    from pipeline.pools.build import rebuild_pool

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "c")
    pool = build_pool(corpus, PoolSpec(size=800, queries=10))["name"]
    folder = pool_dir(corpus, pool)
    before = (folder / "qrels.parquet").read_bytes()
    (folder / "qrels.parquet").write_bytes(before[:-8])  # damaged
    planted = plant(folder.parent / f"{pool}.notes", folder.parent / f"{pool}-mine" / "x.txt",
                    folder.parent / f".{pool}.bak", corpus / "pools.txt")
    rebuild_pool(corpus, pool)
    assert (folder / "qrels.parquet").read_bytes() == before
    untouched(planted)
