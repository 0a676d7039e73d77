"""The package's structure holds: layers without cycles (import-linter, as `make lint` runs
it), no private name imported across modules, every artifact name in pipeline/layout.py."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipeline"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_private_name_is_imported_across_modules():
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipeline"):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_")]
    assert not found


# ---- every artifact name in pipeline/layout.py --------------------------------------------
# A layout constant names a path when its value is a file name, suffix or pattern
# (`manifest.json`, `.spec.json`, `part-{}.arrow`), when it is a suffix (a constant whose name
# ends in SUFFIX or SUFFIXES), or when the package uses it as a path: in a `/` join, a
# `.glob()`, `.with_name()`, `Path()`, an f-string so used, a comparison with `.name`, or
# through a variable or a loop that is (`for folder in DATA_FOLDERS.values(): root / folder`).
LAYOUT = PACKAGE / "layout.py"
PATH_METHODS = {"with_name", "with_suffix", "with_stem", "glob", "rglob", "joinpath"}
PATH_CALLS = {"Path", "PurePath", "PurePosixPath", "open"}
PATH_ATTRIBUTES = {"name", "suffix", "stem"}
_FILE_LIKE = re.compile(r"\.[A-Za-z0-9]+$|[*{]")
# Files the layers below layout name themselves (pipeline/core may not import layout): the
# checksum cache of a folder and the lock beside an artifact.
BELOW_LAYOUT = {"pipeline/core/checksums.py": {".checksums.json"},
                "pipeline/core/locks.py": {".lock"}}


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string statements (docstrings, and bare strings anywhere)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and _is_str(node.value)}


def _path_operands(tree: ast.AST) -> Iterator[ast.AST]:
    """The expressions a module uses as a path or a path's part."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            yield node.left
            yield node.right
        elif isinstance(node, ast.Call):
            func = node.func
            if ((isinstance(func, ast.Attribute) and func.attr in PATH_METHODS)
                    or (isinstance(func, ast.Name) and func.id in PATH_CALLS)):
                yield from node.args
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr in PATH_ATTRIBUTES for s in sides):
                yield from sides


def _direct(node: ast.AST) -> Iterator[ast.AST]:
    """An expression and the parts of it that become its value's text: both sides of a `/`,
    the branches of `a if c else b` and `a or b`, the elements of a tuple, an f-string's parts,
    the receiver of `.format()`, `.items()`, `.values()`; not a call's arguments, not an index."""
    yield node
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        parts = [node.left, node.right]
    elif isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, ast.BoolOp):
        parts = node.values
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        parts = node.elts
    elif isinstance(node, ast.JoinedStr):
        parts = node.values
    elif isinstance(node, (ast.FormattedValue, ast.Starred, ast.Subscript)):
        parts = [node.value]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in {"format", "items", "values", "lstrip", "strip"}):
        parts = [node.func.value]
    else:
        parts = []
    for part in parts:
        yield from _direct(part)


def _names_in(node: ast.AST) -> set[str]:
    """Names an expression's text comes from: `x`, and `module.X` as written."""
    found = set()
    for sub in _direct(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            found.add(f"{sub.value.id}.{sub.attr}")
    return found


def _layout_names_used(path: Path, tree: ast.Module) -> set[str]:
    """The layout constants a module uses as paths: its own names in layout, else the names
    it imports from pipeline.layout (`from pipeline.layout import X as Y`, `layout.X`)."""
    used = _used_as_paths(tree)
    if path == LAYOUT:
        return used
    local = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "pipeline.layout":
            local.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module == "pipeline":
            local.update({f"{a.asname or a.name}.": "" for a in node.names if a.name == "layout"})
    found = {local[name] for name in used if name in local}
    for prefix in (key for key, value in local.items() if key.endswith(".")):
        found |= {name[len(prefix):] for name in used if name.startswith(prefix)}
    return found


def _used_as_paths(tree: ast.AST) -> set[str]:
    """Names a module uses as paths, directly or through a variable or a loop's target."""
    used = set().union(*(_names_in(node) for node in _path_operands(tree)))
    flows = []  # (names bound, names they are made from)
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)):
            flows.append((set().union(*map(_names_in, _direct(node.target))),
                          _names_in(node.iter)))
        elif isinstance(node, ast.Assign):
            flows.append((set().union(*map(_names_in, node.targets)), _names_in(node.value)))
    changed = True
    while changed:
        changed = False
        for bound, source in flows:
            if bound & used and not source <= used:
                used |= source
                changed = True
    return used


