"""``$.flow.delay``, ``$.flow.suspend`` and ``$.flow.rerun``: what a pause is, and what a
paused run does when its time comes, its resume URL is called or its cancel URL. Pure.

A step that calls one of them ends as ``delayed``, ``suspended`` or ``rerun`` (the runner's
record carries ``pause = {kind, ms, …}``); the run stops there and keeps a ``Pause``, with one
``resume`` job due at ``due_ms``. What happens next (``resumption``)::

    delay    due / resume URL ──► the next step runs          cancel URL ──► cancelled
    suspend  resume URL ──► the next step runs, the step's export $resume_data = the body
             due (the time-out) / cancel URL ──► cancelled
    rerun    due / resume URL ──► the same step runs again, $.context.run = {runs, context,
             callback_request (the resume request)}          cancel URL ──► cancelled

>>> p = Pause("rerun", "c_1", 0, due_ms=5, runs=1, context={"n": 1}, max_reruns=3)
>>> r = resumption(p, Action.DUE, None)
>>> r.start, r.run
(0, {'runs': 2, 'context': {'n': 1}})
>>> resumption(Pause("suspend", "c_1", 0, due_ms=5), Action.DUE, None).cancelled
True
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from sluice.domain.states import RunStatus, StepStatus

#: Pipedream's range for a delay: at most one year.
MAX_PAUSE_MS = 365 * 24 * 3600 * 1000

#: A paused step's status, by the kind of pause; and the run's status while it waits.
STEP_STATUS = {
    "delay": StepStatus.DELAYED,
    "suspend": StepStatus.SUSPENDED,
    "rerun": StepStatus.RERUN,
}
RUN_STATUS = {
    "delay": RunStatus.DELAYED,
    "suspend": RunStatus.SUSPENDED,
    "rerun": RunStatus.DELAYED,
}


class Action(StrEnum):
    """What wakes a paused run: its time, its resume URL, its cancel URL."""

    DUE = "due"
    RESUME = "resume"
    CANCEL = "cancel"


@dataclass
class Pause:
    """A paused run's wait: stored with the run (``runs.pause``) while it lasts."""

    kind: str
    step_id: str
    #: The paused step's position in the workflow's steps.
    index: int
    due_ms: int
    #: How many times the paused step ran (``$.context.run.runs``).
    runs: int = 1
    context: Any = None
    max_reruns: int = 10
    #: The ``resume`` job that wakes the run (its time, or a URL moving it to now).
    job_id: int | None = None
    #: sha256 of the URLs' secrets; the secrets themselves are never stored.
    resume_hash: str = ""
    cancel_hash: str = ""
    #: Set when a URL woke it (``resume``/``cancel``): each pause wakes once.
    woken: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Pause:
        return cls(**{k: value[k] for k in cls.__dataclass_fields__ if k in value})


@dataclass
class Resumption:
    """What a woken run does: run from ``start`` (``run`` is ``$.context.run`` of that step),
    or nothing (``cancelled``)."""

    start: int | None
    run: dict[str, Any] | None = None
    resume_data: Any = None
    cancelled: bool = False
    timed_out: bool = False


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """Constant time: a wrong secret tells nothing about the right one."""
    return bool(stored_hash) and hmac.compare_digest(secret_hash(secret), stored_hash)


def check(pause: dict[str, Any], runs: int) -> dict[str, Any] | None:
    """The error of a pause that cannot be kept (a step record's ``error``), else None: a
    time past a year, or a rerun past its ``maxReruns``.

    >>> check({"kind": "rerun", "ms": 10, "max_reruns": 2}, runs=3)["code"]
    'RERUN_LIMIT'
    """
    ms = pause.get("ms")
    if not isinstance(ms, int) or not 0 <= ms <= MAX_PAUSE_MS:
        message = f"$.flow.{pause.get('kind')}: the time must be 0 to {MAX_PAUSE_MS} ms, got {ms}"
        return {"name": "RangeError", "code": "INVALID_PAUSE", "message": message, "stack": None}
    max_reruns = pause.get("max_reruns", 10)
    if pause.get("kind") == "rerun" and (not isinstance(max_reruns, int) or runs > max_reruns):
        message = f"$.flow.rerun: the step ran {runs} times; maxReruns is {max_reruns}"
        return {"name": "RerunLimitError", "code": "RERUN_LIMIT", "message": message, "stack": None}
    return None


def pause_of(record: dict[str, Any], index: int, *, now_ms: int, runs: int) -> Pause:
    """The pause a step's record asks for (``check`` passed)."""
    asked = record.get("pause") or {}
    return Pause(
        kind=str(asked["kind"]),
        step_id=str(record["id"]),
        index=index,
        due_ms=now_ms + int(asked["ms"]),
        runs=runs,
        context=asked.get("context"),
        max_reruns=int(asked.get("max_reruns", 10)),
    )


