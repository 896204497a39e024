"""Network egress (attack A3): ``$.send.http`` and the runner's egress proxy refuse loopback,
private and metadata destinations unless ``SLUICE_EGRESS_ALLOW`` names them.

Every packet goes to loopback or to a network namespace this file creates and removes: the
refusal of other ranges is proved by the pure classifier (tests/unit/test_egress_policy.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice import errors
from sluice.config import Settings
from sluice.domain import egress
from sluice.engine.outbound import destinations, http_clients, posts
from sluice.runtime.egress import EgressProxy, ProxyLimits, StaticResolver
from tests import netns
from tests.conftest import Api
from tests.integration.test_destinations import http_server
from tests.integration.test_mailer import free_port
from tests.integration.test_workflows import create, run, step

RESOLVER = StaticResolver(
    {
        "evil.test": ["127.0.0.1"],
        # A rebinding resolver's two answers at once: public first, loopback second.
        "rebind.test": ["93.184.215.14", "127.0.0.1"],
        "mapped.test": ["::ffff:127.0.0.1"],
    }
)


def allowing(entries: str) -> egress.EgressPolicy:
    """The policy the server builds from ``SLUICE_EGRESS_ALLOW=entries``."""
    return http_clients.policy(Settings.from_env({"SLUICE_EGRESS_ALLOW": entries}))


# --- $.send.http through a real run -----------------------------------------------------------


async def test_send_http_to_loopback_is_refused_and_recorded(api: Api) -> None:
    async with http_server() as srv:
        workflow = await create(
            api,
            [
                step(
                    "out", f"async run({{ $ }}) {{ $.send.http({{ url: '{srv.url}/hook?t=s' }}); }}"
                )
            ],
        )
        result = await run(api, workflow["id"], {})
        await api.platform.jobs.drain()
        stored = (await api.client.get(f"/v1/runs/{result['id']}")).json()["data"]
        (send,) = stored["sends"]
        assert send["status"] == "failed"
        error = send["outcome"]["error"]
        assert error == (
            f"$.send.http: GET {srv.url}/hook refused: 127.0.0.1 is a loopback address; "
            "SLUICE_EGRESS_ALLOW can allow it"
        )
        assert srv.received == []

        # Allow-listed (as SLUICE_EGRESS_ALLOW would), the same send goes through.
        before = api.platform.sends.egress
        api.platform.sends.egress = allowing(f"127.0.0.1:{srv.port}")
        try:
            result = await run(api, workflow["id"], {})
            await api.platform.jobs.drain()
        finally:
            api.platform.sends.egress = before
        stored = (await api.client.get(f"/v1/runs/{result['id']}")).json()["data"]
        assert stored["sends"][0]["status"] == "sent"
        assert [r.target for r in srv.received] == ["/hook?t=s"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/",
        "http://2130706433:{port}/",
        "http://0x7f.1:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://0.0.0.0:{port}/",
        "http://localhost:{port}/",
    ],
)
async def test_send_http_refuses_every_spelling_of_loopback(url: str) -> None:
    async with http_server() as srv:
        outcome = await destinations.send_http(
            {"url": url.format(port=srv.port)}, time_limit=5, policy=allowing("10.0.0.0/8:*")
        )
    assert outcome["status"] == "failed"
    assert " refused: " in outcome["error"]
    # 0.0.0.0 can never be allowed, so the error does not suggest it.
    assert ("SLUICE_EGRESS_ALLOW can allow it" in outcome["error"]) is ("0.0.0.0" not in url)
    assert srv.received == []


async def test_send_http_names_are_resolved_once_and_vetted() -> None:
    # A name resolving to loopback (a stub resolver, as a wildcard DNS like nip.io would).
    async with http_server() as srv:
        for host in ("evil.test", "rebind.test", "mapped.test"):
            async with http_clients.client(egress.EgressPolicy(), resolver=RESOLVER) as client:
                outcome = await destinations.send_http(
                    {"url": f"http://{host}:{srv.port}/"}, time_limit=5, client=client
                )
            assert outcome["status"] == "failed", host
            assert "refused" in outcome["error"] and "loopback" in outcome["error"]
        # Listed by name, the name reaches the address it was vetted at, Host header intact.
        async with http_clients.client(
            allowing(f"evil.test:{srv.port}"), resolver=RESOLVER
        ) as client:
            outcome = await destinations.send_http(
                {"url": f"http://evil.test:{srv.port}/x"}, time_limit=5, client=client
            )
    assert outcome["status"] == "sent"
    (req,) = srv.received
    assert req.headers["host"] == f"evil.test:{srv.port}"


# --- webhook deliveries' client (engine/outbound/posts.py) ---------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/",
        "http://2130706433:{port}/",
        "http://0x7f.1:{port}/",
        "http://127.1:{port}/",
        "http://[::1]:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://0.0.0.0:{port}/",
        "http://localhost:{port}/",
        "http://evil.test:{port}/",
        "http://rebind.test:{port}/",
        "http://mapped.test:{port}/",
    ],
)
async def test_delivery_posts_refuse_every_spelling_of_loopback(url: str) -> None:
    # aiohttp connects to an IP literal without asking the resolver: Poster vets those itself.
    async with http_server() as srv:
        resolver = RESOLVER if ".test:" in url else None  # localhost: the system's
        poster = posts.Poster(allowing("10.0.0.0/8:*"), resolver=resolver)
        try:
            with pytest.raises(errors.EgressRefused):
                await poster.post(
                    url.format(port=srv.port), b"{}", {}, time_limit=5, read_limit=100
                )
        finally:
            await poster.aclose()
    assert srv.received == []


async def test_delivery_posts_reach_a_listed_name_at_its_vetted_address() -> None:
    async with http_server() as srv:
        poster = posts.Poster(allowing(f"evil.test:{srv.port}"), resolver=RESOLVER)
        try:
            for _ in range(2):
                status = await poster.post(
                    f"http://evil.test:{srv.port}/x", b"{}", {}, time_limit=5, read_limit=100
                )
                assert status == 200
            # Another port of the same name is not listed.
            with pytest.raises(errors.EgressRefused):
                await poster.post(
                    f"http://evil.test:{srv.port + 1}/x", b"{}", {}, time_limit=5, read_limit=1
                )
        finally:
            await poster.aclose()
    assert [r.target for r in srv.received] == ["/x", "/x"]
    assert srv.received[0].headers["host"] == f"evil.test:{srv.port}"


# --- the runner's egress proxy ------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    head: str
    body: bytes


async def _request(sock: Path, head: str, then: bytes = b"") -> Answer:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    try:
        writer.write(head.encode() + then)
        await writer.drain()
        async with asyncio.timeout(10):
            data = await reader.read(-1) if not head.startswith("CONNECT") or then else b""
            if not data:
                data = await reader.readuntil(b"\r\n\r\n")
                if not data.startswith(b"HTTP/1.1 200"):
                    data += await reader.read(-1)
    finally:
        writer.close()
    top, _, body = data.partition(b"\r\n\r\n")
    return Answer(int(top.split(b" ")[1]), top.decode("latin-1"), body)


@contextlib.asynccontextmanager
async def proxy(
    tmp_path: Path, policy: egress.EgressPolicy, **limits: float
) -> AsyncIterator[Path]:
    path = tmp_path / "egress.sock"
    async with EgressProxy(
        path, "acct-test", policy, resolver=RESOLVER, limits=ProxyLimits(**limits)
    ):
        yield path
    assert not path.exists()


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1:{port}",
        "2130706433:{port}",
        "0x7f.1:{port}",
        "[::1]:{port}",
        "[::ffff:127.0.0.1]:{port}",
        "0.0.0.0:{port}",
        "evil.test:{port}",
        "rebind.test:{port}",
        "mapped.test:{port}",
        "169.254.169.254:80",
        "100.64.0.1:80",
        "10.0.0.1:80",
        "[fd00:ec2::254]:80",
    ],
)
async def test_proxy_refuses_local_destinations(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluice.runtime.egress")
    async with http_server() as srv, proxy(tmp_path, egress.EgressPolicy()) as sock:
        dest = target.format(port=srv.port)
        connect = await _request(sock, f"CONNECT {dest} HTTP/1.1\r\nHost: {dest}\r\n\r\n")
        forward = await _request(
            sock,
            f"GET http://{dest}/secret?token=abc HTTP/1.1\r\nHost: {dest}\r\n"
            "Authorization: Bearer hunter2\r\n\r\n",
        )
    assert connect.status == 403 and forward.status == 403
    assert connect.body.startswith(b"sluice egress: refused: ")
    assert srv.received == []
    (record, _) = [r for r in caplog.records if r.getMessage() == "egress refused"]
    assert record.__dict__["label"] == "acct-test" and record.__dict__["reason"]
    logged = repr([r.__dict__ for r in caplog.records])
    assert "hunter2" not in logged and "token=abc" not in logged and "/secret" not in logged


async def test_proxy_tunnels_and_forwards_to_allow_listed(tmp_path: Path) -> None:
    async with http_server() as srv:
        policy = allowing(f"127.0.0.1:{srv.port},evil.test:{srv.port}")
        async with proxy(tmp_path, policy) as sock:
            tunnel = await _request(
                sock,
                f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1\r\n\r\n",
                b"GET /tunnelled HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            forwarded = await _request(
                sock,
                f"GET http://evil.test:{srv.port}/fwd?q=1 HTTP/1.1\r\nHost: evil.test\r\n"
                "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\r\n",
            )
            other_port = await _request(sock, f"CONNECT 127.0.0.1:{srv.port + 1} HTTP/1.1\r\n\r\n")
    assert tunnel.status == 200 and tunnel.body.endswith(b"ok")
    assert forwarded.status == 200 and forwarded.body == b"ok"
    assert other_port.status == 403
    assert [r.target for r in srv.received] == ["/tunnelled", "/fwd?q=1"]
    fwd = srv.received[1].headers
    assert fwd["host"] == "evil.test" and fwd["connection"] == "close"
    assert "proxy-connection" not in fwd and "proxy-authorization" not in fwd


async def test_proxy_answers_502_and_503(tmp_path: Path) -> None:
    closed = free_port()
    async with http_server(answer=False) as srv:
        policy = allowing(f"127.0.0.1:{closed},127.0.0.1:{srv.port}")
        async with proxy(tmp_path, policy, max_tunnels=1) as sock:
            refused = await _request(sock, f"CONNECT 127.0.0.1:{closed} HTTP/1.1\r\n\r\n")
            assert refused.status == 502 and b"cannot connect" in refused.body
            unknown = await _request(sock, "CONNECT nowhere.test:80 HTTP/1.1\r\n\r\n")
            assert unknown.status == 502 and b"cannot resolve" in unknown.body
            held = await asyncio.open_unix_connection(str(sock))
            held[1].write(f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1\r\n\r\n".encode())
            assert (await held[0].readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            full = await _request(sock, f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1\r\n\r\n")
            assert full.status == 503
            held[1].close()
            await held[1].wait_closed()


async def test_proxy_closes_idle_tunnels(tmp_path: Path) -> None:
    async with http_server(answer=False) as srv:
        policy = allowing(f"127.0.0.1:{srv.port}")
        async with proxy(tmp_path, policy, idle_timeout=0.2) as sock:
            reader, writer = await asyncio.open_unix_connection(str(sock))
            writer.write(f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1\r\n\r\n".encode())
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            async with asyncio.timeout(10):
                assert await reader.read(-1) == b""  # closed by the proxy, not by us
            writer.close()


# --- a test host in a network namespace (10.x, on both ends of a veth pair: tests/netns.py) -----


@dataclass(frozen=True)
class Namespace:
    address: str
    port: int


@pytest.fixture(scope="module")
def netns_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Namespace]:
    made = netns.shared()
    if isinstance(made, str):
        pytest.skip(made)
    root = tmp_path_factory.mktemp("netns-www")
    (root / "hello.txt").write_text("hello from the namespace\n")
    port = 8000 + secrets.randbelow(1000)
    server = subprocess.Popen(
        ["ip", "netns", "exec", made.name, sys.executable, "-u", "-m", "http.server",
         str(port), "--bind", made.address, "--directory", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        # It prints once it listens: a bounded wait on that line, not a sleep.
        line = server.stdout.readline()
        assert "Serving HTTP" in line, line
        yield Namespace(made.address, port)
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


async def test_netns_host_is_refused_unless_allow_listed(
    tmp_path: Path, netns_host: Namespace
) -> None:
    dest = f"{netns_host.address}:{netns_host.port}"
    url = f"http://{dest}/hello.txt"
    head = f"GET {url} HTTP/1.1\r\nHost: {dest}\r\n\r\n"
    async with proxy(tmp_path, egress.EgressPolicy()) as sock:
        assert (await _request(sock, head)).status == 403
        assert (await _request(sock, f"CONNECT {dest} HTTP/1.1\r\n\r\n")).status == 403
    refused = await destinations.send_http({"url": url}, time_limit=5)
    assert refused["status"] == "failed"
    assert f"refused: {netns_host.address} is a private address" in refused["error"]

    policy = allowing(f"10.250.0.0/16:{netns_host.port}")
    async with proxy(tmp_path, policy) as sock:
        answer = await _request(sock, head)
        tunnel = await _request(
            sock,
            f"CONNECT {dest} HTTP/1.1\r\n\r\n",
            f"GET /hello.txt HTTP/1.0\r\nHost: {dest}\r\n\r\n".encode(),
        )
    assert answer.status == 200 and answer.body == b"hello from the namespace\n"
    assert tunnel.status == 200 and tunnel.body.endswith(b"hello from the namespace\n")
    sent = await destinations.send_http({"url": url}, time_limit=5, policy=policy)
    assert sent["status"] == "sent" and sent["http_status"] == 200


# --- Node through the real proxy ---------------------------------------------------------------

EGRESS_MJS = Path(__file__).resolve().parents[2] / "src/sluice/runtime/js/egress.mjs"

NODE_SCRIPT = """
import http from "node:http";
const { installEgress } = await import(process.argv[1]);
installEgress(process.argv[2]);
const out = {};
const get = (url) => new Promise((resolve) => {
  http.get(url, (res) => { let b = ""; res.on("data", (c) => (b += c));
    res.on("end", () => resolve(`${res.statusCode} ${b}`)); })
    .on("error", (e) => resolve(`${e.code} ${e.message}`));
});
const viaFetch = (url) => fetch(url).then(async (r) => `${r.status} ${await r.text()}`,
  (e) => `${e.cause?.code} ${e.cause?.message}`);
