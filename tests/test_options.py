"""The options below the command line (pipeline/options): the library and its API check their
arguments without importing pipeline.cli, with the checks make and the command line use."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.options import declared
from pipeline.options.checks import choice

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_checks_its_arguments_without_the_command_line(tmp_path):
    """`import pipeline`, a checked call refused and a Data made load no module of
    pipeline.cli: the API's checks are the library's own (a library user's program never
    loads the command line)."""
    code = (
        "import sys, pipeline\n"
        "from pipeline.core.errors import InputError\n"
        f"data = pipeline.Data({str(tmp_path)!r})\n"
        "try:\n"
        "    pipeline.search(data, 'c', 'p', 'bm25', bm25_engine='solr')\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
        "print(sorted(m for m in sys.modules if m.startswith('pipeline.cli')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    refusal, loaded = done.stdout.splitlines()
    assert "bm25_engine='solr'" in refusal and "lucene, arrays" in refusal
    assert loaded == "[]"


# A made-up option, declared by one line in pipeline/options/declared.py's VARIABLES: loaded by
# every Python process of a test (make's check and goals included) through sitecustomize.
MADE_UP = '''
from pipeline.options import declared
from pipeline.options.checks import choice

made_up = declared.Variable(
    "MADE_UP", "plain", choice(("plain", "fancy")), "a made-up option of the search", "search",
    stages=("search",), keywords=("made_up",))
declared.VARIABLES = (*declared.VARIABLES, made_up)
declared.BY_NAME[made_up.name] = made_up
'''


def run(tmp_path: Path, *argv: str, plugin: bool = True) -> subprocess.CompletedProcess:
    """`argv` run from the checkout, with the made-up option declared (`plugin`) or not."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(MADE_UP if plugin else "")
    environ = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    environ["PYTHONPATH"] = os.pathsep.join((str(site), str(ROOT)))
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=environ,
                          timeout=300)


def make_n(tmp_path: Path, *variables: str, plugin: bool = True) -> subprocess.CompletedProcess:
    """make -n search on a corpus with one pool: the commands it would run, none run."""
    data = tmp_path / "data"
    (data / "corpora" / "c" / "pools" / "all-1k-r0").mkdir(parents=True, exist_ok=True)
    (data / "corpora" / "c" / "pools" / "all-1k-r0" / "manifest.json").write_text("{}")
    (tmp_path / "installed").touch()
    return run(tmp_path, "make", "-n", "--no-print-directory", f"DATA={data}", "CORPUS=c",
               f"PY={sys.executable}", f"STAMP={tmp_path / 'installed'}", "search",
               "MODEL=bm25", *variables, plugin=plugin)


def test_an_option_declared_once_is_in_make_the_command_line_the_api_and_the_docs(tmp_path):
    """One declaration (name, default, check, help, the stage that takes it, the API keyword)
    is all a new option needs to be accepted and checked by make, passed on by make's goal to
    its stage, offered by the stage's command line, checked by the API and documented."""
    # make: accepted on its command line, passed on to the search as --made-up, checked
    given = make_n(tmp_path, "MADE_UP=fancy")
    assert given.returncode == 0, given.stderr
    search = [line for line in given.stdout.splitlines() if " search " in line]
    assert len(search) == 1 and "--made-up 'fancy'" in search[0]
    assert "--made-up 'plain'" in make_n(tmp_path).stdout  # its default
    refused = make_n(tmp_path, "MADE_UP=odd")
    assert refused.returncode == 2
    assert "MADE_UP: 'odd': use one of plain, fancy" in refused.stderr
    unknown = make_n(tmp_path, "MADE_UP=fancy", plugin=False)
    assert unknown.returncode == 2 and "unknown variable MADE_UP" in unknown.stderr
    # the command line: the stage's option, with its help
    helped = run(tmp_path, sys.executable, "-m", "pipeline", "search", "--help")
    assert "--made-up" in helped.stdout and "a made-up option of the search" in helped.stdout
    assert "--made-up" not in run(tmp_path, sys.executable, "-m", "pipeline", "search",
                                  "--help", plugin=False).stdout
    # the API: the keyword is known and checked by the option's check
    code = ("from pipeline.options.arguments import check_arguments\n"
            "check_arguments('search', {'made_up': 'fancy'})\n"
            "check_arguments('search', {'made_up': 'odd'})\n")
    api = run(tmp_path, sys.executable, "-c", code)
    assert "InputError: search: made_up='odd': 'odd': use one of plain, fancy (as make's " \
           "MADE_UP)" in api.stderr
    assert "unknown option made_up" in run(tmp_path, sys.executable, "-c", code,
                                           plugin=False).stderr
    # docs/variables.md, as generated
    docs = run(tmp_path, sys.executable, "-m", "pipeline", "variables").stdout
    assert "| `MADE_UP` | `plain` | a made-up option of the search |" in docs


