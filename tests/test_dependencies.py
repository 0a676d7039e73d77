"""The dependencies: every package the code, the tests and the benchmarks import is declared in
pyproject.toml; constraints.txt (the exact versions make setup installs) parses, pins every
distribution declared that is installed, at the version installed and inside the declared range,
and make setup installs torch and pyserini through it (their one version); the pipeline uses
ranx's public API only (so a range can declare it); constraints-specter2.txt (SPECTER2's
adapters, beside .venv) resolves against constraints.txt."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from pipeline.retrieval.bm25.jvm import PYSERINI
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = ("test", "bench")  # what make setup installs: -e '.[test,bench]'
# The splitters benchmarks/sentence_split.py compares with when installed (its docstring), and
# benchmarks/gpu_stage.py's third peer, infinity-emb, carried to a GPU machine as its wheel
# (its metadata asks numpy<2, which the pipeline's numpy>=2 excludes from one install), and
# PyLate, the late-interaction reference, in an environment of its own (tests/conftest.py
# install_pylate: it pins sentence-transformers 5.3, the pipeline runs 6).
OPTIONAL = {"pysbd", "blingfire", "spacy", "infinity_emb", "pylate"}


def constraints(name: str = "constraints.txt") -> dict[str, Version]:
    """A constraints file as name -> version; every line one `name==version` (no URL, no
    range)."""
    pins: dict[str, Version] = {}
    for line in (ROOT / name).read_text().splitlines():
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


def setup_installs(tmp_path: Path) -> list[list[str]]:
    """The `pip install` commands that `make setup setup-gpu` runs for a new virtual
    environment, as make prints them under -n (which runs none), split as the shell splits
    them."""
    done = subprocess.run(["make", "--no-print-directory", "-n", "setup", "setup-gpu",
                           f"PYTHON={sys.executable}", f"VENV={tmp_path / 'venv'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**{k: v for k, v in os.environ.items()  # make test STAMP=..
                                  if k not in ("STAMP", "PY", "VENV", "PYTHON")},
                               "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.replace("\\\n", " ").splitlines()  # a recipe line continued: one
    commands = [shlex.split(line) for line in lines
                if line.strip() and not line.lstrip().startswith("#")]
    return [words for words in commands if Path(words[0]).name == "pip" and "install" in words]


def test_every_install_of_make_setup_goes_through_the_constraints(tmp_path):
    """make setup and make setup-gpu install each package at constraints.txt's version: every
    `pip install` they run is given it (`-c`) and pins nothing itself, torch, pyserini and
    faiss-gpu-cu12 included; the GPU packages (faiss-gpu-cu12, the newest release at or below
    faiss-cpu's, and the CUDA libraries it requires) are pinned, inside the gpu extra."""
    installs = setup_installs(tmp_path)
    for words in installs:
        given = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "-c"]
        assert [ROOT / c for c in given] == [ROOT / "constraints.txt"], words
        assert not any("==" in word for word in words), words
    installed = {word for words in installs for word in words if not word.startswith("-")}
    assert {"torch", "pyserini", ".[test,bench]", ".[gpu]", "faiss-gpu-cu12"} <= installed
    pins = constraints()
    (gpu,) = [Requirement(r) for r in PROJECT["optional-dependencies"]["gpu"]]
    assert gpu.specifier.contains(pins["faiss-gpu-cu12"])
    assert pins["faiss-gpu-cu12"].release[:2] <= pins["faiss-cpu"].release[:2]
    assert {"nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"} <= set(pins)


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


def exported(package: str) -> set[str]:
    """The names `package` exports at top level: its `__all__`, read from its __init__.py
    without importing it (ranx's import costs seconds)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin, package
    for node in ast.parse(Path(spec.origin).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{package} has no __all__")


def private_imports(folder: Path, package: str) -> list[str]:
    """`path:line` of each import under folder that reaches past `package`'s top-level names:
    a submodule (`from ranx.meta import ...`, `import ranx.metrics`) or an unexported name."""
    public = exported(package)
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                bad = any(a.name.startswith(package + ".") for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                bad = node.module.startswith(package + ".") or (
                    node.module == package and any(a.name not in public for a in node.names))
            else:
                continue
            if bad:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_pipeline_uses_ranx_s_public_api_only():
    """pyproject.toml declares ranx by a range (docs/install.md names the tests that back it):
    its internals (ranx.meta, ranx.metrics, ranx.statistical_tests) may change in any release."""
    assert not private_imports(ROOT / "pipeline", "ranx")
    (ranx,) = [Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "ranx"]
    assert {s.operator for s in ranx.specifier} == {">=", "<"}, str(ranx.specifier)


SPECTER2 = "constraints-specter2.txt"  # adapters and its transformers, beside .venv


def test_specter2_side_packages_fit_the_declared_ranges():
    """constraints-specter2.txt's pins stand in for .venv's inside the pipeline's process
    (PYTHONPATH): each is in the range pyproject.toml declares, adapters its specter2 extra's;
    torch is never among them (the side folder holds no second torch)."""
    every = PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values()
                                       for r in extra]
    ranges = {canonicalize_name(Requirement(r).name): Requirement(r).specifier for r in every}
    side = constraints(SPECTER2)
    assert "adapters" in side and "transformers" in side and "torch" not in side
    for name, pin in side.items():
        assert name not in ranges or ranges[name].contains(pin), (name, str(pin))


@pytest.mark.slow
def test_specter2_side_packages_need_nothing_else_than_the_base(tmp_path):
    """pip resolves constraints-specter2.txt with its dependencies against constraints.txt's
    other pins (a dry run: nothing installed): every package it needs is either pinned
    in the file or .venv's, at constraints.txt's version, so installing it with --no-deps
    (docs/install.md) leaves no dependency out and no version unmet."""
    side, base = constraints(SPECTER2), constraints()
    others = tmp_path / "others.txt"
    others.write_text("".join(f"{n}=={v}\n" for n, v in base.items() if n not in side))
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                    "--quiet", "--report", str(report), "-c", str(others),
                    "-r", str(ROOT / SPECTER2)], check=True)
    resolved = {canonicalize_name(i["metadata"]["name"]): Version(i["metadata"]["version"])
                for i in json.loads(report.read_text())["install"]}
    assert {n: v for n, v in resolved.items() if n in side} == side
    assert {n: v for n, v in resolved.items() if n not in side} == \
        {n: base.get(n) for n in resolved if n not in side}
