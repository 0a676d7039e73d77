"""`python -m pipeline warm`'s bytecode step: every module of the package compiled where Python
looks for it, then nothing to do (what a process that may not write bytecode finds)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pipeline
from pipeline.cli.commands.house import bytecode


def test_warm_writes_the_bytecode_of_every_module(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))  # PYTHONPYCACHEPREFIX's
    package = Path(pipeline.__file__).parent
    modules = sorted(package.rglob("*.py"))
    said = bytecode()
    assert said == f"{len(modules)} modules of {package} compiled, the others current"
    assert all(Path(importlib.util.cache_from_source(str(m))).is_file() for m in modules)
    assert bytecode() == f"0 modules of {package} compiled, the others current"
