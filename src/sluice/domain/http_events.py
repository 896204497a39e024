"""HTTP endpoints of sources, as pure decisions: the event a request becomes, the per-endpoint
token bucket that admits it, and what the endpoint answers (the default answer, the
``OPTIONS`` preflight, the answer a source's ``respond()`` call becomes, or the refusal Sluice
sends instead when the call is not a valid answer). No I/O; time is passed in.

The event is the spec's ``{method, path, query, headers, bodyRaw, body}``:

- ``headers``: names lowercased; a repeated header's values joined with ``", "`` (RFC 9110).
- ``query``: ``{name: value}``, the last value winning when a name repeats.
- ``bodyRaw``: the body as text (its ``charset``, else UTF-8; undecodable bytes become U+FFFD);
  ``""`` when there is none.
- ``body``: absent when the request has no body; else parsed by ``Content-Type``: JSON (also
  ``+json`` types) → the value (invalid JSON → the text); ``x-www-form-urlencoded`` →
  ``{name: value}`` (a body without ``=``, e.g. ``curl -d '{"a": 1}'``, stays the text, as on
  Pipedream); ``multipart/form-data`` → ``{field: text}``, file parts as
  ``{filename, mimetype, size, base64}`` (the endpoint stores them instead and passes
  ``stored_body``: ``{url, filename, mimetype, size}``); anything else → the text.
- ``stored_body``: the body an endpoint kept behind URLs (``x-pd-upload-body: 1`` →
  ``{"raw_body_url": …}``; a multipart body's file parts → their URLs): it is the event's
  ``body``, and ``bodyRaw`` is ``""`` (the bytes are behind the URLs, not in the event).
- NUL characters and lone surrogates (JSON's ``"\\ud800"``) become U+FFFD everywhere in the
  event: neither is Unicode text that every store and the Node runner take. ``bodyRaw`` keeps
  their escapes as they came, and the job keeps the body's bytes.
- A JSON body nested deeper than ``text.MAX_DEPTH`` levels, or with a number too large for a
  64-bit float (``1e400``), stays the text, as invalid JSON does.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any
from urllib.parse import parse_qsl

import orjson

from sluice.domain import text as text_rules
from sluice.domain.states import Unanswered

# ---- the event ------------------------------------------------------------------------------


def build_event(
    method: str,
    path: str,
    query_string: str,
    headers: Iterable[tuple[str, str]],
    raw: bytes,
    stored_body: Any = None,
) -> dict[str, Any]:
    """``build_event("POST", "/", "a=1", [("Content-Type", "application/json")], b'{"x":1}')``
    → ``{"method": "POST", "path": "/", "query": {"a": "1"}, "headers": {"content-type":
    "application/json"}, "bodyRaw": '{"x":1}', "body": {"x": 1}}``."""
    merged: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    content_type = merged.get("content-type", "")
    text = _decode(raw, content_type)
    event: dict[str, Any] = {
        "method": method.upper(),
        "path": path or "/",
        "query": dict(parse_qsl(query_string, keep_blank_values=True)),
        "headers": merged,
        "bodyRaw": text,
    }
    if stored_body is not None:
        event["body"] = stored_body
    elif raw:
        event["body"] = parse_body(content_type, raw, text)
    if stored_body is None and not _may_be_unclean(path, query_string, merged, raw, content_type):
        return event  # the common case: no walk over the whole event
    clean: dict[str, Any] = text_rules.clean_json(event)
    return clean


#: The key of an ``http`` job's payload that holds the request as it came (``raw_request``).
RAW_KEY = "raw_request"


def raw_request(
    method: str,
    path: str,
    query_string: str,
    headers: list[tuple[str, str]],
    raw: bytes,
    stored_body: Any = None,
) -> dict[str, Any]:
    """What an ``http`` job stores: the request as it came, cheaper to take than the event,
    which ``event_of`` builds when the job runs (off the request's path). The body is text when
    it is UTF-8 without NUL, else ``body64`` (base64): JSON columns (PostgreSQL's JSONB) hold
    no NUL. A path or header with a NUL or a lone surrogate (rare) gets the event built at once
    instead."""
    if not text_rules.is_clean(path) or any("\x00" in k or "\x00" in v for k, v in headers):
        return build_event(method, path, query_string, headers, raw, stored_body)
    request: dict[str, Any] = {
        "method": method,
        "path": path,
        "query": query_string,
        "headers": headers,
    }
    if stored_body is not None:
        request["stored_body"] = stored_body
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\x00" not in text:
        request["body"] = text
    else:
        request["body64"] = base64.b64encode(raw).decode("ascii")
    return {RAW_KEY: request}


def event_of(payload: Any) -> Any:
    """The event of an ``http`` job: built from a ``raw_request`` payload, else the payload
    (an event built at the request: jobs stored before this format, or with a NUL)."""
    if not isinstance(payload, dict) or RAW_KEY not in payload:
        return payload
    request = payload[RAW_KEY]
    if "body" in request:
        raw = request["body"].encode("utf-8")
    else:
        raw = base64.b64decode(request["body64"])
    headers = [(str(k), str(v)) for k, v in request["headers"]]
    return build_event(
        request["method"],
        request["path"],
        request["query"],
        headers,
        raw,
        request.get("stored_body"),
    )


#: A JSON escape of a surrogate: with its pair it is fine, alone it is not (checked on a walk).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _may_be_unclean(
    path: str, query_string: str, headers: dict[str, str], raw: bytes, content_type: str
) -> bool:
    """Whether a NUL or a lone surrogate can be anywhere in the event: a NUL byte, or an
    escape that decodes to one (JSON's, percent-encoding's; multipart parts may be base64 or
    quoted-printable), or a charset other than UTF-8 (UTF-7 decodes to lone surrogates)."""
    return (
        not text_rules.is_clean(path)
        or "%00" in query_string
        or any("\x00" in v or "\x00" in k for k, v in headers.items())
        or b"\x00" in raw
        or b"\\u0000" in raw
        or b"%00" in raw
        or media_type(content_type) == "multipart/form-data"
        or _SURROGATE_ESCAPE.search(raw) is not None
        or _charset(content_type) != "utf-8"
    )


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _charset(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
            try:
                return codecs.lookup(charset).name
            except LookupError:
                break
    return "utf-8"


def _decode(raw: bytes, content_type: str) -> str:
    return raw.decode(_charset(content_type), errors="replace")


def parse_body(content_type: str, raw: bytes, text: str) -> Any:
    """The parsed ``body`` of a non-empty request body (see the module docstring)."""
    kind = media_type(content_type)
    if kind == "application/json" or kind.endswith("+json"):
        try:
            value = _JSON.decode(text)
        except (ValueError, RecursionError):
            return text
        if text_rules.too_deep(value):
            return text
        return value
    if kind == "application/x-www-form-urlencoded":
        return dict(parse_qsl(text, keep_blank_values=True)) if "=" in text else text
    if kind == "multipart/form-data":
        return _multipart(content_type, raw, text)
    return text


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: the body stays text rather than failing to store.
    raise ValueError(f"{name} is not JSON")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        # 1e400: Python reads infinity, which no JSON store or JSON.parse takes back.
        raise ValueError(f"{literal} is too large for a 64-bit float")
    return number


#: A JSON body's decoder, made once: ``json.loads`` with these hooks builds a decoder (and its
#: scanner) for every call, ~1.5 µs of each request's parse.
_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite)


@dataclass(frozen=True)
class Part:
    """One named part of a ``multipart/form-data`` body: a field (``filename`` None) or a
    file."""

    name: str
    filename: str | None
    mimetype: str
    data: bytes
    charset: str

    def text(self) -> str:
        return self.data.decode(self.charset, errors="replace")


def multipart_parts(content_type: str, raw: bytes) -> list[Part] | None:
    """The named parts of a multipart body, in order; None when it is not one."""
    if media_type(content_type) != "multipart/form-data":
        return None
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=policy.HTTP).parsebytes(head + raw)
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        return None
    parts: list[Part] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        content = part.get_payload(decode=True)
        data = content if isinstance(content, bytes) else b""
        charset = part.get_content_charset() or "utf-8"
        try:
            codecs.lookup(charset)
        except LookupError:
            charset = "utf-8"
        filename = part.get_filename()
        parts.append(Part(name, filename, part.get_content_type(), data, charset))
    return parts


def stored_form(parts: list[Part], urls: dict[int, str]) -> dict[str, Any]:
    """A multipart body whose file parts were stored: ``{field: text}``, each file part (by its
    index in ``parts``) as Pipedream gives it, ``{url, filename, mimetype}`` (and its
    ``size``).

    >>> p = [Part("a", None, "text/plain", b"x", "utf-8")]
    >>> p.append(Part("f", "a.png", "image/png", b"..", "utf-8"))
    >>> stored_form(p, {1: "https://s/files/fl_1/k"})["f"]
    {'url': 'https://s/files/fl_1/k', 'filename': 'a.png', 'mimetype': 'image/png', 'size': 2}
    """
    fields: dict[str, Any] = {}
    for i, part in enumerate(parts):
        if part.filename is None:
            fields[part.name] = part.text()
        else:
            fields[part.name] = {
                "url": urls[i],
                "filename": part.filename,
                "mimetype": part.mimetype,
                "size": len(part.data),
            }
    return fields


def _multipart(content_type: str, raw: bytes, text: str) -> Any:
    parts = multipart_parts(content_type, raw)
    if parts is None:
        return text
    fields: dict[str, Any] = {}
    for part in parts:
        if part.filename is None:
            fields[part.name] = part.text()
        else:
            fields[part.name] = {
                "filename": part.filename,
                "mimetype": part.mimetype,
                "size": len(part.data),
                "base64": base64.b64encode(part.data).decode("ascii"),
            }
    return fields


def declared_length(headers: Iterable[tuple[str, str]]) -> int | None:
    """The request's ``Content-Length``, when it gives a valid one."""
    for name, value in headers:
        if name.lower() == "content-length":
            value = value.strip()
            return int(value) if value.isdigit() else None
    return None


def pd_flag(
    headers: Iterable[tuple[str, str]], query_string: str, header: str, *params: str
) -> bool:
    """Whether a request sets one of Pipedream's switches to ``1`` (``x-pd-notrigger``, a
    header or a query parameter; ``x-pd-upload-body`` or ``?pipedream_upload_body=1``).

    >>> pd_flag([("X-PD-NoTrigger", "1")], "", "x-pd-notrigger")
    True
    >>> pd_flag([], "a=b&pipedream_upload_body=1", "x-pd-upload-body", "pipedream_upload_body")
    True
    >>> pd_flag([("x-pd-notrigger", "0")], "", "x-pd-notrigger")
    False
    """
    names = {header, *params}
    if any(k.lower() == header and v.strip() == "1" for k, v in headers):
        return True
    if not query_string or not any(n in query_string for n in names):
        return False
    return any(k in names and v == "1" for k, v in parse_qsl(query_string))


def custom_response(configurable_props: Iterable[dict[str, Any]]) -> bool:
    """Whether the source answers its endpoint's requests itself (``customResponse: true``)."""
    return any(
        p.get("type") == "$.interface.http" and p.get("customResponse") is True
        for p in configurable_props
    )


# ---- the rate limit -------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    """Tokens left at ``at_ms``. An endpoint starts full: ``burst`` requests at once, then
    ``rate`` a second."""

    tokens: float
    at_ms: int


def take(bucket: Bucket | None, now_ms: int, *, rate: float, burst: int) -> tuple[Bucket, int]:
    """Take one token: the new bucket, and 0 when the request may pass, else the milliseconds
    until a token is back (``Retry-After``). A ``rate`` of 0 or less means no limit."""
    if rate <= 0:
        return Bucket(float(burst), now_ms), 0
    capacity = float(max(1, burst))
    if bucket is None:
        tokens = capacity
    else:
        elapsed = max(0, now_ms - bucket.at_ms)
        tokens = min(capacity, bucket.tokens + elapsed * rate / 1000.0)
    if tokens >= 1.0:
        return Bucket(tokens - 1.0, now_ms), 0
    wait = math.ceil((1.0 - tokens) * 1000.0 / rate)
    return Bucket(tokens, now_ms), max(1, wait)


def is_full(bucket: Bucket, now_ms: int, *, rate: float, burst: int) -> bool:
    """A bucket that has refilled is the same as none: it can be forgotten."""
    if rate <= 0:
        return True
    return bucket.tokens + max(0, now_ms - bucket.at_ms) * rate / 1000.0 >= max(1, burst)


# ---- What an endpoint answers ------------------------------------------------------------

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
        try:  # the usual value in one orjson dump (compact UTF-8, as below)
            return orjson.dumps(body), "application/json; charset=utf-8"
        except TypeError:  # orjson.JSONEncodeError: integers past 64 bits, lone surrogates
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
