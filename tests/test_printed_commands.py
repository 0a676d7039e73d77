"""Every command the pipeline prints (verify's repairs, an error's repair) is one command whose
values are the names it was given, whatever characters those hold: a corpus, pool, model or
data folder named with shell code is quoted, never run when the line is pasted (issue 39.3).
The lines are parsed with shlex here; nothing is executed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.core.inputs import Roots
from pipeline.core.repair import Placeholder, Repair, Where
from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.ingest.synthetic import SyntheticConfig, generate
from pipeline.layout import Place, pool_dir, run_paths
from pipeline.models import ModelEntry
from pipeline.pools.build import PoolSpec, build_pool, check_pool
from pipeline.retrieval.search import search_pool
from pipeline.verify import verify
from tests.conftest import copy_corpus

CORPUS = "<a>$(touch${IFS}X)>"  # the name
POOL = "x$(touch${IFS}W)-800-r0"
MODEL = "m;`touch Y`|b&c"
DATA = "d a'$(touch Z)"  # the data folder: DATA=... in every repair
SHELL = re.compile(r"[$`;&|<>()\n\\\"]")  # what makes a shell do more than run one command


def one_command(command: str) -> list[str]:
    """The words of `command`, checked to be one command with no shell syntax outside single
    quotes (what shlex.quote writes); the note after it, in parentheses, left out."""
    command = re.sub(r" \([^'()]*\)$", "", command)
    bare = re.sub(r"'[^']*'|\"'\"", "", command)  # shlex.quote writes a ' as '"'"'
    assert not SHELL.search(bare), f"unquoted shell syntax in {command!r}"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = shlex.split(command)
    assert list(lexer) == words, f"{command!r} is more than one command"
    return words


def repair_of(line: str) -> str:
    return line.rsplit("; repair: ", 1)[1]


@pytest.fixture()
def hostile(corpus_dir, tmp_path) -> Place:
    """A data folder whose folder, corpus, pool and model names hold shell code (a shared
    DATA, or the stage functions called directly), with damage of each kind verify names."""
    root = tmp_path / DATA
    place = Place(copy_corpus(corpus_dir, root / "corpora" / CORPUS), root / "indexes",
                  root / "runs")
    built = build_pool(place.corpus_dir, PoolSpec(size=800, queries=10))["name"]
    pool_dir(place.corpus_dir, built).rename(pool_dir(place.corpus_dir, POOL))
    pool = POOL
    entry = ModelEntry(MODEL, "random")
    for model in (entry, ModelEntry("random", "random")):
        search_pool(place, pool, model)
        eval_run(place, pool, model.name)
    collect_results(root / "corpora", root / "indexes", root / "runs")
    generate(place.corpus_dir / "s2orc", SyntheticConfig(n_papers=200, n_shards=1, seed=3))
    return place


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_verify_and_errors_print_one_quoted_command_for_names_with_shell_code(hostile):
    place, root = hostile, hostile.runs_root.parent
    pool = POOL
    flip(pool_dir(place.corpus_dir, pool) / "qrels.parquet")  # a pool: make pools
    run_paths(place.runs_root, CORPUS, pool, MODEL).manifest.unlink()  # a run: make eval
    flip(root / "runs" / "results.parquet")  # the results: pipeline collect
    flip(next((place.corpus_dir / "s2orc").rglob("*.jsonl.gz")))  # raw: pipeline synth
    lines = verify(Roots(root / "corpora", root / "indexes", root / "runs"))
    commands, calls = {}, []
    for line in lines:
        command = repair_of(line)
        if command.startswith("in Python"):  # a model make has no name for: its Python calls
            calls.append(command)
            continue
        # the user's file, a placeholder (shown as is), filled in
        words = one_command(command.replace(str(Placeholder(
            "the TREC run file it was imported from")), "run.trec"))
        roots = ["--corpora-root", str(root / "corpora"), "--index-root", str(root / "indexes"),
                 "--runs-root", str(root / "runs")]
        commands[words[1] if words[0] == "make" else words[3 + len(roots)]] = words
    assert set(commands) >= {"pools", "import-run", "collect", "synth"}, "\n".join(lines)
    data = f"DATA={root}"
    assert commands["pools"] == ["make", "pools", f"CORPUS={CORPUS}", data]
    assert commands["import-run"] == ["make", "import-run", f"CORPUS={CORPUS}", f"MODEL={MODEL}",
                                      f"POOL={pool}", "RUN=run.trec", "REPLACE=1", data]
    assert commands["collect"] == ["python", "-m", "pipeline", *roots, "collect"]
    assert commands["synth"] == ["python", "-m", "pipeline", *roots, "synth", "--corpus",
                                 CORPUS, "--repair"]
    # the evaluation of the run of a ModelEntry of the user's: Python, each name a literal
    assert calls and all(f"pipeline.search(<data>, {CORPUS!r}, {pool!r}, " in call
                         and f"named {MODEL!r}>" in call for call in calls), calls
    with pytest.raises(InputError) as refused:  # a stage's refusal names the same command
        check_pool(place.corpus_dir, pool)
    assert one_command(repair_of(str(refused.value))) == ["make", "pools", f"CORPUS={CORPUS}"]


def test_only_a_placeholder_is_shown_unquoted():
    """A value shaped like a placeholder but read from data is quoted like any other."""
    shaped = Repair("import-beir", "c", variables=(("SRC", "<a>$(touch${IFS}X)>"),))
    assert one_command(shaped.command()) == ["make", "import-beir", "CORPUS=c",
                                             "SRC=<a>$(touch${IFS}X)>"]
    fill_in = Repair("import-beir", "c", variables=(("SRC", Placeholder("folder")),))
    assert fill_in.command(Where((("DATA", "/x y"),))) == (
        "make import-beir CORPUS=c SRC=<folder> DATA='/x y'")
