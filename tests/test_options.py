"""The options below the command line (pipeline/options): the library and its API check their
arguments without importing pipeline.cli, with the checks make and the command line use."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import docs
from pipeline.options import declared
from pipeline.options.checks import choice, flag
from tests.conftest import CHILD_BOUND_S
from tests.rules import api_rules, rule

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
    stages=("search",), changes_run=False)
declared.VARIABLES = (*declared.VARIABLES, made_up)
declared.BY_NAME[made_up.name] = made_up
'''


def run(tmp_path: Path, *argv: str, plugin: bool | str = True) -> subprocess.CompletedProcess:
    """`argv` run from the checkout, with the made-up option declared (`plugin`; a str: that
    code instead) or not."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    code = plugin if isinstance(plugin, str) else MADE_UP if plugin else ""
    (site / "sitecustomize.py").write_text(code)
    environ = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    environ["PYTHONPATH"] = os.pathsep.join((str(site), str(ROOT)))
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=environ,
                          timeout=CHILD_BOUND_S)


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
    """One declaration added at run time (name, default, check, help, the stage that takes it,
    the API keyword) is all a new option needs: make accepts it, passes it on to its stage and
    lists it in `make help`; the stage's --help offers it; pipeline.search takes it; a bad
    value is refused by each door with the same line, the option in that door's words
    (MADE_UP, --made-up, made_up=); docs/variables.md documents it. Without the declaration,
    each door refuses it."""
    reason = "'odd': use one of plain, fancy"
    # make: accepted on its command line, passed on to the search as --made-up, checked
    given = make_n(tmp_path, "MADE_UP=fancy")
    assert given.returncode == 0, given.stderr
    search = [line for line in given.stdout.splitlines() if " search " in line]
    assert len(search) == 1 and "--made-up 'fancy'" in search[0]
    assert "--made-up 'plain'" in make_n(tmp_path).stdout  # its default
    refused = make_n(tmp_path, "MADE_UP=odd")
    assert refused.returncode == 2 and refused.stderr.startswith(f"error: MADE_UP: {reason}\n")
    unknown = make_n(tmp_path, "MADE_UP=fancy", plugin=False)
    assert unknown.returncode == 2 and "unknown variable MADE_UP" in unknown.stderr
    helped = run(tmp_path, "make", "--no-print-directory", f"PYTHON={sys.executable}", "help")
    assert helped.returncode == 0, helped.stderr
    assert "MADE_UP=plain" in helped.stdout
    assert "MADE_UP" not in run(tmp_path, "make", "--no-print-directory",
                                f"PYTHON={sys.executable}", "help", plugin=False).stdout
    # the command line: the stage's option, with its help, checked by the same check
    pipeline = (sys.executable, "-m", "pipeline")
    helped = run(tmp_path, *pipeline, "search", "--help")
    assert "--made-up" in helped.stdout and "a made-up option of the search" in helped.stdout
    assert "--made-up" not in run(tmp_path, *pipeline, "search", "--help",
                                  plugin=False).stdout
    stage = run(tmp_path, *pipeline, "search", "--corpus", "c", "--made-up", "odd")
    assert stage.returncode == 2 and stage.stderr.endswith(f"--made-up: {reason}\n")
    # the API: pipeline.search takes the keyword (a pool that does not exist: refused after
    # the keyword was taken), and refuses a bad value by the option's check
    code = ("import sys, pipeline\n"
            "from pipeline.core.errors import InputError\n"
            "for value in sys.argv[2:]:\n"
            "    try:\n"
            "        pipeline.search(sys.argv[1], 'c', 'all-1k-r0', 'bm25', made_up=value)\n"
            "    except InputError as exc:\n"
            "        print(exc)\n")
    api = run(tmp_path, sys.executable, "-c", code, str(tmp_path / "data"), "fancy", "odd")
    taken, bad = api.stdout.splitlines()
    assert "made_up" not in taken and "all-1k-r0" in taken, api.stdout
    assert bad == f"search: made_up='odd': {reason}"
    assert "unknown option made_up for bm25" in run(
        tmp_path, sys.executable, "-c", code, str(tmp_path / "data"), "fancy",
        plugin=False).stdout
    # docs/variables.md, as generated
    docs = run(tmp_path, *pipeline, "variables").stdout
    assert "| `MADE_UP` | `plain` | a made-up option of the search |" in docs


