"""make's variables as the command line reads them: from the environment make passes its
command line in (`read`), each checked by its declaration (pipeline/options/declared.py), with
what make's goals need (TARGETS, check_goals); then the names and paths the goals' commands use
(`derived`: make never composes a model's, a pool's or a data folder's name itself).
`python -m pipeline variables --write` writes docs/variables.md again (the declaration's
markdown); tests/cli/test_variables.py fails when the committed one differs.

Standard library only, like the rest of the check (the Makefile runs it with the system Python
before the environment exists); main imports this module only when it builds its parser.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pipeline import layout
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import written_whole
from pipeline.models import (
    HF_PREFIX,
    IMPORT_VECTORS,
    VECTORS_PREFIX,
    get_model,
    with_precision,
)
from pipeline.options.declared import BY_NAME, VARIABLES, Variable, markdown
from pipeline.roots import ROOT_OPTIONS, ROOT_VARIABLES, data_roots


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (`error: ...`) and exit status 2, not usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if self.prog.endswith(" check"):  # options named after make variables: name the variable
            print(f"error: {message.removeprefix('argument --')}", file=sys.stderr)
        else:
            print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


ROOT = Path(__file__).resolve().parents[2]
DOCS = Path(layout.VARIABLES_DOC)


# The names and paths the goals' commands use (pipeline/cli/goals.py), from the checked values:
# never composed by make.
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


# The Makefile's own interpreter and environment: settable on make's command line or in the
# environment, plain paths only (make runs them, single-quoted).
TOOL_VARS = ("PYTHON", "VENV", "PY", "STAMP")
TOOL_PATH = re.compile(r"[A-Za-z0-9._/+-]+")
# What make's command line may set besides VARIABLES (and their aliases): TOOL_VARS and make's
# own variables.
MAKE_OWN = frozenset({*TOOL_VARS, "SHELL", ".SHELLFLAGS", "MAKE", "MAKEFLAGS", "MFLAGS",
                      "MAKEFILES", "MAKEOVERRIDES", "GNUMAKEFLAGS", "MAKESHELL"})
# make's goals (MAKECMDGOALS), which the Makefile exports under this name: what they need is
# checked (TARGETS), and some names depend on them (model_spec, run_without_model).
GOALS_ENV = "MDCR_MAKE_GOALS"
# make's command line as the Makefile's check gets it: $(shell) does not see it, so the Makefile
# passes MAKEOVERRIDES (`CORPUS=c MODEL=a\\ b`: a backslash escapes the next character), with
# each line break as the byte 0x1e ($(shell) would drop it).
OVERRIDES_ENV, LINE_BREAK = "MDCR_MAKE_OVERRIDES", "\x1e"
# The Makefile hands its check's token (`checked_token`) to its recipes under this name
CHECKED_ENV = "MDCR_CHECKED"
ALIAS = {v.alias: v.name for v in VARIABLES if v.alias}


def command_line(makeflags: str) -> list[str]:
    """The names of the variables given on make's command line, in MAKEFLAGS as make passes
    it to a recipe (`ks -j2 -- CORPUS=c MODEL=a\\ b`: the assignments after ` -- `, a space
    in a value escaped); never the environment's."""
    match = re.search(r"(?:^| )-- (.*)", makeflags, re.S)
    words = re.split(r"(?<!\\) ", match.group(1)) if match else []
    names = (re.match(r"([^\s:+?!=]+)\s*[:+?!]*=", word) for word in words)
    return [name.group(1) for name in names if name]


def overrides(text: str) -> dict[str, str]:
    """The assignments of make's MAKEOVERRIDES (`A=x B=y\\ z`), name -> value, in their order:
    words split at unescaped spaces, a backslash taking the next character as it is."""
    words, word, escaped = [], [], False
    for char in text.replace(LINE_BREAK, "\n"):
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == " ":
            words.append("".join(word))
            word = []
        else:
            word.append(char)
    words.append("".join(word))
    found = (re.fullmatch(r"([^\s:+?!=]+)\s*[:+?!]*=(.*)", w, re.S) for w in words if w)
    return {m.group(1): m.group(2) for m in found if m}


