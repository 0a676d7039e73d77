"""The model registry (pipeline/models.py) as docs/encoders.md's table lists it."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.models import REGISTRY, family

ENCODERS_DOC = Path(__file__).resolve().parents[1] / "docs" / "encoders.md"


def test_the_registry_table_lists_every_entry_with_its_family_and_kind():
    """Each registered name is a row of the table, its family and kind as the code says."""
    rows = {m.group(1): (m.group(2).strip(), m.group(3).strip()) for m in re.finditer(
        r"^\| `([^`]+)` \|([^|]*)\|([^|]*)\|", ENCODERS_DOC.read_text(), flags=re.M)}
    assert {name: (family(entry), entry.kind) for name, entry in REGISTRY.items()} == {
        name: rows.get(name) for name in REGISTRY}
