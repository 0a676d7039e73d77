"""make's variables: read from the environment (`read`), each checked by its declaration
(pipeline/options/declared.py), and the names and paths the goals' commands use (`derived`:
make never composes them). Standard library only: the Makefile runs the check with the system
Python, before the environment exists."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from pipeline import layout
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import written_whole
from pipeline.models import IMPORT_VECTORS, VECTORS_PREFIX, chosen_model
from pipeline.options.declared import BY_NAME, VARIABLES, Variable
from pipeline.roots import data_roots


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (`error: ...`) and exit status 2, not usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


# The names and paths the goals' commands use (pipeline/cli/goals.py)
DERIVED = {
    "CORPORA_ROOT": "CORPORA_DIR, or DATA's corpora/ folder (absolute): --corpora-root",
    "INDEX_ROOT": "INDEX_DIR, or DATA's indexes/ folder (absolute): --index-root",
    "RUNS_ROOT": "RUNS_DIR, or DATA's runs/ folder (absolute): --runs-root",
    "RAW_DIR": "RAW, or the corpus's default raw folder",
    "WRITTEN_WHOLE": "benchmark or collection when CORPUS was written whole by one command "
                     "(make mdcr, the imports: nothing to ingest), else empty",
    "MODEL_NAME": "the name MODEL's runs are written under (with QUERY_VARIANT)",
    "MODEL_FILE": "MODEL's file-safe name (the stages' --model)",
}


# The data folders' variables: a command the check suggests names those given (they locate
# the data it acts on).
WHERE = ("DATA", "CORPORA_DIR", "INDEX_DIR", "RUNS_DIR")


# The Makefile's own interpreter and environment: plain paths only (make runs them, quoted)
TOOL_VARS = ("PYTHON", "VENV", "PY", "STAMP")
TOOL_PATH = re.compile(r"[A-Za-z0-9._/+-]+")
# What make's command line may set besides VARIABLES (and their aliases)
MAKE_OWN = frozenset({*TOOL_VARS, "SHELL", ".SHELLFLAGS", "MAKE", "MAKEFLAGS", "MFLAGS",
                      "MAKEFILES", "MAKEOVERRIDES", "GNUMAKEFLAGS", "MAKESHELL"})
# What the Makefile exports to its recipes: make's goals (MAKECMDGOALS); make itself hands its
# flags and its command line's variables to every recipe in MAKEFLAGS (make_command_line)
GOALS_ENV = "MDCR_MAKE_GOALS"
MAKEFLAGS = "MAKEFLAGS"
# make's flags that run no recipe but the `+` ones (-n, -t, -q): the goals print their stages
DRY_RUN_FLAGS = frozenset("ntq")
ALIAS = {v.alias: v.name for v in VARIABLES if v.alias}


def refuse_unsafe(environ: Mapping[str, str], names: list[str]) -> None:
    """Refuse a value of the environment holding '$' (make would run it as make code) or a
    line break (make refuses both on its command line), and a tool variable no plain path."""
    for name in names:
        if "$" in environ[name]:
            raise InputError(f"{name} holds a '$', which make would run as code: give a plain "
                             "value")
        if "\n" in environ[name] or "\r" in environ[name]:
            raise InputError(f"{name} holds a line break: give the value on one line")
        if name in TOOL_VARS and not TOOL_PATH.fullmatch(environ[name]):
            raise InputError(f"{name} must be one executable or path of letters, digits and "
                             "._/+- (no spaces or shell characters), e.g. PYTHON=python3.11 or "
                             "VENV=.venv")


def checked_value(var: Variable, name: str, text: str) -> object:
    """`text` as `var`'s check reads it (`optional`: an empty value is no value, None);
    InputError naming the variable (or its alias, `name`) otherwise."""
    if var.optional and text == "":
        return None
    if var.check is None:
        return text
    try:
        return var.check(text)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def make_command_line(makeflags: str) -> tuple[str, dict[str, str]]:
    """make's MAKEFLAGS split into its one-letter flags (its first word, unless that starts
    with '-') and the variables of its command line (the words after ` -- `), each unescaped
    as GNU make escapes it: a space or tab after a backslash is part of the value, a doubled
    backslash is one, a doubled '$' is one. make lists the variables last given first: the
    result is in the order given. InputError for a word that is no NAME=value."""
    text = " " + makeflags
    flags_part, _, rest = text.partition(" -- ")
    first = flags_part.split()[0] if flags_part.split() else ""
    flags = "" if first.startswith("-") else first
    words: list[str] = []
    word: list[str] = []
    chars = iter(rest)
    for char in chars:
        if char == "\\":
            char = next(chars, "\\")  # an escaped space, tab or backslash: itself
        elif char == " ":
            words.append("".join(word))
            word = []
            continue
        word.append(char)
    words.append("".join(word))
    assignments: dict[str, str] = {}
    for word in reversed([w.replace("$$", "$") for w in words if w]):
        name, equals, value = word.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_.][A-Za-z0-9_.]*", name):
            raise InputError(f"{word.split('=')[0]!r} on make's command line is no "
                             "NAME=value: give each variable as NAME=value (make eval "
                             "MODEL=bm25)")
        assignments[name] = value
    return flags, assignments


def read_make(environ: Mapping[str, str]) -> argparse.Namespace:
    """The variables of a make recipe's process (`read`): those of make's command line from
    MAKEFLAGS, the others from `environ`; DRY_RUN when make runs with -n, -t or -q."""
    flags, command_line = make_command_line(environ.get(MAKEFLAGS, ""))
    args = read(environ, command_line)
    args.DRY_RUN = bool(DRY_RUN_FLAGS & set(flags))
    return args


def read(environ: Mapping[str, str], command_line: Mapping[str, str] | None = None
         ) -> argparse.Namespace:
    """Each variable from `environ` and make's `command_line` (make_command_line: its values
    win), else its default, checked; TIME only from make's command line (the environment's is
    GNU time's). With GOALS, GIVEN, COMMAND_LINE and DRY_RUN (False: read_make sets it)."""
    command_line = command_line or {}
    environ, names = {**environ, **command_line}, list(command_line)
    given = [v.name for v in VARIABLES if v.name in environ]
    aliased = [a for a, name in ALIAS.items() if a in names and name not in names]
    refuse_unsafe(environ, [*given, *aliased, *(n for n in TOOL_VARS if n in environ)])
    texts: dict[str, str] = {}  # a default may follow the values before it (SOURCE: CORPUS)
    for var in VARIABLES:
        default = var.default(texts) if callable(var.default) else var.default
        texts[var.name] = environ[var.name] if var.name in given else default
    args = argparse.Namespace(**{var.name: checked_value(var, var.name, texts[var.name])
                                 for var in VARIABLES})
    for alias, name in ALIAS.items():
        value = checked_value(BY_NAME[name], alias, environ[alias]) if alias in aliased else None
        setattr(args, alias, value)
        if alias in aliased:
            setattr(args, name, value)
    args.GOALS = environ.get(GOALS_ENV, "")
    args.GIVEN = " ".join(given)
    args.COMMAND_LINE = " ".join(names)
    args.DRY_RUN = False
    return args


