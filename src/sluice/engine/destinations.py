"""Performers of the ``$.send.*`` destinations: ``http``, ``email`` and ``s3``.

A workflow queues ``$.send.*`` calls; they are delivered after the run ends, each once, with no
retries (Pipedream's semantics). The convention, for every performer:

* a malformed config RAISES ``InvalidSend`` (a ``ValueError`` and an ``InvalidRequest``) whose
  message names the destination and the field: ``$.send.http: url must be an http(s) URL``.
  ``check_http`` / ``check_email`` / ``check_s3`` run the same validation without sending,
  so a caller can refuse a config when the step queues it;
* anything else RETURNS an outcome dict, a delivery failure included::

      {"status": "sent", ...}                      delivered (details per destination)
      {"status": "written", "transport": "outbox", ...}   e-mail kept in the outbox (no SMTP)
      {"status": "failed", "error": "$.send.http: POST http://h/p timed out after 5 s", ...}

Outcomes never hold a password or the request's query string (which often carries a token).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from sluice import errors
from sluice.config import Settings
from sluice.domain import egress
from sluice.engine import outbound
from sluice.engine.mailer import DeliveryFailed, Mailer

log = logging.getLogger(__name__)

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
#: Time limit of one ``$.send.s3`` upload, seconds.
S3_TIMEOUT_SECONDS = 30.0
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class InvalidSend(errors.InvalidRequest, ValueError):
    """The $.send config is invalid."""

    code = "invalid_send"


def _invalid(kind: str, name: str, message: str) -> InvalidSend:
    return InvalidSend(f"$.send.{kind}: {name} {message}", field=name)


def _mapping(kind: str, config: object) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise InvalidSend(f"$.send.{kind}: the config must be an object", field="config")
    return config


def _string(kind: str, config: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = config.get(name)
    if value is None:
        if default is None:
            raise _invalid(kind, name, "is required")
        return default
    if not isinstance(value, str):
        raise _invalid(kind, name, f"must be a string, not {type(value).__name__}")
    return value


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


# --- $.send.http ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpSend:
    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, Any]
    content: bytes | None
    auth: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """``POST https://host/path``: no credentials, no query string."""
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        return f"{self.method} {parts.scheme}://{host}{parts.path}"


