"""``domain/flow.py`` and the pause rules of ``domain/outcomes.py``: pure decisions."""

from __future__ import annotations

from sluice.domain import flow, outcomes
from sluice.domain.flow import Action, Pause

STEPS = [{"id": "c_1", "name": "a"}, {"id": "c_2", "name": "b"}]


def paused(kind: str, **pause: object) -> dict[str, object]:
    status = flow.STEP_STATUS[kind]
    return {
        "id": "c_1",
        "name": "a",
        "status": status,
        "exports": {"x": 1},
        "return_value": 2,
        "error": None,
        "pause": {"kind": kind, "ms": 1000, **pause},
    }


def test_a_pause_sets_the_run_status_and_is_dated_from_now() -> None:
    out = outcomes.run_outcome(
        STEPS, [paused("delay")], logs=[], ok=True, error=None, ts="t", now_ms=50
    )
    assert out.status == "delayed" and out.pause is not None
    assert (out.pause.kind, out.pause.index, out.pause.due_ms) == ("delay", 0, 1050)
    suspended = outcomes.run_outcome(
        STEPS, [paused("suspend")], logs=[], ok=True, error=None, ts="t"
    )
    assert suspended.status == "suspended"


def test_a_pause_past_its_limits_is_the_steps_error() -> None:
    too_long = paused("delay")
    too_long["pause"] = {"kind": "delay", "ms": flow.MAX_PAUSE_MS + 1}
    out = outcomes.run_outcome(STEPS, [too_long], logs=[], ok=True, error=None, ts="t")
    assert out.status == "error" and out.error is not None and out.error["code"] == "INVALID_PAUSE"
    rerun = paused("rerun", max_reruns=2)
    out = outcomes.run_outcome(
        STEPS, [rerun], logs=[], ok=True, error=None, ts="t", runs={"c_1": 3}
    )
    assert out.error is not None and out.error["code"] == "RERUN_LIMIT"
    assert out.steps[0]["runs"] == 3 and out.pause is None


def test_what_wakes_each_kind_of_pause() -> None:
    delay = Pause("delay", "c_1", 0, due_ms=1)
    assert flow.resumption(delay, Action.DUE, None).start == 1
    assert flow.resumption(delay, Action.CANCEL, None).cancelled
    suspend = Pause("suspend", "c_1", 0, due_ms=1)
    resumed = flow.resumption(suspend, Action.RESUME, {"body": {"ok": 1}})
    assert (resumed.start, resumed.resume_data) == (1, {"ok": 1})
    timed_out = flow.resumption(suspend, Action.DUE, None)
    assert timed_out.cancelled and timed_out.timed_out
    rerun = Pause("rerun", "c_1", 0, due_ms=1, runs=2, context={"p": 1})
    woke = flow.resumption(rerun, Action.RESUME, {"body": "x"})
    assert woke.start == 0
    assert woke.run == {"runs": 3, "context": {"p": 1}, "callback_request": {"body": "x"}}


def test_the_paused_record_is_settled() -> None:
    record = paused("suspend")
    suspend = Pause("suspend", "c_1", 0, due_ms=1)
    woke = flow.resumption(suspend, Action.RESUME, {"body": 5})
    [settled] = flow.resumed_steps([record], suspend, woke)
    assert settled["status"] == "success" and settled["exports"] == {"x": 1, "$resume_data": 5}
    assert flow.prior_steps([settled]) == {"a": {"x": 1, "$resume_data": 5, "$return_value": 2}}
    rerun = Pause("rerun", "c_1", 0, due_ms=1)
    assert flow.resumed_steps([record], rerun, flow.resumption(rerun, Action.DUE, None)) == []
    [cancelled] = flow.resumed_steps([record], suspend, flow.Resumption(None, cancelled=True))
    assert cancelled["status"] == "cancelled"


def test_secrets_are_compared_by_hash() -> None:
    stored = flow.secret_hash("s3cret")
    assert flow.matches("s3cret", stored) and not flow.matches("other", stored)
    assert not flow.matches("s3cret", "")
