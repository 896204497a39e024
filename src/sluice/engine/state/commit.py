"""The one writer of what invocations did: every result of a source's invocation, a workflow's
run and a run's ``$.send`` is stored here, each in one transaction (concurrent ones share a
group commit: ``database.GroupWriter``).

A transaction holds, together: the job's done mark (``mark_done``, so "done" and the results commit
or roll back as one), the events (emits, ``$errors``, ``$.send.emit``/``sse``), one ``emit``
job per (listener, event) carrying the chain of workflows it went through, or a delivery per
(webhook, event) (``engine/outbound/webhooks.py``; an event is never stored without its deliveries),
the db state, the run, log lines, and the trims of the
retention windows. After the commit, never before, the live streams hear what was stored and
the job worker is woken for the jobs enqueued (``Commit._published``).

On one ``database.Writer`` (inline on SQLite). What an answer *means* (a run's status, its
``$errors`` error, a source's failure) is decided before, in ``domain/outcomes.py``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import (
    dedupe,
    error_events,
    limits,
    log_events,
    outcomes,
    routing,
    states,
    text,
)
from sluice.domain.deployments import Deployment
from sluice.domain.events import Event, LogLine
from sluice.domain.jobs import EmitJob, Emitter, Listener, ReleaseJob, ResumeJob, SendJob
from sluice.domain.outcomes import Item, SourceResults, SourceStored
from sluice.domain.runs import Run
from sluice.domain.states import JobKind, RunStatus
from sluice.engine.outbound import webhooks
from sluice.engine.queue.jobs import Finish, FinishMany
from sluice.engine.state import broker, quotas
from sluice.engine.state.broker import Broker
from sluice.storage import database, deliveries, events, jobs, runs, sources, subscriptions
from sluice.storage import workflows as workflow_store
from sluice.storage.deliveries import NewDelivery

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Sends performed by a ``send`` job after the run is stored; the others are stored with it.
DEFERRED_SENDS = ("http", "email", "s3")


class _Batch:
    """One transaction's events and the deliveries they cause, for one emitter."""

    def __init__(
        self,
        conn: Connection,
        owner_id: str,
        emitter: tuple[Emitter, str],
        now_ms: int,
        *,
        chain: list[str] | None = None,
        max_hops: int = 0,
    ) -> None:
        """``emitter``: who emits, and its id."""
        self.conn, self.owner_id, self.now_ms = conn, owner_id, now_ms
        self.emitter, self.emitter_id = emitter
        self.chain, self.max_hops = chain, max_hops
        self.stored: list[Event] = []
        self.log_lines: list[LogLine] = []
        self.queued = 0
        #: Deliveries to webhooks stored (``engine/outbound/deliveries.py`` posts them).
        self.deliveries = 0
        self._links: list[routing.Link] | None = None
        #: Event rows not inserted yet (``defer``): one statement for a batch's events.
        self._deferred: list[dict[str, Any]] | None = None
        #: Bytes stored for the account, charged once (``Commit._sources_transaction``).
        self.charge = 0

    def defer(self) -> None:
        """From now on, events are inserted by ``flush``, all at once."""
        self._deferred = []

    def flush(self) -> None:
        if self._deferred:
            events.insert_rows_sync(self.conn, self._deferred)
            self._deferred = []

    def append(self, items: list[Item]) -> list[str]:
        """Store events of the emitter; their ids."""
        if not items:
            return []
        stored = events.append_events_sync(
            self.conn,
            emitter_id=self.emitter_id,
            owner_id=self.owner_id,
            now_ms=self.now_ms,
            items=items,
            deferred=self._deferred,
        )
        self.stored.extend(stored)
        return [event.id for event in stored]

    def deliver(
        self, event_id: str, channel: str, event: Any, *, also_to: str | None = None
    ) -> None:
        """One ``emit`` job per listener of a stored event (``also_to``: one more, the global
        error workflow), or a delivery per webhook listening. With a ``chain`` (the workflows
        the event went through), a listener on it is skipped (never a loop), and nothing goes
        past ``max_hops``."""
        made: list[NewDelivery] = []
        self._route(event_id, channel, event, also_to, made)
        self._store(made)

    def deliver_all(self, stored: Sequence[tuple[str, str, Any]]) -> None:
        """``deliver`` for each ``(event_id, channel, event)``, their webhook deliveries
        stored in one statement."""
        made: list[NewDelivery] = []
        for event_id, channel, event in stored:
            self._route(event_id, channel, event, None, made)
        self._store(made)

    def _store(self, made: list[NewDelivery]) -> None:
        if made:
            deliveries.insert_many_sync(self.conn, made, now_ms=self.now_ms)
            self.deliveries += len(made)

    def _route(
        self,
        event_id: str,
        channel: str,
        event: Any,
        also_to: str | None,
        made: list[NewDelivery],
    ) -> None:
        if self._links is None:
            patterns = routing.emitter_patterns(self.emitter_id)
            self._links = subscriptions.from_emitter(self.conn, self.owner_id, patterns)
        listeners = routing.listeners(self._links, self.emitter_id, channel)
        if also_to and also_to not in listeners:
            listeners.append(also_to)
        for listener in listeners:
            if self.chain is not None and listener in self.chain:
                continue  # it is on this event's way already: never a loop
            if self.chain is not None and self.max_hops and len(self.chain) >= self.max_hops:
                log.warning(
                    "forwarding stopped after %d hops",
                    len(self.chain),
                    extra={"action": "hops_exceeded", "emitter_id": self.emitter_id},
                )
                return
            kind = Listener.of_id(listener)
            if kind == Listener.WEBHOOK:  # a webhook: its own queue and slots
                payload = {
                    "event_id": event_id,
                    "emitter_id": self.emitter_id,
                    "channel": channel,
                    "event": event,
                }
                made.append(webhooks.new_delivery(self.owner_id, listener, payload))
                continue
            hops = None if self.chain is None else tuple(self.chain)
            emit = EmitJob(event_id, self.emitter_id, channel, event, kind, hops, self.emitter)
            self.enqueue(JobKind.EMIT, listener, emit.to_json())

    def enqueue(
        self,
        kind: JobKind,
        target_id: str,
        payload: dict[str, Any],
        *,
        run_after_ms: int | None = None,
    ) -> None:
        jobs.enqueue_sync(
            self.conn,
            kind=kind,
            owner_id=self.owner_id,
            target_id=target_id,
            payload=payload,
            now_ms=self.now_ms,
            run_after_ms=run_after_ms,
        )
        self.queued += 1

    def log(self, invocation_id: str, lines: list[dict[str, Any]]) -> None:
        self.log_lines += events.append_logs_sync(
            self.conn,
            emitter_id=self.emitter_id,
            owner_id=self.owner_id,
            invocation_id=invocation_id,
            entries=lines,
        )


