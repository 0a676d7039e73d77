"""`verify` names what is corrupt, partial, stale or debris, and passes a clean data root."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys

import pytest

from pipeline.core import atomic
from pipeline.core.errors import InputError
from pipeline.core.inputs import Roots
from pipeline.ingest import prefilter
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.verify import verify
from tests.conftest import built_once, copy_corpus

POOL = "all-800-r0"


@pytest.fixture(scope="module")
def clean_root(corpus_dir, tmp_path_factory):
    """A data root with the corpus, one pool and its random run made by the command line,
    built once per test run for make test's workers (a search in a subprocess, about 2 s);
    tests get copies."""
    def build(made):
        copy = copy_corpus(corpus_dir, made / "corpora" / "small")
        build_pool(copy, PoolSpec(size=800, queries=10))
        subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                        str(made / "corpora"), "--runs-root", str(made / "runs"), "search",
                        "--corpus", "small", "--model", "random"], check=True,
                       capture_output=True)

    return built_once(tmp_path_factory, "verify-root", build)


@pytest.fixture()
def root(clean_root, tmp_path):
    """A private copy of `clean_root` (its files' times kept: staleness compares them), for a
    test that damages it; nothing in it names its folder, so the copy is the same data."""
    shutil.copytree(clean_root, tmp_path, dirs_exist_ok=True)
    return tmp_path


def data(root):
    return Roots(root / "corpora", root / "indexes", root / "runs")


def run_verify(root):
    return verify(data(root))


def test_clean_root_has_no_problems(root):
    assert run_verify(root) == []
    # one corpus folder as the root: its pools' files are not taken for runs
    assert verify(data(root), [root / "corpora" / "small"]) == []


def test_corrupt_partial_stale_and_debris_are_named(root):
    pool_dir = root / "corpora" / "small" / "pools" / POOL
    qrels = pool_dir / "qrels.parquet"
    data = bytearray(qrels.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    qrels.write_bytes(bytes(data))
    (root / "runs" / "small" / POOL / "random.manifest.json").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (root / "corpora" / "small" / f".papers.parquet.{atomic.HOST}-{dead}.ab12.tmp").touch()
    problems = run_verify(root)
    kinds = {line.split()[0] + " " + line.split()[1].rsplit("/", 1)[-1] for line in problems}
    assert "CORRUPT qrels.parquet:" in kinds
    assert "PARTIAL random.parquet:" in kinds
    assert any(k.startswith("DEBRIS .papers.parquet") for k in kinds)
    prefilter(root / "corpora" / "small", "either")
    assert any(line.startswith("STALE") and POOL in line for line in run_verify(root))


def test_the_summary_counts_in_words(root, caplog):
    """Issue 88: "1 problems"; a count of one is singular, of none "no"."""
    run = root / "runs" / "small" / POOL
    with caplog.at_level(logging.INFO, logger="pipeline.verify"):
        assert verify(data(root), [run]) == []
        (run / "random.parquet").write_bytes(b"PAR1")
        assert len(verify(data(root), [run])) == 1
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[verify]")]
    assert said == ["[verify] 1 manifest checked with checksums: no problems",
                    "[verify] 1 manifest checked with checksums: 1 problem"]


@pytest.mark.slow  # two command-line runs (3 s of make test-fast)
def test_cli_exit_status(root):
    cmd = [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"), "verify",
           str(root / "corpora"), str(root / "runs")]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    (root / "corpora" / "small" / "pools" / POOL / "candidates.parquet").write_bytes(b"PAR1")
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 1 and "CORRUPT" in done.stdout and "candidates.parquet" in done.stdout


@pytest.mark.parametrize("where", ["missing", "empty", "path"])
def test_a_verify_that_finds_no_data_fails(where, tmp_path):
    """A typo in DATA, an empty or unmounted scratch disk: verify says it found nothing and
    fails (exit status 2), never "no problems"."""
    data_root = tmp_path / "typo"
    if where != "missing":
        for kind in ("corpora", "indexes", "runs"):
            (data_root / kind).mkdir(parents=True)
    cmd = [sys.executable, "-m", "pipeline", "--corpora-root", str(data_root / "corpora"),
           "--index-root", str(data_root / "indexes"), "--runs-root", str(data_root / "runs"),
           "verify", *([str(data_root / "runs")] if where == "path" else [])]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "nothing" in done.stderr and "no problems" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_corpus_whose_manifest_lost_its_stage_is_partial(root):
    from pipeline.ingest import update_corpus_manifest

    update_corpus_manifest(root / "corpora" / "small", "ingest", None)
    problems = run_verify(root)
    assert any(line.startswith("PARTIAL") and "papers.parquet" in line for line in problems)


def test_a_prefilter_older_than_its_ingest_is_stale(tmp_path):
    import gzip
    import json

    from pipeline.ingest import ingest
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    generate(tmp_path / "raw", SyntheticConfig(n_papers=300, n_shards=2))
    corpus = tmp_path / "corpora" / "c"
    ingest(tmp_path / "raw", corpus)
    prefilter(corpus)
    assert run_verify(tmp_path) == []
    with gzip.open(tmp_path / "raw" / "metadata" / "metadata_1.jsonl.gz", "ab") as handle:
        handle.write(json.dumps({"paper_id": "5", "title": "New", "year": 2001}).encode() + b"\n")
    ingest(tmp_path / "raw", corpus)
    problems = run_verify(tmp_path)
    assert any(line.startswith("STALE") and "papers.parquet changed since" in line
               for line in problems)


def test_an_exclude_list_edited_at_the_same_size_is_stale(corpus_dir, tmp_path):
    """verify and the stages apply one rule to a pool's EXCLUDE list: a list edited at the
    same size (other ids), or gone, makes verify name the pool, with the reason the stages
    refuse it for and the command that retires it."""
    from pipeline.pools.build import check_pool

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    listed = tmp_path / "list.txt"
    listed.write_text("1000001\n")
    name = build_pool(corpus, PoolSpec(size=800, queries=10, exclude=str(listed)))["name"]
    assert run_verify(tmp_path) == []
    for edit in ("1000002\n", None):
        listed.write_text(edit) if edit else listed.unlink()
        problems = run_verify(tmp_path)
        with pytest.raises(InputError) as refused:
            check_pool(corpus, name)
        why = refused.value.message.split(": ", 1)[1]
        assert problems == [f"STALE {corpus / 'pools' / name}: {why}; repair: make retire-pool "
                            f"CORPUS=small POOL={name} DATA={tmp_path} (or put the old list "
                            "back where it was)"]
        assert ("has other papers" if edit else "is gone") in why


def evaluated_and_reported(root, tmp_path):
    """The fixture's run scored, collected and reported with TRAINING_SETS (a list of the
    pool's first queries): (the reports folder, the list's path)."""
    import polars as pl

    from pipeline.evaluation.evaluate import collect_results, eval_run
    from pipeline.layout import Place, pool_dir
    from pipeline.report.build import report

    corpus = root / "corpora" / "small"
    eval_run(Place(corpus, root / "indexes", root / "runs"), POOL, "random")
    collect_results(root / "corpora", root / "indexes", root / "runs")
    queries = pl.read_parquet(pool_dir(corpus, POOL) / "queries.parquet")["corpusid"]
    listed = tmp_path / "trained.txt"
    listed.write_text("".join(f"{i}\n" for i in queries.to_list()[:3]))
    report(root / "runs", "small", 0, root / "corpora", training_sets={"random": str(listed)})
    return root / "runs" / "reports", listed


@pytest.mark.slow  # a whole report, then one by the command line (6 s of make test-fast)
def test_a_report_edited_at_the_same_size_is_named_with_the_command_that_made_it(root,
                                                                                tmp_path):
    """Issue 39, case 16: a report's numbers edited at the same size (mtime put back) passed
    verify (reports had no manifest). Each file is named CORRUPT with `make report` and the
    settings the report was made with; running that repair makes the same bytes again."""
    import os
    import re
    import shlex

    reports, listed = evaluated_and_reported(root, tmp_path)
    assert run_verify(root) == []
    made = {p.name: p.read_bytes() for p in reports.iterdir() if not p.name.startswith(".")}
    assert {"small.md", "small.html", "small-dataset.tex", "small.manifest.json"} <= set(made)
    for name in ("small.md", "small.html", "small-dataset.tex", "small-leakage.tex"):
        path = reports / name
        stat = path.stat()
        text = made[name].decode()
        number = re.search(r"\d+\.\d", text.split("\\midrule", 1)[-1].split("| bm25", 1)[0]
                           .split("provenance", 1)[0].split("<tbody>", 1)[-1])
        doctored = text[:number.start()] + ("9" if text[number.start()] != "9" else "8") + \
            text[number.start() + 1:]
        path.write_text(doctored)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_size == stat.st_size
        problems = run_verify(root)
        assert len(problems) == 1 and problems[0].startswith(f"CORRUPT {path}: "), problems
        words = shlex.split(problems[0].split("; repair: ", 1)[1])
        assert words[:3] == ["make", "report", "CORPUS=small"], words
        assert {"SEED=0", f"TRAINING_SETS=random={listed}"} <= set(words), words
        path.write_bytes(made[name])
    # the repair, as the command line runs it: the same bytes, verify clean
    (reports / "small.md").write_text("edited")
    subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
                    "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"),
                    "report", "--corpus", "small", "--seed", "0", "--training-sets",
                    f"random={listed}"], check=True, capture_output=True)
    assert run_verify(root) == []
    # the tables are the same bytes (the page and the manifest name the code's git commit)
    assert {n: (reports / n).read_bytes() for n in made if n.endswith((".md", ".tex"))} == {
        n: data for n, data in made.items() if n.endswith((".md", ".tex"))}
    # no manifest (a report made before reports had one): the page is named, not passed
    (reports / "small.manifest.json").unlink()
    problems = run_verify(root)
    assert [p.split(":", 1)[0] for p in problems] == [f"PARTIAL {reports / 'small.html'}"]
    assert "make report CORPUS=small SEED=0" in problems[0]


def test_stale_results_are_gathered_again_whatever_corpus_changed(root, tmp_path):
    """Issue 39, case 21: verify's repair of a stale runs/results.parquet named the
    alphabetically first corpus with evaluations, not the one whose evaluation changed; then
    (issue 46) make report of any corpus, which refuses one whose pools were drawn without
    different exclusion lists. It is collect, which gathers every corpus's evaluations."""
    import shutil

    from pipeline.evaluation.evaluate import collect_results, eval_run
    from pipeline.layout import Place

    shutil.copytree(root / "corpora" / "small", root / "corpora" / "other")  # sorts first
    shutil.copytree(root / "runs" / "small", root / "runs" / "other")
    for corpus in ("other", "small"):
        eval_run(Place(root / "corpora" / corpus, root / "indexes", root / "runs"), POOL,
                 "random")
    collect_results(root / "corpora", root / "indexes", root / "runs")
    assert run_verify(root) == []
    eval_run(Place(root / "corpora" / "small", root / "indexes", root / "runs"), POOL, "random",
             metrics=["precision@7"])  # a metric added to its rows: results.parquet is stale
    problems = [p for p in run_verify(root) if p.startswith("STALE")]
    assert len(problems) == 1 and "results.manifest.json" in problems[0], problems
    repair = problems[0].split("; repair: ", 1)[1]
    assert repair.startswith("python -m pipeline --corpora-root ") and repair.endswith(" collect")
    collect_results(root / "corpora", root / "indexes", root / "runs")  # what it runs
    assert run_verify(root) == []


