"""The process's shared outbound clients (``engine/http_clients.Clients``): one per egress policy,
connections kept alive, no cookie carried from one request to the next (the client is shared
by every account), closed for good when the platform closes."""

from __future__ import annotations

import asyncio

import pytest

from sluice import errors
from sluice.domain import egress
from sluice.engine.outbound import http_clients


async def test_one_client_per_policy_no_cookies_kept_and_closed() -> None:
    seen: list[str] = []
    connections = 0
    ended = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            except asyncio.IncompleteReadError:
                break
            seen.append(head)
            writer.write(
                b"HTTP/1.1 200 OK\r\nSet-Cookie: session=account-a; Path=/\r\n"
                b"Content-Length: 0\r\n\r\n"
            )
            await writer.drain()
        writer.close()
        ended.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/in"
    policy = egress.EgressPolicy.parse("127.0.0.1:*")
    async with server:
        async with http_clients.Clients() as clients:
            shared = clients.get(policy)
            assert clients.get(egress.EgressPolicy.parse("127.0.0.1:*")) is shared
            assert clients.get(egress.EgressPolicy()) is not shared
            for _ in range(3):
                assert (await shared.post(url, content=b"{}")).status_code == 200
            assert len(seen) == 3 and connections == 1  # kept alive
            assert not any("cookie:" in head.lower() for head in seen)
            # The default policy refuses loopback, on its own client.
            with pytest.raises(errors.EgressRefused):
                await clients.get(egress.EgressPolicy()).post(url)
        await ended.wait()  # the connection was closed with the clients
    assert shared.is_closed
    with pytest.raises(errors.NotReady):
        clients.get(policy)


async def test_one_delivery_poster_per_policy_kept_alive_no_cookies_and_closed() -> None:
    seen: list[str] = []
    connections = 0
    ended = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                await reader.readexactly(2)  # the body, b"{}"
            except asyncio.IncompleteReadError:
                break
            seen.append(head)
            body = b"x" * 1000  # a short answer: read, so the connection is kept
            writer.write(
                b"HTTP/1.1 201 Created\r\nSet-Cookie: session=account-a; Path=/\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        writer.close()
        ended.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/in"
    policy = egress.EgressPolicy.parse("127.0.0.1:*")
    async with server:
        async with http_clients.Clients() as clients:
            poster = clients.poster(policy)
            assert clients.poster(egress.EgressPolicy.parse("127.0.0.1:*")) is poster
            assert clients.poster(egress.EgressPolicy()) is not poster
            for _ in range(3):
                status = await poster.post(url, b"{}", {}, time_limit=5, read_limit=65_536)
                assert status == 201
            assert len(seen) == 3 and connections == 1  # kept alive
            assert not any("cookie:" in head.lower() for head in seen)
            with pytest.raises(errors.EgressRefused):
                await clients.poster(egress.EgressPolicy()).post(
                    url, b"{}", {}, time_limit=5, read_limit=1
                )
        await ended.wait()  # the connection was closed with the clients
    with pytest.raises(errors.NotReady):
        clients.poster(policy)
