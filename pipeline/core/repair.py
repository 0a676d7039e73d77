"""A repair as a value: the command that makes a damaged, partial or stale artifact whole again.

The library never writes a command line: it returns (and raises, on `InputError.repair`) a
`Repair` naming the make target and the variables that pick the artifact (CORPUS, MODEL, ...).
Where the data lies is added when the command is shown, by whoever knows the data roots (the
command line, `verify`): a `Where` of the variables that locate them (DATA=..., or each root;
none for the checkout's own data folder, make's default), built by `pipeline.roots.where`.
`Repair.command` is the one place a repair becomes the words a user types.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

MAKE, PIPELINE = "make", "pipeline"  # the programs a repair runs
PIPELINE_COMMAND = "python -m pipeline"


@dataclass(frozen=True)
class Where:
    """Where the data lies, as a command takes it: make variables (`DATA=...`, or each root
    when they are not one folder's children) and the pipeline's own root options; empty for
    the checkout's own data folder."""

    variables: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    program: str = PIPELINE_COMMAND  # how the pipeline's command line is called


HERE = Where()  # the checkout's own data folder: make's default


class Placeholder(str):
    """A value the user fills in, shown as `<what>` and never quoted (`Placeholder("folder")`).
    Its own type, so no value read from data or given by a user (plain strings, always
    quoted) can pass for one, whatever its characters."""

    def __new__(cls, what: str) -> Placeholder:
        return super().__new__(cls, f"<{what}>")

    def __reduce__(self):  # pickled as itself (an InputError's repair, from a worker)
        return type(self), (self[1:-1],)


@dataclass(frozen=True)
class Repair:
    """The command that repairs an artifact. `target`: a make target (eval, index, embed,
    pools, corpus, ...), or with program PIPELINE one of the pipeline's commands, or '' when no
    command does it (then `note` says what to do). `variables`: further make variables (for a
    pipeline command: its options, '' for a flag), in order. `note`: said after the command,
    in parentheses: the code's own words, never a value from data (the command names those,
    quoted), but for the Python calls a repair with no command names (a model only the user
    holds: its names as Python literals, repr). Every target and value is shell-quoted where
    the command is made; a Placeholder is the one value shown as is."""

    target: str
    corpus: str | None = None
    model: str | None = None
    variables: tuple[tuple[str, str], ...] = ()
    note: str = ""
    program: str = MAKE

    def command(self, where: Where = HERE) -> str:
        """The words a user types to run this repair on the data `where` says."""
        if not self.target:
            return self.note
        if self.program == PIPELINE:
            words = [where.program, *_options(where.options), _quote(self.target),
                     *_options((("--corpus", self.corpus),) if self.corpus else ()),
                     *_options((("--model", self.model),) if self.model else ()),
                     *_options(self.variables)]
        else:
            named = [("CORPUS", self.corpus), ("MODEL", self.model)]
            words = ["make", _quote(self.target), *(f"{name}={_quote(value)}" for name, value in
                                            [*named, *self.variables, *where.variables]
                                            if value is not None)]
        return " ".join(words) + (f" ({self.note})" if self.note else "")

    def __str__(self) -> str:
        return self.command()


def _quote(value: str) -> str:
    """A value as a shell reads it back as one word (quoted only when it must be); a
    Placeholder stays readable, `<folder>`."""
    if isinstance(value, Placeholder):
        return value
    return shlex.quote(str(value))


def _options(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    return [word for option, value in pairs
            for word in ((option,) if value == "" else (option, _quote(value)))]