def test_a_demo_whose_generator_record_is_damaged_is_remade_with_its_settings_named(tmp_path):
    """The demo's raw shards are made again by `make corpus` with the settings the generator
    recorded; when that record is damaged they are lost with it, so the repair asks for them
    (as `make corpus` then does) instead of naming a command that would refuse."""
    from pipeline.core.files import write_json
    from pipeline.corpus.manifest import raw_repair

    raw = tmp_path / "corpora" / "demo" / "s2orc"
    raw.mkdir(parents=True)
    write_json({"manifest_version": 1, "stage": "synth"}, raw / "manifest.json")
    assert raw_repair(raw).command() == "make corpus CORPUS=demo"
    (raw / "manifest.json").write_bytes(b"{\"manifest_version\": 1, \"stage\": \"synt\xdf\"}")
    assert raw_repair(raw).command() == ("make corpus CORPUS=demo DEMO_PAPERS=<papers it was "
                                         "made with> DEMO_SEED=<its seed>")


def test_a_damaged_imported_run_is_repaired_by_importing_its_source_again(root, tmp_path):
    """An imported run (make import-run) is never searched: its damaged copy names `make
    import-run` with the recorded source (shell-quoted: a `~` in it), not make eval; running
    that repair makes verify clean. Its damaged evaluation names `make eval MODEL=<the run>`,
    which scores it."""
    import shlex

    import polars as pl

    import pipeline
    from pipeline.layout import run_paths
    from pipeline.retrieval.runs import load_run

    data = pipeline.Data(root)
    random = load_run(data.place("small"), POOL, "random")
    source = tmp_path / "from~elsewhere" / "outside.trec"
    source.parent.mkdir()
    source.write_text("".join(f"{q} Q0 {d} {r} {s} x\n" for q, d, r, s in
                              random.select("query", "doc", "rank", "score").iter_rows()))
    pipeline.import_run(data, "small", POOL, source, "outside")
    pipeline.evaluate(data, "small", POOL, "outside")
    assert run_verify(root) == []
    paths = run_paths(root / "runs", "small", POOL, "outside")
    made = paths.trec.read_bytes()
    paths.trec.write_bytes(made.replace(b" Q0 ", b" Q1 ", 1))  # same size, other bytes
    problems = run_verify(root)
    assert len(problems) == 1 and problems[0].startswith(f"CORRUPT {paths.trec}"), problems
    words = shlex.split(problems[0].split("; repair: ", 1)[1])
    assert words[:2] == ["make", "import-run"], words
    assert {"CORPUS=small", "MODEL=outside", f"POOL={POOL}", f"RUN={source}"} <= set(words)
    assert f"RUN={shlex.quote(str(source))}" in problems[0]
    subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
                    "--runs-root", str(root / "runs"), "import-run", "--corpus", "small",
                    "--pool", POOL, "--run", str(source), "--model", "outside"], check=True,
                   capture_output=True)
    assert paths.trec.read_bytes() == made and run_verify(root) == []
    paths.evaluation.write_text("{")  # the evaluation damaged: scored again by make eval
    problems = run_verify(root)
    assert len(problems) == 1 and "repair: make eval CORPUS=small MODEL=outside " in problems[
        0], problems
    assert pl.read_parquet(paths.parquet).height == random.height


