"""Running a deployed source in Node and keeping what it did.

Before: props decrypted, ``$auth`` loaded, the db snapshot read (no transaction is held while
Node runs). After, in one transaction with the deployment's row locked: dedupe, events stored,
db writes applied, logs kept. A run's emits are durable when ``invoke`` returns.

Limits (``domain/limits.py``) are enforced here, on what the runner returned: emits past
``max_emits_per_invocation`` are dropped and fail the invocation (``EMIT_LIMIT``); db writes
that would make the store larger than ``max_db_bytes`` are not applied, none of them, and fail
it (``DB_LIMIT``), checked against the store as it is in the transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import PLATFORM_VERSION, errors, ids, metrics
from sluice.clock import Clock, iso_ms
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import components as rules
from sluice.domain import error_events, limits, states, text
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.domain.outcomes import SourceResults, SourceStored
from sluice.engine.auth.credentials import CREDENTIAL_ERRORS, Credentials
from sluice.engine.components import invocations
from sluice.engine.components.components import Components, scrub_paths
from sluice.engine.queue.jobs import Finish, FinishMany
from sluice.engine.state.commit import Commit
from sluice.engine.state.data_stores import DataStores
from sluice.runtime import protocol
from sluice.runtime.port import Invocation, RespondCallback, Runner
from sluice.runtime.protocol import Result
from sluice.storage import database, sources

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchRun:
    """One run of a batch (``Invoker.run_many``): its event, its job's done mark, and who
    hears its ``respond()``."""

    event: Any
    mark_done: Finish | None
    on_respond: RespondCallback | None = None


@dataclass
class InvocationOutcome:
    """What one invocation did, after persistence."""

    invocation_id: str
    result: Result
    event_ids: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def secret_aad(deployment_id: str, prop: str) -> str:
    return f"deployed_components:{deployment_id}:props.{prop}"


class Invoker:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        clock: Clock,
        commit: Commit,
        reader: database.Reader | None = None,
        *,
        credentials: Credentials,
        stores: DataStores | None = None,
    ) -> None:
        self.db = db
        #: Connected accounts' ``$auth``, OAuth tokens refreshed (``engine/auth/credentials.py``).
        self.credentials = credentials
        #: Answers the source's data_store calls.
        self.stores = stores
        self.pool = pool
        self.components = components
        self.cipher = cipher
        self.settings = settings
        self.clock = clock
        self.reader = reader
        #: The one writer of results (shared with the workflow executor).
        self.commit = commit

    def endpoint_url(self, endpoint_id: str | None) -> str | None:
        if endpoint_id is None:
            return None
        return self.settings.endpoint_url(endpoint_id)

    async def invoke(
        self,
        deployment: Deployment,
        call: dict[str, Any],
        *,
        on_respond: RespondCallback | None = None,
        snapshot: dict[str, Any] | None = None,
        mark_done: Finish | None = None,
        timeout_seconds: float | None = None,
        hops: list[str] | None = None,
    ) -> InvocationOutcome:
        """``call`` is ``{"kind": "run", "event": …}`` or ``{"kind": "hook", "hook": …}``.

        ``snapshot`` is the db state when the caller read it with the deployment;
        ``timeout_seconds`` replaces the source time-out (HTTP sources answered at once)."""
        component = await self.components.by_id(deployment.component_id)
        refused = None
        try:
            props = await self.props_for(deployment, component)
        except CREDENTIAL_ERRORS as exc:  # an account to reconnect: the run fails, no Node
            props, refused = {}, Result.failure(exc.code, exc.message)
        if snapshot is None:
            async with self.db.connect() as conn:
                snapshot = await sources.read_state(conn, deployment.id)
        entry = await self.components.materialize(component)
        invocation_id = ids.random_token(27)
        timeout_ms = int((timeout_seconds or self.settings.source_timeout_seconds) * 1000)
        call = {**call, "props": props, "db": snapshot}
        invocation = self._invocation(deployment, component, entry, invocation_id, call, timeout_ms)
        try:
            result = refused or await self.pool.invoke(invocation, on_respond)
        except errors.RunnerCrashed as exc:
            if mark_done is not None:
                raise  # a job: nothing is stored, and the job worker runs it again
            # Run by hand (or a hook): its caller sees the crash as the run's error.
            result = Result.failure(protocol.RUNNER_CRASHED, exc.message)
        if result.error and result.error.get("stack"):
            result.error["stack"] = scrub_paths(result.error["stack"], entry.parent)
        crashed = bool(result.error and result.error.get("code") == protocol.RUNNER_CRASHED)
        failed_run = None
        if call.get("kind") == "run" and not crashed:
            event = call.get("event")

            def failed_run(error: dict[str, Any]) -> dict[str, Any]:
                return self.error_event(deployment, invocation_id, event, error)

        return await self.persist(
            deployment,
            component,
            invocation_id,
            result,
            mark_done,
            error_event=failed_run,
            hops=hops,
        )

    async def run_many(
        self,
        deployment: Deployment,
        runs: Sequence[BatchRun],
        *,
        snapshot: dict[str, Any],
        timeout_seconds: float | None = None,
        finish_many: FinishMany | None = None,
    ) -> list[InvocationOutcome | Exception]:
        """The batch path: ``run()`` of one source on many events (a claim's queued requests
        of it), each a job. What is the same for every run (the component, its props and
        ``$auth``, its file) is made once; the runs go to the runner together
        (``Runner.invoke_many``) and their results are stored in one transaction
        (``Commit.sources``), each with its job's done mark.

        A run that throws is a run like any other (its error, logs and ``$errors`` event are
        stored). A run whose results cannot be stored (its lease lost: ``errors.LeaseLost``;
        or another error) gets the exception in its place, and the others are stored. A
        runner that crashed raises ``errors.RunnerCrashed``: nothing of the batch is stored,
        and each job runs again."""
        component = await self.components.by_id(deployment.component_id)
        refused: errors.SluiceError | None = None
        try:
            props = await self.props_for(deployment, component)
        except CREDENTIAL_ERRORS as exc:  # an account to reconnect: the runs fail, no Node
            props, refused = {}, exc
        entry = await self.components.materialize(component)
        timeout_ms = int((timeout_seconds or self.settings.source_timeout_seconds) * 1000)
        # Every run's id from one random draw (a draw is a system call), as events' emit ids.
        drawn = ids.random_token(27 * len(runs))
        invocation_ids = [drawn[27 * n : 27 * (n + 1)] for n in range(len(runs))]
        invocations = [
            self._invocation(
                deployment,
                component,
                entry,
                invocation_id,
                {"kind": "run", "event": run.event, "props": props, "db": snapshot},
                timeout_ms,
            )
            for invocation_id, run in zip(invocation_ids, runs, strict=True)
        ]
        if refused is not None:
            results = [Result.failure(refused.code, refused.message) for _ in runs]
        else:
            results = await self.pool.invoke_many(invocations, [run.on_respond for run in runs])
        kept: list[tuple[SourceResults, Finish | None]] = []
        for invocation_id, run, result in zip(invocation_ids, runs, results, strict=True):
            if result.error and result.error.get("stack"):
                result.error["stack"] = scrub_paths(result.error["stack"], entry.parent)
            failed_run = self._failed_run(deployment, invocation_id, run.event)
            results_kept = self._kept(invocation_id, result, failed_run, None, always=True)
            assert results_kept is not None
            kept.append((results_kept, None if finish_many is not None else run.mark_done))
        stored = await self.commit.sources(
            deployment, component.shape.get("dedupe"), kept, finish_many=finish_many
        )
        return [
            one
            if isinstance(one, Exception)
            else _stored(InvocationOutcome(invocation_id, result), one)
            for invocation_id, result, one in zip(invocation_ids, results, stored, strict=True)
        ]

    def _failed_run(
        self, deployment: Deployment, invocation_id: str, event: Any
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def failed_run(error: dict[str, Any]) -> dict[str, Any]:
            return self.error_event(deployment, invocation_id, event, error)

        return failed_run

    def _invocation(
        self,
        deployment: Deployment,
        component: SavedComponent,
        entry: Path,
        invocation_id: str,
        call: dict[str, Any],
        timeout_ms: int,
    ) -> Invocation:
        """The runner call (docs/runner-protocol.md) with the limits the worker enforces."""
        max_emits = self.settings.max_emits_per_invocation
        return invocations.of_deployment(
            self.settings,
            deployment,
            component,
            entry,
            # Lone surrogates (JavaScript's, in events and db values) become U+FFFD on the
            # runner's UTF-8 pipe (protocol.encode).
            (
                {
                    **call,
                    # The runner keeps one emit past it (docs/runner-protocol.md).
                    **({"max_emits": max_emits} if max_emits > 0 else {}),
                    # The worker refuses a set() past it at once (Python checks again).
                    "max_db_bytes": self.settings.max_db_bytes,
                    "context": {
                        "id": invocation_id,
                        "deployment_id": deployment.id,
                        "owner_id": deployment.owner_id,
                    },
                }
            ),
            timeout_ms=timeout_ms,
            on_store=self.stores.runner_call(deployment.owner_id) if self.stores else None,
        )

    def error_event(
        self, deployment: Deployment, invocation_id: str, event: Any, failure: dict[str, Any]
    ) -> dict[str, Any]:
        """A source's ``run()`` that threw, as an ``$errors`` event (the shape of a workflow's,
        ``cellId`` the source's id), for the source's ``$errors`` subscribers."""
        ts = iso_ms(self.clock.now_ms())
        context = {
            "id": invocation_id,
            "ts": ts,
            "deployment_id": deployment.id,
            "source_type": "COMPONENT",
            "verified": False,
            "owner_id": deployment.owner_id,
            "platform_version": PLATFORM_VERSION,
            "emitter_id": deployment.id,
        }
        error = error_events.error_of(failure, cell_id=deployment.id, ts=ts)
        return error_events.event(error, event, context)

    async def props_for(self, deployment: Deployment, component: SavedComponent) -> dict[str, Any]:
        """The values Node builds ``this`` from (docs/runner-protocol.md), secrets decrypted."""
        values: dict[str, Any] = dict(deployment.configured_props)
        for name, token in deployment.secret_props.items():
            values[name] = json.loads(self.cipher.decrypt(token, secret_aad(deployment.id, name)))
        for prop in component.configurable_props:
            name, typ = prop["name"], prop["type"]
            if typ == rules.HTTP:
                values[name] = {"endpoint": self.endpoint_url(deployment.endpoint_id)}
            elif typ == rules.TIMER:
                timer = values.get(name) or {}
                values[name] = {
                    "intervalSeconds": timer.get("intervalSeconds"),
                    "cron": timer.get("cron"),
                    "timezone": timer.get("timezone"),
                }
            elif typ == "app" and isinstance(values.get(name), dict):
                account_id = values[name].get("authProvisionId")
                found = await self.credentials.auth(deployment.owner_id, str(account_id))
                values[name] = {"$auth": found[1] if found else {}}
        return values

    async def persist(
        self,
        deployment: Deployment,
        component: SavedComponent,
        invocation_id: str,
        result: Result,
        mark_done: Finish | None = None,
        *,
        error_event: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        hops: list[str] | None = None,
    ) -> InvocationOutcome:
        """Keep what the invocation did (``engine/state/commit.py``), after the limits: emits past
        the cap are dropped and fail it; a db write the worker refused keeps none. ``mark_done``
        runs in the same transaction (a job's done mark). A failed run (``error_event`` builds
        its ``$errors`` event) is kept like any other: emits and logs."""
        outcome = InvocationOutcome(invocation_id, result)
        results = self._kept(invocation_id, result, error_event, hops, always=mark_done is not None)
        if results is None:
            return outcome  # nothing to keep: no transaction at all
        stored = await self.commit.source(
            deployment, component.shape.get("dedupe"), results, mark_done
        )
        return _stored(outcome, stored)

    def _kept(
        self,
        invocation_id: str,
        result: Result,
        error_event: Callable[[dict[str, Any]], dict[str, Any]] | None,
        hops: list[str] | None,
        *,
        always: bool = False,
    ) -> SourceResults | None:
        """What of ``result`` is stored, after the limits (``persist``); None when nothing is
        (unless ``always``)."""
        result.emits, over = limits.cap_emits(result.emits, self.settings.max_emits_per_invocation)
        if over is not None:
            metrics.limit_hit(limits.EMIT_LIMIT)
        if over is not None and result.error is None:
            result.ok, result.error = False, over
        if result.error is not None and result.error.get("code") == limits.DB_LIMIT:
            # The worker refused a set() past the limit: as when Python refuses it, none of the
            # invocation's db writes are kept.
            result.db_writes, result.db_deletes = {}, []
        logs = list(result.logs)
        busy = result.emits or result.db_writes or result.db_deletes or logs or result.error
        if not busy and not always:
            return None
        emits, db_writes, db_deletes, unstorable = text.storable_results(
            list(result.emits), dict(result.db_writes), list(result.db_deletes)
        )
        now_ms = self.clock.now_ms()
        logs.extend({"ts": now_ms, "level": "error", "msg": reason} for reason in unstorable)
        return SourceResults(
            invocation_id, emits, db_writes, db_deletes, logs, result.error, error_event, hops
        )


def _stored(outcome: InvocationOutcome, stored: SourceStored | None) -> InvocationOutcome:
    """The outcome of a run whose results ``engine/state/commit.py`` stored (None: its source was
    deleted meanwhile)."""
    if stored is None:
        return outcome
    result = outcome.result
    if stored.error is not None:
        result.ok, result.error = False, stored.error
    outcome.event_ids = [
        i
        for i, item in zip(stored.event_ids, stored.items, strict=True)
        if item[0] != states.ERRORS
    ]
    outcome.dropped = stored.dropped
    result.logs = stored.lines
    return outcome
