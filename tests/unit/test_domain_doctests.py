"""The examples in ``domain/`` docstrings are true: every module's doctests run here (a
decision module documents itself with them, as ``domain/routing.py`` and ``domain/shares.py``)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import sluice.domain

MODULES = sorted(m.name for m in pkgutil.iter_modules(sluice.domain.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(f"sluice.domain.{name}")
    assert doctest.testmod(module).failed == 0


def test_the_decision_modules_have_examples() -> None:
    # A module listed here with no example would pass the test above by running nothing.
    for name in ("limits", "routing", "shares", "flow", "outcomes", "deliveries"):
        module = importlib.import_module(f"sluice.domain.{name}")
        assert doctest.DocTestFinder().find(module), name
