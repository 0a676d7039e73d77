"""Every process, thread and shard count is bounded (issue 46: `make corpus THREADS=200` forked
200 workers on 2 cores; `build_corpus(synthetic=2000, threads=10**5)` started 4,375 processes;
`shards=10**6` and paths over 4,096 bytes gave tracebacks): the command line's options and the
Python API's arguments refuse a value above the bound with one line, as make's variables do
(tests/cli/test_variables.py), all from the one declaration (pipeline/cli/variables.py)."""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.docs import annotation, check_words, public_arguments
from pipeline.cli.main import build_parser
from pipeline.cli.variables import read
from pipeline.core.errors import InputError
from pipeline.options.arguments import check_value
from pipeline.options.checks import (
    PER_CORE,
    cores,
    corpus_name,
    given_path,
    maximum,
    worker_count,
    xdist_workers,
)
from pipeline.options.declared import VARIABLES, Variable
from pipeline.roots import data_roots
from tests.conftest import CHILD_BOUND_S, refusal
from tests.rules import api_rules, rule

ROOT = Path(__file__).resolve().parents[2]
# the options and API arguments that set how many processes, threads, shards or array tasks run
COUNT_OPTIONS = {"--threads", "--shards", "--cpus-per-task", "--parallel"}
COUNT_ARGUMENTS = {"threads", "shards"}
HUGE = str(10**6)
TOO_MANY = PER_CORE * cores() + 1
LONG_PATH = "/tmp/" + "p/" * 1600  # 3,204 bytes made absolute, each folder name short


def every_option() -> list[tuple[str, str, argparse.Action]]:
    """(command, option or argument name, action) of every option of every command, and of
    the global options (command '')."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(name, option, action)
            for name, sub in [("", parser), *commands.choices.items()]
            for action in sub._actions for option in action.option_strings or [action.dest]]


def check(action: argparse.Action):
    """The option's check: its type (pipeline/cli/registry.py arg)."""
    return action.type


def count_options() -> list[tuple[str, str, argparse.Action]]:
    """(command, option, action) for every count option of every command."""
    return [found for found in every_option() if found[1] in COUNT_OPTIONS]


def test_every_path_option_of_every_command_refuses_a_path_too_long_or_empty():
    """A path option is one the pipeline reads or writes under: each one's type measures it
    (safe_path, given_path); --out of make mdcr is a corpus name, checked as one."""
    paths = {"--raw", "--model-path", "--src", "--out", "--run", "--exclude", "--benchmark",
             "--scores", "--paper-ids", "--corpora-root", "--index-root", "--runs-root",
             "--training-sets", "path"}
    found = [(name, option, action) for name, option, action in every_option()
             if option in paths]
    assert {option for _, option, _ in found} == paths
    for _, option, action in found:
        text = f"m={LONG_PATH}" if option == "--training-sets" else LONG_PATH
        said = "a corpus name" if check(action) is corpus_name else "a path of 3,204 bytes"
        with pytest.raises(argparse.ArgumentTypeError, match=said):
            check(action)(text)
        if option != "--training-sets":  # empty: no leakage table
            with pytest.raises(argparse.ArgumentTypeError):  # never read as the folder '.'
                check(action)("")


def test_every_count_option_of_every_command_is_bounded():
    found = count_options()
    commands = {name for name, _, _ in found}
    assert {"synth", "ingest", "corpus", "index", "search", "embed", "submit-embed",
            "download"} <= commands, commands
    for name, option, action in found:
        with pytest.raises(argparse.ArgumentTypeError, match="use at most"):
            check(action)(HUGE)
        assert check(action)("1") == 1, (name, option)


