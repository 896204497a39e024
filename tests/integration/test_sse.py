"""SSE: /v1/sources/{id}/sse and /v1/sources/{id}/logs/sse, read over real HTTP.

httpx's ASGITransport buffers a response until it ends, so these tests serve the app with a
real uvicorn server in this process (on the suite's platform; a 0.05 s keepalive) and read
the streams with httpx. Nothing sleeps: each read waits for the next line, under a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest_asyncio
import uvicorn

from sluice.api.app import serving
from sluice.engine.outbound import tls
from sluice.engine.state import broker
from sluice.platform import Platform
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_subscriptions import EMITTER, deploy, emit

DEADLINE = 15.0

LOGGER = """
export default {
  name: "Logger", version: "0.0.1",
  async run(event) { console.log("hello", event.n); console.error("oops", event.n); },
};
"""


class _Server(uvicorn.Server):
    """uvicorn, told apart from the test process: no signal handlers, a ready event."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def live(platform: Platform) -> AsyncIterator[str]:
    """The base URL of a real server on ``platform`` (its settings with a tiny keepalive)."""
    fast = dataclasses.replace(
        platform, settings=dataclasses.replace(platform.settings, sse_keepalive_seconds=0.05)
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            serving(fast),
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.wait_for(server.ready.wait(), DEADLINE)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def sse_client(live: str, api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=live,
        headers={"Authorization": f"Bearer {api.api_key}"},
        timeout=DEADLINE,
        verify=tls.context(),
    ) as client:
        yield client


async def messages(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """SSE messages as ``{"id", "data"}`` dicts, and comments as ``{"comment": …}``."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                yield fields
            fields = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields[name] = fields[name] + "\n" + value if name in fields else value


async def next_data(stream: AsyncIterator[dict[str, str]]) -> tuple[str, dict[str, Any]]:
    """The next message (not a comment): its id and its JSON data."""
    async with asyncio.timeout(DEADLINE):
        async for message in stream:
            if "data" in message:
                return message["id"], json.loads(message["data"])
    raise AssertionError("the stream ended")


async def test_each_emit_streams_as_it_is_stored(api: Api, live: str) -> None:
    source = await deploy(api, EMITTER, "emitter")
    async with (
        sse_client(live, api) as client,
        client.stream("GET", f"/v1/sources/{source}/sse") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # Subscribed before the headers were sent: nothing stored from now on is missed.
        assert api.platform.commit.broker.subscribers(broker.emits_topic(source)) == 1
        stream = messages(response)
        ids = await emit(api, source, {"payload": {"n": 1}}, {"payload": [2], "channel": "ch"})
        first = await next_data(stream)
        second = await next_data(stream)
    assert first == (
        ids[0],
        {
            "k": "emit",
            "e": {"n": 1},
            "ts": int(ids[0].split("-")[0]),
            "id": ids[0],
            "name": "",
            "metadata": {},
        },
    )
    assert second[0] == ids[1] and second[1]["e"] == [2] and second[1]["name"] == "ch"


async def test_resume_after_last_event_id_replays_then_goes_live(api: Api, live: str) -> None:
    source = await deploy(api, EMITTER, "emitter")
    ids = await emit(api, source, *({"payload": n} for n in range(3)))
    async with (
        sse_client(live, api) as client,
        client.stream(
            "GET", f"/v1/sources/{source}/sse", headers={"Last-Event-ID": ids[0]}
        ) as response,
    ):
        stream = messages(response)
        replayed = [await next_data(stream), await next_data(stream)]
        (later,) = await emit(api, source, {"payload": "live"})
        live_one = await next_data(stream)
    assert [i for i, _ in replayed] == ids[1:]
    assert [d["e"] for _, d in replayed] == [1, 2]
    assert live_one[0] == later and live_one[1]["e"] == "live"

    # ?after= does the same for a first connection; the header wins over it on reconnects.
    async with (
        sse_client(live, api) as client,
        client.stream(
            "GET", f"/v1/sources/{source}/sse", params={"after": ids[1], "event_name": ""}
        ) as response,
    ):
        stream = messages(response)
        assert (await next_data(stream))[0] == ids[2]
        assert (await next_data(stream))[0] == later
        # A named-channel emit is filtered out of this default-channel stream.
        _named, default_id = await emit(
            api, source, {"payload": "x", "channel": "ch"}, {"payload": "y"}
        )
        assert (await next_data(stream))[0] == default_id


async def test_keepalive_comments(api: Api, live: str) -> None:
    source = await deploy(api, EMITTER, "emitter")
    async with (
        sse_client(live, api) as client,
        client.stream("GET", f"/v1/sources/{source}/sse") as response,
    ):
        async with asyncio.timeout(DEADLINE):
            async for message in messages(response):
                if message.get("comment") == "keepalive":
                    break


async def test_other_accounts_bad_ids_and_no_key(api: Api, other_api: Api, live: str) -> None:
    source = await deploy(api, EMITTER, "emitter")
    async with sse_client(live, other_api) as client:
        assert_error(await client.get(f"/v1/sources/{source}/sse"), 404, "not_found")
        assert_error(await client.get(f"/v1/sources/{source}/logs/sse"), 404, "not_found")
    async with sse_client(live, api) as client:
        response = await client.get(f"/v1/sources/{source}/sse", headers={"Last-Event-ID": "nope"})
        assert assert_error(response, 400, "invalid_request")["field"] == "Last-Event-ID"
        response = await client.get(f"/v1/sources/{source}/logs/sse", params={"after": "x"})
        assert assert_error(response, 400, "invalid_request")["field"] == "after"
    async with httpx.AsyncClient(base_url=live) as anonymous:
        assert_error(await anonymous.get(f"/v1/sources/{source}/sse"), 401, "unauthorized")


async def test_log_lines_stream_and_resume(api: Api, live: str) -> None:
    source = await deploy(api, LOGGER, "logger")
    async with (
        sse_client(live, api) as client,
        client.stream("GET", f"/v1/sources/{source}/logs/sse") as response,
    ):
        stream = messages(response)
        run = await api.client.post(f"/v1/sources/{source}/run", json={"event": {"n": 1}})
        assert run.json()["data"]["ok"]
        out_id, out = await next_data(stream)
        err_id, err = await next_data(stream)
    assert out["k"] == "log" and out["level"] == "log" and out["msg"] == "hello 1"
    assert err["level"] == "error" and err["msg"] == "oops 1"
    assert int(err_id) > int(out_id) and out["invocation_id"] == err["invocation_id"]

    async with (
        sse_client(live, api) as client,
        client.stream(
            "GET", f"/v1/sources/{source}/logs/sse", headers={"Last-Event-ID": out_id}
        ) as response,
    ):
        stream = messages(response)
        assert (await next_data(stream))[1]["msg"] == "oops 1"
        await api.client.post(f"/v1/sources/{source}/run", json={"event": {"n": 2}})
        assert (await next_data(stream))[1]["msg"] == "hello 2"


async def test_workflow_send_sse_replays_then_streams(api: Api, live: str) -> None:
    from tests.integration.test_workflows import create, run, step

    workflow = await create(
        api,
        [
            step(
                "push",
                "async run({ steps, $ }) { $.send.sse({ channel: 'updates', "
                "payload: { n: steps.trigger.event.n } }); }",
            )
        ],
    )
    await run(api, workflow["id"], {"n": 1})  # before connecting: replayed
    async with (
        sse_client(live, api) as client,
        client.stream("GET", f"/v1/workflows/{workflow['id']}/sse") as response,
    ):
        assert response.status_code == 200
        stream = messages(response)

        async def next_message() -> dict[str, str]:
            async with asyncio.timeout(DEADLINE):
                async for message in stream:
                    if "data" in message:
                        return message
            raise AssertionError("the stream ended")

        first = await next_message()
        await run(api, workflow["id"], {"n": 2})
        second = await next_message()
    assert (first["event"], json.loads(first["data"])) == ("updates", {"n": 1})
    assert (second["event"], json.loads(second["data"])) == ("updates", {"n": 2})


async def test_events_stored_by_another_process_reach_the_stream(
    api: Api, platform: Platform
) -> None:
    """With ``stream_poll_seconds`` (the api role's default), a stream also reads storage: a
    run in another process (here a second platform on the same database) reaches it."""
    polling = dataclasses.replace(
        platform,
        settings=dataclasses.replace(
            platform.settings, sse_keepalive_seconds=0.05, stream_poll_seconds=0.05
        ),
    )
    source = await deploy(api, EMITTER, "elsewhere")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(serving(polling), log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.wait_for(server.ready.wait(), DEADLINE)
    try:
        async with (
            sse_client(f"http://127.0.0.1:{port}", api) as client,
            client.stream("GET", f"/v1/sources/{source}/sse") as response,
        ):
            stream = messages(response)
            async with Platform.open(platform.settings, background=False) as other:
                outcome = await other.sources.run(
                    api.account_id, source, {"emits": [{"payload": {"from": "other"}}]}
                )
            assert outcome.result.ok
            event_id, data = await next_data(stream)
            assert event_id == outcome.event_ids[0] and data["e"] == {"from": "other"}
    finally:
        server.should_exit = True
        await task
        sock.close()