def dead_pid() -> str:
    """The id of a process that has ended (a killed stage's, in a temporary's name)."""
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_killed_imports_folders_are_debris_with_the_sweep_only(root):
    """A corpus being imported (make import-beir, import-mdcr: a temporary beside the
    corpora) and a store being imported (make import-vectors), killed half-way: each is one
    DEBRIS line whose repair is the sweep, never a per-artifact repair naming the temporary
    as a corpus or a model (`make pools CORPUS=.c.host-1.x.tmp`, which make refuses); the
    sweep it prints leaves verify clean."""
    import shlex
    import shutil

    pid = dead_pid()
    pool = root / "corpora" / "small" / "pools" / POOL
    corpus = root / "corpora" / f".imported.{atomic.HOST}-{pid}.ab12.tmp"
    (corpus / "pools" / POOL).mkdir(parents=True)
    shutil.copy(root / "corpora" / "small" / "prefiltered.parquet", corpus)
    shutil.copy(pool / "queries.parquet", corpus / "pools" / POOL)  # no manifest yet
    (corpus / "pools" / POOL / f".manifest.json.{atomic.HOST}-{pid}.cd34.tmp").touch()
    store = (root / "indexes" / "small" / "embeddings" /
             f".vectors--mine.{atomic.HOST}-{pid}.ef56.tmp")
    store.mkdir(parents=True)
    (store / f"part-{'0' * 16}.arrow").write_bytes(b"vectors")
    problems = run_verify(root)
    assert sorted(line.split(":")[0] for line in problems) == [
        f"DEBRIS {corpus}", f"DEBRIS {store}"], problems
    for line in problems:
        words = shlex.split(line.split("; repair: ", 1)[1])
        assert words == ["make", "sweep", f"DATA={root}"], line
    subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
                    "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"),
                    "sweep"], check=True, capture_output=True)
    assert run_verify(root) == [] and not corpus.exists() and not store.exists()