def test_a_declaration_gives_each_stage_its_option_required_without_default_or_a_switch(
        monkeypatch):
    """Where a stage's option differs from make's variable, the declaration says so: a switch
    (REPLACE=1) is a bare option the goals pass on only when 1; `required` stages refuse to run
    without the option, `no_default` ones get None (make keeps its default), the others the
    declared default. The goals' argv parses back to make's values."""
    from pipeline import api
    from pipeline.cli import goals, registry
    from pipeline.cli.variables import OneLineParser

    switch = declared.Variable("MADE_SWITCH", "", flag, "a made-up switch",
                               "search", switch=True, stages=("x", "y", "z"))
    value = declared.Variable("MADE_VALUE", "plain", choice(("plain", "fancy")),
                              "a made-up value", "search", stages=("x", "y", "z"),
                              required=("x",), no_default=("y",))
    monkeypatch.setattr(registry, "VARIABLES", (switch, value))
    monkeypatch.setattr(goals, "VARIABLES", (switch, value))

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

    def declared_argv(stage: str) -> list[str]:  # its keywords, as a command of x's renders
        return goals.Step(api.search, dict(goals.declared_options(stage, made))).argv()[1:]

    argv = declared_argv("x")
    assert argv == ["--made-switch", "--made-value", "fancy"]
    assert vars(parse("x", *argv)) == {"made_switch": True, "made_value": "fancy"}
    made.MADE_SWITCH = "0"
    assert declared_argv("y") == ["--made-value", "fancy"]
    made.MADE_VALUE = 1  # a value of 1 is a value, not a switch on (--shards 1)
    assert declared_argv("y") == ["--made-value", "1"]


def test_a_refusal_carries_its_options_and_each_door_words_them(tmp_path, capsys, monkeypatch):
    """A refusal naming declared options (OptionError) is worded by the door it reaches:
    make's variable, the stage's option (its flag: SHARDS is --shards), the API's
    keyword; the library's own message is the command line's. Here a pool too large for its
    corpus, through each door, and the template worded directly."""
    from pipeline.cli.main import main
    from pipeline.cli.variables import FROM_MAKE
    from pipeline.core.errors import OptionError

    refusal = OptionError("{SHARDS=} with {BACKEND=}: use {K}", {"SHARDS": 3, "BACKEND": "x"})
    assert refusal.message == "--shards 3 with --backend x: use --k"
    assert declared.worded(refusal, "make") == "SHARDS=3 with BACKEND=x: use K"
    assert declared.worded(refusal, "command") == "--shards 3 with --backend x: use --k"
    assert declared.worded(refusal, "api") == "shards=3 with backend='x': use k"
    corpus = tmp_path / "corpora" / "tiny"
    import pipeline

    pipeline.build_corpus(tmp_path, "tiny", synthetic=400, shards=1)
    with pytest.raises(OptionError) as api:
        pipeline.build_pool(tmp_path, "tiny", size=10**6, queries=5)
    assert api.value.message.startswith("size=1000000 exceeds the papers available")
    assert api.value.message.endswith("choose a smaller size")
    argv = ["--corpora-root", str(corpus.parent), "pool", "--corpus", "tiny", "--size", "1M",
            "--queries", "5"]
    assert main(argv) == 2
    line = capsys.readouterr().err
    assert line.startswith("error: --size 1000000 exceeds") and "smaller --size\n" in line
    monkeypatch.setenv(FROM_MAKE, "1")
    assert main(argv) == 2
    line = capsys.readouterr().err
    assert line.startswith("error: SIZE=1000000 exceeds") and "smaller SIZE\n" in line


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


