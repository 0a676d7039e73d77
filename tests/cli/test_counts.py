"""Every process, thread and shard count is bounded (issue 46: `make corpus THREADS=200` forked
200 workers on 2 cores; `build_corpus(synthetic=2000, workers=10**5)` started 4,375 processes;
`shards=10**6` and paths over 4,096 bytes gave tracebacks): the command line's options and the
Python API's arguments refuse a value above the bound with one line, as make's variables do
(tests/cli/test_variables.py), all from the one declaration (pipeline/cli/variables.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.main import build_parser
from pipeline.core.errors import InputError
from pipeline.options.checks import PER_CORE, cores, corpus_name
from pipeline.options.declared import declaration

ROOT = Path(__file__).resolve().parents[2]
# the options and API arguments that set how many processes, threads, shards or array tasks run
COUNT_OPTIONS = {"--threads", "--workers", "--num-shards", "--cpus-per-task", "--parallel",
                 "--shards"}
COUNT_ARGUMENTS = {"threads", "workers", "shards"}
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
                           "2k", "--workers", str(too_many)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert f"{too_many} worker processes or threads on {cores()} CPU cores" in line
    assert not (tmp_path / "corpora").exists()


def test_every_count_argument_of_the_api_is_bounded():
    for name in COUNT_ARGUMENTS:
        check = declaration("build_corpus", name).check
        with pytest.raises((argparse.ArgumentTypeError, InputError), match="use at most"):
            check(HUGE)


@pytest.mark.parametrize("call, message", [
    # one above the bound, not 10**5: code without the bound would start them
    (lambda d: pipeline.build_corpus(d, "c", synthetic=2000, workers=TOO_MANY),
     f"workers={TOO_MANY}: {TOO_MANY} worker processes or threads on {cores()} CPU cores: use "
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
