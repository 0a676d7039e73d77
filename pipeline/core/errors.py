"""The errors users see, each printed on one line by the CLI.

InputError: bad input (an unknown field, a malformed size, a corrupt or missing file...), exit
status 2. ToolError: an external tool (Java/Anserini) failed on good input, exit status 1; its
message says where the tool's log was kept.

An InputError about an artifact that a command can make whole again carries that command as a
value (`repair`, pipeline/core/repair.py), not as text: the command line shows it with the
data folder it was given (`python -m pipeline` with its roots, make with DATA).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from pipeline.core.repair import HERE, Repair, Where

MAX_QUOTED = 80  # characters of a value a refusal quotes (a list of 200,000 names: 1.4 MB)


def quoted(value: object, most: int = MAX_QUOTED) -> str:
    """`value`'s repr as a refusal quotes it, bounded to about `most` characters: a long list,
    tuple or dict as its first items and its count, any other long value cut, with its
    length. A refusal stays one line to read, whatever it was given."""
    text = repr(value)
    if len(text) <= most:
        return text
    if isinstance(value, list | tuple | Mapping):
        items = [f"{key!r}: {value[key]!r}" for key in value] if isinstance(value, Mapping) \
            else map(repr, value)
        shown, length = [], 0
        for item in items:
            if length + len(item) > most // 2:
                break
            shown.append(item)
            length += len(item) + 2
        noun = "item" if len(value) == 1 else "items"
        return f"{text[0]}{', '.join([*shown, '...'])}{text[-1]} ({len(value):,} {noun})"
    return f"{text[:most // 2]}... ({len(text):,} characters)"


class InputError(argparse.ArgumentTypeError):
    """Bad input from the user; the message must name the input and say what to do (or carry
    the `repair` that does it). An ArgumentTypeError, so that argparse reports one raised by an
    option's check (its type) as `argument --NAME: <message>`."""

    def __init__(self, message: str, repair: Repair | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.repair = repair
        self.where: Where = HERE  # the data its repair names: the API's call sets it

    def __str__(self) -> str:
        if self.repair is None:
            return self.message
        return f"{self.message}; repair: {self.repair.command(self.where)}"

    def __reduce__(self):  # across processes (ingest's workers), with its repair
        return type(self), (self.message, self.repair)


class OptionError(InputError):
    """A refusal that names declared options (pipeline/options/declared.py): `template` holds
    each as {NAME}, its make variable, or as {NAME=} with its value in `values`. Each door
    writes them in its own words (`worded`: make's NAME=value, the stage's --name value, the
    API's name=value); its message is the command line's (--name, the declaration's default
    spelling) until a door words it."""

    def __init__(self, template: str, values: dict[str, object] | None = None,
                 repair: Repair | None = None) -> None:
        self.template, self.values = template, dict(values or {})
        super().__init__(self.worded(lambda name: "--" + name.lower().replace("_", "-"),
                                     lambda name, value: f"{name} {value}"), repair)

    def worded(self, named, with_value) -> str:
        """The template with each option `named` (from its make variable), {NAME=} with its
        value (`with_value`: the door's name and the value together)."""
        class Words(dict):
            def __missing__(_, key: str) -> str:
                name = key.removesuffix("=")
                return with_value(named(name), self.values[name]) if key.endswith("=") \
                    else named(name)

        return self.template.format_map(Words())

    def __reduce__(self):
        return type(self), (self.template, self.values, self.repair)


class ToolError(Exception):
    """An external program failed; the message names its log file, which is kept."""


def first_line(exc: BaseException) -> str:
    """An exception's message in one line (its first), or its type's name when it has none:
    what a one-line refusal quotes of a library's error."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