# docs/extending.md's recipe for a new option, followed literally: one line in VARIABLES
# (declaring that it changes runs) plus the code that uses it (BM25's retriever takes it among
# its OPTIONS, so search_pool hands it over); loaded by every process through sitecustomize.
MADE_K1 = """
from pipeline.options import declared
from pipeline.options.checks import choice
from pipeline.retrieval.bm25.retriever import RETRIEVER

k1 = declared.Variable(
    "MADE_K1", "0.9", choice(("0.9", "1.2")), "a fixed BM25 k1", "search",
    stages=("index", "search"), changes_run=True)
declared.VARIABLES = (*declared.VARIABLES, k1)
declared.BY_NAME[k1.name] = k1
type(RETRIEVER).OPTIONS = {**RETRIEVER.OPTIONS, "made_k1": "0.9"}
"""


def test_an_option_added_by_the_recipe_makes_the_runs_of_its_other_values_stale(
        corpus_dir, tmp_path):
    """An option added as docs/extending.md says (a fixed BM25 k1 that changes runs): a run
    made with one value was kept current when the value changed (a retriever's options reached
    its search and nothing else). Now the value is in the run's identity, the same from the
    command line and the API: another value searches again, the same one keeps the run, and
    the run's repair (verify's) carries the value."""
    from pipeline.core.files import read_json
    from pipeline.layout import run_paths
    from pipeline.models import get_model
    from pipeline.options.declared import kind_run_options
    from pipeline.retrieval.runs import recorded_run_repair
    from tests.conftest import POOL_SIZES, pool_of

    # BM25's other options that change a run, at their defaults: recorded beside the new one
    others = dict(kind_run_options(get_model("bm25"), {}))

    pool, runs = pool_of(POOL_SIZES[0]), tmp_path / "runs"
    roots = ("--corpora-root", str(corpus_dir.parent), "--index-root",
             str(tmp_path / "indexes"), "--runs-root", str(runs))

    def search(k1: str) -> str:
        done = run(tmp_path, sys.executable, "-m", "pipeline", *roots, "search", "--corpus",
                   corpus_dir.name, "--model", "bm25", "--pool", pool, "--k", "20",
                   "--threads", "1", "--made-k1", k1, "--index", "--stale-only",
                   plugin=MADE_K1)
        assert done.returncode == 0, done.stderr
        return done.stderr + done.stdout

    manifest = run_paths(runs, corpus_dir.name, pool, "bm25").manifest
    assert "0 current runs kept, 1 to search" in search("0.9")
    assert read_json(manifest)["parameters"]["options"] == {**others, "MADE_K1": "0.9"}
    assert "1 current runs kept, 0 to search" in search("0.9")
    assert "0 current runs kept, 1 to search" in search("1.2")  # the old run is stale
    assert read_json(manifest)["parameters"]["options"] == {**others, "MADE_K1": "1.2"}
    # the API: the same identity, so the run made by the command line is kept, then redone
    api = ("import pipeline, sys\n"
           f"data = pipeline.Data(corpora={str(corpus_dir.parent)!r}, "
           f"indexes={str(tmp_path / 'indexes')!r}, runs={str(runs)!r})\n"
           "for k1 in ('1.2', '0.9'):\n"
           f"    pipeline.search(data, {corpus_dir.name!r}, {pool!r}, 'bm25', k=20, threads=1,"
           " made_k1=k1)\n"
           "    print(pipeline.__name__, k1, __import__('os').stat(sys.argv[1]).st_mtime_ns)\n")
    before = str(manifest.stat().st_mtime_ns)
    done = run(tmp_path, sys.executable, "-c", api, str(manifest), plugin=MADE_K1)
    assert done.returncode == 0, done.stderr
    (_, _, kept), (_, _, redone) = (line.split() for line in done.stdout.splitlines())
    assert kept == before and redone != kept
    assert read_json(manifest)["parameters"]["options"] == {**others, "MADE_K1": "0.9"}
    assert "MADE_K1=0.9" in recorded_run_repair(runs, corpus_dir.name, pool, "bm25").command()


