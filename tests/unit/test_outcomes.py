"""What an invocation's answer means (``domain/outcomes.py``): pure decisions over values."""

from __future__ import annotations

import doctest

from sluice.domain import outcomes
from sluice.domain.states import RunStatus, StepStatus

STEPS = [{"id": "c_a", "name": "first"}, {"id": "c_b", "name": "second"}]


def _ran(step: dict[str, str], status: str, **extra: object) -> dict[str, object]:
    return {
        "id": step["id"],
        "name": step["name"],
        "status": status,
        "return_value": None,
        "exports": {},
        "duration_ms": 1,
        "error": None,
        **extra,
    }


def test_doctests() -> None:
    assert doctest.testmod(outcomes).failed == 0


def test_every_step_succeeded() -> None:
    ran = [_ran(STEPS[0], "success"), _ran(STEPS[1], "success")]
    out = outcomes.run_outcome(STEPS, ran, logs=[], ok=True, error=None, ts="t")
    assert out.status == RunStatus.SUCCESS and out.error is None
    assert [s["logs"] for s in out.steps] == [[], []]


def test_the_first_failing_step_decides_and_its_error_takes_the_errors_shape() -> None:
    boom = {"name": "TypeError", "message": "x is undefined", "stack": "TypeError: x\n at /h/p"}
    ran = [_ran(STEPS[0], "error", error=boom), _ran(STEPS[1], "success")]
    out = outcomes.run_outcome(
        STEPS, ran, logs=[], ok=True, error=None, ts="2026-01-01T00:00:00.000Z",
        scrub=lambda text: text.replace("/h/p", "p") if isinstance(text, str) else text,
    )  # fmt: skip
    assert out.status == RunStatus.ERROR
    assert out.error == {
        "code": "TypeError",
        "msg": "x is undefined",
        "cellId": "c_a",
        "ts": "2026-01-01T00:00:00.000Z",
        "stack": "TypeError: x\n at p",
        "name": "TypeError",
        "step_name": "first",
    }
    assert out.steps[0]["error"]["stack"] == "TypeError: x\n at p"


def test_a_runner_error_goes_to_the_step_it_names_else_the_first_not_done() -> None:
    named = outcomes.run_outcome(
        STEPS, [], logs=[], ok=False, error={"code": "TIMEOUT", "step": "c_b"}, ts="t"
    )
    assert [s["id"] for s in named.steps] == ["c_b"]
    assert named.steps[0]["status"] == StepStatus.ERROR and named.error is not None
    assert named.error["code"] == "TIMEOUT" and named.error["step_name"] == "second"
    unnamed = outcomes.run_outcome(
        STEPS, [_ran(STEPS[0], "success")], logs=[], ok=False, error={"code": "OOM"}, ts="t"
    )
    assert [s["status"] for s in unnamed.steps] == ["success", "error"]


def test_exited_unless_a_later_step_failed() -> None:
    exited = outcomes.run_outcome(
        STEPS[:1], [_ran(STEPS[0], "exited")], logs=[], ok=True, error=None, ts="t"
    )
    assert exited.status == RunStatus.EXITED


def test_logs_go_to_their_step_and_loose_ones_to_the_last() -> None:
    ran = [_ran(STEPS[0], "success"), _ran(STEPS[1], "success")]
    logs = [
        {"ts": 1, "msg": "a", "step": "c_a"},
        {"ts": 2, "msg": "loose"},
        {"ts": 3, "msg": "b", "step": "c_b"},
    ]
    out = outcomes.run_outcome(STEPS, ran, logs=logs, ok=True, error=None, ts="t")
    assert out.steps[0]["logs"] == [{"ts": 1, "msg": "a"}]
    assert out.steps[1]["logs"] == [{"ts": 3, "msg": "b"}, {"ts": 2, "msg": "loose"}]


def test_code_steps_db_writes_leave_the_records() -> None:
    db = {"writes": {"k": 1}, "deletes": []}
    out = outcomes.run_outcome(
        STEPS[:1], [_ran(STEPS[0], "success", db=db)], logs=[], ok=True, error=None, ts="t"
    )
    assert out.db_writes == {"c_a": db} and "db" not in out.steps[0]


def test_a_source_failure_is_the_runners_first_and_logs_both() -> None:
    runner = {"name": "Error", "message": "boom"}
    db = {"name": "Error", "code": "DB_LIMIT", "message": "full"}
    error, lines = outcomes.source_failure(runner, db)
    assert error is runner and lines == ["Error: boom", "Error [DB_LIMIT]: full"]
    assert outcomes.source_failure(None, None) == (None, [])
