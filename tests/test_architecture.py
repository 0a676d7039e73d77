"""The package's structure holds: layers without cycles (import-linter, as `make lint` runs
it), no private name imported across modules, every artifact name in pipeline/layout.py."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_artifact_names_are_written_in_layout_only():
    """The file and folder names of artifacts are spelled out in pipeline/layout.py alone."""
    names = ('"prefiltered.parquet"', '"papers.parquet"', '"citations.parquet"',
             '"queries.parquet"', '"candidates.parquet"', '"qrels.parquet"',
             '"results.parquet"', '/ "bm25-tuning"', '/ "embeddings"', '/ "pools"',
             '"stage-times')
    found = [f"{path.relative_to(ROOT)}: {name}" for path in modules()
             if path.name != "layout.py" for name in names if name in path.read_text()]
    assert not found


def lint(workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--config", str(workdir / ".importlinter")],
                          cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin"})


def test_the_contracts_are_kept():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, contract", [
    # a lower layer importing a higher one (the core importing the command line)
    ("core/errors.py", "from pipeline.cli import main", "The stages in layers"),
    # a cycle inside retrieval: the run store importing the dispatcher
    ("retrieval/runs.py", "from pipeline.retrieval.search import search", "Retrieval"),
    # a cycle hidden inside a function still counts
    ("encoding/store.py", "def f():\n    from pipeline.encoding.embed import embed\n",
     "Encoding"),
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
