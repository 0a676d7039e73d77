"""The generated parts of docs/variables.md and docs/api.md (the tables between their markers),
from the declarations (pipeline/options/declared.py) and the public functions' signatures:
`python -m pipeline variables --write` writes them, tests/cli/test_variables.py fails while
they differ. Here, at the top of the layers, as it reads the API's signatures."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from pipeline import layout
from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.options import arguments, declared
from pipeline.options.checks import maximum
from pipeline.options.declared import Variable

BLOCK_START = "<!-- generated from the declarations (python -m pipeline variables --write) -->"
BLOCK_END = "<!-- end of the generated part -->"
ROOT = Path(__file__).resolve().parents[2]  # the checkout


def md_text(text: str) -> str:
    """Text as a Markdown table cell shows it (`<org>` is not an HTML tag)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _shown(var: Variable) -> str:
    if var.shown:
        return md_text(var.shown)
    return f"`{var.text()}`" if var.text() else "(empty)"


def _bounds(var: Variable) -> str:
    """A count's or a number's range, as its meaning ends in docs/variables.md: `; 1 to 100`
    (checks.maximum: every count has one)."""
    return f"; {check_words(var.check)}" if maximum(var.check) is not None else ""


def markdown() -> str:
    """docs/variables.md's tables: one per group (variable, default, meaning and, for a count
    or a number, its range)."""
    lines = []
    for group, title in declared.GROUPS.items():
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        lines += [f"| `{v.name}` | {_shown(v)} | {md_text(v.help + _bounds(v))} |"
                  for v in declared.VARIABLES if v.group == group]
    return "\n".join(lines[1:])



# ---- the Python API's arguments
# the public classes whose constructor checks its arguments as a function's (api.Data:
# check_value("Data", ...))
CHECKED_CLASSES = ("Data",)


def annotation(function: str, name: str) -> object:
    """The type of parameter `name` of public function `function` (its annotation, evaluated;
    a CHECKED_CLASSES constructor's too); None for a **keyword's, or where `function` is none
    of pipeline's."""
    import pipeline

    value = getattr(pipeline, function, None)
    if not callable(value):
        return None
    return arguments.hints(value.__init__ if isinstance(value, type) else value).get(name)


def public_arguments() -> dict[str, list[str]]:
    """Each public function (pipeline.__all__'s functions, each checked by
    arguments.validated, and the constructors of CHECKED_CLASSES) -> its arguments: its
    parameters (a *parameter by its name) and, for a **parameter, the keywords it takes (its
    command's declared options)."""
    import pipeline

    found = {}
    for name in pipeline.__all__:
        value = getattr(pipeline, name)
        if not (inspect.isfunction(value) or name in CHECKED_CLASSES):
            continue
        params = inspect.signature(value).parameters.values()
        names = [p.name for p in params if p.kind is not p.VAR_KEYWORD]
        if any(p.kind is p.VAR_KEYWORD for p in params):
            names += [key for key in declared.command_keywords(name) if key not in names]
        found[name] = list(dict.fromkeys(names))
    return found


def check_words(check: Callable[[str], object] | None) -> str:
    """The values `check` takes, in words (its `words`: checks.py says them for its checks
    whose values a kind's words do not say); '' for any other."""
    return getattr(check, "words", "")


def argument_words(function: str, name: str) -> str:
    """What argument `name` of public function `function` takes: its type's words
    (arguments.words), its check's (check_words), the make variable it is checked as (none
    where its parameter declares its own Check), and None where it is taken. An argument with
    neither an annotation nor a variable is refused."""
    said = annotation(function, name)
    own = said is not None and arguments.split_rule(said)[1] is not None
    var = None if own else declared.declaration(function, name)
    if var is None and said is None:
        raise InputError(f"{layout.API_DOC}: argument {name} of {function} has neither an "
                         "annotation nor a make variable of its name: annotate it (a Check "
                         "and a Help where no variable says it: core/annotations.py)")
    hint = arguments.type_of(function, name, said)
    words = md_text(arguments.words(hint)).replace("|", "\\|")
    check = arguments.check_of(function, name, said)
    values = "" if hint is bool else check_words(check)
    if check is None and words == "a str" and var is None:
        words += ", checked by the function (see its section)"
    return (words + (f": {values}" if values else "") + (f", as `{var.name}`" if var else "")
            + (", or None" if type(None) in arguments.members(hint) else ""))


def api_table() -> str:
    """docs/api.md's table of the arguments (its generated part): a row per argument of the
    public functions (public_arguments), or per group of arguments that read the same, saying
    what to give (argument_words). An argument's row names the functions taking it so, but for
    one: the row of a declaration for every function (no `functions`) that the most functions
    take by it."""
    taking: dict[tuple[str, str], set[str]] = {}  # (argument, its words) -> the functions
    general: dict[tuple[str, str], int] = {}  # -> how many by a declaration for every function
    for function, names in public_arguments().items():
        for name in names:
            key = (name, argument_words(function, name))
            taking.setdefault(key, set()).add(function)
            if not getattr(declared.declaration(function, name), "functions", ()):
                general[key] = general.get(key, 0) + 1
    bare: dict[str, tuple[str, str]] = {}  # argument -> its row naming no function
    for key in sorted(general, key=lambda key: (-general[key], key)):
        bare.setdefault(key[0], key)
    groups: dict[tuple[str, str], list[str]] = {}  # (words, functions named) -> arguments
    for (name, words), functions in taking.items():
        where = "" if bare.get(name) == (name, words) else (
            f" ({', '.join(f'`{f}`' for f in sorted(functions))})")
        groups.setdefault((words, where), []).append(name)
    lines = ["| argument | what to give |", "|---|---|"]
    for (words, where), names in sorted(groups.items(), key=lambda g: (min(g[1]), g[0][1])):
        lines.append(f"| {', '.join(f'`{n}`' for n in sorted(names))}{where} | {words} |")
    return "\n".join(lines)


def spliced(text: str, block: str, where: str) -> str:
    """`text` (the file `where`) with what lies between its lines BLOCK_START and BLOCK_END
    replaced by `block`: the rest of the file stays as written."""
    start, end = (text.find(f"\n{marker}\n") for marker in (BLOCK_START, BLOCK_END))
    if min(start, end) < 0 or start > end or any(
            text.count(marker) != 1 for marker in (BLOCK_START, BLOCK_END)):
        raise InputError(f"{where}: give it one line {BLOCK_START} and, after it, one line "
                         f"{BLOCK_END}: the generated tables go between")
    return f"{text[:start]}\n{BLOCK_START}\n\n{block}\n\n{text[end + 1:]}"


# each file with a generated part -> what goes between its markers
GENERATED: dict[str, Callable[[], str]] = {layout.VARIABLES_DOC: markdown,
                                           layout.API_DOC: lambda: api_table()}


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Each file with a generated part (under `root`) -> its text: as written, its part
    between the markers generated."""
    return {Path(path): spliced((root / path).read_text() if (root / path).is_file() else "",
                                block(), path) for path, block in GENERATED.items()}


def stale(root: Path = ROOT, texts: dict[Path, str] | None = None) -> list[Path]:
    """The generated files that differ from what the declaration gives (`texts`: generated)."""
    return [path for path, text in (texts or generated(root)).items()
            if not (root / path).is_file() or (root / path).read_text() != text]


def write(root: Path = ROOT) -> list[Path]:
    """Write the stale generated files again, each as written but for its generated part;
    returns them."""
    texts = generated(root)
    written = stale(root, texts)
    for path in written:
        with atomic_path(root / path) as tmp:
            tmp.write_text(texts[path])
    return written
