"""Which deployment answers an endpoint id: the read on every request to ``/e/…``, cached.

An entry is the endpoint's row (``storage.endpoints.Endpoint``) plus, for a source, whether
its component answers requests itself (``customResponse``). Entries live ``ttl_seconds``
(default 1 s) at most, and this process forgets one the moment it changes it (``forget``, called
by ``Sources`` after the commit of an update or a delete): in one process an updated, deactivated
or deleted source's endpoint answers accordingly at once. Changes made by another process (other
``--role api`` servers on one PostgreSQL) show within the time-to-live; a request accepted in
that window for a source deleted or deactivated meanwhile is stored and then dropped when its
job finds the source gone (``HttpJobs.__call__``, ``engine/handlers/http.py``), as one accepted
just before the change would be.

Unknown ids are not cached (a new source's endpoint answers at once in every process). A
workflow's entry is only a hint: the ingress reads the workflow itself on every request.

A lookup that started before a ``forget`` does not store what it read (a generation counter):
on PostgreSQL the read awaits, and a commit and its ``forget`` may land in between.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluice import errors
from sluice.domain import http_events
from sluice.engine.components.components import Components
from sluice.storage import database, endpoints

#: Endpoint ids are 20 lowercase letters and digits; anything else is not looked up.
_ENDPOINT_ID = re.compile(r"^[a-z0-9]{1,40}$")
#: Past this many entries the expired ones are dropped (amortized: the bound doubles).
_PRUNE_AT = 4096


@dataclass(frozen=True)
class Entry:
    endpoint: endpoints.Endpoint
    #: A source whose component answers requests itself (``customResponse: true``).
    custom: bool
    expires: float


class EndpointDirectory:
    def __init__(
        self,
        reader: database.Reader,
        components: Components,
        *,
        ttl_seconds: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.components = components
        self.ttl_seconds = ttl_seconds
        #: The clock of the time-to-live (replaceable by tests).
        self.monotonic = monotonic
        self._entries: dict[str, Entry] = {}
        self._generation = 0
        self._prune_at = _PRUNE_AT
        self._loading: dict[str, asyncio.Future[Entry | None]] = {}

    def cached(self, endpoint_id: str) -> Entry | None:
        """The active endpoint's entry if it is cached and fresh, else None (then ``find``):
        a request to a known endpoint, the usual one, costs no coroutine here."""
        entry = self._entries.get(endpoint_id)
        if entry is None or entry.expires < self.monotonic() or not entry.endpoint.active:
            return None
        return entry

    async def find(self, endpoint_id: str) -> Entry:
        """The active endpoint's entry; ``NotFound`` when it is unknown, deleted or inactive
        (not told apart: the endpoint is public)."""
        entry = self._entries.get(endpoint_id)
        now = self.monotonic()
        if entry is None or entry.expires < now:
            loading = self._loading.get(endpoint_id)
            if loading is None:  # one read per endpoint at a time, however many requests wait
                loading = asyncio.ensure_future(self._load(endpoint_id, now))
                self._loading[endpoint_id] = loading
                loading.add_done_callback(lambda _: self._loading.pop(endpoint_id, None))
            entry = await asyncio.shield(loading)
        if entry is None or not entry.endpoint.active:
            raise errors.NotFound(f"no active endpoint {endpoint_id!r}")
        return entry

    async def _load(self, endpoint_id: str, now: float) -> Entry | None:
        self._entries.pop(endpoint_id, None)
        if not _ENDPOINT_ID.match(endpoint_id):
            return None
        generation = self._generation
        found = await self.reader(lambda conn: endpoints.get(conn, endpoint_id))
        if found is None:
            return None
        custom = False
        if not found.workflow:
            component = await self.components.by_id(found.component_id)
            custom = http_events.custom_response(component.configurable_props)
        entry = Entry(found, custom, now + self.ttl_seconds)
        if generation == self._generation:
            self._store(endpoint_id, entry, now)
        return entry

    def _store(self, endpoint_id: str, entry: Entry, now: float) -> None:
        self._entries[endpoint_id] = entry
        if len(self._entries) > self._prune_at:
            self._entries = {k: e for k, e in self._entries.items() if e.expires >= now}
            self._prune_at = max(_PRUNE_AT, 2 * len(self._entries))

    def forget(self, endpoint_id: str | None) -> None:
        """This process changed what answers ``endpoint_id`` (or may have): read it again."""
        self._generation += 1
        if endpoint_id is not None:
            self._entries.pop(endpoint_id, None)
