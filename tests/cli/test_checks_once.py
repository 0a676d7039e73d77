"""Each value is checked once, on the path it travels, at each of the four doors (issues 72,
81): a make goal, make -n, a command of `python -m pipeline` and a call of the API. Counted
at the check itself: every declared check is wrapped before the pipeline is imported
(sitecustomize), and no memo stands between a door and a check. A goal reads make's variables,
checks each (given or defaulted) and gives the checked values to its stages, which never check
them again; a command's options are checked by argparse (a default only when not given); an
API call checks each argument it runs with, given or defaulted. MODEL's check
(checks.model_name) is counted as every other: the rules run it once the goals are known."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pipeline
from pipeline.cli import registry
from pipeline.evaluation.score import check_order
from pipeline.layout import check_name
from pipeline.options.declared import VARIABLES
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.retrieval.runs import load_run
from tests.conftest import CHILD_BOUND_S, copy_corpus, pool_of

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# Every declared check counted where it runs: each access to a declaration's `check` gives a
# new counting function, so no memo keyed on the check (as `run_check` was) can answer a
# second ask without the check running, and being counted, again.
COUNTER = """
import functools
import os
import sys
from pipeline.core import annotations
from pipeline.options import declared


def logging(check, name, at):
    if check is None:
        return None

    @functools.wraps(check)
    def logged(text, **form):
        with open(os.environ["CHECKS_LOG"], "a") as log:
            log.write(f"{name}\\t{text}\\t{at}\\n")
        return check(text, **form)
    return logged


def counting(var):
    at = next((i for i, each in enumerate(declared.VARIABLES) if each is var), None)
    if at is None:  # a parameter's rule: its Check's check, counted already (counting_own)
        return var.__dict__["check"]
    return logging(var.__dict__["check"], var.name, at)


def counting_own(rule):  # a rule on a parameter (core/annotations.py's Check), logged under
    # the parameter's name: its reader's (arguments.check_of, own_options) local `name`
    # (another reader, a hash or a comparison: the check itself)
    name = sys._getframe(1).f_locals.get("name")
    check = rule.__dict__["check"]
    return check if name is None else logging(check, name, "signature")


def kept(var, value):
    var.__dict__["check"] = value


