"""The make variables come from one declaration (pipeline/cli/variables.py): docs/variables.md
is generated from it and committed, make defines none of them (Python reads them from the
environment make passes its command line in), and the names the stages get (a model's, a
fused model's, the pools, the data folders) are Python's, never composed by make. Quick:
make -n, which prints the stages' commands and runs none."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.docs import generated, markdown, md_text, stale
from pipeline.cli.variables import GOALS_ENV, derived, make_command_line, read, read_make
from pipeline.core.errors import InputError
from pipeline.layout import raw_dir, run_name
from pipeline.models import fused_name, hf_name
from pipeline.options.checks import PER_CORE, cores, input_path, safe_path
from pipeline.options.declared import BY_NAME, VARIABLES
from pipeline.roots import data_roots
from tests.conftest import CHILD_BOUND_S, refusal

ROOT = Path(__file__).resolve().parents[2]
# what make itself defines
MAKE_BUILTINS = {"MAKECMDGOALS", "MAKEOVERRIDES", "SHELL"}


def make(root: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    """make as a user runs it, with DATA=root and the environment taken as installed; only
    the variables a test sets (none from the environment; `env`: more of it)."""
    (root / "installed").parent.mkdir(parents=True, exist_ok=True)
    (root / "installed").touch()
    environ = {k: v for k, v in os.environ.items()
               if k not in {v.name for v in VARIABLES} | {"TIME", "PYTHON", "VENV", "PY"}}
    environ.update(env or {}, MAKEFLAGS="")
    return subprocess.run(["make", "--no-print-directory", f"DATA={root}",
                           f"PY={sys.executable}", f"STAMP={root / 'installed'}", *args],
                          cwd=ROOT, capture_output=True, text=True, env=environ,
                          timeout=CHILD_BOUND_S)


def with_pool(root: Path, corpus: str = "c") -> Path:
    """A corpus with one (empty) complete pool: make eval gets as far as its recipes."""
    pool = root / "corpora" / corpus / "pools" / "all-1k-r0"
    pool.mkdir(parents=True)
    (pool / "manifest.json").write_text("{}")
    return root


def test_generated_files_are_current():
    """The committed docs are what the declaration gives (else: python -m pipeline variables
    --write): docs/variables.md, and docs/api.md's table of the arguments, between its markers
    (tests/test_api_table.py); make includes nothing generated."""
    assert stale() == [], "stale: run `python -m pipeline variables --write` and commit it"
    assert set(generated()) == {Path("docs/variables.md"), Path("docs/api.md")}


def makefile_values(root: Path) -> dict[str, str]:
    """The variables the Makefile itself defines, with their values, as make's database
    (`make -pn`) holds them, and MAKEFILE_LIST: what make read, not the file's text."""
    database = make(root, "-pn", "help").stdout
    found = dict(re.findall(r"^# makefile \(from 'Makefile', line \d+\)\n(?:define )?"
                            r"([A-Za-z_][A-Za-z0-9_]*) :?= ?(.*)$", database, re.M))
    read_list = re.search(r"^MAKEFILE_LIST :?= ?(.*)$", database, re.M)
    found["MAKEFILE_LIST"] = read_list.group(1) if read_list else ""
    return found


def test_make_reads_one_makefile_and_composes_no_name(tmp_path):
    """make includes nothing (generated or not) and none of its own variables composes a
    name or a path of the data: names and paths come from pipeline/layout.py through the
    check, never from make; the commands make runs for every goal (`make -n`) name no data
    path either."""
    values = makefile_values(tmp_path)
    assert values["MAKEFILE_LIST"].split() == ["Makefile"], values["MAKEFILE_LIST"]
    assert "GOAL" in values
    for name, value in values.items():
        for rule in ("hf--", "fuse--", "manifest.json", "pools/", "abspath", "DATAROOT"):
            assert rule not in value, (name, rule)
        assert not re.search(r"(corpora|indexes|runs)/", value), (name, value)