def test_an_imported_runs_changed_source_is_stale_and_a_gone_one_is_said(root, tmp_path,
                                                                         caplog):
    """make import-run, then the source file edited: verify names the imported run STALE
    (the source's sha256 differs from its manifest's) with the import again over it, RUN
    shell-quoted; that repair leaves verify clean. The source deleted: no problem (the import
    is a copy, intact), said in the log."""
    import logging
    import shlex

    import pipeline
    from pipeline.layout import run_paths
    from pipeline.retrieval.runs import load_run

    data = pipeline.Data(root)
    random = load_run(data.place("small"), POOL, "random")
    source = tmp_path / "my runs" / "run.trec"
    source.parent.mkdir()
    lines = [f"{q} Q0 {d} {r} {s} x\n" for q, d, r, s in
             random.select("query", "doc", "rank", "score").iter_rows()]
    source.write_text("".join(lines))
    pipeline.import_run(data, "small", POOL, source, "outside")
    assert run_verify(root) == []
    source.write_text("".join(lines[:-1]))  # edited: its last line gone
    problems = run_verify(root)
    paths = run_paths(root / "runs", "small", POOL, "outside")
    assert len(problems) == 1 and problems[0].startswith(
        f"STALE {paths.manifest}: its source file changed since it was imported"), problems
    words = shlex.split(problems[0].split("; repair: ", 1)[1])
    assert words[:2] == ["make", "import-run"], words
    assert {"CORPUS=small", "MODEL=outside", f"POOL={POOL}", f"RUN={source}",
            "REPLACE=1"} <= set(words)
    assert f"RUN={shlex.quote(str(source))}" in problems[0]
    subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
                    "--runs-root", str(root / "runs"), "import-run", "--corpus", "small",
                    "--pool", POOL, "--run", str(source), "--model", "outside", "--replace"],
                   check=True, capture_output=True)
    assert run_verify(root) == []
    source.unlink()
    with caplog.at_level(logging.INFO, logger="pipeline.verify"):
        assert run_verify(root) == []
    assert f"{paths.manifest}: the file it was imported from, {source}, is gone" in caplog.text


