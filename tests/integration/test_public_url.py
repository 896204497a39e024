"""Links made with the public URL of the moment, not of the day the data was made (issue 16)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from sluice import errors, public_url
from sluice.api.app import serving
from sluice.config import Settings
from sluice.engine.outbound import tls
from sluice.engine.outbound.mailer import Mailer
from sluice.platform import Platform
from tests.conftest import Api
from tests.integration.test_mailer import smtp_server
from tests.integration.test_sse import DEADLINE, _Server
from tests.integration.test_workflows import THROWS, create, run


async def test_error_mails_link_to_the_public_url_of_the_moment(api: Api) -> None:
    """The account was made under one public URL; Sluice now runs under another (issue 16)."""
    sends, workflows = api.platform.sends, api.platform.workflows
    before = (sends.mailer, workflows.settings)
    async with smtp_server() as inbox:
        sends.mailer = Mailer(
            dataclasses.replace(before[1], smtp_url=f"smtp://127.0.0.1:{inbox.port}")
        )
        workflows.settings = dataclasses.replace(before[1], public_url="https://moved.example/")
        try:
            failing = await create(api, [THROWS], name="moved-check")
            await run(api, failing["id"], {"x": 1})
            await api.platform.jobs.drain()
        finally:
            sends.mailer, workflows.settings = before
    [message] = [m for m in inbox.messages if m["Subject"].endswith("in moved-check")]
    lines = message.get_content().splitlines()
    assert f"The workflow's errors: https://moved.example/workflows/{failing['id']}" in lines
    assert any(re.fullmatch(r"The run: https://moved\.example/runs/\w+", line) for line in lines)
    # The error's name once ("Error: Error: …" read the label and the name).
    assert any(line.startswith("What: TypeError: Cannot read") for line in lines)


# ---- the public URL from the request (no SLUICE_PUBLIC_URL), over real HTTP --------------

WEBHOOK = """
export default {
  name: "Hook", version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};