def test_make_defines_none_of_the_variables_and_accepts_each_declared_one(tmp_path):
    """One declaration, no second default: make's database (`make -p`) holds none of the
    declared variables, and each one is accepted on make's command line,
    checked (at a value its check passes) and listed in docs/variables.md."""
    database = make(tmp_path, "-pn", "help").stdout
    defined = set(re.findall(r"^# makefile \(from 'Makefile', line \d+\)\n(?:define )?"
                             r"([A-Za-z_][A-Za-z0-9_]*) ", database, re.M))
    assert "GOAL" in defined and not defined & set(BY_NAME)
    values = {v.name: "" if v.optional else v.default({"CORPUS": "demo"}) if callable(v.default)
              else v.text() for v in VARIABLES}
    given = make(tmp_path, "check", *(f"{name}={value}" for name, value in values.items()))
    assert given.returncode == 0, given.stderr
    docs = subprocess.run([sys.executable, "-m", "pipeline", "variables"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    for var in VARIABLES:
        assert f"| `{var.name}` |" in docs, var.name


# Loaded by every Python start (sitecustomize): each check of the goal's one check writes a
# line to CHECKS_LOG: `value NAME` per value checked, `rule <name>` per rule of several values
# (RULES), `goals` for what make's goals need (check_goals).
COUNTER = """
import os
from pipeline.options import declared


def logged(line):
    with open(os.environ["CHECKS_LOG"], "a") as log:
        log.write(line + "\\n")


def rule_of(rule):
    return lambda v: (logged("rule " + rule.__name__), rule(v))[1]


declared.RULES = tuple(rule_of(rule) for rule in declared.RULES)  # before any module takes it
from pipeline.cli import goals, variables  # noqa: E402
value_check = variables.checked_value
variables.checked_value = lambda var, text: (logged("value " + var.name),
                                             value_check(var, text))[1]

goals_check = goals.check_goals
goals.check_goals = lambda args: (logged("goals"), goals_check(args))[1]
"""


def test_each_check_runs_once_in_the_goal_and_refuses_what_it_checks(tmp_path):
    """make eval is one goal process that checks once: every declared value by its own check
    (once each), every rule of several values (RULES, once each, after the values), what the
    goals need (once, last), then prints its chain's three stages (corpus, search, eval). On
    data that shows each: a bad value stops before any rule, a bad pair of values (POOLING
    with a registered model) at its rule, a corpus without pools at the goals' check."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(COUNTER)
    log = tmp_path / "checks.log"
    env = {"PYTHONPATH": os.pathsep.join((str(site), str(ROOT))), "CHECKS_LOG": str(log)}
    root = with_pool(tmp_path / "data")
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=bm25", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(" -m pipeline goal ") == 1
    assert [re.search(r"--runs-root '[^']*' (\S+)", line).group(1)
            for line in done.stdout.splitlines() if "--runs-root" in line] == [
        "corpus", "search", "eval"]
    from pipeline.options.declared import RULES
    lines = log.read_text().splitlines()
    assert lines == ([f"value {v.name}" for v in VARIABLES]
                     + [f"rule {rule.__name__}" for rule in RULES] + ["goals"]), lines
    cases = (("SIZE=abc", "SIZE: malformed SIZE 'abc'", "value"),
             ("POOLING=cls", "POOLING=cls is for MODEL=hf:<id>", "rule pooling_is_for_hf"),
             ("CORPUS=none", "no pools for CORPUS=none", "goals"))
    for assignment, says, last in cases:
        log.unlink()
        line = refusal(make(root, "eval", "MODEL=bm25", "CORPUS=c", assignment, env=env))
        assert says in line, line
        lines = log.read_text().splitlines()
        assert lines[-1].startswith(last) and len(lines) == len(set(lines)), lines
        assert ("goals" in lines) == (last == "goals")
    goal = subprocess.run([sys.executable, "-m", "pipeline", "goal", "eval"], cwd=ROOT,
                          env={**os.environ, "MODEL": "bm52", "MAKEFLAGS": ""},
                          capture_output=True, text=True)
    assert goal.returncode == 2 and "unknown MODEL" in goal.stderr, goal.stderr


def test_the_docs_come_from_the_declaration():
    read_names = set(vars(read({}))) - {"GOALS", "GIVEN", "COMMAND_LINE", "DRY_RUN"}
    assert read_names == {v.name for v in VARIABLES}
    docs = markdown()
    for var in VARIABLES:
        assert f"| `{var.name}` |" in docs and md_text(var.help) in docs


def test_the_command_line_is_the_one_make_names():
    """The variables of make's command line are those of MAKEFLAGS (make_command_line),
    never the environment's."""
    for args in (read_make({"MAKEFLAGS": " -- SLURM_TIME=90", "SLURM_TIME": "80"}),
                 read({}, {"SLURM_TIME": "90"})):
        assert args.SLURM_TIME == "90" and args.COMMAND_LINE == "SLURM_TIME"
    args = read({"MAKEFLAGS": " -- SLURM_TIME=90"})  # read alone: no parsing
    assert args.SLURM_TIME is None and args.COMMAND_LINE == ""
    args = read({"TIME": "%e"})  # GNU time's format, in the environment: never read
    assert args.SLURM_TIME is None and args.CORPUS == "demo" and args.SOURCE == "s2orc"
    args = read({"CORPUS": "s2ag", GOALS_ENV: "corpus"})
    assert (args.SOURCE, args.MDCR, args.QUERIES, args.GOALS) == ("s2ag", "s2ag-mdcr", None,
                                                                 "corpus")


def test_fused_model_with_an_hf_component_is_the_one_python_names(tmp_path):
    """The drift the issue names: make built fuse--rrf--bm25--hf:org/name (and split a fused
    name on every `--`); now the goal searches and scores each component under the name its
    runs have, then fused_name's model, each named by Python, none composed by make."""
    root = with_pool(tmp_path / "data")
    fused = fused_name("rrf", ["bm25", "hf:org/name"])
    assert fused == "fuse--rrf--bm25--hf--org--name--mean"
    for models, method, names in (
            ("bm25,hf:org/name", "rrf", ["bm25", "hf--org--name--mean", fused]),
            ("hf:org/name@cls,bm25", "wsum",
             ["hf--org--name--cls", "bm25", fused_name("wsum", ["hf:org/name@cls", "bm25"])])):
        done = make(root, "-n", "fuse", "CORPUS=c", f"MODELS={models}", f"METHOD={method}")
        assert done.returncode == 0, done.stderr[-2000:]
        assert re.findall(r" search --corpus 'c' --model '([^']+)'", done.stdout) == names
        assert re.findall(r" eval --corpus 'c' --model '([^']+)'", done.stdout) == names


def test_seed_reaches_every_search(tmp_path):
    """SEED is also the random model's (docs/variables.md), but make search, eval and fuse
    never passed it on: `make eval MODEL=random SEED=5` kept or made the seed-0 run (issue
    46)."""
    root = with_pool(tmp_path / "data")
    for goal, model in (("search", "MODEL=random"), ("eval", "MODEL=random"),
                        ("fuse", "MODELS=bm25,random")):
        done = make(root, "-n", goal, "CORPUS=c", model, "SEED=5")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "--seed '5'" in done.stdout, (goal, done.stdout)


def test_model_names_and_paths_are_pythons(tmp_path):
    root = with_pool(tmp_path / "data")
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=hf:org/name", "POOLING=cls",
                "QUERY_VARIANT=title")
    assert done.returncode == 0, done.stderr[-2000:]
    name = hf_name("org/name", "cls")
    assert f"search --corpus 'c' --model '{name}'" in done.stdout
    assert f"eval --corpus 'c' --model '{run_name(name, 'title')}'" in done.stdout
    roots = data_roots(root)
    assert f"--corpora-root '{roots['corpora']}' --index-root '{roots['indexes']}' " \
           f"--runs-root '{roots['runs']}'" in done.stdout
    assert f"--raw '{raw_dir(roots['corpora'], 'c', 's2orc')}'" in done.stdout
    # a corpus written whole (a benchmark): nothing to ingest
    (root / "corpora" / "c" / "manifest.json").write_text('{"benchmark": {}}')
    done = make(root, "-n", "corpus", "CORPUS=c")
    assert done.returncode == 0 and " corpus --corpus" not in done.stdout
    # no complete pool: make eval says where it looked
    (root / "corpora" / "c" / "pools" / "all-1k-r0" / "manifest.json").unlink()
    done = make(root, "-n", "eval", "CORPUS=c")
    assert done.returncode == 2 and f"under {root / 'corpora' / 'c' / 'pools'}:" in done.stderr


def test_precision_names_the_runs_and_is_refused_for_bm25(tmp_path):
    """PRECISION=bf16: every stage gets the model `<name>+bf16` (its own store and runs);
    BM25 has no precision: refused up front, naming the variable."""
    root = with_pool(tmp_path / "data")
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=scincl", "PRECISION=bf16")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "search --corpus 'c' --model 'scincl+bf16'" in done.stdout
    assert "eval --corpus 'c' --model 'scincl+bf16'" in done.stdout
    assert "--model 'scincl'" not in done.stdout
    # the model named in its precision, as docs/encoders.md writes it (was refused: the
    # default PRECISION=fp32 was taken as asking for another precision)
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=scincl+bf16")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eval --corpus 'c' --model 'scincl+bf16'" in done.stdout
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=bm25", "PRECISION=bf16")
    assert done.returncode == 2 and "PRECISION=bf16 is for encoders" in done.stderr
    done = make(root, "-n", "eval", "CORPUS=c", "MODEL=scincl", "PRECISION=fp8")
    assert done.returncode == 2 and "PRECISION" in done.stderr


@pytest.mark.slow  # 18 make runs (6 s of make test-fast)
@pytest.mark.parametrize("assignment, message", [
    ("METRICS=ndcg@99999999999999999999", "cutoffs 1 to 100,000"),
    ("METRICS=map-l1000", "levels 1 to 100"),
    ("SEED=99999999999", "SEED: 99999999999 is too large"),
    ("THREADS=4294967296", "THREADS: 4294967296 is too large"),
    ("SIZE=5000M", "over 1000M papers"),
    ("CORPUS=" + "a" * 300, "a corpus name of 300 characters"),
    ("DATA=/tmp/" + "b" * 300, "a folder name of 300 characters"),
    ("CORPUS=-rf", "'-rf': a corpus name is letters"),
    ("CORPUS=a\nb", "CORPUS holds a line break"),
    ("FIELD=medicine\nbiology", "FIELD holds a line break"),
    ("FIELD=all medicine", "'all' stands alone"),
    ("EXCLUDE=my list.txt", "EXCLUDE"),
    ("TRAINING_SETS=specter", "write <model>=<file of its training papers>"),
    ("TRAINING_SETS=specter=a.txt specter=b.txt", "a model named twice"),
    ("TEST_WORKERS=99999", "TEST_WORKERS: 99999 test processes on"),  # xdist would start them
    # issue 46: every process count bounded (THREADS=200 forked 200 workers on 2 cores)
    (f"THREADS={PER_CORE * cores() + 1}", f"THREADS: {PER_CORE * cores() + 1} worker processes "
                                          f"or threads on {cores()} CPU cores: use at most"),
    ("SHARDS=1000000", "SHARDS: 1000000 is too large: use at most 1,000"),
    ("PARALLEL=100000", "PARALLEL: 100000 is too large: use at most 32"),
])
def test_values_out_of_bounds_are_refused_up_front(assignment, message, tmp_path):
    """Bounds, lengths, leading dashes and line breaks: one line naming the variable, exit
    status 2, before anything runs (each of these once passed the check and failed later)."""
    done = make(with_pool(tmp_path / "data"), "-n", "pool", assignment)
    assert message in refusal(done) and "Traceback" not in done.stderr


def test_the_largest_counts_allowed_are_taken():
    """The bounds refuse only what is above them: THREADS at 4 per core, SHARDS at SLURM's
    default array size, PARALLEL at 32."""
    largest = {"THREADS": PER_CORE * cores(), "SHARDS": 1000, "PARALLEL": 32}
    args = vars(read({name: str(value) for name, value in largest.items()}))
    assert {name: args[name] for name in largest} == largest


LONG_PATH = "/tmp/" + "p/" * 1600  # 3,204 bytes made absolute, of short folder names
PATH_VARIABLES = [v.name for v in VARIABLES if v.check in (safe_path, input_path)]


@pytest.mark.slow  # 12 make runs (4 s of make test-fast)
@pytest.mark.parametrize("name", [*PATH_VARIABLES, "TRAINING_SETS"])
def test_a_path_too_long_for_the_file_system_is_refused_up_front(name, tmp_path):
    """Issue 46: a path of over ~4,096 bytes (DATA, RAW, SRC, OUT, RUN, ...) gave a traceback
    (File name too long); now one line naming the variable and the most it may be."""
    value = f"specter={LONG_PATH}" if name == "TRAINING_SETS" else LONG_PATH
    done = make(with_pool(tmp_path / "data"), "-n", "pool", f"{name}={value}")
    line = refusal(done)
    assert line.startswith(f"error: {name}: a path of ") and "use at most 3,072" in line
    assert {"DATA", "RAW", "SRC", "OUT", "RUN", "EXCLUDE"} <= set(PATH_VARIABLES)


def test_every_derived_value_is_pythons():
    values = derived(read({"CORPUS": "c", "MODEL": "hf:org/name", "MODELS": "bm25,random",
                           "DATA": "/d"}))
    assert set(values) == {"CORPORA_ROOT", "INDEX_ROOT", "RUNS_ROOT", "SOURCE", "RAW_DIR",
                           "WRITTEN_WHOLE", "MODEL_FILE", "MODEL_NAME"}
    assert values["SOURCE"] == "s2orc"  # a corpus that records none: the name's default
    assert values["MODEL_FILE"] == "hf--org--name--mean"
    assert values["CORPORA_ROOT"] == "/d/corpora" and values["WRITTEN_WHOLE"] == ""
    st = derived(read({"CORPUS": "c", "MODEL": "st:org/name", "PRECISION": "bf16"}))
    assert st["MODEL_FILE"] == "st--org--name+bf16"  # the stages' --model (issue 49)


def test_a_repair_names_the_data_it_acts_on_and_make_takes_it(tmp_path):
    """Issue 30.3: a stage's repair is the command for the data the stage was given: DATA for
    one folder's corpora/, indexes/ and runs/, each root (CORPORA_DIR, INDEX_DIR, RUNS_DIR)
    for roots apart, and nothing for the checkout's own; make then runs on those roots."""
    roots = {"corpora": tmp_path / "a" / "corpora", "indexes": tmp_path / "idx",
             "runs": tmp_path / "a" / "runs"}
    (roots["corpora"] / "c").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(roots["corpora"]), "--index-root", str(roots["indexes"]),
                           "--runs-root", str(roots["runs"]), "index", "--corpus", "c",
                           "--model", "bm25"], cwd=ROOT, capture_output=True, text=True,
                          timeout=CHILD_BOUND_S)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    command = line.rsplit("; repair: ", 1)[1]
    assert command == (f"make pool CORPUS=c CORPORA_DIR={roots['corpora']} "
                       f"INDEX_DIR={roots['indexes']} RUNS_DIR={roots['runs']}"), line
    done = make(tmp_path / "elsewhere", "-n", *command.split()[1:], "SIZE=1k")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"--corpora-root '{roots['corpora']}' --index-root '{roots['indexes']}' "
            f"--runs-root '{roots['runs']}' pool --corpus 'c'") in done.stdout
    # one folder's three roots: DATA alone
    data = tmp_path / "scratch"
    (data / "corpora" / "c").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                           str(data / "corpora"), "--index-root", str(data / "indexes"),
                           "--runs-root", str(data / "runs"), "index", "--corpus", "c",
                           "--model", "bm25"], cwd=ROOT, capture_output=True, text=True,
                          timeout=CHILD_BOUND_S)
    assert done.stderr.rstrip().endswith(f"; repair: make pool CORPUS=c DATA={data}"), \
        done.stderr


