"""The in-process broker (engine/state/broker.py): fan-out, overflow, and replay + live with no gap
and no duplicate."""

from __future__ import annotations

import asyncio

from sluice.engine.state.broker import Broker, follow


async def test_publish_reaches_each_subscriber_of_the_topic() -> None:
    hub = Broker()
    a, b, other = hub.subscribe("t"), hub.subscribe("t"), hub.subscribe("u")
    hub.publish("t", [1, 2])
    hub.publish("t", [3])
    assert await a.next_batch() == [1, 2, 3]
    assert await b.next_batch() == [1, 2, 3]
    assert hub.subscribers("u") == 1 and not other.closed
    a.close()
    b.close()
    a.close()  # idempotent
    assert hub.subscribers("t") == 0
    assert await a.next_batch() == []


async def test_callbacks_and_empty_publications() -> None:
    seen: list[object] = []
    hub = Broker(callbacks={"jobs": [seen.extend]})
    hub.publish("jobs", [])
    hub.publish("jobs", [2])
    assert seen == [2]


async def test_a_reader_too_far_behind_is_closed_after_what_it_holds() -> None:
    hub = Broker(maxsize=3)
    sub = hub.subscribe("t")
    hub.publish("t", [1, 2])
    hub.publish("t", [3, 4])  # over the limit: closed, this batch dropped
    assert sub.closed and sub.overflowed and hub.subscribers("t") == 0
    assert await sub.next_batch() == [1, 2]
    assert await sub.next_batch() == []


async def test_a_waiting_reader_wakes_on_publish_and_on_close() -> None:
    hub = Broker()
    sub = hub.subscribe("t")
    waiting = asyncio.create_task(sub.next_batch())
    await asyncio.sleep(0)  # let it wait (a scheduling point, not a delay)
    hub.publish("t", ["x"])
    assert await waiting == ["x"]
    waiting = asyncio.create_task(sub.next_batch())
    await asyncio.sleep(0)
    sub.close()
    assert await waiting == []


async def test_follow_skips_live_items_the_replay_already_gave() -> None:
    hub = Broker()
    sub = hub.subscribe("t")
    # Committed while the replay was read: both in the replay and published live.
    hub.publish("t", [2, 3])
    hub.publish("t", [4])
    sub.close()  # so that follow ends once it has passed on what it holds
    assert [i async for i in follow(sub, [1, 2, 3], key=lambda i: i)] == [1, 2, 3, 4]


async def test_follow_without_replay_passes_everything_in_publication_order() -> None:
    hub = Broker()
    sub = hub.subscribe("t")
    hub.publish("t", [5, 4])
    sub.close()
    assert [i async for i in follow(sub, [], key=lambda i: i)] == [5, 4]


async def test_follow_skips_what_the_reader_had_when_nothing_is_replayed() -> None:
    hub = Broker()
    sub = hub.subscribe("t")
    hub.publish("t", [3, 5])  # 3: committed before the reader's resume point, published late
    sub.close()
    assert [i async for i in follow(sub, [], key=lambda i: i, after=4)] == [5]


async def test_follow_passes_an_item_published_twice_once() -> None:
    # A stream that also polls storage may get an item both live and from the poll.
    hub = Broker()
    sub = hub.subscribe("t")
    hub.publish("t", [1, 2])
    sub.push([2, 3])
    hub.publish("t", [3])
    sub.close()
    assert [i async for i in follow(sub, [], key=lambda i: i)] == [1, 2, 3]
