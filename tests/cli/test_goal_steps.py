"""A goal runs its stages with the values make's variables were checked to (goals.Step), never
writing them out and parsing them again: the arguments a stage gets are those its printed
command line (make -n) gives when parsed, for every goal's chain, so the printed command is
the one that ran."""

from __future__ import annotations

import argparse
import shlex

import pytest

from pipeline.cli.goals import GOALS, _parser, chain, shown, stage_args
from pipeline.cli.variables import GOALS_ENV, derived, read

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


@pytest.mark.parametrize("goal", sorted(CASES))
def test_each_stage_gets_what_its_printed_command_gives(goal, tmp_path):
    steps = steps_of(goal, CASES[goal], tmp_path)
    assert steps
    for step in steps:
        argv = step.argv()
        assert shlex.split(shown(argv)) == argv  # what make -n prints, as a shell reads it
        parsed = _parser(step.name).parse_args(argv[1:])
        made = stage_args(argparse.Namespace(), step)
        assert vars(made) == vars(parsed), argv


def test_a_value_of_zero_is_given_and_an_empty_one_is_not(tmp_path):
    """SEED=0 is a value (--seed 0), an optional variable not given has no option."""
    (search,) = [s for s in steps_of("search", {"MODEL": "bm25"}, tmp_path)
                 if s.name == "search"]
    argv = search.argv()
    assert argv[argv.index("--seed") + 1] == "0" and "--query-prompt" not in argv
