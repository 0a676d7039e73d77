"""The suite's own installers (tests/conftest.py INSTALLERS), started in the background by a
whole `make test`: each names a function that exists, so that none is dropped without a word
(install_queue goes on past an installer that fails, leaving its test to say why)."""

from __future__ import annotations

import importlib
import inspect

from tests.conftest import INSTALLERS


def test_every_installer_is_a_function_of_no_arguments():
    named = [(module, name) for queue in INSTALLERS for module, name in queue]
    assert len(named) == len(set(named)) == 5
    for module, name in named:
        function = getattr(importlib.import_module(module), name)
        assert not inspect.signature(function).parameters, (module, name)