def _constants(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Layout's module-level string constants, name -> its strings (one for a string, each
    element of a tuple, each value of a dict; elements that name a constant are resolved)."""
    found: dict[str, tuple[str, ...]] = {}

    def strings(node: ast.AST) -> tuple[str, ...] | None:
        if _is_str(node):
            return (node.value,)
        if isinstance(node, ast.Name) and node.id in found:
            return found[node.id]
        items = (node.elts if isinstance(node, (ast.Tuple, ast.List))
                 else node.values if isinstance(node, ast.Dict) else None)
        if items is None:
            return None
        parts = [strings(item) for item in items]
        return None if None in parts else tuple(s for part in parts for s in part)

    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        else:
            continue
        for target, value in pairs:
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs += list(zip(target.elts, value.elts, strict=False))
            elif isinstance(target, ast.Name) and (values := strings(value)):
                found[target.id] = values
    return found


@functools.cache
def _module_trees() -> dict[Path, ast.Module]:
    """Every module of the package parsed, once per test process (the tests only read them)."""
    return {path: ast.parse(path.read_text()) for path in modules()}


def layout_names(trees: dict[Path, ast.Module] | None = None) -> dict[str, tuple[str, ...]]:
    """The constants of pipeline/layout.py that name a file, a folder, a pattern or a suffix."""
    trees = trees if trees is not None else _module_trees()
    used = set().union(*(_layout_names_used(path, tree) for path, tree in trees.items()))
    return {name: values for name, values in _constants(trees[LAYOUT]).items()
            if name in used or name.endswith(("SUFFIX", "SUFFIXES"))
            or all(_FILE_LIKE.search(value) for value in values)}


@functools.cache
def package_layout_names() -> dict[str, tuple[str, ...]]:
    """layout_names of the package itself, found once per test process (about 4 s of AST
    walks that two tests would otherwise each repeat); read, never changed."""
    return layout_names(_module_trees())


def layout_suffixes(names: dict[str, tuple[str, ...]]) -> set[str]:
    """The file suffixes layout names: `.parquet` of `papers.parquet`, `.trec` of a run."""
    found = set()
    for name, values in names.items():
        for value in values:
            if name.endswith(("SUFFIX", "SUFFIXES")):
                found.add("." + value.lstrip("."))
            if match := re.search(r"\.[A-Za-z0-9]+$", value):
                found.add(match.group())
    return found


def _pieces(node: ast.AST) -> list[str]:
    """The literal text of a string or an f-string."""
    if _is_str(node):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [part.value for part in node.values if _is_str(part)]
    return []


def _named(text: str, names: set[str]) -> bool:
    """A literal path text holds one of `names` as a part: `manifest.json`, `*/manifest.json`,
    `pools/x`, a file pattern's pieces (`part-{}.arrow` as `part-` ... `.arrow`)."""
    return any(part in names for part in re.split(r"[/]", text) if part)


