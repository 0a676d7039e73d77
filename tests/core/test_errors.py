"""The errors users see (pipeline/core/errors.py): a value a refusal quotes is bounded."""

from __future__ import annotations

from pipeline.core.errors import MAX_QUOTED, quoted


def test_a_quoted_value_is_bounded_and_says_how_much_it_held():
    """`model=['x y'] * 200000` was refused in a line of 1,400,139 characters (issue 88)."""
    assert quoted("bm25") == "'bm25'" and quoted(["a", "b"]) == "['a', 'b']"
    many = quoted(["x y"] * 200_000)
    assert many.startswith("['x y', 'x y', ") and many.endswith(", ...] (200,000 items)")
    assert len(many) < 2 * MAX_QUOTED
    long = quoted("é" * 10_000)
    assert long.startswith("'éé") and long.endswith("... (10,002 characters)")
    assert len(long) < 2 * MAX_QUOTED
    held = quoted({f"k{i}": i for i in range(1000)})
    assert held.startswith("{'k0': 0, ") and held.endswith("...} (1,000 items)")
    assert quoted(tuple(range(100))).endswith("...) (100 items)")