for (const [name, url] of Object.entries(JSON.parse(process.argv[3]))) {
  out[`get ${name}`] = await get(url);
  out[`fetch ${name}`] = await viaFetch(url);
}
console.log(JSON.stringify(out));
process.exit(0);
"""


async def test_node_code_goes_through_the_proxy(tmp_path: Path) -> None:
    async with http_server() as srv, http_server() as other:
        policy = allowing(f"evil.test:{srv.port}")
        async with proxy(tmp_path, policy) as sock:
            urls = {
                "allowed": f"http://evil.test:{srv.port}/in",
                "loopback": f"http://127.0.0.1:{other.port}/no",
                "by name": f"http://evil.test:{other.port}/no",
            }
            node = await asyncio.create_subprocess_exec(
                "node", "--input-type=module", "-e", NODE_SCRIPT,
                str(EGRESS_MJS), str(sock), json.dumps(urls),
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(30):
                out, _ = await node.communicate()
    results = json.loads(out)
    assert results["get allowed"] == results["fetch allowed"] == "200 ok"
    for name in ("loopback", "by name"):
        for how in ("get", "fetch"):
            assert results[f"{how} {name}"].startswith("EGRESS_REFUSED sluice egress: refused: ")
    assert "127.0.0.1 is a loopback address" in results["get loopback"]
    assert "evil.test resolves to 127.0.0.1" in results["fetch by name"]
    assert [r.target for r in srv.received] == ["/in", "/in"]
    assert other.received == []