"""


@contextlib.asynccontextmanager
async def live_server(platform: Platform, **settings: Any) -> AsyncIterator[str]:
    """A real uvicorn server on ``platform`` (its settings changed by ``settings``)."""
    changed = dataclasses.replace(
        platform, settings=dataclasses.replace(platform.settings, **settings)
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(serving(changed), log_level="warning", lifespan="off", proxy_headers=False)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.wait_for(server.ready.wait(), DEADLINE)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def endpoint_url(base: str, api: Api, headers: dict[str, str] | None = None) -> str:
    """Deploy an HTTP source over real HTTP at ``base``; the endpoint URL in the answer."""
    async with httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {api.api_key}"},
        timeout=60,
        verify=tls.context(),
    ) as client:
        response = await client.post(
            "/v1/sources", json={"component_code": WEBHOOK}, headers=headers or {}
        )
    assert response.status_code == 200, response.text
    url: str = response.json()["data"]["endpoint_url"]
    return url


async def test_endpoint_urls_follow_the_address_the_request_came_to(api: Api) -> None:
    assert api.platform.settings.public_url == ""
    async with live_server(api.platform) as base:
        assert (await endpoint_url(base, api)).startswith(base + "/e/")
        # A name the client used (a DNS name, a port mapped by Docker) comes back in the link.
        named = await endpoint_url(base, api, {"Host": "sluice.example:8443"})
        assert named.startswith("http://sluice.example:8443/e/")
        # The link works: the endpoint id is served at the address the request came to.
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(base + "/e/" + named.rsplit("/", 1)[1], json={"a": 1})
        assert response.status_code == 200, response.text


async def test_forwarded_headers_only_from_trusted_proxies(api: Api) -> None:
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "sluice.example.com"}
    async with live_server(api.platform) as base:  # SLUICE_TRUSTED_PROXIES unset: ignored
        assert (await endpoint_url(base, api, forwarded)).startswith(base + "/e/")
    async with live_server(api.platform, trusted_proxies="10.0.0.0/8") as base:  # not this peer
        assert (await endpoint_url(base, api, forwarded)).startswith(base + "/e/")
    async with live_server(api.platform, trusted_proxies="127.0.0.1, ::1") as base:
        url = await endpoint_url(base, api, forwarded)
        assert url.startswith("https://sluice.example.com/e/")
        # Only the proto: the Host stays the request's.
        url = await endpoint_url(base, api, {"X-Forwarded-Proto": "https"})
        assert url.startswith("https://" + base.removeprefix("http://") + "/e/")


async def test_a_host_that_would_change_the_link_is_not_used(api: Api) -> None:
    async with live_server(api.platform) as base:
        for bad in ("evil.example/phish?", "a@evil.example"):
            url = await endpoint_url(base, api, {"Host": bad})
            assert url.startswith(base + "/e/"), (bad, url)


async def test_the_configured_public_url_wins(api: Api) -> None:
    invoker = api.platform.invoker
    saved = invoker.settings
    invoker.settings = dataclasses.replace(saved, public_url="https://configured.example")
    try:
        async with live_server(api.platform) as base:
            url = await endpoint_url(base, api, {"Host": "other.example"})
    finally:
        invoker.settings = saved
    assert url.startswith("https://configured.example/e/")


async def test_error_mails_made_by_the_worker_use_the_accounts_last_request_url(
    api: Api, other_api: Api
) -> None:
    """No request at hand when the global error workflow runs (a job): its links use the URL of
    the account's last request to this process; another account's requests do not count."""
    sends = api.platform.sends
    before = sends.mailer
    public_url.forget_all()
    async with smtp_server() as inbox, live_server(api.platform) as base:
        sends.mailer = Mailer(
            dataclasses.replace(api.platform.settings, smtp_url=f"smtp://127.0.0.1:{inbox.port}")
        )
        try:
            headers = {"Authorization": f"Bearer {api.api_key}", "Host": "mine.example:8080"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
                made = await client.post(
                    "/v1/workflows",
                    json={
                        "name": "last-url-check",
                        "trigger": {"type": "manual"},
                        "steps": [THROWS],
                    },
                )
                assert made.status_code == 200, made.text
                failing = made.json()["data"]
                ran = await client.post(f"/v1/workflows/{failing['id']}/runs", json={"event": 1})
                assert ran.status_code == 200, ran.text
            # Another account's request, with another Host, after it.
            async with httpx.AsyncClient(
                base_url=base,
                headers={"Authorization": f"Bearer {other_api.api_key}", "Host": "evil.example"},
                timeout=60,
            ) as client:
                assert (await client.get("/v1/users/me")).status_code == 200
            await api.platform.jobs.drain()  # the error workflow runs here, outside any request
        finally:
            sends.mailer = before
    [message] = [m for m in inbox.messages if m["Subject"].endswith("in last-url-check")]
    lines = message.get_content().splitlines()
    assert f"The workflow's errors: http://mine.example:8080/workflows/{failing['id']}" in lines
    assert public_url.last_known(other_api.account_id) == "http://evil.example"


def test_resolution_order() -> None:
    settings = Settings.from_env({}, port=9000)
    assert settings.resolved_public_url == "http://127.0.0.1:9000"
    public_url.forget_all()
    token = public_url.enter(
        {"type": "http", "scheme": "http", "headers": [(b"host", b"a.example")]},
        settings.proxies,
    )
    try:
        assert settings.resolved_public_url == "http://a.example"
        public_url.remember("u_1")
        assert Settings.from_env({}, public_url="https://set.example/").resolved_public_url == (
            "https://set.example"
        )
    finally:
        public_url.leave(token)
    assert settings.resolved_public_url == "http://127.0.0.1:9000"
    assert settings.public_url_for("u_1") == "http://a.example"
    assert settings.public_url_for("u_2") == "http://127.0.0.1:9000"


def test_trusted_proxies_setting() -> None:
    proxies = public_url.TrustedProxies("127.0.0.1, 10.0.0.0/8")
    assert proxies.trusts("10.1.2.3") and proxies.trusts("127.0.0.1")
    assert not proxies.trusts("192.168.1.1") and not proxies.trusts(None)
    assert public_url.TrustedProxies("*").trusts("203.0.113.9")
    assert not public_url.TrustedProxies("")
    with pytest.raises(errors.InvalidRequest, match="SLUICE_TRUSTED_PROXIES"):
        Settings.from_env({"SLUICE_TRUSTED_PROXIES": "not-an-address"})
