"""The supervised pool of Node runners: one process per account, started on first use.

Accounts never share a process, and with a sandbox (``sandbox.py``) each runner lives in its
account's jail, seeing only the component files that account's invocations use. A runner that
died is replaced on the next invocation. Past
``max_runners`` the least recently used runner with nothing in flight is stopped, so idle
accounts cost no memory (its warm workers go with it; the next call starts them again).
Inside a runner a few worker threads serve all of the account's deployments (``js/hosts.mjs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sluice import errors, metrics
from sluice.runtime import protocol
from sluice.runtime.port import Invocation, RespondCallback
from sluice.runtime.protocol import Result
from sluice.runtime.runner import NodeRunner
from sluice.runtime.sandbox import Sandbox


@dataclass(frozen=True)
class PoolConfig:
    node: str = "node"
    max_runners: int = 8
    #: Warm worker threads per runner: one per deployment, each its own realm (docs/runtime.md,
    #: "Warm workers").
    max_workers_per_runner: int = 16
    worker_idle_ms: int = 300_000
    #: Seconds past an invocation's time-out before Python gives up on the runner.
    deadline_grace_seconds: float = 10.0


#: An account's jail uid, as stored with it (``storage.accounts.jail_uid``); None when the
#: owner is no account (then the sandbox picks one for this process).
UidOf = Callable[[str], Awaitable[int | None]]


class RunnerPool:
    def __init__(
        self, config: PoolConfig, sandbox: Sandbox | None = None, uid_of: UidOf | None = None
    ) -> None:
        self.config = config
        #: The jails runners start in; None runs Node directly (SLUICE_SANDBOX=off).
        self.sandbox = sandbox
        self.uid_of = uid_of
        self._runners: dict[str, NodeRunner] = {}
        # One lock for choosing victims and starting runners: two accounts starting at once
        # must not both evict (and close) the same runner.
        self._spawn_lock = asyncio.Lock()
        # Callers holding a runner between choosing it and their result: never evicted.
        self._leases: dict[str, int] = {}
        self._closed = False

    async def __aenter__(self) -> RunnerPool:
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.open)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def invoke(self, inv: Invocation, on_respond: RespondCallback | None = None) -> Result:
        """Run ``inv`` in its account's runner (``port.Runner``); raises
        ``errors.RunnerCrashed`` when the runner died during it."""
        runner = await self._runner_for(inv.owner_id)
        started = time.monotonic()
        try:
            await runner.stage(_paths(inv))
            result = await self._call(runner, inv, on_respond)
        finally:
            self._leases[inv.owner_id] -= 1
        error = result.error or {}
        code = None if result.ok else str(error.get("code") or "error")
        metrics.invocation(str(inv.call.get("kind") or "call"), time.monotonic() - started, code)
        if not result.ok and error.get("code") == protocol.RUNNER_CRASHED:
            raise errors.RunnerCrashed(str(error.get("message") or "the Node runner crashed"))
        return result

    async def invoke_many(
        self, invs: Sequence[Invocation], on_respond: Sequence[RespondCallback | None]
    ) -> list[Result]:
        """Run invocations of one account and worker key together (``port.Runner``): one
        ``invoke_batch`` message, what their calls share sent once (docs/runner-protocol.md).
        Invocations that differ in anything but their call go one by one."""
        if not invs:
            return []
        first = invs[0]
        if len(invs) == 1 or any(
            (inv.owner_id, inv.worker_key, inv.entry, inv.env, inv.timeout_ms, inv.memory_mb)
            != (first.owner_id, first.worker_key, first.entry, first.env, first.timeout_ms,
                first.memory_mb)
            or inv.call.get("steps")  # a workflow's: its steps' paths go one by one
            for inv in invs
        ):  # fmt: skip
            pairs = zip(invs, on_respond, strict=True)
            return list(await asyncio.gather(*(self.invoke(i, r) for i, r in pairs)))
        shared = _shared(invs)
        runner = await self._runner_for(first.owner_id)
        started = time.monotonic()
        try:
            await runner.stage(_paths(first))
            entry, sandbox = first.entry, self.sandbox
            if sandbox is not None:  # the jail's path: the host's is not in it
                entry = sandbox.jail_path(entry)
            message = {
                "worker_key": first.worker_key,
                "entry": entry,
                "env": first.env or {},
                "limits": {"timeout_ms": first.timeout_ms, "memory_mb": first.memory_mb},
                "shared": shared,
            }
            calls = [
                ({k: v for k, v in inv.call.items() if k not in shared}, respond, inv.on_store)
                for inv, respond in zip(invs, on_respond, strict=True)
            ]
            deadline = first.timeout_ms / 1000 + self.config.deadline_grace_seconds
            results = await runner.call_many(message, calls, deadline)
            if sandbox is not None:
                for result in results:
                    _errors_at_host_paths(sandbox, result)
        finally:
            self._leases[first.owner_id] -= 1
        elapsed = time.monotonic() - started
        kind = str(first.call.get("kind") or "call")
        crashed = None
        for result in results:
            error = result.error or {}
            code = None if result.ok else str(error.get("code") or "error")
            metrics.invocation(kind, elapsed, code)
            if not result.ok and error.get("code") == protocol.RUNNER_CRASHED:
                crashed = str(error.get("message") or "the Node runner crashed")
        if crashed is not None:
            raise errors.RunnerCrashed(crashed)
        return results

    async def _call(
        self, runner: NodeRunner, inv: Invocation, on_respond: RespondCallback | None
    ) -> Result:
        entry, call, sandbox = inv.entry, inv.call, self.sandbox
        if sandbox is not None:  # the jail's paths: the host's are not in it
            entry = sandbox.jail_path(entry)
            # A workflow's steps (a list, each with its module's entry); an action's
            # ``steps`` is the run's context object, passed as it is.
            if isinstance(call.get("steps"), list):
                call = {**call, "steps": [_step_in_jail(sandbox, s) for s in call["steps"]]}
        message = {
            "type": "invoke",
            "worker_key": inv.worker_key,
            "entry": entry,
            "env": inv.env or {},
            "limits": {"timeout_ms": inv.timeout_ms, "memory_mb": inv.memory_mb},
            "call": call,
        }
        # The runner enforces timeout_ms itself; the deadline only catches a runner that broke.
        deadline = inv.timeout_ms / 1000 + self.config.deadline_grace_seconds
        result = await runner.call(message, on_respond, deadline, inv.on_store)
        if sandbox is not None:
            _errors_at_host_paths(sandbox, result)
        return result

    async def evict(self, owner_id: str, worker_key: str) -> None:
        """Stop the warm worker of ``worker_key`` (``dc_x:*`` for every version of dc_x)."""
        runner = self._runners.get(owner_id)
        if runner is not None and runner.alive:
            await runner.call({"type": "evict", "worker_key": worker_key})

    async def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for owner, runner in list(self._runners.items()):
            if runner.alive:
                result = await runner.call({"type": "stats"})
                out[owner] = {"pid": runner.pid, **(result.value or {})}
        return out

    @property
    def usable(self) -> bool:
        """False once closing: no invocation is taken any more."""
        return not self._closed

    def runner(self, owner_id: str) -> NodeRunner | None:
        return self._runners.get(owner_id)

    async def _runner_for(self, owner_id: str) -> NodeRunner:
        """The account's live runner, leased to the caller (who must release it)."""
        if self._closed:
            raise RuntimeError("the runner pool is closed")
        runner = self._runners.get(owner_id)
        if runner is not None and runner.alive:
            self._leases[owner_id] = self._leases.get(owner_id, 0) + 1
            return runner
        async with self._spawn_lock:
            runner = self._runners.get(owner_id)
            if runner is not None and runner.alive:
                self._leases[owner_id] = self._leases.get(owner_id, 0) + 1
                return runner
            if runner is not None:
                await runner.close(grace=0)
                metrics.runner_restarted()  # it died: this account's runner starts again
            await self._make_room()
            uid = None
            if self.sandbox is not None and self.sandbox.is_root and self.uid_of is not None:
                uid = await self.uid_of(owner_id)
            runner = NodeRunner(
                owner_id,
                node=self.config.node,
                max_workers=self.config.max_workers_per_runner,
                idle_ms=self.config.worker_idle_ms,
                sandbox=self.sandbox,
                uid=uid,
            )
            await runner.start()
            self._runners[owner_id] = runner
            self._leases[owner_id] = self._leases.get(owner_id, 0) + 1
            return runner

    async def _make_room(self) -> None:
        """Stop least recently used idle runners until one more fits. The cap is soft: when
        every runner is busy, the new one starts anyway rather than making a caller wait."""
        live = sorted((r.last_used, owner) for owner, r in self._runners.items() if r.alive)
        excess = len(live) - self.config.max_runners + 1
        for _, owner in live:
            if excess <= 0:
                break
            runner = self._runners.get(owner)
            if runner is None or runner.in_flight or self._leases.get(owner, 0):
                continue
            del self._runners[owner]
            await runner.close()
            excess -= 1

    async def close(self) -> None:
        self._closed = True
        runners, self._runners = list(self._runners.values()), {}
        for runner in runners:
            with contextlib.suppress(Exception):
                await runner.close()
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.close)