declared.Variable.check = property(counting, kept)
annotations.Check.check = property(counting_own, kept)
"""


def checks_in(root: Path, tmp_path: Path, *assignments: str) -> Counter:
    """(variable, text, its declaration's place) -> how many times its check ran in `make
    <assignments>` (a real run)."""
    site, log = tmp_path / "site", tmp_path / "checks.log"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNTER)
    log.unlink(missing_ok=True)
    (root / "installed").touch()
    environ = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MODEL", "CORPUS")}
    environ.update(PYTHONPATH=os.pathsep.join((str(site), str(ROOT))), CHECKS_LOG=str(log))
    done = subprocess.run(["make", "--no-print-directory", f"DATA={root}", f"PY={sys.executable}",
                           f"STAMP={root / 'installed'}", "CORPUS=c", *assignments], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return Counter(tuple(line.split("\t")) for line in log.read_text().splitlines())


@pytest.fixture(scope="module")
def data(corpus_dir, tmp_path_factory) -> Path:
    """A data root whose corpus c has one small pool (30 candidates, 2 queries): MiniLM embeds
    its 32 papers, not more."""
    root = tmp_path_factory.mktemp("once")
    corpus = copy_corpus(corpus_dir, root / "corpora" / "c")
    build_pool(corpus, PoolSpec(size=30, queries=2, seed=0))
    return root


def counted_run(tmp_path: Path, argv: list[str], **environ: str) -> Counter:
    """(variable, text, its declaration's place) -> how many times its check ran in `argv`,
    run from the checkout with every check counted."""
    site, log = tmp_path / "site", tmp_path / "checks.log"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNTER)
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MODEL", "CORPUS")}
    env.update(PYTHONPATH=os.pathsep.join((str(site), str(ROOT))), CHECKS_LOG=str(log),
               **environ)
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return Counter(tuple(line.split("\t")) for line in log.read_text().splitlines())


def by_value(counts: Counter) -> Counter:
    """(variable, text) -> the checks of it, whichever declaration's."""
    times: Counter = Counter()
    for (name, text, _), n in counts.items():
        times[name, text] += n
    return times


def once(counts: Counter, given: list[tuple[str, str]], defaulted: list[tuple[str, str]]):
    """Each check ran at most once; each value given and each default taken exactly once."""
    twice = {key: n for key, n in counts.items() if n > 1}
    assert not twice, twice
    times = by_value(counts)
    missing = [pair for pair in (*given, *defaulted) if times[pair] != 1]
    assert not missing, (missing, counts)


def make_defaults(given: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """make's variables not given, each with its default as make writes it: those a check
    reads (an empty optional one is no value; one without a check, RULES')."""
    names = {name for name, _ in given}
    return [(v.name, v.text()) for v in VARIABLES if v.name not in names and v.check
            and not v.with_goals and not callable(v.default) and v.text()]


@pytest.mark.parametrize("assignments", [
    ("search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"),
    ("eval", "MODEL=minilm", "SIZE=1k"),
    ("-n", "search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"),  # make -n: the commands
])
def test_make_checks_each_value_and_each_default_once(data, tmp_path, assignments):
    """A make goal and make -n: every variable, given or defaulted, checked exactly once,
    MODEL's included; no check twice, however many stages take a value."""
    counts = checks_in(data, tmp_path, *assignments)
    given = [tuple(a.split("=", 1)) for a in (*assignments, "CORPUS=c", f"DATA={data}")
             if "=" in a]
    once(counts, given, make_defaults(given))


def test_a_command_checks_each_option_once(data, tmp_path):
    """`python -m pipeline search`: each option given checked once by argparse, each default
    of the command's declared options once (argparse reads it when not given), none again by
    the stage."""
    counts = counted_run(tmp_path, [
        sys.executable, "-m", "pipeline", "--corpora-root", str(data / "corpora"),
        "--index-root", str(data / "indexes"), "--runs-root", str(data / "runs"), "search",
        "--corpus", "c", "--model", "bm25", "--k", "100", "--bm25-engine", "lucene"])
    given = [("CORPUS", "c"), ("MODEL", "bm25"), ("K", "100"), ("BM25_ENGINE", "lucene")]
    defaulted = [(v.name, v.text()) for v in registry.staged("search")
                 if v.check and v.text() and not callable(v.default) and not v.switch
                 and v.name not in {name for name, _ in given}]
    assert {name for name, _ in defaulted} >= {"SEED", "THREADS", "QUERY_VARIANT", "dtype"}
    once(counts, given, defaulted)


def test_an_api_call_checks_each_argument_once(data, tmp_path):
    """`pipeline.search(...)`: each argument the call runs with, given or defaulted, checked
    once by its declaration's check, its **options too, as typed (k=100, replace=False: no
    text made of it); none again inside the stage."""
    code = ("import sys, pipeline\n"
            "pipeline.search(sys.argv[1], 'c', None, 'bm25', k=100, bm25_engine='lucene')\n")
    counts = counted_run(tmp_path, [sys.executable, "-c", code, str(data)])
    given = [("CORPUS", "c"), ("MODEL", "bm25"), ("K", "100"), ("BM25_ENGINE", "lucene")]
    defaulted = [("SEED", "0"), ("THREADS", "2"), ("QUERY_VARIANT", "full"),
                 ("dtype", "float32"), ("REPLACE", "False")]
    once(counts, given, defaulted)


# ---- checks that are no declaration's, counted at the check itself ----------------------------
@contextlib.contextmanager
def calls_of(check: Callable) -> Iterator[list[dict]]:
    """Each call of `check` (its arguments) made in this thread while inside: counted at its
    own code, so a call through any name an import bound it to is counted too."""
    code, calls, before = check.__code__, [], sys.getprofile()

    def profile(frame, event, _):
        if event == "call" and frame.f_code is code:
            calls.append(dict(frame.f_locals))

    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(before)


def test_the_order_of_qrels_and_runs_is_checked_once():
    """`pipeline.score` and `pipeline.compare`: the arguments' order (check_order, read from
    their contents) checked once, at the API's door, not again inside."""
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d1": 2.0, "d2": 1.0}}
    other = {"q1": {"d3": 2.0, "d1": 1.0}, "q2": {"d2": 2.0}}
    for call in (lambda: pipeline.score(qrels, run, "map"),
                 lambda: pipeline.score(qrels, run, "map", per_query=True),
                 lambda: pipeline.compare(qrels, {"a": run, "b": other}, "map")):
        with calls_of(check_order) as calls:
            call()
        assert len(calls) == 1, calls


@pytest.fixture(scope="module")
def searched(corpus_dir, tmp_path_factory) -> pipeline.Data:
    """The fixture corpus with a BM25 run of one pool (pool_of(800))."""
    root = tmp_path_factory.mktemp("searched")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                         runs=root / "runs")
    pipeline.search(data, corpus_dir.name, pool_of(800), "bm25", threads=1)
    return data


def test_a_pool_name_is_checked_once(searched, corpus_dir, tmp_path):
    """A pool named to an API function that searches, scores, imports or exports it: its name
    checked once (layout.check_name, by POOL's or pool's declaration at the door), not again
    by the function or the stage behind it."""
    corpus, pool = corpus_dir.name, pool_of(800)
    run = load_run(searched.place(corpus), pool, "bm25").select("query", "doc", "score")
    for call in (lambda: pipeline.search(searched, corpus, pool, "bm25", threads=1),
                 lambda: pipeline.evaluate(searched, corpus, pool, "bm25", save=False),
                 lambda: pipeline.mteb_result(searched, corpus, pool, "bm25"),
                 lambda: pipeline.import_run(searched, corpus, pool, run, "elsewhere"),
                 lambda: pipeline.export_beir(searched, corpus, pool, tmp_path / "beir")):
        with calls_of(check_name) as calls:
            call()
        assert [c["name"] for c in calls if c["kind"] == "pool"] == [pool], calls