def artifact_literals(source: str, names: dict[str, tuple[str, ...]],
                      allowed: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, literal) of every string in `source` that spells a layout name as a path, or
    ends in a suffix that layout names; docstrings are not read (comments never are)."""
    tree = ast.parse(source)
    values = {value for group in names.values() for value in group}
    suffixes = layout_suffixes(names)
    skip = _docstrings(tree)
    found = {}
    for node in _path_operands(tree):
        for sub in _direct(node):
            if id(sub) not in skip and any(_named(piece, values) for piece in _pieces(sub)):
                found[id(sub)] = sub
    for node in ast.walk(tree):
        if id(node) in skip or not (_is_str(node) or isinstance(node, ast.JoinedStr)):
            continue
        pieces = _pieces(node)
        last = node.values[-1] if isinstance(node, ast.JoinedStr) and node.values else node
        prose = any(c.isspace() for piece in pieces for c in piece)  # a message, a help text
        if (pieces and not prose and _is_str(last) and last.value.endswith(tuple(suffixes))
                and not last.value.endswith(tuple(allowed))):
            found[id(node)] = node
    # a string inside an f-string is reported once, as the f-string
    inner = {id(part) for node in found.values() if isinstance(node, ast.JoinedStr)
             for part in node.values}
    return sorted((node.lineno, ast.unparse(node)) for key, node in found.items()
                  if key not in inner)


def literals_outside_layout() -> list[str]:
    """`file:line: literal` for every artifact name spelled outside pipeline/layout.py."""
    trees = _module_trees()
    names = package_layout_names()
    found = []
    for path in trees:
        relative = path.relative_to(ROOT).as_posix()
        if path == LAYOUT:
            continue
        allowed = frozenset(BELOW_LAYOUT.get(relative, ()))
        found += [f"{relative}:{line}: {literal}" for line, literal
                  in artifact_literals(path.read_text(), names, allowed)]
    return found


def test_artifact_names_are_written_in_layout_only():
    """Every file and folder name layout declares, and every file suffix it names, is spelled
    in pipeline/layout.py alone: no other module writes one as a path."""
    found = literals_outside_layout()
    assert not found, ("artifact names spelled outside pipeline/layout.py (add a constant or "
                       "a function there and use it):\n" + "\n".join(found))


# A layout of its own and a module that uses it: each constant says which rule finds it.
SYNTHETIC_LAYOUT = '''
PAPERS = "papers.parquet"  # a file name: found by its value
STORE_PART = "part-{}.arrow"  # a file pattern: found by its value
RUN_SUFFIXES = ("trec", "metrics.parquet")  # suffixes: found by the constant's name
QUARANTINE = "quarantine"  # a folder layout itself joins into a path
POOLS = "pools"  # a folder another module joins (imported by name)
LUCENE = "lucene"  # ... imported under another name, then with_name()
SLURM = "slurm"  # ... used as layout.SLURM
DATA_FOLDERS = {"corpora": "corpora", "runs": "runs"}  # ... through a loop over its values
REPORTS = "reports"  # ... through a variable, then glob()
TABLE = "tables"  # ... compared with a path's .name
ENGINE = "arrays"  # a choice also compared with a value: not a path
VARIANT_SEP = "~"  # a separator: not a path
SPLITS = ("test", "validation")  # names looped over but never joined: not a path
ABSTRACT_SENTENCES = "sentences"  # a column: not a path


def quarantine(corpus_dir):
    return corpus_dir / QUARANTINE
'''
SYNTHETIC_USER = '''
from pipeline import layout
from pipeline.layout import ENGINE, LUCENE as ENGINE_FOLDER, POOLS, REPORTS, SPLITS, TABLE


def paths(root, corpus, engine, found):
    for folder in layout.DATA_FOLDERS.values():
        yield root / folder
    yield root / corpus / POOLS
    yield (root / corpus).with_name(ENGINE_FOLDER)
    yield root / layout.SLURM
    reports = REPORTS
    yield from root.glob(reports)
    yield [path for path in found if path.name == TABLE]
    for split in SPLITS:
        yield split.upper()
    yield engine == ENGINE, layout.VARIANT_SEP.join([corpus, engine])
'''


def test_layout_names_are_the_constants_used_as_paths():
    """On a layout and a module of their own, layout_names finds each constant by the rule that
    makes it a path (its value, its name, a use as a path in layout or in another module,
    directly, under another name, through a variable or a loop) and no constant that is not
    one, and layout_suffixes the suffixes they name: the detector above guards what the rules
    find, whatever the real layout's constants are called."""
    trees = {LAYOUT: ast.parse(SYNTHETIC_LAYOUT),
             PACKAGE / "user.py": ast.parse(SYNTHETIC_USER)}
    names = layout_names(trees)
    assert sorted(names) == sorted(["PAPERS", "STORE_PART", "RUN_SUFFIXES", "QUARANTINE", "POOLS",
                                    "LUCENE", "SLURM", "DATA_FOLDERS", "REPORTS", "TABLE"])
    assert layout_suffixes(names) == {".parquet", ".arrow", ".trec", ".metrics.parquet"}
    # without the module that uses them, the folders it joins are not found
    alone = layout_names({LAYOUT: trees[LAYOUT]})
    assert sorted(alone) == sorted(["PAPERS", "STORE_PART", "RUN_SUFFIXES", "QUARANTINE"])


