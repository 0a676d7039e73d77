"""A goal's chain is its stages' API functions with keyword arguments (goals.Step), called
with the values make's variables were checked to, never written out and parsed again: the
call a stage makes is the one its printed command line (make -n) makes when parsed, for every
goal's chain, so the printed command is the one that ran."""

from __future__ import annotations

import inspect
import shlex

import pytest

from pipeline.cli.goals import GOALS, chain, shown
from pipeline.cli.registry import COMMANDS, call_arguments, command_values
from pipeline.cli.variables import GOALS_ENV, OneLineParser, derived, read

# goal -> make's variables given (those the goal needs, and some that change its stages)
CASES = {
    "demo": {"JUDGE": "standin:1", "DEMO_MODELS": "bm25,minilm,random", "DEMO_PAPERS": "8k"},
    "eval": {"MODEL": "minilm", "BM25_ENGINE": "lucene", "K": "100", "QUERY_VARIANT": "title",
             "DEVICE": "cpu", "PRECISION": "bf16"},
    "eval~slurm": {"MODEL": "hf:org/name", "POOLING": "cls", "EXECUTOR": "slurm",
                   "SHARDS": "4", "SLURM_TIME": "1:00:00"},
    "search": {"MODEL": "bm25", "BM25_ENGINE": "lucene", "K": "100", "SEED": "3"},
    "search~hostile": {"MODEL": "minilm", "QUERY_PROMPT": "it's \"a\" test; rm -rf / `id` *",
                       "MODEL_PATH": "/tmp/a folder/it's"},
    "search~dashes": {"MODEL": "minilm", "QUERY_PROMPT": "--index now", "MODEL_PATH": "-x"},
    "fuse": {"MODELS": "bm25,random", "METHOD": "rrf"},
    "mdcr": {"MDCR_MODELS": "bm25,random", "SEED": "2"},
    "mdcr-jaccard": {"MODELS": "bm25,random"},
    "judge": {"MODELS": "bm25,random", "JUDGE": "standin:1", "SAMPLE": "4"},
    "pool": {"SIZE": "1k 2k", "FIELD": "medicine", "REPEATS": "2", "QUERIES": "10"},
    "pools": {},
    "embed": {"MODEL": "minilm", "SHARDS": "2", "REPLACE": "1"},
    "embed~slurm": {"MODEL": "minilm", "EXECUTOR": "slurm", "SHARDS": "4"},
    "index": {"MODEL": "bm25"},
    "report": {"EXCLUDE": "ids.txt"},
    "mdcr-scores": {"MODEL": "bm25", "OUT": "scores.json"},
    "export-mteb": {"MODEL": "bm25", "OUT": "mteb"},
}


def steps_of(goal: str, given: dict[str, str], data) -> list:
    name = goal.partition("~")[0]
    v = read({"DATA": str(data), GOALS_ENV: name, **given})
    v.DRY_RUN = True
    return [step for target in chain(name) for step in GOALS[target].steps(v, derived(v))]


def called(name: str, values: dict) -> dict:
    """The arguments the command `name`'s function is called with, its defaults filled in."""
    function = COMMANDS[name].api
    args, kwargs = call_arguments(name, "DATA", values)
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


@pytest.mark.parametrize("goal", sorted(CASES))
def test_each_stage_calls_what_its_printed_command_calls(goal, tmp_path):
    """Each stage is (function, keyword arguments), the function its command's; its call is
    the call of its printed command line, parsed by the command's parser, to the argument."""
    steps = steps_of(goal, CASES[goal], tmp_path)
    assert steps
    for step in steps:
        assert callable(step.function) and isinstance(step.kwargs, dict)
        argv = step.argv()
        assert shlex.split(shown(argv)) == argv  # what make -n prints, as a shell reads it
        parser = COMMANDS[step.command].add_to(OneLineParser(prog=step.command))
        parsed = parser.parse_args(argv[1:])
        parsed.program = "the-program"
        assert called(step.command, step.values("the-program")) == called(
            step.command, command_values(step.command, parsed)), argv


def test_a_value_of_zero_is_given_and_an_empty_one_is_not(tmp_path):
    """SEED=0 is a value (--seed 0), an optional variable not given has no option."""
    (search,) = [s for s in steps_of("search", {"MODEL": "bm25"}, tmp_path)
                 if s.command == "search"]
    argv = search.argv()
    assert argv[argv.index("--seed") + 1] == "0" and "--query-prompt" not in argv


def test_a_goal_calls_its_functions_and_parses_nothing(tmp_path, monkeypatch, capsys):
    """run_goal calls each stage's function with its keywords: no parser parses a stage's
    command line (argparse's parsing fails the test), and what the function returns is
    shown as its command shows it."""
    import argparse

    from pipeline.cli.goals import run_goal

    def parsed(*args, **kwargs):
        pytest.fail("a goal's stage was parsed")

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parsed)
    v = read({"DATA": str(tmp_path / "data"), GOALS_ENV: "models"})
    run_goal(argparse.Namespace(goal="models", program="prog"), v)
    printed, *listed = capsys.readouterr().out.splitlines()
    data = tmp_path / "data"
    assert printed.rstrip().endswith(f"-m pipeline --corpora-root '{data}/corpora' --index-root "
                                     f"'{data}/indexes' --runs-root '{data}/runs' models")
    assert [line.split()[0] for line in listed[:2]] == ["bm25", "random"]
