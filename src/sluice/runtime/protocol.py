"""The wire between Python and the Node runner (docs/runner-protocol.md): its messages as data,
and the socket that carries them as lines.

Python → runner: ``invoke``, ``evict``, ``stats``. Runner → Python: ``respond`` (streamed),
``result`` (exactly one per request). Decoding happens in one place, ``decode``.

``LineChannel`` is the socket: each complete line goes to its handler from ``data_received``,
in the same step of the event loop that read it (a result settles its caller's future at once,
where a ``StreamReader`` would first wake a task waiting for the line), and the lines
written in one step leave in one system call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from sluice.domain import limits, text
from sluice.errors import OversizedLine

log = logging.getLogger(__name__)


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


#: A ``result`` line longer than this is not used: the invocation fails with
#: ``PAYLOAD_LIMIT`` (Pipedream: logs, exports and event 6 MB combined, "Function Payload Limit
#: Exceeded"). Checked on the line, so a runner that forges its own results cannot pass it.
MAX_RESULT_BYTES = 8 * 1024 * 1024
#: Levels a result wraps a user's value in (``steps`` → record → ``exports`` → name → value).
_WRAPPING = 4

#: The runner's codes (``js/codes.json``, the one table the JS runtime reads too, through
#: ``js/codes.mjs``); anything else in a result's ``error.code`` is the user's error name or code.
CODES: dict[str, dict[str, str | None]] = json.loads(
    (Path(__file__).parent / "js" / "codes.json").read_text(encoding="utf-8")
)["codes"]


def _code(name: str) -> str:
    if name not in CODES:
        raise KeyError(f"runtime/js/codes.json has no code {name}")
    return name


TIMEOUT = _code("TIMEOUT")
OUT_OF_MEMORY = _code("OUT_OF_MEMORY")
LOAD_FAILED = _code("LOAD_FAILED")
NOT_A_COMPONENT = _code("NOT_A_COMPONENT")
NO_RUN = _code("NO_RUN")
RUNNER_CRASHED = _code("RUNNER_CRASHED")


def encode(message: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON, by orjson (about a tenth of ``json.dumps``' CPU). Events and db
    values may hold lone surrogates (from JavaScript, or JSON's ``"\\ud800"``), which UTF-8
    cannot carry: only then is the message walked, each one becoming U+FFFD
    (``text.for_runner``). What orjson refuses (those, keys that are not strings) takes the
    stdlib's way."""
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError
        dumped = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return dumped.encode() + b"\n"
    except UnicodeEncodeError:
        return encode(text.for_runner(message))


def decode(line: bytes) -> Any:
    """A line from the runner: orjson's parse, or the stdlib's for what orjson refuses (a lone
    surrogate's escape, which JavaScript's ``JSON.stringify`` writes; nesting past its limit,
    which then raises ``RecursionError`` as before). ``ValueError`` for a line that is not
    JSON."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def decode_result(message: dict[str, Any], line: bytes | None = None) -> Result:
    """A ``result`` message as a ``Result``; ``line``, the text it was read from, spares the
    walk for depth when it holds too few brackets to nest that deep (nearly always)."""
    # The message's own levels (a step record's exports, an emit's event) come on top.
    limit = text.MAX_DEPTH + _WRAPPING
    shallow = line is not None and line.count(b"[") + line.count(b"{") <= limit
    if not shallow and text.too_deep(message, limit):
        return Result(ok=False, error=limits.depth_error(text.MAX_DEPTH))
    return Result(
        ok=bool(message.get("ok")),
        value=message.get("value"),
        emits=list(message.get("emits") or []),
        db_writes=dict(message.get("db_writes") or {}),
        db_deletes=list(message.get("db_deletes") or []),
        exports=dict(message.get("exports") or {}),
        flow_exit=message.get("flow_exit"),
        sends=list(message.get("sends") or []),
        logs=limits.cap_logs(list(message.get("logs") or [])),
        error=message.get("error"),
        steps=list(message.get("steps") or []),
        duration_ms=float(message.get("duration_ms") or 0.0),
    )


_HEAD = re.compile(rb'^\{"type":"(result|store)","id":(\d+)(?:,"req":(\d+))?')


def too_deep_answer(line: bytes) -> dict[str, Any] | None:
    """A stand-in for a ``result`` or ``store`` line that nests deeper than Python's parser
    goes (its head is read as the runner writes it): the invocation fails with
    ``DEPTH_LIMIT``, the store call is refused. None for anything else."""
    head = _HEAD.match(line[:120])
    if head is None:
        return None
    kind, request_id, req = head.group(1).decode(), int(head.group(2)), head.group(3)
    if kind == "result":
        error = limits.depth_error(text.MAX_DEPTH)
        return {"type": kind, "id": request_id, "ok": False, "error": error}
    return {"type": kind, "id": request_id, "req": int(req or 0), "too_deep": True}


def decode_response(message: dict[str, Any]) -> Response:
    r = message.get("response") or {}
    return Response(
        status=r.get("status"),
        headers=dict(r.get("headers") or {}),
        body=r.get("body"),
        body_encoding=r.get("body_encoding"),
        immediate=bool(r.get("immediate")),
    )


# ---- the socket ------------------------------------------------------------------------------


class LineChannel(asyncio.Protocol):
    def __init__(self, on_line: Callable[[bytes], None], limit: int) -> None:
        self._on_line = on_line
        self._limit = limit
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        #: Resolves when the socket is closed: None at EOF, else why (``OversizedLine``, an
        #: ``OSError``).
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self._drained: asyncio.Future[None] | None = None
        self._out: list[bytes] | None = None

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.attach(transport)

    def attach(self, transport: asyncio.BaseTransport) -> None:
        """Take ``transport`` (``create_unix_connection`` returns it; uvloop calls
        ``connection_made`` only on a later turn of the loop)."""
        if self._transport is None and not self.closed.done():
            self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            self._deliver(bytes(buffer[start : end + 1]))
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            buffer.clear()
            self._end(OversizedLine(f"a line over {self._limit} bytes"))
            if self._transport is not None:
                self._transport.close()

    def eof_received(self) -> bool:
        return False  # close our end too

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        self._transport = None

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # ---- for the runner ---------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data``; ``ConnectionError`` when the socket is closed. What is written in
        one step of the loop leaves in one system call on the next (many runs starting
        together wake the runner once, not once each)."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the runner's protocol socket is closed")
        if self._out is None:
            self._out = [data]
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, None
        if out and self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))

    async def drain(self) -> None:
        """Wait while the socket's send buffer is over its high-water mark (as of the last
        step's writes)."""
        drained = self._drained
        if drained is not None:
            await asyncio.shield(drained)
        if self._transport is None:
            raise ConnectionError("the runner's protocol socket is closed")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _deliver(self, line: bytes) -> None:
        try:
            self._on_line(line)
        except Exception:  # one bad message must not stop the channel
            log.exception("a runner message could not be handled")

    def _end(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_exception(ConnectionError("the runner's protocol socket closed"))
