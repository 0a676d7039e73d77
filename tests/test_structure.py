"""benchmarks/results/structure.md is what benchmarks/structure.py writes from the checkout."""

from __future__ import annotations

from benchmarks.structure import OUT, render


def test_structure_figures_are_current():
    assert OUT.read_text() == render(), (
        f"{OUT.name} is stale: run python benchmarks/structure.py")
