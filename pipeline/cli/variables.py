"""make's variables: read from make's command line (MAKEFLAGS) and the environment, each
checked by its declaration (pipeline/options/declared.py), and the names and paths the goals'
commands use (`derived`: make never composes them). Standard library only: the Makefile runs
the check with the system Python, before the environment exists."""

from __future__ import annotations

import argparse
import difflib
import logging
import re
import sys
from collections.abc import Mapping

from pipeline import layout
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import recorded_source, written_whole
from pipeline.models import IMPORT_VECTORS, VECTORS_PREFIX, chosen_model
from pipeline.options.declared import BY_NAME, VARIABLES, Variable
from pipeline.roots import ROOT_VARIABLES, roots_of

log = logging.getLogger(__name__)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (`error: ...`) and exit status 2, not usage text;
    an option's refusal names it as make's names a variable (`--k: ...`, `K: ...`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {self.prog}: {message.removeprefix('argument ')}", file=sys.stderr)
        raise SystemExit(2)


# The data folders' variables: a command the check suggests names those given
WHERE = ("DATA", *ROOT_VARIABLES.values())
# The Makefile's own interpreter and environment: plain paths only (make runs them, quoted)
TOOL_VARS = ("PYTHON", "VENV", "PY", "STAMP")
TOOL_PATH = re.compile(r"[A-Za-z0-9._/+-]+")
# What make's command line may set besides VARIABLES
MAKE_OWN = frozenset({*TOOL_VARS, "SHELL", ".SHELLFLAGS", "MAKE", "MAKEFLAGS", "MFLAGS",
                      "MAKEFILES", "MAKEOVERRIDES", "GNUMAKEFLAGS", "MAKESHELL"})
GOALS_ENV = "MDCR_MAKE_GOALS"  # make's goals (MAKECMDGOALS), exported by the Makefile
# make's flags that run no recipe but the `+` ones (-n, -t, -q): the goals print their stages
DRY_RUN_FLAGS = frozenset("ntq")
# Set in a command's environment: its errors name make's variables (a goal's always do)
FROM_MAKE = "MDCR_PIPELINE_FROM_MAKE"


def refuse_unsafe(environ: Mapping[str, str], names: list[str]) -> None:
    """Refuse a value holding '$' (make would run it as make code) or a line break (make
    refuses both on its command line), and a tool variable that is no plain path."""
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


def checked_value(var: Variable, text: str) -> object:
    """`text` as `var`'s check reads it (optional: empty is None); InputError naming it
    (once: a check whose line begins `NAME=` names it already)."""
    if var.optional and text == "":
        return None
    if var.check is None or var.with_goals:  # with_goals: RULES check it (MODEL)
        return text
    try:
        return var.check(text)
    except InputError as exc:
        said = str(exc)
        raise InputError(said if said.startswith(f"{var.name}=") else f"{var.name}: {said}"
                         ) from None


def make_command_line(makeflags: str) -> tuple[str, dict[str, str]]:
    """MAKEFLAGS as GNU make writes it: its one-letter flags (its first word, unless that
    starts with '-') and its command line's variables (after ` -- `, latest first, a character
    after a backslash itself, '$$' one '$'), in the order given; InputError for no NAME=value."""
    flags_part, _, rest = f" {makeflags}".partition(" -- ")
    first = (flags_part.split() or [""])[0]
    words = [re.sub(r"\\(.)", r"\1", word, flags=re.S).replace("$$", "$")
             for word in re.findall(r"(?:\\.?|[^ \\])+", rest, re.S)]
    assignments: dict[str, str] = {}
    for word in reversed(words):
        name, equals, value = word.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_.][A-Za-z0-9_.]*", name):
            raise InputError(f"{name!r} on make's command line is no NAME=value: give each "
                             "variable as NAME=value (make eval MODEL=bm25)")
        assignments[name] = value
    return "" if first.startswith("-") else first, assignments


def read_make(environ: Mapping[str, str]) -> argparse.Namespace:
    """The variables of a make recipe's process (`read`, make's command line from MAKEFLAGS);
    DRY_RUN when make runs with -n, -t or -q."""
    flags, command_line = make_command_line(environ.get("MAKEFLAGS", ""))
    args = read(environ, command_line)
    args.DRY_RUN = bool(DRY_RUN_FLAGS & set(flags))
    return args


