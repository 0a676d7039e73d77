"""How a number is read from text at every door (pipeline/core/numbers.py): ASCII digits with
nothing around them, where Python's int() and float() also take '٣', '５' and ' 5'."""

from __future__ import annotations

import pytest

from pipeline.core.errors import InputError
from pipeline.core.numbers import decimal, number_in, whole

# each of them int() or float() reads as a number
NOT_ASCII = ("５", "٣", "१२", " 5", "5 ", "\t5", "1_000", "٣.5")


@pytest.mark.parametrize("text", NOT_ASCII)
def test_a_number_in_other_digits_or_with_spaces_is_no_number(text):
    float(text)  # Python takes it
    with pytest.raises(ValueError):
        whole(text)
    with pytest.raises(ValueError):
        decimal(text)


def test_numbers_in_ascii_digits_are_read():
    assert [whole(t) for t in ("0", "5", "-3", "+7", "0012")] == [0, 5, -3, 7, 12]
    assert [decimal(t) for t in ("0.5", "2", ".5", "1e3", "-1.5E-2")] == [
        0.5, 2.0, 0.5, 1000.0, -0.015]
    assert decimal("-inf") == float("-inf") and decimal("NaN") != decimal("NaN")
    for text in ("1e", "", ".", "nano", "in", "٣e2"):
        with pytest.raises(ValueError):
            decimal(text)


def test_a_bounded_number_says_its_range_whatever_is_wrong():
    pause = number_in(0.5, 120.0, "a pause (seconds)")
    assert pause("0.5") == 0.5 and pause("120") == 120.0
    for text in ("0.4", "121", "1e9", "nan", "٣", " 5", "soon"):
        with pytest.raises(InputError) as refused:
            pause(text)
        assert str(refused.value).endswith("give a pause (seconds) from 0.5 to 120"), text
