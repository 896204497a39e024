"""``http_request`` props: ``this.<prop>.execute()`` sends the configured request (Pipedream's
helper_functions-send-http-request), through the egress proxy like any request of user code."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from sluice.platform import Platform
from tests.conftest import Api, account_client
from tests.integration.test_destinations import HttpServer, http_server

#: Shaped like helper_functions-send-http-request (optional: the spec allows a default only on
#: optional props, outside the registry).
SEND = """
export default {
  name: "Send Webhook", key: "send-webhook", version: "1.0.1", type: "action",
  props: { httpRequest: { type: "http_request", label: "HTTP Request Configuration",
                          optional: true, default: { method: "POST" } } },
  async run() { return await this.httpRequest.execute(); },
};
"""


@dataclasses.dataclass
class Env:
    api: Api
    server: HttpServer
    refused: HttpServer


@pytest_asyncio.fixture(loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    """A platform whose egress allows one loopback server (SLUICE_EGRESS_ALLOW) and not another."""
    async with http_server() as server, http_server() as refused:
        settings = dataclasses.replace(platform.settings, egress_allow=f"127.0.0.1:{server.port}")
        async with (
            Platform.open(settings, background=False) as opened,
            account_client(opened, "sender") as api,
        ):
            yield Env(api, server, refused)


async def run(api: Api, config: dict[str, Any]) -> dict[str, Any]:
    ran = await api.client.post(
        "/v1/actions/run",
        json={"component_code": SEND, "configured_props": {"httpRequest": config}},
    )
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


async def test_execute_sends_the_configured_request(env: Env) -> None:
    data = await run(
        env.api,
        {
            "url": f"{env.server.url}/hook?x=1",
            "headers": [{"name": "X-Trace", "value": "t-1"}],
            "params": [{"name": "q", "value": "a b"}],
            "body": {"type": "fields", "fields": [{"name": "n", "value": "1"}]},
            "auth": {"type": "bearer", "token": "tok"},
        },
    )
    assert data["ok"], data["error"]
    assert data["ret"]["status"] == 200 and data["ret"]["statusText"] == "Whatever"
    assert data["ret"]["data"] == "ok" and data["ret"]["headers"]["content-length"] == "2"
    (request,) = env.server.received
    # The prop's default (POST) applies under the configured value.
    assert (request.method, request.target) == ("POST", "/hook?x=1&q=a+b")
    assert request.headers["x-trace"] == "t-1"
    assert request.headers["authorization"] == "Bearer tok"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.body) == {"n": "1"}

    env.server.status = 404
    failed = await run(env.api, {"url": env.server.url, "method": "get"})
    env.server.status = 200
    assert not failed["ok"] and failed["error"]["name"] == "HttpRequestError"
    assert "status code 404" in failed["error"]["message"]
    assert env.server.received[-1].method == "GET"


async def test_execute_obeys_the_egress_rules(env: Env) -> None:
    data = await run(env.api, {"url": f"{env.refused.url}/no", "method": "POST"})
    assert not data["ok"]
    assert data["error"]["code"] == "EGRESS_REFUSED", data["error"]
    assert "127.0.0.1 is a loopback address" in data["error"]["message"]
    assert env.refused.received == []