def _string_map(kind: str, name: str, value: object, *, lists: bool) -> dict[str, Any]:
    """Headers or params: string keys; null values dropped (as axios drops undefined)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid(kind, name, "must be an object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        scalars = item if lists and isinstance(item, list) else [item]
        if not all(isinstance(s, str | int | float | bool) for s in scalars):
            raise _invalid(kind, f"{name}.{key}", "must be a string, number or boolean")
        if isinstance(item, bool):
            item = "true" if item else "false"
        out[str(key)] = item if lists else str(item)
    return out


def check_http(config: object) -> HttpSend:
    """Validate a ``$.send.http`` config.

    ``method`` is one of ``HTTP_METHODS``, in capitals as Pipedream requires; when it is left
    out it is POST if there is ``data``, else GET. ``data``: an object or array is sent as JSON
    (``Content-Type: application/json``), a string as it is (``text/plain`` unless ``headers``
    set a type). Redirects are not followed: a 3xx is the outcome.
    """
    cfg = _mapping("http", config)
    data = cfg.get("data")
    method = _string("http", cfg, "method", default="POST" if data is not None else "GET")
    if method not in HTTP_METHODS:
        hint = "; methods are uppercase" if method.upper() in HTTP_METHODS else ""
        raise _invalid("http", "method", f"must be one of {', '.join(HTTP_METHODS)}{hint}")
    url = _string("http", cfg, "url")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise _invalid("http", "url", "must be an http(s) URL with a host")
    headers = _string_map("http", "headers", cfg.get("headers"), lists=False)
    params = _string_map("http", "params", cfg.get("params"), lists=True)
    has_type = any(k.lower() == "content-type" for k in headers)
    content: bytes | None = None
    if isinstance(data, str):
        content = data.encode()
        if not has_type:
            headers["Content-Type"] = "text/plain; charset=utf-8"
    elif isinstance(data, dict | list):
        try:
            content = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise _invalid("http", "data", f"is not JSON-serializable: {exc}") from None
        if not has_type:
            headers["Content-Type"] = "application/json"
    elif data is not None:
        raise _invalid("http", "data", "must be a string, an object or an array")
    auth = cfg.get("auth")
    credentials = None
    if auth is not None:
        if not isinstance(auth, dict):
            raise _invalid("http", "auth", "must be an object {username, password}")
        username, password = auth.get("username"), auth.get("password")
        if not isinstance(username, str) or not isinstance(password, str):
            raise _invalid("http", "auth", "must be an object {username, password} of strings")
        credentials = (username, password)
    return HttpSend(method, url, headers, params, content, credentials)


async def send_http(
    config: dict[str, Any],
    *,
    time_limit: float,
    policy: egress.EgressPolicy = egress.EgressPolicy(),
    client: httpx.AsyncClient | None = None,
) -> dict[str, Any]:
    """Make the request once, to a destination ``policy`` allows.

    ``{"status": "sent", "http_status": 503, "ok": False, "duration_ms": 12}`` (``ok``: 2xx), or
    ``{"status": "failed", "error": "...", "duration_ms": 5000}`` when no response came (time-out,
    refused connection, TLS, or the egress policy refused the destination:
    ``$.send.http: GET http://127.0.0.1:8080/x refused: 127.0.0.1 is a loopback address; ...``).
    ``client`` is used as given and not closed (and ``policy`` ignored): build it with
    ``outbound.client(policy)``.
    """
    send = check_http(config)
    started = time.monotonic()
    try:
        if client is None:
            async with outbound.client(policy, follow_redirects=False) as own:
                status = await _request(own, send, time_limit)
        else:
            status = await _request(client, send, time_limit)
    except errors.EgressRefused as exc:
        error = f"$.send.http: {send.shown} refused: {outbound.explain(exc)}"
        return _failed_http(error, started)
    except (TimeoutError, httpx.TimeoutException):
        error = f"$.send.http: {send.shown} timed out after {time_limit:g} s"
        return _failed_http(error, started)
    except httpx.HTTPError as exc:
        error = f"$.send.http: {send.shown} failed: {type(exc).__name__}: {exc}"
        return _failed_http(error, started)
    duration_ms = _elapsed_ms(started)
    log.info(
        "$.send.http delivered",
        extra={"action": "send_http", "http_status": status, "duration_ms": duration_ms},
    )
    ok = 200 <= status < 300
    return {"status": "sent", "http_status": status, "ok": ok, "duration_ms": duration_ms}


async def _request(client: httpx.AsyncClient, send: HttpSend, time_limit: float) -> int:
    # httpx's timeout is per operation (connect, each read); asyncio's bounds the whole request.
    async with (
        asyncio.timeout(time_limit),
        client.stream(
            send.method,
            # Merged into the URL's own query (``params=`` alone would replace it); a key given
            # in both takes the value from ``params``.
            httpx.URL(send.url).copy_merge_params(send.params),
            headers=send.headers,
            content=send.content,
            auth=httpx.BasicAuth(*send.auth) if send.auth else None,
            timeout=time_limit,
            follow_redirects=False,
        ) as response,
    ):
        # The body is not read: only the status matters, and it may be large.
        return response.status_code


def _failed_http(error: str, started: float) -> dict[str, Any]:
    log.info("$.send.http failed", extra={"action": "send_http_failed", "error": error})
    return {"status": "failed", "error": error, "duration_ms": _elapsed_ms(started)}


# --- $.send.email --------------------------------------------------------------------------


@dataclass(frozen=True)
class EmailSend:
    subject: str
    text: str
    html: str | None


def check_email(config: object) -> EmailSend:
    """Validate a ``$.send.email`` config: ``subject``, ``text`` and ``html``, all optional
    strings (as in Pipedream); the subject must be one line."""
    cfg = _mapping("email", config)
    subject = _string("email", cfg, "subject", default="")
    if "\r" in subject or "\n" in subject:
        raise _invalid("email", "subject", "must be one line (no CR or LF)")
    text = _string("email", cfg, "text", default="")
    html = _string("email", cfg, "html") if cfg.get("html") is not None else None
    return EmailSend(subject, text, html)


async def send_email(mailer: Mailer, *, to: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """Mail the account owner at ``to``; the outcome is the mailer's (``sent`` over SMTP,
    ``written`` to the outbox) or ``failed``."""
    send = check_email(config)
    if not to:
        return {
            "status": "failed",
            "error": "$.send.email: the account has no e-mail address; set one on the account "
            "to receive $.send.email messages",
        }
    try:
        return await mailer.send(to=to, subject=send.subject, text=send.text, html=send.html)
    except (DeliveryFailed, errors.InvalidRequest) as exc:
        return {"status": "failed", "error": f"$.send.email: {exc.message}"}


# --- $.send.s3 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Send:
    bucket: str
    prefix: str
    payload: bytes  # one JSON line, newline-terminated


def check_s3(config: object) -> S3Send:
    """Validate a ``$.send.s3`` config: ``bucket`` (an S3 bucket name), ``prefix`` (a key
    prefix; slashes at its ends are dropped) and ``payload`` (any JSON value, written as one
    line of JSON)."""
    cfg = _mapping("s3", config)
    bucket = _string("s3", cfg, "bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise _invalid("s3", "bucket", "must be an S3 bucket name (3-63 of a-z 0-9 . -)")
    prefix = _string("s3", cfg, "prefix", default="").strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise _invalid("s3", "prefix", "must not hold empty, '.' or '..' path segments")
    if "payload" not in cfg:
        raise _invalid("s3", "payload", "is required")
    try:
        line = json.dumps(cfg["payload"], separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise _invalid("s3", "payload", f"is not JSON-serializable: {exc}") from None
    return S3Send(bucket, prefix, (line + "\n").encode())


def s3_key(prefix: str, now_ms: int, suffix: str) -> str:
    """``PREFIX/YYYY/MM/DD/HH/YYYY-MM-DD-HH-MM-SS-<suffix>.gz``, UTC (Pipedream's layout)."""
    at = datetime.fromtimestamp(now_ms / 1000, UTC)
    name = f"{at:%Y/%m/%d/%H}/{at:%Y-%m-%d-%H-%M-%S}-{suffix}.gz"
    return f"{prefix}/{name}" if prefix else name


def sign_v4(
    *,
    method: str,
    path: str,
    headers: dict[str, str],
    payload_sha256: str,
    region: str,
    access_key: str,
    secret_key: str,
    service: str = "s3",
) -> str:
    """The ``Authorization`` value of AWS Signature Version 4 for a request without a query.

    ``path`` is already URI-encoded (S3 encodes it once); every header in ``headers`` is signed
    and they must include ``host`` and ``x-amz-date`` (``20130524T000000Z``).
    """
    lowered = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    amz_date = lowered["x-amz-date"]
    names = sorted(lowered)
    signed = ";".join(names)
    canonical = "\n".join(
        [method, path, "", *(f"{n}:{lowered[n]}" for n in names), "", signed, payload_sha256]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret_key}".encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )


def _s3_not_ready(settings: Settings) -> str | None:
    if not settings.s3_endpoint_url:
        return (
            "$.send.s3: no S3-compatible bucket is configured; set SLUICE_S3_ENDPOINT_URL, "
            "SLUICE_S3_ACCESS_KEY_ID and SLUICE_S3_SECRET_ACCESS_KEY"
        )
    parts = urlsplit(settings.s3_endpoint_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "$.send.s3: SLUICE_S3_ENDPOINT_URL must be an http(s) URL such as https://s3.amazonaws.com"
    if not settings.s3_access_key_id or not settings.s3_secret_access_key:
        return (
            "$.send.s3: S3 credentials are missing; set SLUICE_S3_ACCESS_KEY_ID and "
            "SLUICE_S3_SECRET_ACCESS_KEY"
        )
    return None


async def send_s3(
    settings: Settings,
    config: dict[str, Any],
    *,
    now_ms: int,
    client: httpx.AsyncClient | None = None,
    time_limit: float = S3_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """PUT the payload, gzipped, as one new object (path-style ``<endpoint>/<bucket>/<key>``).

    ``now_ms`` is the current time: it names the object and dates the signature (S3 refuses a
    signature more than 15 minutes off). Outcome: ``{"status": "sent", "bucket", "key",
    "http_status", "bytes", "duration_ms"}`` or ``{"status": "failed", "error", ...}``.
    """
    send = check_s3(config)
    problem = _s3_not_ready(settings)
    if problem:
        return {"status": "failed", "error": problem}
    endpoint = urlsplit(settings.s3_endpoint_url)
    host = endpoint.netloc.rpartition("@")[2]
    key = s3_key(send.prefix, now_ms, secrets.token_hex(8))
    path = quote(f"{endpoint.path.rstrip('/')}/{send.bucket}/{key}", safe="/")
    body = gzip.compress(send.payload, mtime=0)
    digest = hashlib.sha256(body).hexdigest()
    headers = {
        "Host": host,
        "Content-Type": "application/gzip",
        "x-amz-content-sha256": digest,
        "x-amz-date": datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y%m%dT%H%M%SZ"),
    }
    headers["Authorization"] = sign_v4(
        method="PUT",
        path=path,
        headers=headers,
        payload_sha256=digest,
        region=settings.s3_region,
        access_key=settings.s3_access_key_id,
        secret_key=settings.s3_secret_access_key,
    )
    url = f"{endpoint.scheme}://{host}{path}"
    target = f"s3://{send.bucket}/{key}"
    started = time.monotonic()
    try:
        async with asyncio.timeout(time_limit):
            if client is None:
                async with httpx.AsyncClient(follow_redirects=False) as own:
                    response = await own.put(url, content=body, headers=headers, timeout=time_limit)
            else:
                response = await client.put(url, content=body, headers=headers, timeout=time_limit)
    except (TimeoutError, httpx.TimeoutException):
        return _failed_s3(f"$.send.s3: PUT {target} timed out after {time_limit:g} s", started)
    except httpx.HTTPError as exc:
        return _failed_s3(f"$.send.s3: PUT {target} failed: {type(exc).__name__}: {exc}", started)
    status = response.status_code
    if not 200 <= status < 300:
        code = re.search(r"<Code>([^<]*)</Code>", response.text)
        message = re.search(r"<Message>([^<]*)</Message>", response.text)
        detail = " ".join(m.group(1) for m in (code, message) if m)
        error = f"$.send.s3: PUT {target} failed with HTTP {status}" + (
            f": {detail}" if detail else ""
        )
        return {**_failed_s3(error, started), "http_status": status}
    duration_ms = _elapsed_ms(started)
    log.info(
        "$.send.s3 delivered",
        extra={"action": "send_s3", "bucket": send.bucket, "key": key, "duration_ms": duration_ms},
    )
    return {
        "status": "sent",
        "bucket": send.bucket,
        "key": key,
        "http_status": status,
        "bytes": len(body),
        "duration_ms": duration_ms,
    }


def _failed_s3(error: str, started: float) -> dict[str, Any]:
    log.info("$.send.s3 failed", extra={"action": "send_s3_failed", "error": error})
    return {"status": "failed", "error": error, "duration_ms": _elapsed_ms(started)}
