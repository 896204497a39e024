"""Every exception class Sluice defines lives in ``sluice.errors``, under ``SluiceError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sluice
from sluice import errors


def _modules() -> list[str]:
    # Alembic's migration scripts run only inside a migration.
    found = pkgutil.walk_packages(sluice.__path__, "sluice.")
    return sorted(m.name for m in found if not m.name.startswith("sluice.storage.migrations"))


def test_no_module_defines_an_exception_outside_errors() -> None:
    outside = []
    for name in _modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and name != "sluice.errors"
            ):
                outside.append(f"{name}.{attr}")
    assert outside == []


def test_every_class_in_errors_is_a_sluice_error_with_its_own_code() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException)
    ]
    assert all(issubclass(cls, errors.SluiceError) for cls in classes)
    leaves = [cls for cls in classes if cls is not errors.SluiceError]
    codes = [cls.code for cls in leaves]
    assert len(codes) == len(set(codes)), sorted(codes)
    # The tree in the module's docstring names every class.
    doc = errors.__doc__ or ""
    assert [cls.__name__ for cls in classes if cls.__name__ not in doc] == []


def test_a_cli_error_carries_the_code_of_the_answer_it_reports() -> None:
    exc = errors.CliError("no such workflow", code="not_found", status=404)
    assert (exc.message, exc.code, exc.status, exc.details) == (
        "no such workflow",
        "not_found",
        404,
        {},
    )
    assert errors.CliError("x").code == "error"