def test_a_count_above_its_bound_on_the_command_line_is_one_line(tmp_path):
    too_many = TOO_MANY
    done = subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(tmp_path / "corpora"), "synth", "--corpus", "c", "--papers",
                           "2k", "--threads", str(too_many)], cwd=ROOT, capture_output=True,
                          text=True, timeout=CHILD_BOUND_S, env={**os.environ,
                          "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert f"{too_many} worker processes or threads on {cores()} CPU cores" in line
    assert not (tmp_path / "corpora").exists()


def test_every_count_argument_of_the_api_is_bounded():
    for name in COUNT_ARGUMENTS:
        check = rule("build_corpus", name).check
        with pytest.raises((argparse.ArgumentTypeError, InputError), match="use at most"):
            check(HUGE)


@pytest.mark.parametrize("call, message", [
    # one above the bound, not 10**5: code without the bound would start them
    (lambda d: pipeline.build_corpus(d, "c", synthetic=2000, threads=TOO_MANY),
     f"threads={TOO_MANY}: {TOO_MANY} worker processes or threads on {cores()} CPU cores: use "
     f"at most {PER_CORE * cores()} \\({PER_CORE} per core\\)$"),
    (lambda d: pipeline.build_corpus(d, "c", synthetic=2000, shards=10**6),
     "shards=1000000: 1000000 is too large: use at most 256"),
    (lambda d: pipeline.search(d, "c", "all-1k-r0", "bm25", threads=10**5),
     "threads=100000: .* use at most"),
    (lambda d: pipeline.Data(LONG_PATH), "Data: folder: a path of 3,204 bytes"),
    (lambda d: pipeline.build_corpus(d, "c", raw=LONG_PATH), "raw: a path of 3,204 bytes"),
    (lambda d: pipeline.import_run(d, "c", "all-1k-r0", LONG_PATH, "mine"),
     "run: a path of 3,204 bytes"),
    (lambda d: pipeline.verify_data(d, LONG_PATH), "folders: a path of 3,204 bytes"),
])
def test_an_api_count_or_path_out_of_bounds_is_one_error_and_starts_nothing(call, message,
                                                                             tmp_path):
    with pytest.raises(InputError, match=message) as raised:
        call(tmp_path)
    assert "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # nothing written, no process started


# ---- issue 78: every count has a declared maximum, every number a finite range, from every door
# The declared whole numbers that count nothing the pipeline makes, holds or starts: seeds,
# years and thresholds (int_at_least's MAX_INT keeps them an int32, no maximum is said)
NOT_COUNTS = {"SEED", "SAMPLE_SEED", "DEMO_SEED", "max_year", "query_year", "min_citations",
              "min_positives"}
# the command line's own whole-number options (no declaration's) that count nothing: a seed
NOT_COUNT_OPTIONS = {"--synth-seed"}


# make's variables and the rules the API's functions declare on their parameters
EVERY_RULE = [*VARIABLES, *api_rules()]


def takes_a_number(var: Variable) -> bool:
    """Whether `var`'s values are numbers: its check reads a whole number (`int`: int_at_least,
    per_core) or a range (checks.maximum), or the API takes it as an int or a float."""
    return getattr(var.check, "__name__", "") == "int" or maximum(var.check) is not None or (
        var.type in (int, float))


def bounded() -> list[Variable]:
    """Every declaration with a maximum (checks.maximum)."""
    return [var for var in EVERY_RULE if maximum(var.check) is not None]


def test_every_count_and_number_has_a_maximum_said_in_the_docs():
    """Every declared number is a count with a maximum (or a seed, a year, a threshold:
    NOT_COUNTS), and so is every whole-number option of every command; the maximum is in the
    generated tables (docs/variables.md, docs/api.md)."""
    unbounded = {var.name for var in EVERY_RULE if takes_a_number(var)
                 and maximum(var.check) is None}
    assert unbounded == NOT_COUNTS
    counted = {var.name for var in bounded()}
    assert {"REPEATS", "SHARDS", "SHARD", "QUERIES", "DEMO_REPEATS", "DEMO_FIELD_QUERIES",
            "PAPER_REPEATS", "PAPER_QUERIES", "PAPER_FIELD_QUERIES", "K", "SAMPLE",
            "JUDGE_DEPTH", "JUDGE_CONCURRENCY", "THREADS", "TEST_WORKERS", "PARALLEL", "FIRST",
            "GPUS_PER_TASK", "EMBEDDINGS_BATCH", "EMBEDDINGS_CONCURRENCY", "retries",
            "backoff", "repeat", "batch_size", "part_size", "positives", "per_type", "top",
            "depth", "shards", "cpus_per_task", "alpha", "power", "DEMO_PAPERS", "papers",
            "synthetic"} <= counted, counted
    declared = {var.option for var in EVERY_RULE}
    options = {option for _, option, action in every_option()
               if getattr(action.type, "__name__", "") == "int"
               and maximum(action.type) is None and option not in declared}
    assert options == NOT_COUNT_OPTIONS
    variables = (ROOT / "docs" / "variables.md").read_text()
    api = (ROOT / "docs" / "api.md").read_text()
    for var in bounded():
        most = maximum(var.check)
        said = f"{most:,}" if isinstance(most, int) else f"{most:g}"
        if var.variable and var.check is not worker_count and var.check is not xdist_workers:
            # its check's words, which say its maximum: a count's "1 to N", a real-valued
            # setting's "from 0.5 to 10" or, its ends left out, "between 0 and 1" (whatever
            # its bounds: whole or not)
            words = check_words(var.check)
            assert re.fullmatch(rf"(from )?\S+ to {said}|between \S+ and {said}", words), words
            assert re.search(rf"\| `{var.name}` \|.*; {re.escape(words)} \|", variables), \
                var.name
        elif var.variable:  # per core: the machine's count
            assert re.search(rf"\| `{var.name}` \|.*; 1 to {PER_CORE} per CPU core", variables)
        else:
            assert re.search(rf"\| [^|]*`{var.name}`[^|]* \| [^|]*(to|and) {said}\b", api), \
                var.name


def beyond(var: Variable) -> list[str]:
    """What `var` refuses, as text: one above its maximum, nan, inf and -1."""
    most = maximum(var.check)
    return [str(most + 1), "nan", "inf", "-1"]


def typed(text: str) -> int | float:
    """A refused value as the API is given it: an int, else a float."""
    return int(text) if text.lstrip("-").isdigit() else float(text)


@functools.cache
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("var", bounded(), ids=lambda var: var.name)
def test_above_the_maximum_nan_inf_and_minus_one_are_refused_from_every_door(var, capsys):
    """make's variable (the goal's reading of it), each command's option and each API
    function's keyword that takes it: one line each, exit status 2 on the command line."""
    doors = 0
    for text in beyond(var):
        if var.variable:  # make: the value as the goal process reads it from make
            with pytest.raises(InputError) as refused:
                read({var.name: text})
            line = str(refused.value)
            assert line.startswith((f"{var.name}: ", f"{var.name}=")) and "\n" not in line, line
            assert not line.startswith(f"{var.name}: {var.name}="), line  # named once
            doors += 1
        for stage in var.stages:
            with pytest.raises(SystemExit) as stopped:
                parser().parse_args([stage, f"{var.option}={text}"])
            assert stopped.value.code == 2
            [line] = capsys.readouterr().err.splitlines()
            assert line.startswith("error: ") and f" {stage}: {var.option}: " in line, line
            doors += 1
        for function, names in public_arguments().items():
            for name in (n for n in names if rule(function, n) is var):
                with pytest.raises(InputError) as refused:
                    check_value(function, name, typed(text), annotation(function, name))
                line = str(refused.value)
                assert line.startswith(f"{function}: {name}=") and "\n" not in line, line
                doors += 1
    assert doors >= len(beyond(var))


@pytest.mark.parametrize("var", bounded(), ids=lambda var: var.name)
def test_the_maximum_itself_is_taken(var):
    """The bound refuses only what is beyond it (a probability's: strictly below 1)."""
    most = maximum(var.check)
    if getattr(var.check, "open_ends", False):
        with pytest.raises(InputError):
            var.check(str(most))
        most = most / 2
    assert float(var.check(str(most))) == most  # a size's check: its text


@pytest.mark.parametrize("assignment, said", [
    ("REPEATS=1000000000", "error: REPEATS: 1000000000 is too large: use at most 100 (pool "
                           "draws per size; the paper draws 3)"),
    ("REPEATS=100000", "error: REPEATS: 100000 is too large: use at most 100"),
    ("K=nan", "error: K: 'nan' is not a whole number"),
])
def test_make_refuses_a_count_beyond_its_maximum_in_one_line(assignment, said, tmp_path):
    """`make pool SIZE=1k REPEATS=1000000000` ended in a MemoryError traceback (the grid's
    list of repeats), REPEATS=100000 wrote pool after pool until killed."""
    from tests.cli.test_variables import make, with_pool

    root = with_pool(tmp_path / "data")
    done = make(root, "pool", "SIZE=1k", assignment)
    assert refusal(done).startswith(said) and "Traceback" not in done.stderr
    assert sorted(p.name for p in (root / "corpora" / "c" / "pools").iterdir()) == ["all-1k-r0"]


@pytest.mark.parametrize("call, message", [
    (lambda d: pipeline.build_pools(d, "c", size="1k", repeats=10**9),
     "^build_pools: repeats=1000000000: 1000000000 is too large: use at most 100 "),
    (lambda d: pipeline.download(d, "c", backoff=-1.0),
     r"^download: backoff=-1.0: give a first pause \(seconds, doubling at each try\) from 0 "
     "to 120$"),
    (lambda d: pipeline.download(d, "c", backoff=math.nan), "^download: backoff=nan: give "),
    (lambda d: pipeline.download(d, "c", retries=10**6), "^download: retries=1000000: "),
])
def test_the_api_refuses_a_count_or_number_out_of_range_and_writes_nothing(call, message,
                                                                           tmp_path):
    with pytest.raises(InputError, match=message) as raised:
        call(tmp_path)
    assert "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "121"])
def test_the_downloads_backoff_on_the_command_line_is_one_line(value, tmp_path):
    """`download --backoff=-1` or nan was a ValueError traceback (sleep length must be
    non-negative), after the first failed try."""
    done = subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(tmp_path / "corpora"), "download", "--corpus", "c",
                           f"--backoff={value}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=CHILD_BOUND_S, env={**os.environ, "PYTHONPATH": str(ROOT),
                                            "S2_API_KEY": "k" * 40})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: python -m pipeline download: --backoff: give a first pause (seconds, doubling "
        "at each try) from 0 to 120"]
    assert not (tmp_path / "corpora").exists()