def dry_run(makeflags: str) -> bool:
    """Whether make runs with -n (or -t, -q): its one-letter flags are MAKEFLAGS's first word.
    The goals then print their commands and run none (the Makefile runs them with `+`)."""
    first = makeflags.split(" ", 1)[0]
    return not first.startswith("-") and "=" not in first and bool(set(first) & set("ntq"))


def refuse_unsafe(environ: Mapping[str, str], names: list[str]) -> None:
    """A value holding '$' or a line break, or a tool variable (PYTHON, VENV, ...) that is no
    plain path, is refused: make would run a '$' as make code (the Makefile refuses it on its
    command line itself, before passing it on), and a value is one line."""
    for name in names:
        value = environ[name]
        if "$" in value:
            raise InputError(f"{name} holds a '$', which make would run as code: give a plain "
                             "value")
        if "\n" in value or "\r" in value:
            raise InputError(f"{name} holds a line break: give the value on one line")
    for name in (n for n in TOOL_VARS if n in names):
        if not TOOL_PATH.fullmatch(environ[name]):
            raise InputError(f"{name} must be one executable or path of letters, digits and "
                             "._/+- (no spaces or shell characters), e.g. PYTHON=python3.11 or "
                             "VENV=.venv")


def default_value(var: Variable, values: dict[str, str]) -> str:
    """The default of `var`, given the values of the variables declared before it."""
    return var.default(values) if callable(var.default) else var.default


def read(environ: Mapping[str, str]) -> argparse.Namespace:
    """The variables as make's recipes get them: each from `environ` (make's command line,
    which make exports, or the environment), else its default, checked by its argparse type
    (one line naming the variable, exit status 2); SLURM_TIME from TIME when TIME came on make's
    command line (a TIME of the environment is GNU time's). With GOALS (make's goals), GIVEN
    (the variables given) and COMMAND_LINE (every variable on make's command line, known or
    not), as check_goals reads them, and DRY_RUN (make -n)."""
    if OVERRIDES_ENV in environ:  # the Makefile's check: its command line from MAKEOVERRIDES
        line = overrides(environ[OVERRIDES_ENV])
        environ, names = {**environ, **line}, list(line)
    else:  # a recipe's: make exported its command line, and names it in MAKEFLAGS
        names = command_line(environ.get("MAKEFLAGS", ""))
    given = [v.name for v in VARIABLES if v.name in environ]
    aliased = [a for a, name in ALIAS.items() if a in names and name not in names]
    refuse_unsafe(environ, [*given, *aliased, *(n for n in TOOL_VARS if n in environ)])
    values: dict[str, str] = {}
    for var in VARIABLES:
        values[var.name] = environ[var.name] if var.name in given else default_value(var, values)
    argv = [f"--{name}={value}" for name, value in values.items()]
    argv += [f"--{alias}={environ[alias]}" for alias in aliased]
    parser = OneLineParser(prog="python -m pipeline check")
    add_options(parser)
    args = parser.parse_args(argv)
    for alias in aliased:
        setattr(args, ALIAS[alias], getattr(args, alias))
    args.GOALS = environ.get(GOALS_ENV, "")
    args.GIVEN = " ".join(given)
    args.COMMAND_LINE = " ".join(names)
    args.DRY_RUN = dry_run(environ.get("MAKEFLAGS", ""))
    return args


def checked_token(args: argparse.Namespace) -> str:
    """A digest of what the check checks: every variable's value as read, the variables given
    and on make's command line, make's goals. The Makefile's check and a goal of the same make
    read the same, so a goal whose token is the check's has nothing to check again."""
    seen = {name: " ".join(sorted(value.split())) if name in ("GIVEN", "COMMAND_LINE")
            else repr(value) for name, value in vars(args).items() if name != "DRY_RUN"}
    return hashlib.sha256(repr(sorted(seen.items())).encode()).hexdigest()[:32]


