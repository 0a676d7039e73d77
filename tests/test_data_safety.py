"""No command destroys, mixes or silently uses damaged or stale data (the cases of the data
safety review): corpora are never overwritten by an import, a run made from a changed input
is stale and redone, verify of any folder finds what the full verify finds there and lists
every problem, each with a command that makes it clean, orphan embedding parts are found and
swept, and a folder that cannot be written is refused before any work."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from pipeline import cli
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import Roots
from pipeline.encoding.embed import embed
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.external.beir import import_beir
from pipeline.layout import Place, store_dir
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.runs import run_problem
from pipeline.retrieval.search import search_pool
from pipeline.verify import find_problems, verify
from tests.conftest import CHILD_BOUND_S, built_once, copy_corpus

ROOT = Path(__file__).resolve().parents[1]
POOL = "all-800-r0"


def roots(root: Path) -> Roots:
    return Roots(root / "corpora", root / "indexes", root / "runs")


def beir(src: Path, docs: dict[str, str], qrels: str = "q1\ta\t1\n") -> Path:
    """A BEIR-layout collection of `docs` and one query."""
    (src / "qrels").mkdir(parents=True, exist_ok=True)
    (src / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": v, "text": v})
                                              + "\n" for k, v in docs.items()))
    (src / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "protein"}) + "\n")
    for split in ("test", "dev"):
        (src / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return src


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith((".lock", ".checksums.json"))}


# ---- case 1: a corpus is never written over by an import or a benchmark -------------------

def test_imports_never_write_over_an_ingested_corpus(corpus_dir, tmp_path):
    root = tmp_path / "data"
    ingested = copy_corpus(corpus_dir, root / "corpora" / "demo")
    (ingested / "s2orc" / "metadata").mkdir(parents=True)
    (ingested / "s2orc" / "metadata" / "metadata_0.jsonl.gz").write_bytes(b"raw")
    before = snapshot(ingested)
    src = beir(tmp_path / "collection", {"a": "protein folding", "b": "soil"})
    for replace in (False, True):  # REPLACE=1 does not make an ingested corpus replaceable
        with pytest.raises(InputError, match="holds an ingested corpus"):
            import_beir(src, ingested, replace=replace)
    from pipeline.mdcr.official import import_benchmark

    with pytest.raises(InputError, match="holds an ingested corpus"):
        import_benchmark(tmp_path / "nowhere", ingested, replace=True)
    assert snapshot(ingested) == before
    assert not [p for p in (root / "corpora").iterdir() if p.name.startswith(".")]


def test_a_collection_is_replaced_only_when_asked(tmp_path):
    """Case 3: a re-import with other documents kept the old pool beside the new one as
    current. Now: refused; with REPLACE the old corpus, its indexes and runs are gone."""
    root = tmp_path / "data"
    corpus = root / "corpora" / "tiny"
    first = beir(tmp_path / "one", {"a": "protein folding", "b": "soil", "c": "graphs"})
    assert import_beir(first, corpus)["collection"]["installed"] == "new"
    place = Place(corpus, root / "indexes", root / "runs")
    search_pool(place, "beir-3-r0", get_model("bm25"), threads=1)
    # the same files again: nothing changes; the dev split of the same documents is added
    before = snapshot(corpus)
    assert import_beir(first, corpus)["collection"]["installed"] == "unchanged"
    assert snapshot(corpus) == before
    assert import_beir(first, corpus, "dev")["collection"]["installed"] == "added"
    assert sorted(p.name for p in (corpus / "pools").iterdir()
                    if not p.name.startswith(".")) == ["beir-3-r0", "beir-3-r0-val"]
    assert read_json(corpus / "manifest.json")["collection"]["pools"] == [
        "beir-3-r0", "beir-3-r0-val"]
    # other documents: refused, nothing written; with replace, the old corpus goes whole
    other = beir(tmp_path / "two", {"a": "protein folding", "d": "soil"})
    with pytest.raises(InputError, match="other papers: add REPLACE=1"):
        import_beir(other, corpus)
    assert snapshot(corpus)["prefiltered.parquet"] == before["prefiltered.parquet"]
    derived = (root / "indexes" / "tiny", root / "runs" / "tiny")
    assert derived[1].exists()
    assert import_beir(other, corpus, replace=True, derived=derived)["collection"][
        "installed"] == "replaced"
    assert sorted(p.name for p in (corpus / "pools").iterdir()
                    if not p.name.startswith(".")) == ["beir-2-r0"]
    assert not any(d.exists() for d in derived)
    assert verify(roots(root)) == []


def test_make_mdcr_refuses_an_ingested_corpus_as_its_output(mdcr_source, tmp_path):
    corpus, root = mdcr_source
    from pipeline.mdcr.build import build_mdcr

    target = copy_corpus(corpus, tmp_path / "corpora" / "other")
    before = snapshot(target)
    with pytest.raises(InputError, match="holds an ingested corpus"):
        build_mdcr(Place(corpus, root / "indexes", root / "runs"), target, ["bm25"], replace=True)
    assert snapshot(target) == before


# ---- case 2: a run records what it read, and goes stale when that changes -----------------

DENSE_MODEL: Path  # the tiny BERT the `dense` data root was embedded with (its store's path)


def build_dense(place: Path, corpus_dir: Path, tiny_bert: Path) -> None:
    """Fill `place` with the data root `data` that `dense` describes and the tiny BERT it
    embeds with (`tiny-bert`, copied: the store records its path)."""
    root, model = place / "data", Path(shutil.copytree(tiny_bert, place / "tiny-bert"))
    corpus = copy_corpus(corpus_dir, root / "corpora" / "c")
    build_pool(corpus, PoolSpec(size=800, queries=10))
    place_ = Place(corpus, root / "indexes", root / "runs")
    embed(place_, get_model("scibert"), model_path=str(model))
    search_pool(place_, POOL, get_model("scibert"))
    eval_run(place_, POOL, "scibert")


@pytest.fixture()
def dense(request, tmp_path_factory, tmp_path):
    """A private corpus with one pool, its papers embedded by the tiny BERT (as scibert),
    searched and evaluated: a copy of a data root built once per test run, shared by make
    test's workers (conftest's built_once; each of the five tests built its own before)."""
    global DENSE_MODEL
    place = built_once(tmp_path_factory, "safety-dense", lambda place: build_dense(
        place, request.getfixturevalue("corpus_dir"), request.getfixturevalue("tiny_bert")))
    DENSE_MODEL = place / "tiny-bert"
    root = Path(shutil.copytree(place / "data", tmp_path / "data", symlinks=True))
    return root / "corpora" / "c", root, get_model("scibert")


def test_a_run_made_from_changed_embeddings_is_stale(dense):
    corpus, root, entry = dense
    store = store_dir(root / "indexes", "c", "scibert")
    place = Place(corpus, root / "indexes", root / "runs")
    assert run_problem(place, POOL, "scibert") is None
    # the store's part written again with other vectors, its manifest updated to match (what
    # embedding the papers again with other settings would do): nothing is damaged, but the
    # run and its evaluation were made from the old vectors
    info = read_json(store / "manifest.json")
    part = info["parts"][0]
    table = ipc.open_file(pa.BufferReader((store / part["file"]).read_bytes())).read_all()
    flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.flip(flat).copy()),
                                                table.column("vector").type.list_size)
    with ipc.new_file(str(store / part["file"]), table.schema) as writer:
        writer.write_table(table.set_column(table.schema.get_field_index("vector"), "vector",
                                            vectors))
    from pipeline.core.checksums import fingerprint

    info["parts"][0] |= fingerprint(store / part["file"])
    write_json(info, store / "manifest.json")
    why = run_problem(place, POOL, "scibert")
    assert why and part["file"] in why and "changed since" in why
    problems = verify(roots(root))
    assert {p.split()[0] for p in problems} == {"STALE"}
    assert all("repair: make eval CORPUS=c MODEL=scibert" in p for p in problems)
    left_out = collect_results(root / "corpora", root / "indexes", root / "runs")
    assert left_out.is_empty()  # the stale evaluation is left out, not reported
    search_pool(place, POOL, entry)
    eval_run(place, POOL, "scibert")
    assert verify(roots(root)) == []


# ---- cases 4, 8, 9: verify anywhere, every problem, each with a command that repairs it ----

def test_verify_of_a_folder_finds_what_the_full_verify_finds_there(dense):
    corpus, root, _ = dense
    shutil.move(corpus / "pools" / POOL / "manifest.json", root / "moved.json")
    full = verify(roots(root))
    assert any(line.startswith(f"PARTIAL {corpus / 'pools' / POOL}") for line in full)
    for folder in (corpus, corpus / "pools", corpus / "pools" / POOL, root / "runs",
                   root / "runs" / "c" / POOL, root / "indexes"):
        part = verify(roots(root), [folder])
        assert part == [line for line in full
                        if line.split()[1].rstrip(":").startswith(str(folder))], folder
    assert verify(roots(root), [corpus])  # the case the review found: it said "no problems"


def test_verify_lists_every_problem_past_corrupt_manifests(dense):
    corpus, root, _ = dense
    for path in (corpus / "pools" / POOL / "manifest.json",
                 root / "runs" / "c" / POOL / "scibert.manifest.json",
                 store_dir(root / "indexes", "c", "scibert") / "manifest.json"):
        path.write_text(path.read_text()[:-40] + "}")  # not JSON any more
    problems = verify(roots(root))
    corrupt = [p for p in problems if p.startswith("CORRUPT")]
    assert len(corrupt) == 3, problems
    assert all("; repair: " in p for p in problems)


ORDER = ("make corpus", "make pools", "make embed", "make index", "make eval", "make sweep")


def test_each_repair_command_makes_verify_clean(dense, raw_corpus):
    """A deleted corpus manifest, a pool whose manifest is gone, a run without its manifest,
    an orphan embedding part: verify names a command for each; running them (as printed,
    through make) leaves verify clean, with every data file as it was."""
    corpus, root, _ = dense
    (root / "installed").touch()
    shutil.copytree(raw_corpus, corpus / "s2orc")
    before = {k: v for k, v in snapshot(root).items() if "/bm25/" not in k
              and not k.endswith(("manifest.json", ".eval.json", ".jsonl", ".spec.json"))}
    store = store_dir(root / "indexes", "c", "scibert")
    orphan = store / "part-0000000000000000.arrow"
    shutil.copy(store / read_json(store / "manifest.json")["parts"][0]["file"], orphan)
    (corpus / "manifest.json").unlink()
    (corpus / "pools" / POOL / "manifest.json").unlink()
    (root / "runs" / "c" / POOL / "scibert.manifest.json").unlink()
    problems = verify(roots(root))
    assert {p.split()[0] for p in problems} == {"PARTIAL", "ORPHAN"}, problems
    commands = {p.rsplit("; repair: ", 1)[1].split(" (")[0] for p in problems}
    assert commands == {f"make corpus CORPUS=c DATA={root}", f"make pools CORPUS=c DATA={root}",
                        f"make embed CORPUS=c MODEL=scibert DATA={root}",
                        f"make eval CORPUS=c MODEL=scibert DATA={root}"}, commands
    env = {**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1"}
    for command in sorted(commands, key=lambda c: ORDER.index(" ".join(c.split()[:2]))):
        done = subprocess.run(["make", "--no-print-directory", f"PY={sys.executable}",
                               f"STAMP={root / 'installed'}", "THREADS=1",
                               *shlex.split(command)[1:], f"MODEL_PATH={DENSE_MODEL}"],
                              cwd=ROOT, capture_output=True, text=True, env=env,
                              timeout=CHILD_BOUND_S)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert not orphan.exists()
    assert verify(roots(root)) == []
    after = snapshot(root)
    assert {k: after.get(k) for k in before} == before


# ---- case 10: a folder that cannot be written is refused before any work -------------------

def test_a_read_only_runs_folder_is_one_line(dense, monkeypatch, capsys):
    corpus, root, _ = dense
    runs = root / "runs"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == runs else real(
        p, mode))
    before = snapshot(root)
    code = cli.main(["--corpora-root", str(root / "corpora"), "--index-root",
                     str(root / "indexes"), "--runs-root", str(runs), "report", "--corpus",
                     "c"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"cannot write in {runs}/" in err[0], err
    assert snapshot(root) == before


def test_find_problems_reports_checked_manifests(dense):
    corpus, root, _ = dense
    problems, checked = find_problems(roots(root))
    assert problems == [] and checked >= 5
