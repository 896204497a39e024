"""``$.send.s3``: the payload, gzipped, PUT as one new object in an S3-compatible bucket
(signed with AWS Signature Version 4 by botocore, keyed by time as Pipedream lays them out)."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from sluice.config import Settings
from sluice.engine.outbound.destinations.config import elapsed_ms, invalid, mapping, string

log = logging.getLogger(__name__)

#: Time limit of one ``$.send.s3`` upload, seconds.
S3_TIMEOUT_SECONDS = 30.0
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class S3Send:
    bucket: str
    prefix: str
    payload: bytes  # one JSON line, newline-terminated


def check_s3(config: object) -> S3Send:
    """Validate a ``$.send.s3`` config: ``bucket`` (an S3 bucket name), ``prefix`` (a key
    prefix; slashes at its ends are dropped) and ``payload`` (any JSON value, written as one
    line of JSON)."""
    cfg = mapping("s3", config)
    bucket = string("s3", cfg, "bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise invalid("s3", "bucket", "must be an S3 bucket name (3-63 of a-z 0-9 . -)")
    prefix = string("s3", cfg, "prefix", default="").strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise invalid("s3", "prefix", "must not hold empty, '.' or '..' path segments")
    if "payload" not in cfg:
        raise invalid("s3", "payload", "is required")
    try:
        line = json.dumps(cfg["payload"], separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise invalid("s3", "payload", f"is not JSON-serializable: {exc}") from None
    return S3Send(bucket, prefix, (line + "\n").encode())


def s3_key(prefix: str, now_ms: int, suffix: str) -> str:
    """``PREFIX/YYYY/MM/DD/HH/YYYY-MM-DD-HH-MM-SS-<suffix>.gz``, UTC (Pipedream's layout)."""
    at = datetime.fromtimestamp(now_ms / 1000, UTC)
    name = f"{at:%Y/%m/%d/%H}/{at:%Y-%m-%d-%H-%M-%S}-{suffix}.gz"
    return f"{prefix}/{name}" if prefix else name


def sign_v4(
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    region: str,
    access_key: str,
    secret_key: str,
    service: str = "s3",
) -> str:
    """The ``Authorization`` value of AWS Signature Version 4, computed by botocore's S3 signer.

    ``url``'s path is already URI-encoded (S3 encodes it once, and its signer does not normalize
    it). Every header in ``headers`` is signed; they must include ``host``, ``x-amz-date``
    (``20130524T000000Z``, the time the signature is dated) and ``x-amz-content-sha256``.

    botocore is imported at the first signature, not with the server (~35 ms of every start,
    for an instance that may never send to S3).
    """
    from botocore import auth as aws_auth
    from botocore import awsrequest
    from botocore import credentials as aws_credentials

    request = awsrequest.AWSRequest(method=method, url=url, headers=headers)
    # botocore's ``add_auth`` reads the wall clock and rewrites the date headers; a send is
    # dated by the platform's clock (``now_ms``), so its public steps are called here with
    # the caller's ``x-amz-date`` instead.
    request.context["timestamp"] = request.headers["x-amz-date"]
    credentials = aws_credentials.Credentials(access_key, secret_key)
    signer = aws_auth.S3SigV4Auth(credentials, service, region)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signed = signer.signed_headers(signer.headers_to_sign(request))
    return (
        f"AWS4-HMAC-SHA256 Credential={signer.scope(request)}, "
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
    put = _signed_put(settings, send, now_ms)
    target = f"s3://{send.bucket}/{put.key}"
    started = time.monotonic()
    try:
        async with asyncio.timeout(time_limit):
            if client is None:
                async with httpx.AsyncClient(follow_redirects=False) as own:
                    response = await put.send(own, time_limit)
            else:
                response = await put.send(client, time_limit)
    except (TimeoutError, httpx.TimeoutException):
        return _failed_s3(f"$.send.s3: PUT {target} timed out after {time_limit:g} s", started)
    except httpx.HTTPError as exc:
        return _failed_s3(f"$.send.s3: PUT {target} failed: {type(exc).__name__}: {exc}", started)
    status = response.status_code
    if not 200 <= status < 300:
        detail = _s3_error_detail(response.text)
        error = f"$.send.s3: PUT {target} failed with HTTP {status}" + (
            f": {detail}" if detail else ""
        )
        return {**_failed_s3(error, started), "http_status": status}
    duration_ms = elapsed_ms(started)
    log.info(
        "$.send.s3 delivered",
        extra={
            "action": "send_s3",
            "bucket": send.bucket,
            "key": put.key,
            "duration_ms": duration_ms,
        },
    )
    return {
        "status": "sent",
        "bucket": send.bucket,
        "key": put.key,
        "http_status": status,
        "bytes": len(put.body),
        "duration_ms": duration_ms,
    }


@dataclass(frozen=True)
class _Put:
    """A signed S3 ``PUT`` of one object."""

    url: str
    key: str
    body: bytes
    headers: dict[str, str]

    async def send(self, client: httpx.AsyncClient, time_limit: float) -> httpx.Response:
        return await client.put(
            self.url, content=self.body, headers=self.headers, timeout=time_limit
        )


def _signed_put(settings: Settings, send: S3Send, now_ms: int) -> _Put:
    """The ``PUT`` of ``send``'s payload, gzipped, under a new key, signed at ``now_ms``."""
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
    url = f"{endpoint.scheme}://{host}{path}"
    headers["Authorization"] = sign_v4(
        method="PUT",
        url=url,
        headers=headers,
        region=settings.s3_region,
        access_key=settings.s3_access_key_id,
        secret_key=settings.s3_secret_access_key,
    )
    return _Put(url, key, body, headers)


def _s3_error_detail(text: str) -> str:
    """``NoSuchBucket The specified bucket does not exist``: the ``Code`` and ``Message`` of an
    S3 error document, as far as it has them."""
    code = re.search(r"<Code>([^<]*)</Code>", text)
    message = re.search(r"<Message>([^<]*)</Message>", text)
    return " ".join(m.group(1) for m in (code, message) if m)


def _failed_s3(error: str, started: float) -> dict[str, Any]:
    log.info("$.send.s3 failed", extra={"action": "send_s3_failed", "error": error})
    return {"status": "failed", "error": error, "duration_ms": elapsed_ms(started)}
