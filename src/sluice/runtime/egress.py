"""The egress proxy: the sandboxed runner's only way out, on a Unix socket.

A runner started with ``bwrap --unshare-net`` has no network interface but its own ``lo``; the
socket of an ``EgressProxy`` is bound into its sandbox and ``js/egress.mjs`` sends every
``http``/``https`` request and ``fetch()`` through it. The proxy speaks:

* ``CONNECT host:port HTTP/1.1`` (https, and any TCP): ``200`` then raw bytes both ways;
* absolute-URI HTTP (``GET http://host/path HTTP/1.1``): forwarded in origin form, with
  ``Connection: close`` so the upstream ends the exchange (one request per connection).

Each destination is resolved here, once; every address is vetted by the egress policy
(``sluice.domain.egress``) and the proxy connects to a vetted address, never resolving again,
so a rebinding DNS answer cannot slip a loopback address in between check and connect.
Refused: ``403`` with a one-line reason; upstream unreachable: ``502``; too many tunnels: ``503``.

The resolver is a port (``Resolver``) with a fake shipped here (``StaticResolver``), so tests
make ``evil.test`` resolve to 127.0.0.1 without touching ``/etc/hosts``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol
from urllib.parse import urlsplit

from sluice.domain import egress

log = logging.getLogger(__name__)

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)


class Resolver(Protocol):
    """Name resolution, behind a port so tests can choose the answers."""

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        """Every address ``host`` resolves to (strings, as ``getaddrinfo`` gives them); raises
        ``OSError`` when it does not resolve."""
        ...


class SystemResolver:
    """The system's resolver (``loop.getaddrinfo``: /etc/hosts, DNS)."""

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class StaticResolver:
    """A fake resolver: ``StaticResolver({"evil.test": ["127.0.0.1"]})``; other names fail."""

    answers: Mapping[str, Sequence[str]]

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        found = self.answers.get(host.lower().rstrip("."))
        if found is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not known")
        return found


async def vet(
    policy: egress.EgressPolicy, resolver: Resolver, host: str, port: int
) -> egress.Verdict:
    """Resolve ``host`` once (not at all if it is an IP literal in any spelling) and check every
    address. Connect only to ``verdict.addresses``. Raises ``OSError`` when the name does not
    resolve (a failure, not a refusal)."""
    try:
        literal = not isinstance(egress.parse_host(host), str)
    except ValueError:
        literal = True  # refused below, with the reason; never handed to a resolver
    if literal:
        return policy.check(host, port, [])
    return policy.check(host, port, await resolver.resolve(host, port))


async def connect_vetted(
    addresses: Sequence[egress.IPAddress], port: int, *, time_limit: float
) -> socket.socket:
    """A connected non-blocking TCP socket to the first of ``addresses`` that answers, within
    ``time_limit`` seconds in all. The addresses are used as they are: nothing is resolved."""
    loop = asyncio.get_running_loop()
    last: OSError = OSError("no address to connect to")
    async with asyncio.timeout(time_limit):
        for address in addresses:
            family = socket.AF_INET if address.version == 4 else socket.AF_INET6
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, (str(address), port))
            except OSError as exc:
                sock.close()
                last = exc
                continue
            except BaseException:
                sock.close()
                raise
            return sock
    raise last


@dataclass(frozen=True)
class ProxyLimits:
    #: Connecting to the upstream (all its vetted addresses together), seconds.
    connect_timeout: float = 10.0
    #: A tunnel with no byte in either direction for this long is closed, seconds.
    idle_timeout: float = 300.0
    #: Client connections served at once on one socket; more get 503.
    max_tunnels: int = 64
    #: The request head must arrive within this many seconds and bytes.
    head_timeout: float = 10.0
    max_head_bytes: int = 16_384