def test_make_help_names_the_new_targets():
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0
    for target in ("make test-fast", "make lint", "make check"):
        assert target in done.stdout


def test_the_declaration_needs_no_environment():
    """The Makefile runs the check with the system python: no third-party import."""
    code = ("import sys; import pipeline.cli.variables; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'polars', 'torch', 'pyarrow', 'faiss', 'ranx')]; print(bad)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=CHILD_BOUND_S)
    assert done.stdout.strip() == "[]", done.stderr


def test_an_unknown_variable_on_makes_command_line_is_refused(tmp_path):
    """`make eval MODLE=bm25` would run the default model on every pool: refused, with the
    nearest known name. The environment's variables, make's and the Makefile's own pass."""
    line = refusal(make(tmp_path, "eval", "MODLE=bm25"))
    assert "unknown variable MODLE on make's command line: did you mean MODEL?" in line
    env = {**os.environ, "MODLE_IN_ENV": "x"}
    done = subprocess.run(["make", "--no-print-directory", "-n", "help", f"DATA={tmp_path}",
                           "PYTHON=" + sys.executable, "TIME=10", "STAMP=.venv/.installed"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr


def test_a_bad_value_is_one_line_before_anything_runs(tmp_path):
    """The goal's process checks every value before its first stage: one line (make's own
    `make: *** ... Error 2` after it), the value's line break named, nothing written."""
    for assignment, says in (("SIZE=abc", "SIZE: malformed SIZE 'abc'"),
                             ("CORPUS=a\nb", "CORPUS holds a line break"),
                             ("FIELD=medicine\nbiology", "error: FIELD holds a line break: "
                                                          "give the value on one line")):
        line = refusal(make(tmp_path / "data", "pool", assignment))
        assert says in line, line
        assert [p.name for p in (tmp_path / "data").iterdir()] == ["installed"]  # the stamp


def test_make_refuses_a_dollar_itself(tmp_path):
    """A '$' on make's command line would run as make code where make exports the value to a
    recipe (`$(shell ...)`): make refuses it while it reads the Makefile, before any recipe
    (here none could run: PYTHON is no executable), and the code never runs."""
    mark = tmp_path / "ran"
    done = make(tmp_path, "help", f"FIELD=$(shell touch {mark})", "PYTHON=/no/python")
    assert "a value on make's command line holds a '$'" in refusal(done)
    assert not mark.exists()


# Values make must hand over exactly: spaces (two, at the end), quotes, '$' (doubled by make),
# '=', backslashes (alone, doubled, before a space, at the end), a tab, unicode, empty.
HOSTILE = {"A": "x  y", "B": "it's \"quoted\"", "C": "a=b=c", "D": "back\\slash",
           "E": "two\\\\ before a space\\", "F": "tab\there", "G": "ünï €", "H": "",
           "I": "-- J=not a variable", "K": "$dollar"}


def test_makeflags_is_parsed_exactly_as_make_writes_it(tmp_path):
    """GNU make hands its command line's variables to every recipe in MAKEFLAGS, escaped:
    make_command_line gives back each value exactly, in the order given, with make's flags
    (-n: n)."""
    makefile = tmp_path / "Makefile"
    makefile.write_text("all:\n\t+@printf '%s' \"$$MAKEFLAGS\" > flags\n")
    for flag, flags in (([], ""), (["-n"], "n"), (["-s", "-k"], "ks")):
        done = subprocess.run(["make", "--no-print-directory", *flag, "-f", str(makefile),
                               *(f"{k}={v}" for k, v in HOSTILE.items())],
                              cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "MAKEFLAGS": ""}, timeout=CHILD_BOUND_S)
        assert done.returncode == 0, done.stderr
        got_flags, values = make_command_line((tmp_path / "flags").read_text())
        assert values == HOSTILE and list(values) == list(HOSTILE)
        assert sorted(got_flags) == sorted(flags)
    assert make_command_line("") == ("", {})
    with pytest.raises(InputError, match="'A:' on make's command line is no NAME=value"):
        make_command_line(" -- A:=1")


def test_a_hostile_value_reaches_the_stage_as_given(tmp_path):
    """A file name with spaces, quotes, '=', a backslash and unicode, on make's command line,
    reaches the stage's command (make -n prints it quoted) unchanged."""
    root = with_pool(tmp_path / "data")
    value = f"{tmp_path}/my runs/a=b \\ it's \"x\" ü.trec"
    done = make(root, "-n", "import-run", "CORPUS=c", "POOL=all-1k-r0", "MODEL=mine",
                f"RUN={value}")
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout.splitlines()[-1])
    assert words[words.index("--run") + 1] == value


@pytest.mark.parametrize("flag", ["-n", "-t", "-q"])
def test_make_n_t_and_q_print_the_stages_and_run_none(flag, tmp_path):
    """make -n, -t and -q run the `+` recipes, whose goals (told by make's flags in
    MAKEFLAGS) print their stages' commands and run none: nothing is written under DATA."""
    root = with_pool(tmp_path / "data")
    before = sorted(root.rglob("*"))
    done = make(root, flag, "eval", "CORPUS=c", "MODEL=bm25")
    assert done.returncode == 0, done.stderr[-2000:]
    assert " eval --corpus 'c' --model 'bm25'" in done.stdout
    assert sorted(p for p in root.rglob("*") if p.name != "installed") == before  # the stamp


def test_a_file_a_stage_only_reads_may_hold_spaces_and_quotes(tmp_path):
    """Issue 46: a run imported from `my runs/x.trec` (by pipeline.import_run) was repaired by a
    `make import-run RUN='...'` that make refused. RUN and SRC, files the stages only read,
    take any characters but control characters (no shell sees them; the printed command quotes
    them): each is passed on as given; a control character is refused."""
    root = with_pool(tmp_path / "data")
    for variable, goal, extra in (("RUN", "import-run", ("POOL=all-1k-r0", "MODEL=mine")),
                                  ("SRC", "import-vectors", ("MODEL=mine",))):
        value = f"{tmp_path}/my runs/it's a (1) #file; é.txt"
        done = make(root, "-n", goal, "CORPUS=c", *extra, f"{variable}={value}")
        assert done.returncode == 0, done.stderr
        words = shlex.split(done.stdout.splitlines()[-1])  # the stage's command, as printed
        assert words[words.index("--run" if variable == "RUN" else "--src") + 1] == value
        bad = value.replace(" ", "\t", 1)  # (make itself strips spaces at either end)
        assert variable in refusal(make(root, "-n", goal, "CORPUS=c", *extra,
                                        f"{variable}={bad}"))