def check_command_line(names: str) -> None:
    """A variable of make's command line (never the environment's: PATH and the like) that
    make does not know, misspelt (MODLE=bm25), would be ignored: InputError with the nearest
    name."""
    known = sorted({*BY_NAME, *(v.alias for v in VARIABLES if v.alias), *MAKE_OWN})
    for name in sorted(set(names.split())):
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"unknown variable {name} on make's command line"
                             + (f": did you mean {near[0]}?" if near else "")
                             + " (the variables: docs/variables.md, or python3 -m pipeline "
                             "variables)")


def _roots(args: argparse.Namespace) -> dict[str, Path]:
    return data_roots(args.DATA or ".", corpora=args.CORPORA_DIR,
                      indexes=args.INDEX_DIR, runs=args.RUNS_DIR)


# Set by the Makefile for the commands it runs: their errors name make's variables
FROM_MAKE = "MDCR_PIPELINE_FROM_MAKE"
def run_without_model(args: argparse.Namespace) -> bool:
    """Whether MODEL names a run with no model behind it: make import-run's, or one imported
    into a pool of CORPUS already (make eval scores it, never searches with it)."""
    from pipeline.retrieval.imported import imported_pools

    if not args.MODEL or not args.CORPUS:
        return False
    if layout.IMPORT_RUN in (args.GOALS or "").split():
        return True
    return bool(imported_pools(_roots(args)["runs"], args.CORPUS, args.MODEL))


def model_spec(args: argparse.Namespace) -> str:
    """MODEL as the stages take it: `vectors:<MODEL>` with make import-vectors among the goals
    (the stages after it then search the vectors it imports)."""
    if args.MODEL and IMPORT_VECTORS in (args.GOALS or "").split():
        return VECTORS_PREFIX + args.MODEL.removeprefix(VECTORS_PREFIX)
    return args.MODEL or ""


def derived(args: argparse.Namespace) -> dict[str, str]:
    """The names and paths of DERIVED, from the checked values (empty where one is not given)."""
    roots = _roots(args)
    corpus = args.CORPUS
    corpus_dir = roots["corpora"] / corpus if corpus else None
    values = {"CORPORA_ROOT": roots["corpora"], "INDEX_ROOT": roots["indexes"],
              "RUNS_ROOT": roots["runs"]}
    values["RAW_DIR"] = args.RAW or (
        layout.raw_dir(roots["corpora"], corpus, args.SOURCE) if corpus and args.SOURCE else "")
    values["WRITTEN_WHOLE"] = written_whole(corpus_dir) if corpus_dir else ""
    model = ""
    if args.MODEL and run_without_model(args):
        model = args.MODEL  # an imported run's name: checked by check_model_name
    elif args.MODEL:
        model = chosen_model(model_spec(args), args.POOLING, args.PRECISION,
                             args.QUERY_PROMPT).name
    values["MODEL_FILE"] = model
    values["MODEL_NAME"] = layout.run_name(model, args.QUERY_VARIANT or "full") if model else ""
    assert values.keys() == DERIVED.keys()
    return {name: str(value) for name, value in values.items()}