class Commit:
    def __init__(self, db: AsyncEngine, settings: Settings, clock: Clock, broker: Broker) -> None:
        self.settings = settings
        self.clock = clock
        #: What this process committed, for live streams (SSE) and the job worker.
        self.broker = broker
        self.writer = database.Writer(db)
        self._grouped = database.GroupWriter(self.writer)  # runs' and sources' transactions
        #: Each account's stored bytes against its quota, counted in these transactions.
        self.quota = quotas.StorageQuota(settings.storage_quota_mb, clock, self.writer)
        # Events, log lines and runs added per emitter since its last trim, in this process.
        self._trims = limits.TrimSchedule()

    def dispose(self) -> None:
        self.writer.dispose()

    async def write(self, transaction: Callable[[Connection], T]) -> T:
        """Any other write on the same writer (the e-mail throttle's slots)."""
        return await self.writer(transaction)

    def _published(self, batch: _Batch) -> None:
        """After the commit, never before: live streams (``engine/streams.py``) see only
        durable events and log lines; the job worker wakes up for the jobs enqueued."""
        hub, emitter_id = self.broker, batch.emitter_id
        if batch.stored and hub.subscribers(broker.emits_topic(emitter_id)):
            hub.publish(broker.emits_topic(emitter_id), list(batch.stored))
        if batch.log_lines and hub.subscribers(broker.logs_topic(emitter_id)):
            hub.publish(broker.logs_topic(emitter_id), list(batch.log_lines))
        if batch.queued:
            hub.publish(broker.JOBS, [batch.queued])
        if batch.deliveries:
            hub.publish(broker.DELIVERIES, [batch.deliveries])

    # ---- a source's invocation ----------------------------------------------------------------

    async def source(
        self,
        deployment: Deployment,
        strategy: str | None,
        results: SourceResults,
        mark_done: Finish | None,
    ) -> SourceStored | None:
        """Store a source invocation's results with its deployment's row locked (dedupe and the
        db limit see the store as it is now); None when the source was deleted while it ran."""
        [stored] = await self.sources(deployment, strategy, [(results, mark_done)])
        if isinstance(stored, Exception):
            raise stored
        return stored

    async def sources(
        self,
        deployment: Deployment,
        strategy: str | None,
        batch: Sequence[tuple[SourceResults, Finish | None]],
        *,
        finish_many: FinishMany | None = None,
    ) -> list[SourceStored | Exception | None]:
        """Store the results of many invocations of one source (the batch path: a claim's
        queued events of one source) in one transaction, in order: one lock of its row, one
        read of its subscribers, dedupe and the db limit applied run after run, their events
        inserted in one statement and their bytes charged to the quota once (a batch may pass
        the quota by its own size before the next is refused). Each result's ``mark_done``
        (its job's done mark) runs in the same transaction; or ``finish_many`` marks them all
        in one statement first, and a run whose claim was not current any more is stored
        not at all (``errors.LeaseLost`` in its place).

        A run that cannot be stored fails alone: the transaction rolls back and is made again
        without it, and its place in the answer holds the exception (``errors.LeaseLost`` for
        a job another worker holds now: fenced, nothing of it stored); the others commit.
        None in a place: the source was deleted while it ran. The runs share their ``hops``
        (one source's runs on requests: none). A failure of the store itself (``NotReady``)
        raises: nothing was stored."""
        if not batch:
            return []
        first = batch[0][0].hops
        if any(results.hops != first for results, _ in batch):
            raise ValueError("the runs of one batch must share their hops")
        now_ms = self.clock.now_ms()
        answers: list[SourceStored | Exception | None] = [None] * len(batch)
        left = list(range(len(batch)))
        chain = None if first is None else [*first, deployment.id]
        shared: list[_Batch] = []  # the transaction's, once one committed
        while left:
            failed: dict[int, Exception] = {}
            attempt = [(position, *batch[position]) for position in left]
            transaction = self._sources_transaction(
                deployment, strategy, attempt, failed, shared, now_ms, chain, finish_many
            )
            try:
                stored = await self._grouped(transaction)
            except Exception:
                if not failed:
                    raise  # the store's own failure: nothing was stored
                # That run alone fails (its own retry or lease path); the others again.
                position, exc = next(iter(failed.items()))
                answers[position] = exc
                left.remove(position)
                shared.clear()
                continue
            for position, one in zip(left, stored, strict=True):
                answers[position] = one
            break
        if shared and left:
            self._published(shared[0])
        return answers

    def _sources_transaction(
        self,
        deployment: Deployment,
        strategy: str | None,
        attempt: list[tuple[int, SourceResults, Finish | None]],
        failed: dict[int, Exception],
        shared: list[_Batch],
        now_ms: int,
        chain: list[str] | None,
        finish_many: FinishMany | None,
    ) -> Callable[[Connection], list[SourceStored | Exception | None]]:
        """The transaction of ``sources`` over the runs of ``attempt`` (their positions): the
        first run that raises is put in ``failed``; the ``_Batch`` of the last try in
        ``shared``."""

        def transaction(conn: Connection) -> list[SourceStored | Exception | None]:
            fenced: set[int] = set()
            if finish_many is not None:
                positions = [position for position, _results, _done in attempt]
                fenced = set(positions) - finish_many(conn, positions)
            batch = _Batch(
                conn,
                deployment.owner_id,
                (Emitter.SOURCE, deployment.id),
                now_ms,
                chain=chain,
                max_hops=self.settings.max_hops,
            )
            batch.defer()
            shared[:] = [batch]
            failed.clear()
            stored: list[SourceStored | Exception | None] = []
            for position, results, mark_done in attempt:
                if position in fenced:  # another worker holds its job now: nothing of it
                    stored.append(errors.LeaseLost())
                    continue
                try:
                    stored.append(
                        self._source_run(conn, batch, deployment, strategy, results, mark_done)
                    )
                except Exception as exc:
                    failed[position] = exc
                    raise
            batch.flush()
            if batch.charge:
                self.quota.charge_sync(conn, deployment.owner_id, batch.charge, now_ms)
            return stored

        return transaction

    def _source_run(
        self,
        conn: Connection,
        batch: _Batch,
        deployment: Deployment,
        strategy: str | None,
        results: SourceResults,
        mark_done: Finish | None,
    ) -> SourceStored | None:
        """One invocation's results, in the transaction of ``sources``."""
        now_ms = batch.now_ms
        if mark_done is not None:
            mark_done(conn)
        current = sources.lock_sync(conn, deployment.id)
        if current is None:
            return None  # deleted while it ran: nothing to keep
        kept = results
        owner = deployment.owner_id
        if self.quota.enabled and self.quota.over_sync(conn, owner, now_ms):
            # Nothing of the run is kept but why: its emits, db writes and logs are not.
            kept = _over_quota(results, self.quota.error())
        db_error = self._source_db(conn, deployment.id, kept)
        error, error_lines = outcomes.source_failure(kept.error, db_error)
        # Emits for later wait in $in, outside dedupe: their delivery is the emit.
        later = [e for e in kept.emits if routing.scheduled_at(e.get("meta"), now_ms)]
        now = [e for e in kept.emits if not routing.scheduled_at(e.get("meta"), now_ms)]
        decision = dedupe.apply(strategy, current.dedupe_state, now, now_ms)
        if strategy is not None and decision.state != current.dedupe_state:
            sources.set_dedupe_state_sync(conn, deployment.id, decision.state)
        dropped = [reason for _emit, reason in decision.dropped]
        lines = kept.logs + [{"ts": now_ms, "level": "warn", "msg": r} for r in dropped]
        lines += [{"ts": now_ms, "level": "error", "msg": line} for line in error_lines]
        items: list[Item] = [
            (str(e["meta"].get("name") or ""), e.get("event"), dict(e.get("meta") or {}))
            for e in decision.emitted
        ]
        if kept.error_event is not None and error is not None:
            # Its subscribers (a workflow archiving the source's errors) hear it like an emit.
            items.append((states.ERRORS, kept.error_event(error), {}))
        stored_before = len(batch.stored)
        event_ids = batch.append(items)
        batch.deliver_all(
            [
                (event_id, channel, payload)
                for event_id, (channel, payload, _meta) in zip(event_ids, items, strict=True)
            ]
        )
        self._schedule(batch, later)
        batch.log(kept.invocation_id, lines)
        if lines:  # its $logs subscribers hear them (one event per invocation, not kept)
            logged = log_events.event(
                lines, emitter_id=deployment.id, invocation_id=kept.invocation_id
            )
            batch.deliver(kept.invocation_id, states.LOGS, logged)
        self._trim_source(batch, deployment.id, added=len(event_ids), lines=len(lines))
        if self.quota.enabled:
            size = sum(quotas.size_of(e.payload, e.meta) for e in batch.stored[stored_before:])
            size += sum(quotas.size_of(line.get("msg")) for line in lines)
            if db_error is None and kept.db_writes:
                size += quotas.size_of(kept.db_writes)
            batch.charge += size  # charged once for the batch, at its end
        return SourceStored(event_ids, items, dropped, lines, error)

    @staticmethod
    def _schedule(batch: _Batch, later: list[dict[str, Any]]) -> None:
        """Scheduled emits: stored in ``$in`` (listed, deletable there), each with a
        ``release`` job due at its ``delivery_ts``."""
        items: list[Item] = [(states.QUEUED, e.get("event"), dict(e["meta"])) for e in later]
        for event_id, (_channel, _payload, meta) in zip(batch.append(items), items, strict=True):
            due = routing.scheduled_at(meta, batch.now_ms)
            batch.enqueue(
                JobKind.RELEASE, batch.emitter_id, ReleaseJob(event_id).to_json(), run_after_ms=due
            )

    async def release(
        self, owner_id: str, deployment_id: str, event_id: str, mark_done: Finish
    ) -> bool:
        """A scheduled emit's time has come: taken out of ``$in`` and emitted on its own
        channel (a new event, delivered to that channel's listeners). False when it is no
        longer in ``$in`` (deleted: cancelled) or its source is gone."""
        now_ms = self.clock.now_ms()
        batch: _Batch | None = None

        def transaction(conn: Connection) -> bool:
            nonlocal batch
            mark_done(conn)
            if sources.lock_sync(conn, deployment_id) is None:
                return False
            queued = events.take_sync(conn, deployment_id, event_id, states.QUEUED)
            if queued is None:
                return False
            batch = _Batch(conn, owner_id, (Emitter.SOURCE, deployment_id), now_ms)
            meta = {k: v for k, v in queued.meta.items() if k != "delivery_ts"}
            item: Item = (str(meta.get("name") or ""), queued.payload, meta)
            [emitted] = batch.append([item])
            batch.deliver(emitted, item[0], item[1])
            return True

        released = await self._grouped(transaction)
        if released and batch is not None:
            self._published(batch)
        return released

    def _source_db(
        self, conn: Connection, deployment_id: str, results: SourceResults
    ) -> dict[str, Any] | None:
        """Apply the invocation's db writes unless the store would pass ``max_db_bytes`` (then
        none of them, and the limit's error)."""
        if not (results.db_writes or results.db_deletes):
            return None
        # The store as it is now (the row is locked): concurrent runs cannot add up.
        state = sources.read_state_sync(conn, deployment_id)
        error = limits.check_db(
            state, results.db_writes, results.db_deletes, self.settings.max_db_bytes
        )
        if error is None:
            sources.write_state_sync(conn, deployment_id, results.db_writes, results.db_deletes)
        return error

    def _trim_source(self, batch: _Batch, emitter_id: str, *, added: int, lines: int) -> None:
        # Trimming walks the retention window, so do it once per tenth of the window: storage
        # holds at most 10% more than the setting, at a fraction of the cost.
        keep_events, keep_logs = self.settings.event_retention, self.settings.log_retention
        conn = batch.conn
        if self._trims.due(("events", emitter_id), added=added, retention=keep_events):
            batch.flush()  # the window counts the events of this transaction too
            events.trim_sync(conn, emitter_id, keep_events)
        if self._trims.due(("logs", emitter_id), added=lines, retention=keep_logs):
            events.trim_logs_sync(conn, emitter_id, keep_logs)

    # ---- a workflow's run ---------------------------------------------------------------------

    async def run(
        self,
        run: Run,
        *,
        global_errors: bool,
        db_writes: dict[str, dict[str, Any]],
        hops: Sequence[str],
        mark_done: Finish | None,
        sends_from: int | None = None,
    ) -> bool:
        """Store a run and everything it caused; False when the workflow was deleted while it
        ran (nothing stored). A failed run's ``$errors`` event goes to the workflow's ``$errors``
        subscribers and, with ``global_errors``, to the account's global error workflow.

        A paused run (``run.pause``) gets its ``resume`` job, due at the pause's end, in the
        same transaction. ``sends_from`` (a paused run carried on): the run is stored already,
        with its sends before that index; it is updated, not inserted."""
        now_ms = self.clock.now_ms()
        chain, hops_max = [*hops, run.workflow_id], self.settings.max_hops
        trim = self._trims.due(
            ("runs", run.workflow_id), added=1, retention=self.settings.run_retention
        )
        batch: _Batch | None = None

        def trim_runs(conn: Connection) -> None:
            runs.insert_gathered_sync(conn)  # the group's new runs count
            runs.trim_sync(conn, run.workflow_id, self.settings.run_retention)
            events.trim_sync(conn, run.workflow_id, self.settings.event_retention)

        def transaction(conn: Connection) -> bool:
            nonlocal batch
            if mark_done is not None:
                mark_done(conn)
            if not workflow_store.exists_sync(conn, run.owner_id, run.workflow_id):
                return False  # deleted while it ran
            over = self.quota.enabled and self.quota.over_sync(conn, run.owner_id, now_ms)
            if over:
                # Stored as failed, with nothing of what it did: only why.
                _refuse_run(run, self.quota.error())
                db_writes.clear()
            if run.pause is not None:
                self._pause(conn, run, now_ms)
            if sends_from is None:
                # A group commit's runs in one insert at the end of the group's work.
                runs.insert_sync(conn, run, at_end=True)
            else:
                runs.update_sync(conn, run, sends_from)
            self._step_db(conn, run.workflow_id, db_writes)
            if trim and not database.at_end(conn, ("trim", run.workflow_id), trim_runs):
                trim_runs(conn)
            batch = _Batch(
                conn,
                run.owner_id,
                (Emitter.WORKFLOW, run.workflow_id),
                now_ms,
                chain=chain,
                max_hops=hops_max,
            )
            if run.status == RunStatus.ERROR and not over:
                self._errors(batch, run, global_errors)
            if not over and (lines := log_events.run_lines(run.steps)):
                logged = log_events.event(lines, emitter_id=run.workflow_id, invocation_id=run.id)
                batch.deliver(run.id, states.LOGS, logged)
            self._sends(batch, run, sends_from or 0)
            if self.quota.enabled and not over:
                size = quotas.size_of(run.event, run.context, run.steps, run.error)
                size += sum(
                    quotas.size_of(p, m) for e in batch.stored for p, m in [(e.payload, e.meta)]
                )
                if db_writes:
                    size += quotas.size_of(db_writes)
                self.quota.charge_sync(conn, run.owner_id, size, now_ms, at_end=True)
            return True

        done = await self._grouped(transaction)
        if done and batch is not None:
            self._published(batch)
        return done

    @staticmethod
    def _errors(batch: _Batch, run: Run, global_errors: bool) -> None:
        """A failed run's ``$errors`` event, to its subscribers and (``global_errors``) to the
        account's global error workflow."""
        error_workflow = (
            workflow_store.error_workflow_id_sync(batch.conn, run.owner_id)
            if global_errors
            else None
        )
        payload = error_events.event(run.error or {}, run.event, run.context)
        [event_id] = batch.append([(states.ERRORS, payload, {})])
        batch.deliver(event_id, states.ERRORS, payload, also_to=error_workflow)

    def _step_db(
        self, conn: Connection, workflow_id: str, db_writes: dict[str, dict[str, Any]]
    ) -> None:
        for step_id, db in db_writes.items():
            writes, deletes = db.get("writes") or {}, db.get("deletes") or []
            # The worker refuses a set() past the limit; this is the backstop for a result that
            # did not come from it (the store as it is now, under this transaction).
            state = runs.step_states_sync(conn, [step_id]).get(step_id, {})
            if limits.check_db(state, writes, deletes, self.settings.max_db_bytes):
                extra = {"action": "db_limit", "workflow": workflow_id, "step": step_id}
                log.warning(
                    "step %s's db writes are over max_db_bytes: not saved", step_id, extra=extra
                )
                continue
            runs.write_step_state_sync(conn, workflow_id, step_id, writes, deletes)

    @staticmethod
    def _pause(conn: Connection, run: Run, now_ms: int) -> None:
        """The ``resume`` job of a paused run, due when its wait ends (its resume or cancel
        URL moves it to now: ``engine/runs/pauses.py``); the pause keeps its id."""
        assert run.pause is not None
        job_id = jobs.enqueue_sync(
            conn,
            kind=JobKind.RESUME,
            owner_id=run.owner_id,
            target_id=run.workflow_id,
            payload=ResumeJob(run.id).to_json(),
            now_ms=now_ms,
            run_after_ms=max(int(run.pause["due_ms"]), now_ms),
        )
        run.pause = {**run.pause, "job_id": job_id}

    @staticmethod
    def _sends(batch: _Batch, run: Run, start: int) -> None:
        """``$.send.emit`` and ``$.send.sse`` events stored now; the others as ``send`` jobs
        (from index ``start``: the earlier sends of a resumed run were stored before)."""
        for idx, send in enumerate(run.sends):
            if idx < start:
                continue
            config = send.get("config") or {}
            if send["type"] == "emit":
                channel = str(config.get("channel") or "")
                if len(channel) > text.MAX_CHANNEL_CHARS:  # the runner fails such a step
                    continue
                raw = config.get("raw_event")
                [event_id] = batch.append([(channel, {"raw_event": raw}, {})])
                batch.deliver(event_id, channel, raw)
            elif send["type"] == "sse":
                payload = {"channel": config.get("channel"), "payload": config.get("payload")}
                batch.append([(states.SSE, payload, {})])
            elif send["type"] in DEFERRED_SENDS:
                batch.enqueue(JobKind.SEND, run.workflow_id, SendJob(run.id, idx).to_json())

    # ---- a run's $.send -----------------------------------------------------------------------

    async def send_outcome(
        self, run_id: str, idx: int, outcome: dict[str, Any], mark_done: Finish
    ) -> None:
        """A performed ``$.send``'s outcome, written into its run with the job's done mark."""
        status = str(outcome.get("status") or "failed")

        def transaction(conn: Connection) -> None:
            mark_done(conn)
            runs.set_send_sync(
                conn, run_id, idx, status=status, outcome=outcome, now_ms=self.clock.now_ms()
            )

        await self.writer(transaction)


def _over_quota(results: SourceResults, error: errors.SluiceError) -> SourceResults:
    """A source's results when its account is over its storage quota: only the error."""
    return dataclasses.replace(
        results,
        emits=[],
        db_writes={},
        db_deletes=[],
        logs=[],
        error={"name": "StorageQuotaExceeded", "code": "STORAGE_QUOTA", "message": error.message},
        error_event=None,
    )


def _refuse_run(run: Run, error: errors.SluiceError) -> None:
    """A workflow run of an account over its storage quota: failed, its steps' records,
    sends and pause dropped."""
    run.status = RunStatus.ERROR
    run.error = {"name": "StorageQuotaExceeded", "code": "STORAGE_QUOTA", "message": error.message}
    run.steps = []
    run.sends = []
    run.pause = None
    run.response = None
