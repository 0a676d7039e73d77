"""Each value is checked once (issue 72): a goal reads make's variables, checks each, and
gives the checked values to its stages; no stage parses them again, and a default every
command shares (CORPUS's, SEED's) is checked once however many stages take it. Counted by
wrapping every declared check before the pipeline is imported (sitecustomize), over real runs
of `make search` with Lucene (and its `make -n`) and of `make eval` with MiniLM: the goals and
every stage they run, the API functions they call and the checks those make. MODEL's check
(checks.model_name) is counted as every other: the rules run it once the goals are known."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import copy_corpus

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

COUNTER = """
import os
from pipeline.options import declared


def counted(var, at):
    check = var.check

    def logged(text):
        with open(os.environ["CHECKS_LOG"], "a") as log:
            log.write(f"{var.name}\\t{text}\\t{at}\\n")
        return check(text)
    return logged


for at, var in enumerate(declared.DECLARED):
    if var.check is not None:
        object.__setattr__(var, "check", counted(var, at))
"""


def checks_in(root: Path, tmp_path: Path, *assignments: str) -> Counter:
    """(variable, text, its declaration's place) -> how many times its check ran in `make
    <assignments>` (a real run): two declarations of one name (search's `model` and eval's)
    are two arguments, each checked apart."""
    site, log = tmp_path / "site", tmp_path / "checks.log"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNTER)
    log.unlink(missing_ok=True)
    (root / "installed").touch()
    environ = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MODEL", "CORPUS")}
    environ.update(PYTHONPATH=os.pathsep.join((str(site), str(ROOT))), CHECKS_LOG=str(log))
    done = subprocess.run(["make", "--no-print-directory", f"DATA={root}", f"PY={sys.executable}",
                           f"STAMP={root / 'installed'}", "CORPUS=c", *assignments], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=600)
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


@pytest.mark.parametrize("assignments", [
    ("search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"),
    ("eval", "MODEL=minilm", "SIZE=1k"),
    ("-n", "search", "MODEL=bm25", "BM25_ENGINE=lucene", "K=100"),  # make -n: the commands
])
def test_each_given_value_is_checked_once_and_no_default_twice(data, tmp_path, assignments):
    counts = checks_in(data, tmp_path, *assignments)
    given = [tuple(a.split("=", 1)) for a in (*assignments, "CORPUS=c") if "=" in a]
    times: Counter = Counter()
    for (name, text, _), n in counts.items():
        times[name, text] += n
    assert all(times[pair] == 1 for pair in given), (given, counts)  # MODEL's included
    twice = {pair: n for pair, n in counts.items() if n > 1}
    assert not twice, twice
