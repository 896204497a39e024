"""The runner port: what the engine needs of the runtime that runs user code.

``RunnerPool`` (``pool.py``) is the real one: Node processes, one per account, each in its
jail. ``FakeRunner`` answers from a function, for tests of the engine that need no Node (as
httpx ships ``httpx.MockTransport``). A runner that dies during an invocation is raised as
``errors.RunnerCrashed`` here, once, where the runtime's answer enters the engine: callers never
re-check a result for a crash.

    runner: Runner = RunnerPool(PoolConfig(), sandbox)      # or FakeRunner(answer)
    result = await runner.invoke(Invocation(owner_id, key, entry, call, timeout_ms, memory_mb))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sluice.runtime.protocol import Response, Result

RespondCallback = Callable[[Response], None]
#: Answers a ``store`` request of user code (a data_store prop's call); raises
#: ``errors.SluiceError`` to fail that call in user code.
StoreCallback = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Invocation:
    """One call into user code. ``call`` is the protocol's call object (kind, props, …)."""

    owner_id: str
    worker_key: str
    entry: str
    call: dict[str, Any]
    timeout_ms: int
    memory_mb: int
    env: dict[str, str] | None = None
    #: Answers the invocation's data store calls; None: they fail.
    on_store: StoreCallback | None = None


class Runner(Protocol):
    async def invoke(self, inv: Invocation, on_respond: RespondCallback | None = None) -> Result:
        """Run ``inv``; its result, user errors included (``result.error``). Raises
        ``errors.RunnerCrashed`` when the runner died before answering."""
        ...

    async def invoke_many(
        self, invs: Sequence[Invocation], on_respond: Sequence[RespondCallback | None]
    ) -> list[Result]:
        """Run invocations of one account and one worker key together (the batch path);
        their results in order. Raises ``errors.RunnerCrashed`` when the runner died before
        answering them all (none of the results is used then)."""
        ...

    async def evict(self, owner_id: str, worker_key: str) -> None:
        """Stop the warm worker of ``worker_key`` (``dc_x:*`` for every version of dc_x)."""
        ...


class FakeRunner:
    """A ``Runner`` answering every invocation with ``answer(inv)`` (which may raise, e.g.
    ``RunnerCrashed``); ``responses(inv)`` are streamed to ``on_respond`` first. The
    invocations are kept in ``calls``."""

    def __init__(
        self,
        answer: Callable[[Invocation], Result],
        responses: Callable[[Invocation], list[Response]] | None = None,
    ) -> None:
        self.answer = answer
        self.responses = responses
        self.calls: list[Invocation] = []
        self.evicted: list[tuple[str, str]] = []
        #: The size of each ``invoke_many``.
        self.batches: list[int] = []

    async def invoke(self, inv: Invocation, on_respond: RespondCallback | None = None) -> Result:
        self.calls.append(inv)
        if self.responses is not None and on_respond is not None:
            for response in self.responses(inv):
                on_respond(response)
        return self.answer(inv)

    async def invoke_many(
        self, invs: Sequence[Invocation], on_respond: Sequence[RespondCallback | None]
    ) -> list[Result]:
        self.batches.append(len(invs))
        pairs = zip(invs, on_respond, strict=True)
        return [await self.invoke(inv, respond) for inv, respond in pairs]

    async def evict(self, owner_id: str, worker_key: str) -> None:
        self.evicted.append((owner_id, worker_key))