class EgressProxy:
    """An HTTP CONNECT and forwarding proxy on the Unix socket ``path``.

    Example (one per account; ``label`` names it in logs)::

        policy = EgressPolicy.parse(settings.egress_allow)
        async with EgressProxy(data_dir / "egress" / f"{account_id}.sock", account_id, policy):
            ...  # bind the socket into the sandbox; call installEgress(path) in the runner

    The socket file is replaced if it exists, made ``0o600`` (the runner runs as this user),
    and removed on exit. Its path must be shorter than 108 bytes (``sun_path``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        label: str,
        policy: egress.EgressPolicy,
        *,
        resolver: Resolver | None = None,
        limits: ProxyLimits = ProxyLimits(),
    ) -> None:
        self.path = Path(path)
        self.label = label
        self.policy = policy
        self.resolver: Resolver = resolver or SystemResolver()
        self.limits = limits
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> EgressProxy:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self.path), limit=self.limits.max_head_bytes
        )
        os.chmod(self.path, 0o600)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        # Open tunnels are cut, not drained: the runner behind them is being stopped too.
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @property
    def active(self) -> int:
        """Client connections being served now."""
        return len(self._tasks)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        full = len(self._tasks) >= self.limits.max_tunnels
        self._tasks.add(task)
        try:
            await self._handle(reader, writer, full=full)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, full: bool
    ) -> None:
        try:
            async with asyncio.timeout(self.limits.head_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except (TimeoutError, asyncio.LimitOverrunError):
            await _answer(writer, 400, "the request head is too slow or too large")
            return
        if full:
            # Answered after reading the head: closing on unread bytes would reset the
            # connection, and the client would see an error instead of the reason.
            log.warning(
                "egress proxy is full", extra={"action": "egress_full", "label": self.label}
            )
            await _answer(writer, 503, "too many connections through the egress proxy")
            return
        request = _parse_head(head)
        if isinstance(request, str):
            await _answer(writer, 400, request)
            return
        sock = await self._open(writer, request.host, request.port)
        if sock is None:
            return
        up_reader, up_writer = await asyncio.open_connection(
            sock=sock, limit=self.limits.max_head_bytes
        )
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(request.rest)
            await _splice(reader, writer, up_reader, up_writer, self.limits.idle_timeout)
        finally:
            up_writer.close()
            with contextlib.suppress(ConnectionError):
                await up_writer.wait_closed()

    async def _open(
        self, writer: asyncio.StreamWriter, host: str, port: int
    ) -> socket.socket | None:
        """A socket connected to a vetted address of ``host``; or ``None`` once the client has
        been answered why not (403 refused by the policy, 502 unresolved or unreachable)."""
        try:
            verdict = await vet(self.policy, self.resolver, host, port)
        except OSError as exc:
            await _answer(writer, 502, f"cannot resolve {host}: {exc.strerror or exc}")
            return None
        if not verdict.allowed:
            log.info(
                "egress refused",
                extra={
                    "action": "egress_refused",
                    "label": self.label,
                    "host": host,
                    "port": port,
                    "reason": verdict.reason,
                },
            )
            await _answer(writer, 403, f"refused: {verdict.reason}")
            return None
        try:
            return await connect_vetted(
                verdict.addresses, port, time_limit=self.limits.connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            why = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
            await _answer(writer, 502, f"cannot connect to {host}:{port}: {why}")
            return None


@dataclass(frozen=True)
class _Request:
    """A client's request, as the proxy reads its head."""

    method: str
    host: str
    port: int
    #: The head to send upstream (origin form), empty for ``CONNECT``.
    rest: bytes


def _parse_head(head: bytes) -> _Request | str:
    """The request in ``head``, or why it is a bad request (answered 400)."""
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        return "malformed request line"
    if method == "CONNECT":
        host, port = _authority(target, default_port=None)
        rest = b""
    else:
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            return "the proxy forwards absolute http:// URIs and CONNECT"
        host, port = _authority(parts.netloc.rpartition("@")[2], default_port=80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        rest = _forwarded_head(method, path, version, lines[1:])
    if host is None or port is None:
        return f"bad destination {target[:200]!r}"
    return _Request(method, host, port, rest)


def _authority(text: str, *, default_port: int | None) -> tuple[str | None, int | None]:
    """``host:port``, ``[v6]:port`` or (with a default port) ``host`` alone."""
    if text.startswith("["):
        host, _, tail = text[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
        if tail and not tail.startswith(":"):
            return None, None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
    if not port_text:
        return (host or None), default_port
    if not port_text.isdigit():
        return None, None
    return (host or None), int(port_text)


def _forwarded_head(method: str, path: str, version: str, headers: list[str]) -> bytes:
    kept = [
        line
        for line in headers
        if line and line.partition(":")[0].strip().lower() not in _HOP_BY_HOP
    ]
    # One request per connection: the upstream closes after answering, so bytes of a second
    # request can never reach it under another request line.
    lines = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _splice(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
    idle: float,
) -> None:
    """Copy bytes both ways until both sides are done, or neither moved for ``idle`` s."""
    last = [time.monotonic()]

    async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while True:
            try:
                chunk = await asyncio.wait_for(src.read(65_536), timeout=idle)
            except TimeoutError:
                if time.monotonic() - last[0] < idle:
                    continue  # the other direction is busy: a long download, say
                raise
            if not chunk:
                if dst.can_write_eof():
                    dst.write_eof()  # half-close: the other direction may still answer
                return
            last[0] = time.monotonic()
            dst.write(chunk)
            await dst.drain()

    pumps = [
        asyncio.ensure_future(pump(a_reader, b_writer)),
        asyncio.ensure_future(pump(b_reader, a_writer)),
    ]
    try:
        # Returns when both directions ended, or one failed (idle, reset): end the tunnel.
        await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reasons = {
        400: "Bad Request",
        403: "Forbidden",
        502: "Bad Gateway",
        503: "Service Unavailable",
    }
    body = f"sluice egress: {text}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()
