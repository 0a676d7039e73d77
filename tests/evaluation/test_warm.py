"""`python -m pipeline warm` (pipeline/evaluation/warm.py)'s bytecode step: every module of
the package compiled where Python looks for it, then nothing to do (what a process that may
not write bytecode finds)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pipeline
from pipeline.evaluation import warm


def test_warm_writes_the_bytecode_of_every_module(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))  # PYTHONPYCACHEPREFIX's
    package = Path(pipeline.__file__).parent
    modules = sorted(package.rglob("*.py"))
    assert package == warm.PACKAGE
    assert warm.bytecode() == len(modules)
    assert all(Path(importlib.util.cache_from_source(str(m))).is_file() for m in modules)
    assert warm.bytecode() == 0
