"""``api/errors.py`` is the one place an HTTP status is decided: every error class and every
reason an endpoint's client is answered by Sluice has exactly one status and code."""

from __future__ import annotations

import inspect
import json

from sluice import errors
from sluice.api import errors as api_errors
from sluice.domain.states import Unanswered


def test_every_unanswered_reason_has_a_status_and_code() -> None:
    assert set(api_errors.UNANSWERED) == set(Unanswered)
    for status, code in api_errors.UNANSWERED.values():
        assert 400 <= status <= 599 and code


def test_the_documented_endpoint_answers() -> None:
    # docs/errors.md: a workflow's missing $.respond is Pipedream's 400; a source's is a 504.
    expected = {
        Unanswered.NO_WORKFLOW_RESPONSE: (400, "no_response"),
        Unanswered.NO_RESPONSE: (504, "no_response"),
        Unanswered.RUNNER_CRASHED: (503, "runner_crashed"),
        Unanswered.RETRYING: (503, "retrying"),
    }
    for reason, answer in expected.items():
        assert api_errors.UNANSWERED[reason] == answer
    response = api_errors.unanswered(Unanswered.GONE, "deleted before it ran")
    assert response.status_code == 404
    assert json.loads(bytes(response.body)) == {
        "error": "deleted before it ran",
        "code": "not_found",
    }


def test_every_error_class_has_a_status() -> None:
    classes = [
        cls
        for _name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.SluiceError) and cls is not errors.SluiceError
    ]
    assert classes
    for cls in classes:
        status = next((api_errors.STATUS[c] for c in cls.__mro__ if c in api_errors.STATUS), None)
        assert status is not None, f"{cls.__name__} has no status in api/errors.py"
