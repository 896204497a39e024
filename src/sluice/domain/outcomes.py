"""What an invocation's answer means, decided once, over plain values (no I/O).

A workflow run (``run_outcome``): the runner's step records become the stored steps (the step
that was running when the runner ended the call gets the runner's error), log lines go to the
step that wrote them, and the run's status is its first failing step's (``error``, with the
``$errors`` shape of that step's error), else ``exited`` when a step called ``$.flow.exit``,
else ``delayed``/``suspended`` when its last step paused it (``$.flow.delay``/``rerun``/
``suspend``: the run keeps a ``flow.Pause``; a pause past its limits is that step's error),
else ``success``.

A source invocation (``source_failure``): the error a run ends with, the runner's or one of
the limits found while storing it, and the log line it leaves.

>>> steps = [{"id": "c_1", "name": "a"}, {"id": "c_2", "name": "b"}]
>>> ran = [{"id": "c_1", "name": "a", "status": "success"}]
>>> out = run_outcome(steps, ran, logs=[], ok=False, error={"code": "TIMEOUT"}, ts="t")
>>> str(out.status), [str(s["status"]) for s in out.steps], out.error["cellId"]
('error', ['success', 'error'], 'c_2')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.domain import error_events, flow
from sluice.domain.states import RunStatus, StepStatus


@dataclass
class RunOutcome:
    status: RunStatus
    #: The stored step records, logs included.
    steps: list[dict[str, Any]]
    #: The ``$errors`` error of the failing step (``step_name`` added), when ``status`` is error.
    error: dict[str, Any] | None
    #: Code steps' ``$.service.db`` writes by step id, applied with the run (not stored in it).
    db_writes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What the run waits for, when its last step paused it.
    pause: flow.Pause | None = None


def run_outcome(
    steps: list[dict[str, Any]],
    ran: list[dict[str, Any]],
    *,
    logs: list[dict[str, Any]],
    ok: bool,
    error: dict[str, Any] | None,
    ts: str,
    scrub: Callable[[Any], Any] = lambda text: text,
    now_ms: int = 0,
    runs: dict[str, int] | None = None,
) -> RunOutcome:
    """``steps`` the workflow's (``id``, ``name``), ``ran`` the runner's records, ``logs`` its
    lines (``step`` naming their step), ``ok``/``error`` the call's end, ``ts`` the time of the
    end; ``scrub`` cleans stacks and messages (host paths). ``now_ms`` dates a pause, ``runs``
    counts the runs of a step that ran again (``$.flow.rerun``; 1 for the others)."""
    records = [dict(r) for r in ran]
    db_writes = {r["id"]: r.pop("db") for r in records if r.get("db")}
    if not ok:
        failed = _running_step(steps, records, (error or {}).get("step"))
        if failed is not None:
            records.append(_runner_failure(failed, error))
    for record in records:
        if (runs or {}).get(record["id"], 1) > 1:
            record["runs"] = (runs or {})[record["id"]]  # $.context.run.runs of a rerun step
    pause = _pause(steps, records, now_ms, runs or {}) if ok else None
    _attach_logs(records, logs)
    status, run_error = RunStatus.SUCCESS, None
    for record in records:
        if record.get("error"):
            record["error"]["stack"] = scrub(record["error"].get("stack"))
            record["error"]["message"] = scrub(record["error"].get("message"))
        if record["status"] == StepStatus.ERROR:
            status = RunStatus.ERROR
            run_error = error_events.error_of(record["error"] or {}, cell_id=record["id"], ts=ts)
            run_error["step_name"] = record["name"]
            break
        if record["status"] == StepStatus.EXITED:
            status = RunStatus.EXITED
    if pause is not None and status == RunStatus.SUCCESS:
        status = flow.RUN_STATUS[pause.kind]
    return RunOutcome(status, records, run_error, db_writes, pause)


def _pause(
    steps: list[dict[str, Any]], records: list[dict[str, Any]], now_ms: int, runs: dict[str, int]
) -> flow.Pause | None:
    """The pause the last record asks for; one past its limits becomes that step's error."""
    if not records or not records[-1].get("pause"):
        return None
    record = records[-1]
    count = runs.get(record["id"], 1)
    problem = flow.check(record["pause"], count)
    if problem is not None:
        record.update(status=StepStatus.ERROR, error=problem)
        del record["pause"]
        return None
    index = next(i for i, s in enumerate(steps) if s["id"] == record["id"])
    return flow.pause_of(record, index, now_ms=now_ms, runs=count)


