"""``$.send.*`` performers against real servers: a small HTTP server in the test's loop, the
mailer's outbox, and an in-process S3 (moto) on a free port."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx
import pytest
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

from sluice import errors
from sluice.clock import FakeClock
from sluice.domain import egress
from sluice.engine.outbound import destinations, http_clients, mailer
from tests.conftest import make_settings
from tests.integration.test_mailer import free_port, read_eml

# --- a real HTTP server --------------------------------------------------------------------


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpServer:
    port: int = 0
    status: int = 200
    answer: bool = True
    #: What it answers with (a feed, JSON, …).
    body: bytes = b"ok"
    content_type: str = "text/plain"
    received: list[Request] = field(default_factory=list)
    handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ", 2)
            headers = dict(line.split(":", 1) for line in head[1:] if line)
            headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append(Request(method, target, headers, body))
            if self.answer:
                writer.write(
                    f"HTTP/1.1 {self.status} Whatever\r\nContent-Length: {len(self.body)}\r\n"
                    f"Content-Type: {self.content_type}\r\nConnection: close\r\n\r\n".encode()
                    + self.body
                )
                await writer.drain()
            else:
                await reader.read()  # never answer; returns when the client gives up
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def http_server(**kwargs: Any) -> AsyncIterator[HttpServer]:
    state = HttpServer(**kwargs)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()
        if state.handlers:
            await asyncio.wait(state.handlers, timeout=5)


# --- $.send.http ---------------------------------------------------------------------------

#: The test servers listen on loopback, which the egress policy refuses unless listed.
LOOPBACK = egress.EgressPolicy.parse("127.0.0.1:*")


async def test_http_posts_json_with_headers_params_and_basic_auth() -> None:
    async with http_server() as srv:
        outcome = await destinations.send_http(
            {
                "method": "POST",
                "url": f"{srv.url}/hook/1?from=url&keep=1",
                "data": {"name": "Ada", "n": [1, 2], "u": "é"},
                "headers": {"X-Trace": "t-1", "X-Num": 7, "X-Drop": None},
                "params": {"q": "a b", "flag": True, "many": ["x", "y"], "from": "params"},
                "auth": {"username": "ada", "password": "hunter2"},
            },
            time_limit=5,
            policy=LOOPBACK,
        )
    assert outcome["status"] == "sent"
    assert outcome["http_status"] == 200
    assert outcome["ok"] is True
    assert isinstance(outcome["duration_ms"], int)
    assert "hunter2" not in repr(outcome)
    (req,) = srv.received
    assert req.method == "POST"
    assert req.target == "/hook/1?from=params&keep=1&q=a+b&flag=true&many=x&many=y"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["x-trace"] == "t-1"
    assert req.headers["x-num"] == "7"
    assert "x-drop" not in req.headers
    assert req.headers["authorization"] == "Basic " + base64.b64encode(b"ada:hunter2").decode()
    assert json.loads(req.body) == {"name": "Ada", "n": [1, 2], "u": "é"}


@pytest.mark.parametrize(
    ("config", "method", "content_type", "body"),
    [
        ({}, "GET", None, b""),
        ({"data": [1, "two"]}, "POST", "application/json", b'[1,"two"]'),
        ({"data": "a=1&b=2"}, "POST", "text/plain; charset=utf-8", b"a=1&b=2"),
        (
            {"method": "PUT", "data": "<x/>", "headers": {"content-type": "application/xml"}},
            "PUT",
            "application/xml",
            b"<x/>",
        ),
        ({"method": "DELETE"}, "DELETE", None, b""),
        ({"method": "PATCH", "data": {}}, "PATCH", "application/json", b"{}"),
    ],
)
async def test_http_methods_and_bodies(
    config: dict[str, Any], method: str, content_type: str | None, body: bytes
) -> None:
    async with http_server() as srv:
        outcome = await destinations.send_http(
            {"url": srv.url, **config}, time_limit=5, policy=LOOPBACK
        )
    assert outcome["status"] == "sent"
    (req,) = srv.received
    assert (req.method, req.headers.get("content-type"), req.body) == (method, content_type, body)


async def test_http_head_request() -> None:
    async with http_server() as srv:
        outcome = await destinations.send_http(
            {"method": "HEAD", "url": srv.url}, time_limit=5, policy=LOOPBACK
        )
    assert outcome["http_status"] == 200
    assert srv.received[0].method == "HEAD"


@pytest.mark.parametrize("status", [302, 404, 503])
async def test_http_non_2xx_is_delivered_but_not_ok(status: int) -> None:
    async with http_server(status=status) as srv:
        outcome = await destinations.send_http(
            {"url": srv.url, "data": "x"}, time_limit=5, policy=LOOPBACK
        )
    assert outcome["status"] == "sent"
    assert (outcome["http_status"], outcome["ok"]) == (status, False)
    assert len(srv.received) == 1  # no retries, no redirect followed


async def test_http_times_out_without_retrying() -> None:
    async with http_server(answer=False) as srv:
        started = time.monotonic()
        outcome = await destinations.send_http(
            {"method": "POST", "url": f"{srv.url}/slow?token=abc", "data": {}},
            time_limit=0.2,
            policy=LOOPBACK,
        )
        elapsed = time.monotonic() - started
    assert outcome["status"] == "failed"
    assert outcome["error"] == f"$.send.http: POST {srv.url}/slow timed out after 0.2 s"
    assert 0.15 < elapsed < 2
    assert len(srv.received) == 1


async def test_http_refused_connection_is_a_failed_outcome() -> None:
    port = free_port()
    outcome = await destinations.send_http(
        {"url": f"http://ada:hunter2@127.0.0.1:{port}/x?token=secret-token"},
        time_limit=5,
        policy=LOOPBACK,
    )
    assert outcome["status"] == "failed"
    assert outcome["error"].startswith(f"$.send.http: GET http://127.0.0.1:{port}/x failed: ")
    assert "ConnectError" in outcome["error"]
    assert "hunter2" not in repr(outcome) and "secret-token" not in repr(outcome)


async def test_http_uses_the_given_client_and_leaves_it_open() -> None:
    async with (
        http_server() as srv,
        http_clients.client(LOOPBACK, headers={"X-Client": "mine"}) as client,
    ):
        first = await destinations.send_http({"url": srv.url}, time_limit=5, client=client)
        second = await destinations.send_http({"url": srv.url}, time_limit=5, client=client)
        assert not client.is_closed
    assert first["ok"] and second["ok"]
    assert [r.headers["x-client"] for r in srv.received] == ["mine", "mine"]


@pytest.mark.parametrize(
    ("config", "field", "message"),
    [
        ("https://x.test", "config", "the config must be an object"),
        ({"method": "POST"}, "url", "url is required"),
        ({"url": 5}, "url", "url must be a string, not int"),
        ({"url": "ftp://x.test/f"}, "url", "url must be an http(s) URL"),
        ({"url": "http://"}, "url", "url must be an http(s) URL"),
        ({"url": "x.test/path"}, "url", "url must be an http(s) URL"),
        ({"url": "https://x.test", "method": "post"}, "method", "methods are uppercase"),
        ({"url": "https://x.test", "method": "FETCH"}, "method", "method must be one of GET"),
        ({"url": "https://x.test", "data": 5}, "data", "data must be a string, an object"),
        ({"url": "https://x.test", "data": {"s": {1}}}, "data", "not JSON-serializable"),
        ({"url": "https://x.test", "headers": ["a"]}, "headers", "headers must be an object"),
        ({"url": "https://x.test", "headers": {"a": [1]}}, "headers.a", "must be a string"),
        ({"url": "https://x.test", "params": {"a": {"b": 1}}}, "params.a", "must be a string"),
        ({"url": "https://x.test", "auth": {"username": "u"}}, "auth", "{username, password}"),
    ],
)
async def test_http_invalid_configs_raise(config: Any, field: str, message: str) -> None:
    with pytest.raises(errors.InvalidSend) as caught:
        await destinations.send_http(config, time_limit=5)
    assert caught.value.field == field
    assert str(caught.value).startswith("$.send.http: ")
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, errors.InvalidRequest)


def test_invalid_auth_does_not_echo_the_password() -> None:
    with pytest.raises(errors.InvalidSend) as caught:
        destinations.check_http(
            {"url": "https://x.test", "auth": {"username": 1, "password": "hunter2"}}
        )
    assert "hunter2" not in str(caught.value)
    send = destinations.check_http(
        {"url": "https://x.test", "auth": {"username": "u", "password": "hunter2"}}
    )
    assert "hunter2" not in repr(send)


# --- $.send.email --------------------------------------------------------------------------


def outbox_mailer(tmp_path: Path) -> mailer.Mailer:
    return mailer.Mailer(make_settings(tmp_path), clock=FakeClock())


async def test_email_goes_to_the_account_address(tmp_path: Path) -> None:
    outcome = await destinations.send_email(
        outbox_mailer(tmp_path),
        to="ada@example.com",
        config={"subject": "Run finished", "text": "all good", "html": "<p>all good</p>"},
    )
    assert outcome["status"] == "written"
    assert outcome["transport"] == "outbox"
    msg = read_eml(Path(outcome["path"]))
    assert (msg["To"], msg["Subject"]) == ("ada@example.com", "Run finished")
    assert msg.get_content_type() == "multipart/alternative"


async def test_email_fields_are_optional(tmp_path: Path) -> None:
    outcome = await destinations.send_email(outbox_mailer(tmp_path), to="a@b.test", config={})
    msg = read_eml(Path(outcome["path"]))
    assert (msg["Subject"], msg.get_content()) == ("", "\n")


async def test_line_breaks_in_a_subject_become_spaces_never_headers(tmp_path: Path) -> None:
    """The default error e-mail's subject quotes the error's code, which user code chooses: a
    code with a line break used to make the send fail, so no e-mail went out."""
    outcome = await destinations.send_email(
        outbox_mailer(tmp_path),
        to="ada@example.com",
        config={"subject": "[Sluice] X\r\nBcc: eve@example.com\nin wf", "text": "t"},
    )
    assert outcome["status"] == "written", outcome
    msg = read_eml(Path(outcome["path"]))
    assert msg["Subject"] == "[Sluice] X Bcc: eve@example.com in wf"
    assert msg["Bcc"] is None and msg["To"] == "ada@example.com"


async def test_email_without_an_account_address_fails_clearly(tmp_path: Path) -> None:
    outcome = await destinations.send_email(
        outbox_mailer(tmp_path), to=None, config={"subject": "x"}
    )
    assert outcome["status"] == "failed"
    assert "the account has no e-mail address; set one" in outcome["error"]
    assert not (tmp_path / "outbox").exists()


async def test_email_delivery_failure_is_an_outcome(tmp_path: Path) -> None:
    port = free_port()
    m = mailer.Mailer(make_settings(tmp_path, smtp_url=f"smtp://u:hunter2@127.0.0.1:{port}"))
    outcome = await destinations.send_email(m, to="ada@example.com", config={"text": "t"})
    assert outcome["status"] == "failed"
    assert outcome["error"].startswith(f"$.send.email: SMTP delivery to 127.0.0.1:{port} failed")
    assert "hunter2" not in outcome["error"]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"subject": 1}, "subject"),
        ({"text": ["x"]}, "text"),
        ({"html": {"x": 1}}, "html"),
        (None, "config"),
    ],
)
async def test_email_invalid_configs_raise(tmp_path: Path, config: Any, field: str) -> None:
    with pytest.raises(errors.InvalidSend, match=r"^\$\.send\.email: ") as caught:
        await destinations.send_email(outbox_mailer(tmp_path), to="a@b.test", config=config)
    assert caught.value.field == field


# --- $.send.s3 -----------------------------------------------------------------------------

NOW_MS = 1_704_164_645_678  # 2024-01-02T03:04:05.678Z
KEY = re.compile(
    r"^(?P<prefix>.*)2024/01/02/03/2024-01-02-03-04-05-[0-9a-f]{16}\.gz$",
)


@dataclass(frozen=True)
class S3:
    endpoint: str
    client: Any  # a boto3 S3 client on the same server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test-key",
        aws_secret_access_key="test-secret",
    )
    client.create_bucket(Bucket="sluice-events")
    try:
        yield S3(endpoint, client)
    finally:
        server.stop()


def s3_settings(tmp_path: Path, s3: S3) -> Any:
    return make_settings(
        tmp_path,
        s3_endpoint_url=s3.endpoint,
        s3_access_key_id="test-key",
        s3_secret_access_key="test-secret",
    )


def read_object(s3: S3, key: str) -> bytes:
    body: bytes = s3.client.get_object(Bucket="sluice-events", Key=key)["Body"].read()
    return gzip.decompress(body)


@pytest.mark.parametrize(
    ("prefix", "expected_prefix"),
    [("events/", "events/"), ("/deep/er logs/é/", "deep/er logs/é/"), ("", "")],
)
async def test_s3_puts_one_gzipped_json_line(
    tmp_path: Path, s3: S3, prefix: str, expected_prefix: str
) -> None:
    payload = {"id": 1, "text": "héllo", "nested": {"list": [1, None, True]}}
    outcome = await destinations.send_s3(
        s3_settings(tmp_path, s3),
        {"bucket": "sluice-events", "prefix": prefix, "payload": payload},
        now_ms=NOW_MS,
    )
    assert outcome["status"] == "sent", outcome
    assert outcome["http_status"] == 200
    assert outcome["bucket"] == "sluice-events"
    match = KEY.match(outcome["key"])
    assert match and match["prefix"] == expected_prefix
    # boto3 encodes the key itself: finding the object proves ours was encoded right.
    line = read_object(s3, outcome["key"])
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == payload


async def test_s3_string_payload_and_given_client(tmp_path: Path, s3: S3) -> None:
    async with httpx.AsyncClient() as client:
        outcome = await destinations.send_s3(
            s3_settings(tmp_path, s3),
            {"bucket": "sluice-events", "prefix": "s", "payload": "plain text"},
            now_ms=NOW_MS,
            client=client,
        )
        assert not client.is_closed
    assert read_object(s3, outcome["key"]) == b'"plain text"\n'


async def test_s3_missing_bucket_is_a_failed_outcome(tmp_path: Path, s3: S3) -> None:
    outcome = await destinations.send_s3(
        s3_settings(tmp_path, s3),
        {"bucket": "no-such-bucket", "prefix": "p", "payload": {}},
        now_ms=NOW_MS,
    )
    assert outcome["status"] == "failed"
    assert outcome["http_status"] == 404
    assert outcome["error"].startswith("$.send.s3: PUT s3://no-such-bucket/p/2024/01/02/03/")
    assert "NoSuchBucket" in outcome["error"]
    assert "test-secret" not in repr(outcome)


async def test_s3_not_configured_fails_clearly(tmp_path: Path) -> None:
    outcome = await destinations.send_s3(
        make_settings(tmp_path), {"bucket": "b-1", "prefix": "p", "payload": {}}, now_ms=NOW_MS
    )
    assert outcome == {
        "status": "failed",
        "error": "$.send.s3: no S3-compatible bucket is configured; set SLUICE_S3_ENDPOINT_URL, "
        "SLUICE_S3_ACCESS_KEY_ID and SLUICE_S3_SECRET_ACCESS_KEY",
    }


async def test_s3_without_credentials_fails_clearly(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, s3_endpoint_url="http://127.0.0.1:1")
    outcome = await destinations.send_s3(
        settings, {"bucket": "b-1", "prefix": "p", "payload": {}}, now_ms=NOW_MS
    )
    assert outcome["status"] == "failed"
    assert "S3 credentials are missing" in outcome["error"]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"prefix": "p", "payload": {}}, "bucket"),
        ({"bucket": "Bad_Bucket", "prefix": "p", "payload": {}}, "bucket"),
        ({"bucket": "ab", "prefix": "p", "payload": {}}, "bucket"),
        ({"bucket": "b-1", "prefix": "a/../b", "payload": {}}, "prefix"),
        ({"bucket": "b-1", "prefix": "a//b", "payload": {}}, "prefix"),
        ({"bucket": "b-1", "prefix": 3, "payload": {}}, "prefix"),
        ({"bucket": "b-1", "prefix": "p"}, "payload"),
        ({"bucket": "b-1", "prefix": "p", "payload": {"x": {1, 2}}}, "payload"),
    ],
)
async def test_s3_invalid_configs_raise(tmp_path: Path, config: Any, field: str) -> None:
    # Validation comes first, so a bad config is refused even where S3 is not configured.
    with pytest.raises(errors.InvalidSend, match=r"^\$\.send\.s3: ") as caught:
        await destinations.send_s3(make_settings(tmp_path), config, now_ms=NOW_MS)
    assert caught.value.field == field


def test_s3_key_layout() -> None:
    assert (
        destinations.s3_key("logs/app", NOW_MS, "abc")
        == "logs/app/2024/01/02/03/2024-01-02-03-04-05-abc.gz"
    )
    assert destinations.s3_key("", NOW_MS, "abc") == "2024/01/02/03/2024-01-02-03-04-05-abc.gz"


# AWS's published Signature V4 examples for S3 (examplebucket, 2013-05-24).
_AWS_KEY, _AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "signature"),
    [
        (
            "GET",
            "/test.txt",
            {"Range": "bytes=0-9"},
            b"",
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        ),
        (
            "PUT",
            "/test%24file.text",
            {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
            b"Welcome to Amazon S3.",
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
        ),
    ],
)
def test_sign_v4_matches_aws_examples(
    method: str, path: str, headers: dict[str, str], body: bytes, signature: str
) -> None:
    digest = hashlib.sha256(body).hexdigest()
    all_headers = {
        "Host": "examplebucket.s3.amazonaws.com",
        "x-amz-date": "20130524T000000Z",
        "x-amz-content-sha256": digest,
        **headers,
    }
    authorization = destinations.sign_v4(
        method=method,
        url=f"https://examplebucket.s3.amazonaws.com{path}",
        headers=all_headers,
        region="us-east-1",
        access_key=_AWS_KEY,
        secret_key=_AWS_SECRET,
    )
    assert authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential={_AWS_KEY}/20130524/us-east-1/s3/aws4_request, "
    )
    assert authorization.endswith(f", Signature={signature}")
