"""How a number is read from text, at every door (make's variables, the environment, the command
line, the API's strings; the API's numbers are taken as given): ASCII digits, with nothing
around them. Python's int() and float() also take other scripts' digits ('٣', '５'), spaces
at either end and '_' between digits, so `K=٣` or `REPEATS=' 5'` would run as 3 and 5, a value
other than the one the user sees written. Standard library only, at the bottom of the layers:
the stages that read a number from the environment (PIPELINE_WORKER_STALL, EMBEDDINGS_BATCH)
read it here too."""

from __future__ import annotations

import math
import re

from pipeline.core.errors import InputError, quoted

_WHOLE = re.compile(r"[-+]?[0-9]+")
_DECIMAL = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|nan|inf"
                      r"|infinity)", re.IGNORECASE)


def whole(text: str | int) -> int:
    """`text` as an int: a sign and ASCII digits only, else ValueError (int() of 5,000 digits
    too, which Python refuses); an int as the API gives it, itself."""
    if isinstance(text, int):
        return text
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"not a whole number in ASCII digits: {quoted(text)}")
    return int(text)


def decimal(text: str | int | float) -> float:
    """`text` as a float: a whole or decimal number in ASCII digits (an exponent allowed), or
    nan or inf as float() writes them (a bounded number's check refuses them saying its
    range), else ValueError; a number as the API gives it, itself."""
    if isinstance(text, int | float):
        return float(text)
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"not a number in ASCII digits: {quoted(text)}")
    return float(text)


def number_in(low: float, high: float, noun: str, example: str = "", *,
              open_ends: bool = False):
    """A finite number (a whole or decimal one) from `low` to `high` (strictly between them:
    `open_ends`): a real-valued setting such as the download's first pause; nan, inf and text
    refused in one line saying `noun` and its range."""
    words = f"between {low:g} and {high:g}" if open_ends else f"from {low:g} to {high:g}"
    said = f"give {noun} {words}" + (f", such as {example}" if example else "")

    def parse(text: str) -> float:
        try:
            value = decimal(text)
        except ValueError:
            raise InputError(f"{quoted(text)} is not a number: {said}") from None
        inside = low < value < high if open_ends else low <= value <= high
        if not (math.isfinite(value) and inside):
            raise InputError(said)
        return value
    parse.__name__ = "float"
    parse.words = words  # type: ignore[attr-defined]
    parse.most = lambda: high  # type: ignore[attr-defined]
    parse.open_ends = open_ends  # type: ignore[attr-defined]
    return parse


# the API's significance level and power (compare, topic_set_size): each strictly inside (0, 1)
significance_level = number_in(0.0, 1.0, "a significance level", "0.05", open_ends=True)
power_level = number_in(0.0, 1.0, "a power", "0.8", open_ends=True)