def read(environ: Mapping[str, str], command_line: Mapping[str, str] | None = None
         ) -> argparse.Namespace:
    """Each variable from make's `command_line`, else `environ`, else its default, checked.
    With GOALS, GIVEN, COMMAND_LINE, DRY_RUN."""
    command_line = dict(command_line or {})
    names = list(command_line)
    environ = {**environ, **command_line}
    given = [v.name for v in VARIABLES if v.name in environ]
    refuse_unsafe(environ, [*given, *(n for n in TOOL_VARS if n in environ)])
    texts: dict[str, str] = {}  # a default may follow the values before it (SOURCE: CORPUS)
    args = argparse.Namespace()
    for var in VARIABLES:
        texts[var.name] = environ[var.name] if var.name in given else var.text(texts)
        setattr(args, var.name, checked_value(var, texts[var.name]))
    args.GOALS = environ.get(GOALS_ENV, "")
    args.GIVEN = " ".join(given)
    args.COMMAND_LINE = " ".join(names)
    args.DRY_RUN = False
    return args


def as_corpus(args: argparse.Namespace, corpus: str) -> argparse.Namespace:
    """make's variables with CORPUS=`corpus`, and the defaults that follow CORPUS (SOURCE,
    QUERIES, MDCR) taken again where not given: make demo's, whatever CORPUS says."""
    values = {**vars(args), "CORPUS": corpus}
    texts = {name: value for name, value in values.items() if isinstance(value, str)}
    for var in VARIABLES:
        if callable(var.default) and var.name not in args.GIVEN.split():
            values[var.name] = checked_value(var, var.default(texts))
    return argparse.Namespace(**values)


def check_command_line(names: str) -> None:
    """A variable of make's command line that make does not know (MODLE=bm25) would be
    ignored: InputError with the nearest name."""
    known = sorted({*BY_NAME, *MAKE_OWN})
    unknown = sorted(set(names.split()) - set(known))
    if unknown:
        near = difflib.get_close_matches(unknown[0], known, n=1)
        raise InputError(f"unknown variable {unknown[0]} on make's command line"
                         + (f": did you mean {near[0]}?" if near else "")
                         + " (the variables: docs/variables.md, or python3 -m pipeline "
                         "variables)")


def run_without_model(args: argparse.Namespace) -> bool:
    """Whether MODEL names a run with no model behind it: make import-run's, or one imported
    into a pool of CORPUS already (make eval scores it, never searches with it)."""
    from pipeline.retrieval.imported import imported_pools

    if not args.MODEL or not args.CORPUS:
        return False
    if layout.IMPORT_RUN in (args.GOALS or "").split():
        return True
    return bool(imported_pools(roots_of(args)["runs"], args.CORPUS, args.MODEL))


def model_spec(args: argparse.Namespace) -> str:
    """MODEL as the stages take it: `vectors:<MODEL>` with make import-vectors among the goals
    (the stages after it then search the vectors it imports)."""
    if args.MODEL and IMPORT_VECTORS in (args.GOALS or "").split():
        return VECTORS_PREFIX + args.MODEL.removeprefix(VECTORS_PREFIX)
    return args.MODEL or ""


def model_names(args: argparse.Namespace) -> dict[str, str]:
    """MODEL_FILE (the stages' --model: MODEL resolved with POOLING, PRECISION and
    QUERY_PROMPT) and MODEL_NAME (its runs', with QUERY_VARIANT); empty without MODEL."""
    model = args.MODEL or ""
    if model and not run_without_model(args):  # an imported run's name: check_model_name's
        model = chosen_model(model_spec(args), args.POOLING, args.PRECISION,
                             args.QUERY_PROMPT).name
    return {"MODEL_FILE": model,
            "MODEL_NAME": layout.run_name(model, args.QUERY_VARIANT or "full") if model else ""}


def derived(args: argparse.Namespace, models: dict[str, str] | None = None) -> dict[str, str]:
    """What the goals' commands use, from the checked values (empty where not given): the data
    roots (absolute), SOURCE (where not given, the one the corpus's manifest records), RAW_DIR
    (RAW or the corpus's raw folder of that source), WRITTEN_WHOLE (the kind of a corpus
    written whole: nothing to ingest) and `models` (model_names', resolved once per goal)."""
    roots, corpus = roots_of(args), args.CORPUS
    source = args.SOURCE  # not given: the one the corpus's manifest records, where it does
    if corpus and "SOURCE" not in args.GIVEN.split():
        source = recorded_source(roots["corpora"] / corpus) or source
    raw = layout.raw_dir(roots["corpora"], corpus, source) if corpus and source else ""
    values = {"CORPORA_ROOT": roots["corpora"], "INDEX_ROOT": roots["indexes"], "SOURCE": source,
              "RUNS_ROOT": roots["runs"], "RAW_DIR": args.RAW or raw,
              "WRITTEN_WHOLE": written_whole(roots["corpora"] / corpus) if corpus else "",
              **(models or model_names(args))}
    return {name: str(value) for name, value in values.items()}