SYNTHETIC = '''
"""A stage writing manifest.json and papers.parquet (a docstring: not read)."""
from pathlib import Path
ENGINES = ("lucene", "arrays")  # a choice that is also a folder's name: not a path
KINDS = {"corpora": 1}


def write(folder, name, executor, roots):
    """Writes folder / "manifest.json"."""
    # folder / "manifest.json" in a comment is not read either
    if executor == "slurm":
        pass
    a = folder / "manifest.json"
    b = folder / f"{name}.metrics.parquet"
    c = Path("pools") / name
    d = folder.glob("*/qrels.parquet")
    e = a.with_name("eval.json")
    f = roots["corpora"] / name
    g = "scratch.npy"
    h = folder / "lucene"
    return a, b, c, d, e, f, g, h
'''


def test_the_detector_finds_names_written_as_paths():
    found = artifact_literals(SYNTHETIC, package_layout_names())
    assert [literal for _, literal in found] == [
        "'manifest.json'", "f'{name}.metrics.parquet'", "'pools'", "'*/qrels.parquet'",
        "'eval.json'", "'scratch.npy'", "'lucene'"]
    assert [line for line, _ in found] == [13, 14, 15, 16, 17, 19, 20]


def lint(workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--config", str(workdir / ".importlinter")],
                          cwd=workdir, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin"})


def test_the_contracts_are_kept():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


# The modules above the library's layers: the only ones that may reach the package's root
# (`import pipeline`: the API) or its API
TOP = ("__init__.py", "__main__.py", "api.py", "cli/")


def reaches_the_top(source: str) -> list[str]:
    """The imports in `source`, at any depth (a function's too), of the package's root or its
    API: `import pipeline`, `from pipeline import <not a module>`, `pipeline.api`. Import-linter
    sees no chain through the root package, whose `__init__` imports the API."""
    def a_module(name: str) -> bool:
        return name != "api" and ((PACKAGE / f"{name}.py").exists() or (PACKAGE / name).is_dir())

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in ("pipeline", "pipeline.api")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module == "pipeline.api" or node.module == "pipeline"
                and not all(a_module(a.name) for a in node.names)):
            found.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
    return found


def test_no_layer_below_the_api_reaches_it_at_run_time_either():
    """Issue 81: the options, the stages and the core never import the package's root or its
    API, not even inside a function (the docs' tables, which read the API's signatures, are
    generated in the command line's layer: cli/docs.py)."""
    reaching = {str(path.relative_to(PACKAGE)): found for path in modules()
                if not str(path.relative_to(PACKAGE)).startswith(TOP)
                and (found := reaches_the_top(path.read_text()))}
    assert reaching == {}
    assert reaches_the_top("def f():\n    import pipeline\n") == ["pipeline"]
    assert reaches_the_top("from pipeline import layout, Data\n") == [
        "from pipeline import layout, Data"]
    assert reaches_the_top("from pipeline import layout, metrics\n") == []