def _running_step(
    steps: list[dict[str, Any]], records: list[dict[str, Any]], named: str | None
) -> dict[str, Any] | None:
    """The step the runner's error belongs to: the one it names, else the first not done."""
    if named:
        found = next((s for s in steps if s["id"] == named), None)
        if found is not None:
            return found
    done = {r["id"] for r in records}
    return next((s for s in steps if s["id"] not in done), None)


def _runner_failure(step: dict[str, Any], error: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": step["id"],
        "name": step["name"],
        "status": StepStatus.ERROR,
        "return_value": None,
        "exports": {},
        "duration_ms": None,
        "error": dict(error or {}),
    }


def _attach_logs(records: list[dict[str, Any]], logs: list[dict[str, Any]]) -> None:
    """Each step gets its lines; lines of no step go to the last step."""
    by_step: dict[str, list[dict[str, Any]]] = {}
    loose: list[dict[str, Any]] = []
    for line in logs:
        entry = {k: v for k, v in line.items() if k != "step"}
        step_id = line.get("step")
        (by_step.setdefault(step_id, []) if step_id else loose).append(entry)
    for record in records:
        record["logs"] = by_step.get(record["id"], [])
    if records and loose:
        records[-1]["logs"] = records[-1]["logs"] + loose


def error_line(error: dict[str, Any]) -> str:
    """A failed invocation's log line: its stack, else its name, code and message.

    >>> error_line({"name": "TypeError", "message": "no"})
    'TypeError: no'
    """
    if error.get("stack"):
        return str(error["stack"])
    name, code = error.get("name") or "Error", error.get("code")
    label = f"{name} [{code}]" if code and code != name else name
    return f"{label}: {error.get('message')}"


def source_failure(
    runner_error: dict[str, Any] | None, db_error: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """A source invocation's error (the runner's first, else the db limit found when storing)
    and the error log lines it leaves (both, when both failed).

    >>> source_failure(None, {"code": "DB_LIMIT", "message": "full"})[0]["code"]
    'DB_LIMIT'
    """
    error = runner_error if runner_error is not None else db_error
    lines = [error_line(e) for e in (runner_error, db_error) if e is not None]
    return error, lines


#: A stored event: ``(channel, payload, meta)``.
Item = tuple[str, Any, dict[str, Any]]


# ---- a source invocation's results, to store -------------------------------------------------


@dataclass
class SourceResults:
    """What a source's invocation left, ready to store (limits applied, text storable)."""

    invocation_id: str
    emits: list[dict[str, Any]]
    db_writes: dict[str, Any]
    db_deletes: list[str]
    logs: list[dict[str, Any]]
    #: The runner's error, if the invocation failed there.
    error: dict[str, Any] | None
    #: Builds the ``$errors`` event of a failed ``run()`` (None: not a run, nothing to say).
    error_event: Callable[[dict[str, Any]], Any] | None = None
    #: A delivery's chain of listeners (an ``emit`` job's ``hops``): its emits do not go back
    #: to one of them, so sources subscribed in a ring stop. None: not a delivery.
    hops: list[str] | None = None


@dataclass
class SourceStored:
    """What one source transaction wrote."""

    event_ids: list[str]
    items: list[Item]
    dropped: list[str]
    lines: list[dict[str, Any]]
    #: The invocation's error: the runner's, or a limit's found in the transaction.
    error: dict[str, Any] | None