NUL_PATH = "corpora\x00/../etc"  # a NUL byte: Python's 'embedded null byte' once opened


@pytest.mark.parametrize("call, message", [
    (lambda d: pipeline.Data(NUL_PATH), "^Data: folder: "),
    (lambda d: pipeline.Data(d, corpora=NUL_PATH), "^Data: corpora: "),
    (lambda d: pipeline.build_pools(NUL_PATH, "c", size="1k"), "^build_pools: data: "),
    (lambda d: pipeline.build_pools(d, "c", size="1k", exclude=NUL_PATH),
     "^build_pools: exclude: "),
    (lambda d: pipeline.build_corpus(d, "c", raw=Path(NUL_PATH)), "^build_corpus: raw: "),
    (lambda d: pipeline.import_run(d, "c", "all-1k-r0", NUL_PATH, "mine"), "^import_run: run: "),
    (lambda d: pipeline.verify_data(d, NUL_PATH), "^verify_data: folders: "),
    (lambda d: given_path(NUL_PATH), "^"),
    (lambda d: data_roots(d, corpora=NUL_PATH), "^"),
])
def test_a_path_holding_a_nul_byte_is_one_line_naming_the_input(call, message, tmp_path):
    """Issue 78: a NUL byte in a path (which no file name can hold) reached the file system
    and gave Python's ValueError ('embedded null byte'); now the path check refuses it, from
    every door a path comes in by, the NUL shown escaped."""
    with pytest.raises(InputError, match=message + r"a path holding a NUL byte \('corpora"
                       r"\\x00/\.\./etc'\): no file name can hold one; give the path without "
                       r"it$") as raised:
        call(tmp_path)
    assert "\n" not in str(raised.value) and "\x00" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