def resumption(pause: Pause, action: Action, data: Any) -> Resumption:
    """What the run does when woken by ``action`` (``data``: the resume request's body)."""
    if action == Action.CANCEL:
        return Resumption(None, cancelled=True)
    if pause.kind == "suspend" and action == Action.DUE:
        return Resumption(None, cancelled=True, timed_out=True)
    if pause.kind == "rerun":
        run: dict[str, Any] = {"runs": pause.runs + 1, "context": pause.context}
        if action == Action.RESUME:
            run["callback_request"] = data
        return Resumption(pause.index, run=run)
    # $resume_data is the body of the resume request (``data`` is the whole request).
    body = data.get("body") if isinstance(data, dict) else data
    resume_data = body if pause.kind == "suspend" and action == Action.RESUME else None
    return Resumption(pause.index + 1, resume_data=resume_data)


def resumed_steps(
    records: list[dict[str, Any]], pause: Pause, woke: Resumption
) -> list[dict[str, Any]]:
    """The stored records with the paused step settled: ``cancelled``; replaced by its rerun
    (the caller appends it); or ``success``, with ``$resume_data`` after a resumed suspend."""
    out = [dict(r) for r in records]
    at = next((i for i, r in enumerate(out) if r.get("id") == pause.step_id), None)
    if at is None:
        return out
    paused = dict(out[at])
    if woke.cancelled:
        paused["status"] = StepStatus.CANCELLED
        paused["flow"] = {
            "kind": pause.kind,
            "outcome": "timed_out" if woke.timed_out else "cancelled",
        }
        return [*out[:at], paused]
    if woke.run is not None:
        return out[:at]
    paused["status"] = StepStatus.SUCCESS
    if pause.kind == "suspend":
        paused["exports"] = {**(paused.get("exports") or {}), "$resume_data": woke.resume_data}
    return [*out[:at], paused]


class Abandoned(StrEnum):
    """Why a woken run cannot be carried on: the error code on its record."""

    #: The workflow was updated while the run waited and the paused step is no longer in it.
    STEP_REMOVED = "STEP_REMOVED"
    #: The workflow was deactivated while the run waited (its triggers deliver nothing either).
    WORKFLOW_INACTIVE = "WORKFLOW_INACTIVE"
    #: The workflow was deleted while the run waited (its runs go with it: seldom seen).
    WORKFLOW_DELETED = "WORKFLOW_DELETED"


_ABANDONED_WHY = {
    Abandoned.STEP_REMOVED: "step {step} paused the run and is no longer in the workflow "
    "(it was removed while the run waited)",
    Abandoned.WORKFLOW_INACTIVE: "the workflow was deactivated while the run waited at step {step}",
    Abandoned.WORKFLOW_DELETED: "the workflow was deleted while the run waited at step {step}",
}


def abandoned(
    records: list[dict[str, Any]], pause: Pause, why: Abandoned, ts: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records and the error of a woken run that cannot be carried on: it ends
    ``cancelled``, its paused step ``cancelled`` with ``flow.outcome`` the reason, and the
    run's error says why (``{code, msg, cellId, ts, stack}``, as a failed step's).

    >>> p = Pause("delay", "c_1", 0, due_ms=5)
    >>> steps, error = abandoned([{"id": "c_1", "name": "wait"}], p, Abandoned.STEP_REMOVED, "t")
    >>> str(steps[0]["status"]), steps[0]["flow"]["outcome"], error["code"]
    ('cancelled', 'step_removed', 'STEP_REMOVED')
    """
    steps = resumed_steps(records, pause, Resumption(None, cancelled=True))
    name = next((r.get("name") for r in records if r.get("id") == pause.step_id), None)
    for record in steps:
        if record.get("id") == pause.step_id:
            record["flow"] = {**(record.get("flow") or {}), "outcome": why.lower()}
    step = f'"{name}" ({pause.step_id})' if name else pause.step_id
    message = "$.flow." + pause.kind + ": " + _ABANDONED_WHY[why].format(step=step)
    error = {"code": str(why), "msg": message, "cellId": pause.step_id, "ts": ts, "stack": None}
    return steps, error


def prior_steps(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``steps.<name>`` of the steps that ran before a resumed part, as the runner gave them
    to later steps: the exports and the return value.

    >>> prior_steps([{"name": "a", "exports": {"x": 1}, "return_value": 2}])
    {'a': {'x': 1, '$return_value': 2}}
    """
    return {
        str(r["name"]): {**(r.get("exports") or {}), "$return_value": r.get("return_value")}
        for r in records
    }
