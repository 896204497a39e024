"""What an HTTP endpoint answers, as pure decisions: the default answer (a source without
``customResponse``), the ``OPTIONS`` preflight, and the answer a source's ``respond()`` call
becomes, or the refusal Sluice sends instead when the call is not a valid answer.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from sluice.domain.states import Unanswered

#: The answer of an endpoint whose source has no ``customResponse`` (Pipedream documents none
#: for sources; a JSON body suits the machines that call webhooks).
DEFAULT_BODY = b'{"success":true}'

#: ``OPTIONS`` answers, as Pipedream's endpoints do.
CORS_METHODS = "GET,HEAD,PUT,PATCH,POST,DELETE"

#: Set by the server from the body it sends; a source's value would corrupt the framing.
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})
#: Added to every ``respond()`` answer: an endpoint may answer on the web UI's origin, so a page
#: it serves runs in an origin of its own (opaque: no cookies, no same-origin requests
#: to Sluice), with scripts, forms and popups still allowed. A CSP the source sets applies too.
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
#: Statuses whose answers carry no content (RFC 9110 §15.3.5, §15.3.6, §15.4.5).
_NO_CONTENT = frozenset({204, 205, 304})
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_DIGITS = re.compile(r"^\s*[0-9]+\s*$")


@dataclass(frozen=True)
class Answer:
    """An HTTP answer to send as it is."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass(frozen=True)
class Refusal:
    """An answer Sluice gives instead of the source's: rendered with the API's error shape."""

    reason: Unanswered
    message: str


DEFAULT_ANSWER = Answer(
    200,
    (("content-type", "application/json"), ("access-control-allow-origin", "*")),
    DEFAULT_BODY,
)


def default_answer() -> Answer:
    return DEFAULT_ANSWER


def preflight_answer(requested_headers: str | None) -> Answer:
    headers = [
        ("access-control-allow-origin", "*"),
        ("access-control-allow-methods", CORS_METHODS),
        ("access-control-max-age", "86400"),
    ]
    if requested_headers:
        headers.append(("access-control-allow-headers", requested_headers))
    return Answer(204, tuple(headers), b"")


def coerce_status(value: Any) -> int | None:
    """A ``respond()`` status as an int 100 to 599, or None when it is not one.

    ``200`` → 200; ``"201"`` → 201 (registry sources pass statuses read from string props);
    ``200.0`` → 200; ``99``, ``600``, ``"abc"``, ``True``, ``None`` → None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and _DIGITS.match(value):
        value = int(value)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _header_value(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"  # as JavaScript's String(true)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    return None


def _headers(given: Any) -> list[tuple[str, str]] | str:
    """``respond()``'s headers as pairs (a list value gives the header once per item), or the
    reason they cannot be sent."""
    if given is None:
        return []
    if not isinstance(given, dict):
        return "headers must be an object of header names and values"
    pairs: list[tuple[str, str]] = []
    for name, value in given.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            return f"{name!r} is not a valid header name"
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            text = _header_value(item)
            if text is None or any(c in text for c in "\r\n\x00"):
                return f"header {name!r} has an invalid value"
            if name.lower() not in _FRAMING:
                pairs.append((name.lower(), text))
    return pairs


def _body(body: Any, encoding: str | None) -> tuple[bytes, str | None] | str:
    if body is None or encoding is None:
        return b"", None
    if encoding == "utf8" and isinstance(body, str):
        return body.encode("utf-8", errors="replace"), "text/plain; charset=utf-8"
    if encoding == "base64" and isinstance(body, str):
        try:
            return base64.b64decode(body, validate=True), "application/octet-stream"
        except binascii.Error:
            return "the Buffer body could not be decoded"
    if encoding == "json":
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8"), "application/json; charset=utf-8"
    return f"unknown body encoding {encoding!r}"


def answer(status: Any, headers: Any, body: Any, body_encoding: str | None) -> Answer | Refusal:
    """What ``respond({status, headers, body})`` sends, or a 500 refusal saying what was wrong.

    The content type follows the body unless ``headers`` gives one: a string is
    ``text/plain; charset=utf-8``, a Buffer ``application/octet-stream``, any other value JSON.
    ``Content-Length``, ``Transfer-Encoding`` and ``Connection`` are the server's to set; 204,
    205 and 304 carry no body; ``Access-Control-Allow-Origin: *`` is added unless given.
    Every answer is sandboxed (``SANDBOX``, ``nosniff``); which of its headers reach the
    browser is ``endpoint_origins``' decision (no cookies on a shared origin)."""
    code = coerce_status(status)
    if code is None:
        return Refusal(
            Unanswered.INVALID_STATUS,
            f"respond() was called with an invalid status {json.dumps(status)}: a status is an "
            "integer from 200 to 599 (1xx statuses cannot end an HTTP exchange)",
        )
    if code < 200:
        return Refusal(
            Unanswered.INVALID_STATUS,
            f"respond() was called with status {code}: a 1xx status is informational "
            "and cannot end an HTTP exchange; use 200 to 599",
        )
    pairs = _headers(headers)
    if isinstance(pairs, str):
        return Refusal(
            Unanswered.INVALID_RESPONSE, f"respond() was called with bad headers: {pairs}"
        )
    content = _body(body, body_encoding)
    if isinstance(content, str):
        return Refusal(
            Unanswered.INVALID_RESPONSE, f"respond() was called with a bad body: {content}"
        )
    data, content_type = content
    names = {name for name, _ in pairs}
    if code in _NO_CONTENT:
        data, content_type = b"", None
    if content_type is not None and "content-type" not in names:
        pairs.append(("content-type", content_type))
    if "access-control-allow-origin" not in names:
        pairs.append(("access-control-allow-origin", "*"))
    pairs.append(("content-security-policy", SANDBOX))
    if "x-content-type-options" not in names:
        pairs.append(("x-content-type-options", "nosniff"))
    return Answer(code, tuple(pairs), data)
