"""A small client of Sluice's REST API, for the CLI: JSON calls, pages, and live SSE streams.

Every failure becomes one :class:`CliError` whose message is one line saying what to do: the
server unreachable, the key refused, or the API's own error (``{"error", "code", "field"}``).

    api = Client(credentials)
    source = api.get("/v1/sources/counter")["data"]
    for message in api.follow(f"/v1/sources/{source['id']}/sse"):
        print(message.data)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from sluice import __version__
from sluice.errors import CliError


class Credentials(Protocol):
    """Where and as whom to call (``config.Credentials``: the profile, flags and variables)."""

    @property
    def base_url(self) -> str: ...

    @property
    def api_key(self) -> str: ...

    @property
    def key_source(self) -> str: ...

    def login_hint(self) -> str: ...


#: Deploys may install npm packages: give the server time.
_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
#: Streams carry a keepalive comment every 15 s by default; silence this long means a dead link.
_STREAM_TIMEOUT = httpx.Timeout(10.0, read=90.0)
#: A follow gives up after this long without a connection.
_RECONNECT_FOR_S = 60.0


@dataclass(frozen=True)
class Message:
    """One SSE message: its ``id:`` and its ``data:`` decoded from JSON."""

    id: str | None
    data: Any


def segment(value: str) -> str:
    """A name or id made safe for one path segment."""
    return quote(value, safe="")


class Client:
    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.base_url = credentials.base_url
        self._headers = {
            "Authorization": f"Bearer {credentials.api_key}",
            "User-Agent": f"sluice-cli/{__version__}",
        }
        self.http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=_TIMEOUT)

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        """``timeout`` (seconds) replaces the usual one, for calls known to be long."""
        return self.request("POST", path, json=body, timeout=timeout)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        timeout: float | None = None,
    ) -> Any:
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.http.request(
                method,
                path,
                params=params,
                json=json,
                timeout=self.http.timeout if timeout is None else httpx.Timeout(timeout),
            )
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc
        return self._decode(response)

    def pages(self, path: str, limit: int = 100, **params: Any) -> Iterator[Any]:
        """Every item of a paginated list (``page_info.end_cursor`` → ``after``)."""
        after = None
        while True:
            page = self.get(path, limit=limit, after=after, **params)
            yield from page["data"]
            info = page.get("page_info") or {}
            after = info.get("end_cursor")
            if not after or info.get("count", 0) < limit:
                return

    def follow(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        after: str | None = None,
        stop: threading.Event | None = None,
        on_connect: Callable[[], None] | None = None,
        on_reconnect: Callable[[str], None] | None = None,
    ) -> Iterator[Message]:
        """The messages of an SSE stream, resuming with ``Last-Event-ID`` when the connection
        drops, until ``stop`` is set. ``after`` is sent as ``?after=`` on the first connection
        (``0-0`` / ``0`` replays the newest 100). Safe to run in its own thread: it uses its
        own connection."""
        stop = stop or threading.Event()
        last_id = None
        failing_since: float | None = None
        delay = 0.25
        with httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=_STREAM_TIMEOUT
        ) as http:
            while not stop.is_set():
                query = {**(params or {})}
                headers = {"Accept": "text/event-stream"}
                if last_id is not None:
                    headers["Last-Event-ID"] = last_id
                elif after is not None:
                    query["after"] = after
                try:
                    with http.stream("GET", path, params=query, headers=headers) as response:
                        if response.status_code != 200:
                            response.read()
                            self._decode(response)
                            raise CliError(f"unexpected answer {response.status_code} from {path}")
                        failing_since, delay = None, 0.25
                        if on_connect is not None:
                            on_connect()
                        for message in _messages(response.iter_lines()):
                            if message.id is not None:
                                last_id = message.id
                            yield message
                            if stop.is_set():
                                return
                except httpx.TransportError as exc:
                    error = self._transport_error(exc)
                    now = time.monotonic()
                    failing_since = failing_since or now
                    if now - failing_since > _RECONNECT_FOR_S:
                        raise error from exc
                    if on_reconnect is not None:
                        on_reconnect(error.message)
                # The server ended the stream (a reader too far behind, a restart): resume.
                if stop.wait(delay):
                    return
                delay = min(delay * 2, 5.0)

    def _transport_error(self, exc: httpx.TransportError) -> CliError:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return CliError(
                f"cannot reach Sluice at {self.base_url} ({_reason(exc)}): is `sluice serve` "
                "running? Check the URL with `sluice login` or SLUICE_BASE_URL",
                code="unreachable",
            )
        return CliError(
            f"lost the connection to {self.base_url} ({_reason(exc)}); try again",
            code="unreachable",
        )

    def _decode(self, response: httpx.Response) -> Any:
        try:
            body = response.json() if response.content else {}
        except ValueError:
            body = None
        if response.status_code == 401:
            raise CliError(
                f"the API key from {self.credentials.key_source} was refused by {self.base_url}: "
                f"{self.credentials.login_hint()}",
                code="unauthorized",
                status=401,
            )
        if response.status_code >= 400:
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                message = body["error"]
                field = body.get("field")
                if field and field not in message:
                    message += f" ({field})"
                raise CliError(
                    message,
                    code=str(body.get("code") or "error"),
                    status=response.status_code,
                    details=body.get("details") if isinstance(body.get("details"), dict) else None,
                )
            raise CliError(
                f"{response.status_code} {response.reason_phrase} from {response.request.url}: "
                "is the base URL a Sluice server?",
                code="bad_answer",
                status=response.status_code,
            )
        if body is None:
            raise CliError(
                f"{response.request.url} did not answer JSON: is the base URL a Sluice server?",
                code="bad_answer",
                status=response.status_code,
            )
        return body


def _messages(lines: Iterator[str]) -> Iterator[Message]:
    """Server-sent events, per the HTML spec: ``id:``/``data:`` fields, ``:`` comments,
    a blank line ends a message."""
    data: list[str] = []
    message_id: str | None = None
    for line in lines:
        if not line:
            if data:
                text = "\n".join(data)
                try:
                    decoded = json.loads(text)
                except ValueError:
                    decoded = text
                yield Message(message_id, decoded)
            data, message_id = [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "id":
            message_id = value


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    if "Connection refused" in text:
        return "connection refused"
    return text.splitlines()[-1] if text else type(exc).__name__