def check_command_line(names: str) -> None:
    """Every variable given on make's command line (COMMAND_LINE, never the environment's,
    which holds PATH and the like) is one make knows: a misspelt one (MODLE=bm25) would
    otherwise be ignored, and the default run instead. InputError with the nearest name."""
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


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--NAME` for every variable (and --TIME, SLURM_TIME's alias), checked by its type: how
    `read` checks the values (so an error names the variable)."""
    for var in VARIABLES:
        kind = _optional(var.check) if var.optional else var.check
        for name in filter(None, (var.name, var.alias)):
            parser.add_argument(f"--{name}", type=kind, help=var.help, metavar="VALUE")


def _optional(check: Callable[[str], object] | None) -> Callable[[str], object]:
    """An empty value is no value (None); any other goes to `check`."""
    def parse(text: str) -> object:
        return None if text == "" else (check(text) if check else text)
    parse.__name__ = getattr(check, "__name__", "value")
    return parse


# The Makefile sets this in the environment of every command it runs (PIPE), so that their
# errors name make's variables, which is what the user typed.
FROM_MAKE = "MDCR_PIPELINE_FROM_MAKE"
# Options the goals fill from a variable besides its own (Variable.option)
OPTION_VARIABLES = {"--cpus-per-task": "THREADS", "--workers": "THREADS",
                    **{option: ROOT_VARIABLES[kind]
                       for kind, option in ROOT_OPTIONS.items()}}


def in_make_words(message: str) -> str:
    """An error message of a command make ran, with its options written as the make
    variables that set them: `--backend faiss-gpu` -> `BACKEND=faiss-gpu`. An option two
    variables set (--models: MODELS, DEMO_MODELS) is written as the first one declared."""
    names = dict(reversed([(v.option, v.name) for v in VARIABLES]))
    names.update(OPTION_VARIABLES)

    def rewrite(match: re.Match) -> str:
        name = names.get(match.group(1))
        if name is None:
            return match.group(0)
        return f"{name}={match.group(2)}" if match.group(2) else name

    return re.sub(r"(--[a-z0-9][a-z0-9-]*)(?:[ =]([^\s:;,()]+))?", rewrite, message)


def run_without_model(args: argparse.Namespace) -> bool:
    """Whether MODEL names a run with no model behind it: the run make import-run writes (its
    goal), or one imported into a pool of CORPUS already (make eval scores it, never searches
    with it). Such a name is no registered model's (check_model_name)."""
    from pipeline.retrieval.imported import imported_pools

    if not args.MODEL or not args.CORPUS:
        return False
    if layout.IMPORT_RUN in (args.GOALS or "").split():
        return True
    return bool(imported_pools(_roots(args)["runs"], args.CORPUS, args.MODEL))


def model_spec(args: argparse.Namespace) -> str:
    """MODEL as the stages take it: with make import-vectors among the goals, MODEL is the
    name of the vectors it imports, so the model is `vectors:<MODEL>` (the stages after it in
    the same make then search those vectors)."""
    if args.MODEL and IMPORT_VECTORS in (args.GOALS or "").split():
        return VECTORS_PREFIX + args.MODEL.removeprefix(VECTORS_PREFIX)
    return args.MODEL or ""


def derived(args: argparse.Namespace) -> dict[str, str]:
    """The names and paths make reads from the check's line (every key of DERIVED), from the
    checked values; a variable not given yields empty values."""
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
        spec = model_spec(args)
        if spec.startswith(HF_PREFIX):
            spec = f"{spec}@{args.POOLING or 'mean'}"
        entry = get_model(spec)
        model = with_precision(entry, args.PRECISION or "fp32").name
    values["MODEL_FILE"] = model
    values["MODEL_NAME"] = layout.run_name(model, args.QUERY_VARIANT or "full") if model else ""
    assert values.keys() == DERIVED.keys()
    return {name: str(value) for name, value in values.items()}


def generated() -> dict[Path, str]:
    """Each generated file (relative to the checkout) and the text it must hold."""
    return {DOCS: markdown()}


def stale(root: Path = ROOT) -> list[Path]:
    """The generated files that differ from what the declaration gives."""
    return [path for path, text in generated().items()
            if not (root / path).exists() or (root / path).read_text() != text]


def write(root: Path = ROOT) -> list[Path]:
    """Write the stale generated files; returns them."""
    written = stale(root)
    for path in written:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        tmp = root / path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(generated()[path])
        os.replace(tmp, root / path)
    return written