def _step_in_jail(sandbox: Sandbox, step: Any) -> Any:
    if isinstance(step, dict) and isinstance(step.get("entry"), str):
        return {**step, "entry": sandbox.jail_path(step["entry"])}
    return step


def _errors_at_host_paths(sandbox: Sandbox, result: Result) -> None:
    """An error's message and stack name the jail's paths: back to the host's, which the
    engine knows how to scrub (``engine/components/components.scrub_paths``)."""
    found = [result.error] if result.error else []
    found += [s["error"] for s in result.steps if isinstance(s.get("error"), dict)]
    for error in found:
        for name in ("message", "stack"):
            if isinstance(error.get(name), str):
                error[name] = sandbox.host_text(error[name])


def _shared(invs: Sequence[Invocation]) -> dict[str, Any]:
    """The parts of the calls that every one of them has, the same (a source's props, its db
    snapshot, its limits): sent once with the batch."""
    first = invs[0].call
    missing = object()
    return {
        key: value
        for key, value in first.items()
        if all((other := inv.call.get(key, missing)) is value or other == value for inv in invs[1:])
    }


def _paths(inv: Invocation) -> list[str]:
    """The files an invocation loads: its entry and, for a workflow, each step's module."""
    paths = [inv.entry]
    for step in inv.call.get("steps") or ():
        if isinstance(step, dict) and isinstance(step.get("entry"), str):
            paths.append(step["entry"])
    return paths


__all__ = ["Invocation", "PoolConfig", "RunnerPool", "protocol"]  # Invocation: from port