def test_a_real_valued_setting_is_a_finite_number_inside_its_bounds():
    """number_in: a decimal or whole number between its bounds (a real-valued setting has a
    maximum too, as every count), anything else one line; the generated docs say the range."""
    from pipeline.cli.docs import check_words
    from pipeline.core.errors import InputError
    from pipeline.options.checks import maximum, number_in

    k1 = number_in(0.0, 10.0, "BM25's k1", "0.9", open_ends=True)
    assert k1("0.9") == 0.9 and k1("2") == 2.0 and maximum(k1) == 10.0
    for bad in ("0", "-1", "10", "nan", "inf", "abc", ""):
        with pytest.raises(InputError) as refused:
            k1(bad)
        assert "\n" not in str(refused.value) and "k1" in str(refused.value)
    assert check_words(k1) == "between 0 and 10"


def test_each_option_has_one_name_its_keyword_and_flag_derived():
    """Issue 81: one name per option. Walking every declaration and every parser: the API's
    keyword is the variable's name in lower case and the flag that keyword with '-' for '_';
    each command's option of a declared variable is that flag, its value at that keyword, and
    each API function's parameter that a variable declares is named so (no alias table)."""
    from dataclasses import fields

    from pipeline.cli import registry
    from pipeline.cli.variables import OneLineParser

    assert not {"keywords", "alias", "flag"} & {f.name for f in fields(declared.Variable)}
    for var in (*declared.VARIABLES, *api_rules()):
        assert var.keyword == var.name.lower(), var.name
        assert var.option == "--" + var.keyword.replace("_", "-"), var.name
    for name, entry in registry.COMMANDS.items():
        parser = entry.add_to(OneLineParser(prog=name))
        shown = [a for a in parser._actions if a.help != argparse.SUPPRESS]
        for var in registry.staged(name):
            [action] = [a for a in shown if var.option in a.option_strings]
            assert (action.option_strings, action.dest) == ([var.option], var.keyword), name
    for function, names in docs.public_arguments().items():
        for name in names:
            var = rule(function, name)  # None: its annotation alone
            assert var is None or var.keyword == name, (function, name)


# The keywords renamed on 2026-11-28 and their one name since; taken with a warning for one
# release, refused now
OLD_KEYWORDS = {"n_queries": "queries", "workers": "threads", "variant": "query_variant",
                "sample_size": "sample", "num_shards": "shards", "time": "slurm_time"}


def test_an_old_keyword_is_refused_at_every_door(tmp_path):
    """The release after the renames: the API refuses an old keyword in one line naming its
    one name now; the commands refuse an old flag (exit status 2); make an old variable."""
    import pipeline
    from pipeline.cli.main import build_parser
    from pipeline.core.errors import InputError

    with pytest.raises(InputError, match="unknown option n_queries for build_pool: did you "
                                         "mean queries"):
        pipeline.build_pool(tmp_path, "c", size=100, n_queries=3)
    with pytest.raises(InputError, match="unknown option sample_size for judge: did you mean "
                                         "sample"):
        pipeline.judge(pipeline.Data(tmp_path), "c", ["bm25", "minilm"], "standin:1",
                       sample_size=4)
    arguments = docs.public_arguments()
    for old, new in OLD_KEYWORDS.items():  # the new name is taken somewhere, the old nowhere
        assert any(new in names for names in arguments.values()), new
        assert all(old not in names for names in arguments.values()), old
    parser = build_parser()
    for argv in (["embed", "--num-shards", "3"], ["ingest", "--workers", "1"],
                 ["submit-embed", "--time", "90"]):
        with pytest.raises(SystemExit) as ended:
            parser.parse_args(argv)
        assert ended.value.code == 2, argv
    done = subprocess.run(["make", "-n", "--no-print-directory", "embed", "TIME=90",
                           f"PY={sys.executable}", f"STAMP={tmp_path / 'stamp'}"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, env={**os.environ, "MAKEFLAGS": ""}, timeout=120)
    assert done.returncode == 2 and "unknown variable TIME" in done.stderr
