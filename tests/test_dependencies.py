"""The dependencies: every package the code, the tests and the benchmarks import is declared in
pyproject.toml; constraints.txt (the exact versions make setup installs) parses, pins every
distribution declared that is installed, at the version installed and inside the declared range,
and make setup installs torch and pyserini through it (their one version)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from pipeline.retrieval.bm25.jvm import PYSERINI

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = ("test", "bench")  # what make setup installs: -e '.[test,bench]'
# The splitters benchmarks/sentence_split.py compares with when installed (its docstring).
OPTIONAL = {"pysbd", "blingfire", "spacy"}


def constraints() -> dict[str, Version]:
    """constraints.txt as name -> version; every line one `name==version` (no URL, no range)."""
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pin = Requirement(line)
        (spec,) = pin.specifier
        assert spec.operator == "==" and not pin.url and not pin.marker, line
        name = canonicalize_name(pin.name)
        assert name not in pins, f"{name} twice"
        pins[name] = Version(spec.version)
    return pins


def declared() -> list[Requirement]:
    lines = PROJECT["dependencies"] + [r for e in EXTRAS for r in
                                       PROJECT["optional-dependencies"][e]]
    return [Requirement(r) for r in lines]


def test_constraints_pin_every_declared_distribution_as_installed():
    pins = constraints()
    checked = 0
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:  # faiss-cpu after make setup-gpu
            continue
        assert name in pins, f"{name} is declared and installed but not in constraints.txt: " \
            "run make constraints"
        assert requirement.specifier.contains(pins[name]), (name, str(pins[name]))
        assert Version(installed.public) == pins[name], (name, str(installed), str(pins[name]))
        checked += 1
    assert checked >= 30


def test_torch_and_pyserini_have_one_version_each_in_constraints():
    """make setup installs torch and pyserini by name through constraints.txt (a PyPI version,
    never a local +cpu build), the pyserini the BM25 error names and the bm25 extra pins."""
    pins = constraints()
    assert pins["torch"].local is None and pins["torch"] >= Version("2.9")
    assert f"pyserini=={pins['pyserini']}" == PYSERINI
    assert PYSERINI in PROJECT["optional-dependencies"]["bm25"]
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r"^\t.*/bin/pip\) install (.*)$", makefile, re.M)
    setup = [line for line in installs if "--upgrade pip" not in line and "[gpu]" not in line
             and "faiss-gpu" not in line]
    assert len(setup) == 3 and all("-c $(CONSTRAINTS)" in line for line in setup), setup
    assert not re.search(r"(torch|pyserini)==[0-9]", makefile)


def imported_modules(folder: Path) -> set[str]:
    """The top-level modules that the .py files under folder import (absolute imports)."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_imported_package_is_declared():
    """An import of a package that only arrives as another's dependency (Pillow, tokenizers)
    breaks when that one drops it: each is declared (its extra: bench, specter2, ...)."""
    every = PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values()
                                       for r in extra]
    names = {canonicalize_name(Requirement(r).name) for r in every}
    local = {p.stem for folder in ("benchmarks", "tests") for p in (ROOT / folder).iterdir()}
    distributions = packages_distributions()
    undeclared = {}
    for folder in ("pipeline", "tests", "benchmarks"):
        for module in imported_modules(ROOT / folder):
            if (module in sys.stdlib_module_names or module in local or module in OPTIONAL
                    or module in ("pipeline", "tests", "benchmarks")):
                continue
            found = {canonicalize_name(d) for d in distributions.get(module, [module])}
            if not found & names:
                undeclared[module] = sorted(found)
    assert not undeclared, f"imported, not declared in pyproject.toml: {undeclared}"
