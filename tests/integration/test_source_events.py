"""DELETE /v1/sources/{id}/events: all, from start_id, up to end_id, one, one channel, bad ids."""

from __future__ import annotations

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_subscriptions import EMITTER, deploy, emit


async def event_ids(api: Api, source_id: str, **params: str) -> list[str]:
    page = (await api.client.get(f"/v1/sources/{source_id}/event_summaries", params=params)).json()
    return [e["id"] for e in reversed(page["data"])]


async def delete(api: Api, source_id: str, **params: str) -> None:
    response = await api.client.delete(f"/v1/sources/{source_id}/events", params=params)
    assert response.status_code == 202, response.text
    assert response.json() == {}


async def test_delete_ranges(api: Api) -> None:
    source = await deploy(api, EMITTER, "emitter")
    ids = await emit(api, source, *({"payload": n} for n in range(6)))
    assert await event_ids(api, source) == ids

    await delete(api, source, start_id=ids[4])  # from it, inclusive, onwards
    assert await event_ids(api, source) == ids[:4]
    await delete(api, source, end_id=ids[0])  # up to it, inclusive
    assert await event_ids(api, source) == ids[1:4]
    await delete(api, source, start_id=ids[2], end_id=ids[2])  # exactly one
    assert await event_ids(api, source) == [ids[1], ids[3]]
    await delete(api, source, start_id=ids[0], end_id=ids[5])  # bounds need not exist
    assert await event_ids(api, source) == []


async def test_delete_all_or_one_channel(api: Api) -> None:
    source = await deploy(api, EMITTER, "emitter")
    ids = await emit(
        api,
        source,
        {"payload": 1},
        {"payload": 2, "channel": "$in"},
        {"payload": 3, "channel": "$in"},
        {"payload": 4},
    )
    # $in (the queue of scheduled emits) is listed only when asked for by name.
    assert await event_ids(api, source) == [ids[0], ids[3]]
    assert await event_ids(api, source, event_name="$in") == [ids[1], ids[2]]
    await delete(api, source, start_id=ids[2], end_id=ids[2], event_name="$in")
    assert await event_ids(api, source, event_name="$in") == [ids[1]]
    assert await event_ids(api, source) == [ids[0], ids[3]]
    await delete(api, source, event_name="$in")
    assert await event_ids(api, source, event_name="$in") == []
    assert await event_ids(api, source) == [ids[0], ids[3]]
    await delete(api, source, event_name="")  # the default channel
    assert await event_ids(api, source) == []

    more = await emit(api, source, {"payload": 5}, {"payload": 6, "channel": "x"})
    await delete(api, source)  # no parameters: everything
    assert await event_ids(api, source) == [] and more


async def test_bad_ids_and_other_accounts(api: Api, other_api: Api) -> None:
    source = await deploy(api, EMITTER, "emitter")
    (only,) = await emit(api, source, {"payload": 1})
    path = f"/v1/sources/{source}/events"
    for params, field in (
        ({"start_id": "yesterday"}, "start_id"),
        ({"end_id": "12-x"}, "end_id"),
        ({"start_id": "1700000000000-5", "end_id": "1700000000000-4"}, "start_id"),
    ):
        body = assert_error(await api.client.delete(path, params=params), 400, "invalid_request")
        assert body["field"] == field, body
    assert_error(await other_api.client.delete(path), 404, "not_found")
    assert_error(await api.client.delete("/v1/sources/dc_nope/events"), 404, "not_found")
    assert await event_ids(api, source) == [only]