@pytest.mark.parametrize("module, line, contract", [
    # a lower layer importing a higher one (the core importing the command line)
    ("core/errors.py", "from pipeline.cli import main", "The stages in layers"),
    # a cycle inside retrieval: the run store importing the dispatcher
    ("retrieval/runs.py", "from pipeline.retrieval.search import search_pool", "Retrieval"),
    # a cycle hidden inside a function still counts
    ("encoding/store.py", "def f():\n    from pipeline.encoding.embed import embed\n",
     "Encoding"),
    # two sibling modules importing each other (download <-> s2diffs once did, in a function)
    ("ingest/s2client.py", "def f():\n    from pipeline.ingest.download import download\n",
     "No import cycles"),
    # two sibling packages importing each other (retrieval <-> evaluation once did)
    ("metrics.py", "def f():\n    from pipeline.retrieval.bm25 import tuning\n",
     "No import cycles"),
])
def test_a_violation_breaks_lint(tmp_path, module, line, contract):
    shutil.copytree(PACKAGE, tmp_path / "pipeline",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    target = tmp_path / "pipeline" / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    done = lint(tmp_path)
    assert done.returncode != 0
    broken = [row for row in done.stdout.splitlines() if " BROKEN" in row]
    assert any(row.startswith(contract) for row in broken), done.stdout[-3000:]


# ---- docs/architecture.md: the package map and the layers, against the package ------------
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_MAP_ENTRY = re.compile(r"^(  |    )([A-Za-z0-9_]+(?:\.py|/))(?=\s|$)")
_MODULE = re.compile(r"(?<![\w/.])([A-Za-z0-9_]+\.py)\b")


def _code_block(heading: str, first_line: str) -> list[str]:
    """The lines of the first fenced block after `heading` in docs/architecture.md whose first
    line is `first_line`."""
    text = ARCHITECTURE.read_text()
    after = text[text.index(f"\n{heading}\n"):]
    match = re.search(rf"^```\n({re.escape(first_line)}\n.*?)^```", after, re.M | re.S)
    assert match, f"no block starting {first_line!r} under {heading!r}"
    return match.group(1).splitlines()


def documented_modules(lines: list[str]) -> set[str]:
    """The modules and folders the package map names, as paths under pipeline/ (`core/`,
    `core/errors.py`, `retrieval/bm25/store.py`). An entry is a name at the map's first
    indent (`layout.py`, `core/`) or, for a package inside one, its second (`bm25/`); inside a
    package's entry every `name.py` of its text is one of its modules, but those in backticks,
    which name a module elsewhere (`corpus/manifest.py`)."""
    found: set[str] = set()
    package = nested = None
    for line in lines[1:]:
        if match := _MAP_ENTRY.match(line):
            indent, name = match.groups()
            rest = line[match.end():]
            if indent == "  ":
                package, nested = (name, None) if name.endswith("/") else (None, None)
                found.add(name)
            else:
                assert package, f"a nested entry outside a package: {line!r}"
                nested = package + name
                found.add(nested)
        else:
            rest = line
        owner = nested or package
        if owner:
            found |= {owner + name for name in _MODULE.findall(re.sub(r"`[^`]*`", "", rest))}
    return found


def package_modules() -> set[str]:
    """Every module and package of pipeline/ (pkgutil, as Python finds them), as paths under
    pipeline/, and every folder of it that holds no module (package data: `data/`)."""
    import pkgutil

    found: set[str] = set()

    def walk(folder: Path, prefix: str) -> None:
        for module in pkgutil.iter_modules([str(folder)]):
            found.add(prefix + module.name + ("/" if module.ispkg else ".py"))
            if module.ispkg:
                walk(folder / module.name, f"{prefix}{module.name}/")

    walk(PACKAGE, "")
    found |= {f"{path.relative_to(PACKAGE).as_posix()}/" for path in PACKAGE.rglob("*")
              if path.is_dir() and path.name != "__pycache__"
              and not (path / "__init__.py").exists()}
    return found | {"__init__.py"}


def test_the_package_map_names_every_module_and_no_other():
    """docs/architecture.md's package map against the package itself: a module added,
    removed or renamed without the map fails here, naming it."""
    documented = documented_modules(_code_block("## Package layout", "pipeline/"))
    actual = package_modules()
    assert {"core/errors.py", "retrieval/bm25/store.py", "data/", "cli/commands/"} <= actual
    left_out, absent = sorted(actual - documented), sorted(documented - actual)
    assert not left_out, f"modules the map leaves out: {left_out}"
    assert not absent, f"the map names what is not there: {absent}"


def test_the_map_reader_sees_what_a_map_says():
    """The reader on a map of its own: entries, nested packages, modules listed in a
    package's text, a backticked reference to another package's module left out."""
    lines = ["pipeline/",
             "  layout.py      paths (`roots.py`'s are its own)",
             "  core/          errors.py (InputError), atomic.py",
             "                 locks.py; reads `corpus/files.py`",
             "  retrieval/     search.py,",
             "    bm25/        store.py (the store), arrays.py",
             "  data/          words.json"]
    assert documented_modules(lines) == {
        "layout.py", "core/", "core/errors.py", "core/atomic.py", "core/locks.py",
        "retrieval/", "retrieval/search.py", "retrieval/bm25/", "retrieval/bm25/store.py",
        "retrieval/bm25/arrays.py", "data/"}


def test_the_layers_are_the_contracts():
    """docs/architecture.md's layers, top to bottom, are .importlinter's layers contract."""
    contract = re.search(r"\[importlinter:contract:layers\][^\[]*?^layers =\n((?:[ \t]+\S.*\n)+)",
                         (ROOT / ".importlinter").read_text(), re.M)
    assert contract
    linted = [line.strip().replace("pipeline.", "") for line in contract.group(1).splitlines()]
    documented = _code_block("### Layers", "cli")
    assert documented == linted