# digits of other scripts and spaces around: int() and float() read each of them as 5 or 3
NOT_ASCII_NUMBERS = ("５", "٣", " 5", "5 ")


@pytest.mark.parametrize("var", [var for var in EVERY_RULE if takes_a_number(var)],
                         ids=lambda var: var.name)
def test_a_number_in_other_digits_or_spaced_is_refused_from_every_door(var, capsys):
    """`REPEATS=５`, `K=٣`, `SEED=٣` and ' 5' ran as 5, 3, 3 and 5 (issue 88): every number's
    check reads ASCII digits only (core/numbers.py), from make, the command line and the
    API's text alike (a size's and a synthetic corpus's are text)."""
    for text in NOT_ASCII_NUMBERS:
        if var.variable:
            with pytest.raises(InputError) as refused:
                read({var.name: text})
            line = str(refused.value)
            assert line.startswith((f"{var.name}: ", f"{var.name}=")), line
        for stage in var.stages:
            with pytest.raises(SystemExit):
                parser().parse_args([stage, f"{var.option}={text}"])
            [line] = capsys.readouterr().err.splitlines()
            assert f" {stage}: {var.option}: " in line, line
        with pytest.raises(InputError):
            var.check(text)


@pytest.mark.parametrize("call", [
    lambda d: pipeline.build_pools(d, "c", size="٣k"),
    lambda d: pipeline.build_corpus(d, "c", synthetic="５k"),
    lambda d: pipeline.build_paper_pools(d, "c", paper_sizes="1k ２k"),
])
def test_the_api_refuses_a_size_in_other_digits(call, tmp_path):
    with pytest.raises(InputError, match="malformed SIZE"):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == []
