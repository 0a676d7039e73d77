"""The rules of the API's arguments, as the tests walk them: make's variables' and those the
public functions declare on their parameters (pipeline/options/arguments.py: own_options)."""

from __future__ import annotations

import inspect

import pipeline
from pipeline.cli.commands import COMMANDS  # each registered
from pipeline.options import arguments, declared
from pipeline.options.declared import Variable


def api_rules() -> list[Variable]:
    """The rules the public functions declare on their parameters (a Check: arguments.
    own_options), a function's options with a Help among its command's."""
    commands = {entry.api: name for name, entry in COMMANDS.items() if entry.api}
    found: list[Variable] = []
    for name in pipeline.__all__:
        value = getattr(pipeline, name)
        if inspect.isfunction(value):
            function = inspect.unwrap(value)
            found += arguments.own_options(function, commands.get(function, ""))
    return found


def rule(function: str, name: str) -> Variable | None:
    """The rule of argument `name` of public function `function`: its parameter's own (a
    Check), else the make variable it is checked as; None: its annotation alone."""
    own = [var for var in api_rules() if var.keyword == name and function in var.functions]
    return own[0] if own else declared.declaration(function, name)