def test_a_declaration_gives_each_stage_its_option_required_without_default_or_a_switch(
        monkeypatch):
    """Where a stage's option differs from make's variable, the declaration says so: a switch
    (REPLACE=1) is a bare option the goals pass on only when 1; `required` stages refuse to run
    without the option, `no_default` ones get None (make keeps its default), the others the
    declared default. The goals' argv and a command's own (of_make, of_args) agree."""
    from pipeline.cli import registry
    from pipeline.cli.variables import OneLineParser

    switch = declared.Variable("MADE_SWITCH", "", choice(declared.FLAG), "a made-up switch",
                               "search", switch=True, stages=("x", "y", "z"))
    value = declared.Variable("MADE_VALUE", "plain", choice(("plain", "fancy")),
                              "a made-up value", "search", stages=("x", "y", "z"),
                              required=("x",), no_default=("y",))
    monkeypatch.setattr(registry, "VARIABLES", (switch, value))

    def parse(stage: str, *argv: str) -> argparse.Namespace:
        parser = OneLineParser(prog=f"python -m pipeline {stage}")
        for var in (switch, value):
            registry.add_declared(parser, var, stage)
        return parser.parse_args(list(argv))

    with pytest.raises(SystemExit) as refused:
        parse("x")
    assert refused.value.code == 2
    assert vars(parse("x", "--made-value", "fancy", "--made-switch")) == {
        "made_switch": True, "made_value": "fancy"}
    assert vars(parse("y")) == {"made_switch": False, "made_value": None}
    assert vars(parse("z")) == {"made_switch": False, "made_value": "plain"}
    with pytest.raises(SystemExit):
        parse("z", "--made-value", "odd")
    made = argparse.Namespace(MADE_SWITCH="1", MADE_VALUE="fancy")
    argv = registry.declared_argv("x", registry.of_make(made))
    assert argv == ["--made-switch", "--made-value", "fancy"]
    assert registry.declared_argv("x", registry.of_args(parse("x", *argv))) == argv
    made.MADE_SWITCH = "0"
    assert registry.declared_argv("y", registry.of_make(made)) == ["--made-value", "fancy"]


def test_an_option_two_variables_set_is_written_as_the_first_declared():
    """make fuse's --models is MODELS, demo's (DEMO_MODELS, declared after it, with the same
    flag) does not take its name in the errors make shows; demo's own --sizes is DEMO_SIZES."""
    from pipeline.cli.variables import in_make_words

    assert in_make_words("--models bm25,x: unknown") == "MODELS=bm25,x: unknown"
    assert in_make_words("--sizes 0: too small") == "DEMO_SIZES=0: too small"


RULES_ALONE = """
import sys
from types import SimpleNamespace
from pipeline.core.errors import InputError
from pipeline.options.declared import RULES, VARIABLES

for given in ({"MODEL": "bm25"}, {"MODEL": "bm25 random"}, {"MODEL": ""}, {"MODEL": "BM25"},
              {"MODEL": "bm25", "CORPUS": "a b"},
              {"MODEL": "bm25", "DEMO_MODELS": "bm25 MiniLM"}):
    values = SimpleNamespace(**{**{v.name: None for v in VARIABLES}, "TIME": None, **given})
    try:
        for rule in RULES:
            rule(values)
        print("passed")
    except InputError as exc:
        print(exc)
print(sorted(m for m in sys.modules if m.startswith("pipeline.cli")))
"""


def test_the_rules_on_several_values_need_no_command_line():
    """MODEL's rules (one name, none empty, written as registered) and the one-word rule are
    declared beside the variables (RULES) and apply to plain values: no module of
    pipeline.cli is loaded (issue 48; they were the command line's own)."""
    done = subprocess.run([sys.executable, "-c", RULES_ALONE], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    *lines, loaded = done.stdout.splitlines()
    assert lines[0] == "passed"
    assert "MODEL='bm25 random' names 2 models" in lines[1]
    assert lines[2].startswith("MODEL is empty")
    assert "write it as registered, 'bm25'" in lines[3]
    assert lines[4].startswith("CORPUS='a b' holds a space")
    assert "write it as registered, 'minilm'" in lines[5]
    assert loaded == "[]"
