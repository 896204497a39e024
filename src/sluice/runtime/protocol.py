"""Wire messages between Python and the Node runner (docs/runner-protocol.md), as data.

Python → runner: ``invoke``, ``evict``, ``stats``. Runner → Python: ``respond`` (streamed),
``result`` (exactly one per request). Decoding happens in one place, ``decode``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from sluice.domain import text

CallKind = Literal["inspect", "run", "hook", "action", "options", "workflow"]


class Limits(TypedDict):
    timeout_ms: int
    memory_mb: int


class InvokeMessage(TypedDict):
    type: Literal["invoke"]
    id: int
    worker_key: str
    entry: str
    env: dict[str, str]
    limits: Limits
    call: dict[str, Any]


@dataclass
class Response:
    """What ``respond()`` / ``$.respond()`` asked for."""

    status: Any
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    body_encoding: str | None = None
    immediate: bool = False


@dataclass
class Result:
    ok: bool
    value: Any = None
    emits: list[dict[str, Any]] = field(default_factory=list)
    db_writes: dict[str, Any] = field(default_factory=dict)
    db_deletes: list[str] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)
    flow_exit: dict[str, Any] | None = None
    sends: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    #: Workflow calls: one record per step that ran (see docs/runner-protocol.md).
    steps: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    response: Response | None = None

    @classmethod
    def failure(cls, code: str, message: str) -> Result:
        return cls(ok=False, error={"name": "Error", "code": code, "message": message})


# Runner codes (docs/runner-protocol.md); anything else is the user's error name or code.
TIMEOUT = "TIMEOUT"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
WORKER_STOPPED = "WORKER_STOPPED"
LOAD_FAILED = "LOAD_FAILED"
NOT_A_COMPONENT = "NOT_A_COMPONENT"
NO_RUN = "NO_RUN"
RUNNER_CRASHED = "RUNNER_CRASHED"


def encode(message: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON. Events and db values may hold lone surrogates (from
    JavaScript, or JSON's ``"\\ud800"``), which UTF-8 cannot carry: only then is the message
    walked, each one becoming U+FFFD (``text.for_runner``)."""
    dumped = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return dumped.encode() + b"\n"
    except UnicodeEncodeError:
        return encode(text.for_runner(message))


def decode_result(message: dict[str, Any]) -> Result:
    return Result(
        ok=bool(message.get("ok")),
        value=message.get("value"),
        emits=list(message.get("emits") or []),
        db_writes=dict(message.get("db_writes") or {}),
        db_deletes=list(message.get("db_deletes") or []),
        exports=dict(message.get("exports") or {}),
        flow_exit=message.get("flow_exit"),
        sends=list(message.get("sends") or []),
        logs=list(message.get("logs") or []),
        error=message.get("error"),
        steps=list(message.get("steps") or []),
        duration_ms=float(message.get("duration_ms") or 0.0),
    )


def decode_response(message: dict[str, Any]) -> Response:
    r = message.get("response") or {}
    return Response(
        status=r.get("status"),
        headers=dict(r.get("headers") or {}),
        body=r.get("body"),
        body_encoding=r.get("body_encoding"),
        immediate=bool(r.get("immediate")),
    )