def test_imported_vectors_whose_source_changed_are_stale(root, tmp_path):
    """The same for make import-vectors: the source parquet rewritten with other vectors, the
    store is STALE with the import again over it (REPLACE=1), which leaves verify clean."""
    import shlex

    import numpy as np
    import polars as pl

    import pipeline

    data = pipeline.Data(root)
    ids = pl.read_parquet(root / "corpora" / "small" / "prefiltered.parquet")["corpusid"][:20]
    src = tmp_path / "my vectors.parquet"
    pl.DataFrame({"corpusid": ids, "vector": np.eye(20, 8).tolist()}).write_parquet(src)
    pipeline.import_vectors(data, "small", "mine", src)
    assert run_verify(root) == []
    pl.DataFrame({"corpusid": ids, "vector": np.eye(20, 8)[::-1].tolist()}).write_parquet(src)
    problems = run_verify(root)
    store = root / "indexes" / "small" / "embeddings" / "vectors--mine"
    assert len(problems) == 1 and problems[0].startswith(
        f"STALE {store / 'manifest.json'}: its source file changed"), problems
    words = shlex.split(problems[0].split("; repair: ", 1)[1])
    assert words[:2] == ["make", "import-vectors"] and {
        "CORPUS=small", "MODEL=mine", f"SRC={src}", "REPLACE=1"} <= set(words), words
    pipeline.import_vectors(data, "small", "mine", src, replace=True)
    assert run_verify(root) == []
