"""Running workflows, and keeping what each run did.

``execute`` runs every step of a workflow in one warm Node worker (a ``workflow`` call, see
docs/runner-protocol.md), then ``persist`` stores, in one transaction together with the job that
asked for the run (``also``):

- the run: its event, context, each step's record (status, return value, exports, logs,
  duration, error), the flow exit, the ``$.respond`` answer and the sends;
- when the run failed, an ``$errors`` event of the workflow (``{error, original_event,
  original_context}``) and one ``emit`` job per listener: every workflow or source subscribed
  to the workflow's ``$errors`` and the account's global error workflow;
- ``$.send.emit`` events (delivered like a source's emits) and ``$.send.sse`` events (the
  workflow's live stream); ``$.send.http/email/s3`` become ``send`` jobs, performed after the
  commit, whose outcome is written into the run.

Loops are impossible: a forwarded event carries the chain of workflows it went through
(``hops``) and never reaches a workflow on its chain again; the global error workflow never
receives its own errors; chains stop after ``max_hops``.

A crashed runner is Sluice's failure, not the run's: ``errors.RunnerCrashed`` goes up to the job
worker, nothing is stored and the job runs again; so a listener runs at least once, and a
stored run never again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import PLATFORM_VERSION, ids
from sluice.clock import Clock, iso_ms
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import error_events, limits, retention, routing, states, text
from sluice.domain.states import JobKind, SendStatus
from sluice.engine import deliveries, sealed, streams
from sluice.engine.broker import Broker
from sluice.engine.jobs import Finish
from sluice.engine.workflows import Workflows
from sluice.runtime.port import Invocation, Runner
from sluice.runtime.protocol import Response, Result
from sluice.storage import database, events, jobs, runs, subscriptions
from sluice.storage import workflows as store
from sluice.storage.runs import Run
from sluice.storage.workflows import Workflow

log = logging.getLogger(__name__)

WORKFLOW_ENTRY = Path(__file__).resolve().parent.parent / "runtime" / "js" / "workflow-entry.mjs"
#: Sends performed by a job after the run is stored; the others are stored with the run.
DEFERRED_SENDS = ("http", "email", "s3")


@dataclass
class RunOutcome:
    """``run`` is None when nothing was stored: the workflow was deleted while it ran."""

    run: Run | None
    result: Result


class Executor:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        workflows: Workflows,
        broker: Broker,
        settings: Settings,
        clock: Clock,
        reader: database.Reader | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        self.db = db
        #: Hot-path reads (the workflow of a job): inline on SQLite.
        self.reader = reader
        self.cipher = cipher or workflows.cipher
        self.pool = pool
        self.workflows = workflows
        self.broker = broker
        self.settings = settings
        self.clock = clock
        self.writer = database.Writer(db)
        self._paths = re.compile(
            r"(?:file://)?(?:"
            + re.escape(str(settings.components_dir))
            + r"/[0-9a-f]{64}/|"
            + re.escape(str(settings.npm_store_dir))
            + r"/[^/\s]+/)"
        )
        self._trims = retention.TrimSchedule()

    # ---- running ----------------------------------------------------------------------------

    async def execute(
        self,
        workflow: Workflow,
        event: Any,
        *,
        source_type: str,
        run_id: str | None = None,
        also: Finish | None = None,
        on_respond: Callable[[Response], None] | None = None,
        hops: Sequence[str] = (),
        replay_of: str | None = None,
        trigger_context: dict[str, Any] | None = None,
    ) -> RunOutcome:
        run_id = run_id or ids.random_token(27)
        now_ms = self.clock.now_ms()
        context: dict[str, Any] = {
            "id": run_id,
            "ts": iso_ms(now_ms),
            "workflow_id": workflow.id,
            "deployment_id": workflow.deployment_id,
            "source_type": source_type,
            "verified": False,
            "owner_id": workflow.owner_id,
            "platform_version": PLATFORM_VERSION,
            "workflow_name": workflow.name,
            "replay": replay_of is not None,
            "hops": list(hops),
            "trace_id": run_id,
            **(trigger_context or {}),
        }
        run_s = self.settings.workflow_timeout_seconds
        step_s = self.settings.workflow_step_timeout_seconds or run_s
        with_db = [step["id"] for step in workflow.steps if step.get("uses_db")]
        states: dict[str, dict[str, Any]] = {}
        if with_db:
            async with self.db.connect() as conn:
                states = await conn.run_sync(runs.step_states_sync, with_db)
        call_steps = [
            {
                "id": step["id"],
                "name": step["name"],
                "entry": str(await self.workflows.step_entry(step)),
                "props": await self.workflows.step_props(workflow, step),
                "timeout_ms": int(step_s * 1000),
                **(
                    {"db": states.get(step["id"], {}), "max_db_bytes": self.settings.max_db_bytes}
                    if step.get("uses_db")
                    else {}
                ),
            }
            for step in workflow.steps
        ]
        responses: list[Response] = []

        def responded(response: Response) -> None:
            responses.append(response)
            if on_respond is not None:
                on_respond(response)

        result = await self.pool.invoke(
            Invocation(
                owner_id=workflow.owner_id,
                worker_key=f"{workflow.id}:{workflow.deployment_id}",
                entry=str(WORKFLOW_ENTRY),
                timeout_ms=int(run_s * 1000),
                memory_mb=self.settings.memory_mb,
                # Events and db values may hold lone surrogates from JavaScript.
                call=text.for_runner(
                    {"kind": "workflow", "event": event, "context": context, "steps": call_steps}
                ),
            ),
            responded,
        )
        run, db_writes = self._record(
            workflow, context, event, result, responses, now_ms, replay_of
        )
        stored = await self.persist(workflow, run, also=also, hops=hops, db_writes=db_writes)
        return RunOutcome(run if stored else None, result)

    def _scrub(self, text: Any) -> Any:
        """Component paths become relative; Sluice's own frames are left out."""
        if not isinstance(text, str):
            return text
        runtime = str(WORKFLOW_ENTRY.parent)
        lines = [line for line in text.split("\n") if runtime not in line]
        return self._paths.sub("", "\n".join(lines))

    def _record(
        self,
        workflow: Workflow,
        context: dict[str, Any],
        event: Any,
        result: Result,
        responses: list[Response],
        now_ms: int,
        replay_of: str | None,
    ) -> tuple[Run, dict[str, dict[str, Any]]]:
        records = [dict(r) for r in result.steps]
        # Code steps' $.service.db writes are applied with the run, not stored in it.
        db_writes = {r["id"]: r.pop("db") for r in records if r.get("db")}
        if not result.ok:
            # The runner ended the call (time-out, memory, a stopped worker): the step that was
            # running gets the runner's error.
            failed = (result.error or {}).get("step")
            done = {r["id"] for r in records}
            step = workflow.step_by_id(failed) if failed else None
            if step is None:
                step = next((s for s in workflow.steps if s["id"] not in done), None)
            if step is not None:
                records.append(
                    {
                        "id": step["id"],
                        "name": step["name"],
                        "status": "error",
                        "return_value": None,
                        "exports": {},
                        "duration_ms": None,
                        "error": dict(result.error or {}),
                    }
                )
        by_step: dict[str, list[dict[str, Any]]] = {}
        loose: list[dict[str, Any]] = []
        for line in result.logs:
            entry = {k: v for k, v in line.items() if k != "step"}
            step_id = line.get("step")
            (by_step.setdefault(step_id, []) if step_id else loose).append(entry)
        for record in records:
            record["logs"] = by_step.get(record["id"], [])
        if records and loose:
            records[-1]["logs"] = records[-1]["logs"] + loose
        status, error = "success", None
        for record in records:
            if record.get("error"):
                record["error"]["stack"] = self._scrub(record["error"].get("stack"))
                record["error"]["message"] = self._scrub(record["error"].get("message"))
            if record["status"] == "error":
                status = "error"
                error = error_events.error_of(
                    record["error"] or {},
                    cell_id=record["id"],
                    ts=iso_ms(now_ms + int(result.duration_ms)),
                )
                error["step_name"] = record["name"]
                break
            if record["status"] == "exited":
                status = "exited"
        response = None
        if responses:
            first = responses[0]
            response = {
                "status": first.status,
                "headers": first.headers,
                "body": first.body,
                "body_encoding": first.body_encoding,
                "immediate": first.immediate,
            }
        sends = []
        for idx, send in enumerate(result.sends):
            kind = str(send.get("type"))
            sends.append(
                {
                    "type": kind,
                    "step": send.get("step"),
                    "config": sealed.seal(self.cipher, send.get("config"), context["id"], idx),
                    "status": SendStatus.QUEUED if kind in DEFERRED_SENDS else "done",
                }
            )
        run = Run(
            id=context["id"],
            owner_id=workflow.owner_id,
            workflow_id=workflow.id,
            deployment_id=workflow.deployment_id,
            status=status,
            event=event,
            context=context,
            steps=records,
            error=error,
            flow_exit=result.flow_exit,
            response=response,
            started_ms=now_ms,
            duration_ms=float(result.duration_ms),
            replay_of=replay_of,
            sends=sends,
        )
        return run, db_writes

    # ---- storing ----------------------------------------------------------------------------

    async def persist(
        self,
        workflow: Workflow,
        run: Run,
        *,
        also: Finish | None,
        hops: Sequence[str],
        db_writes: dict[str, dict[str, Any]] | None = None,
    ) -> bool:
        now_ms = self.clock.now_ms()
        chain = [*hops, workflow.id]
        max_hops = self.settings.max_hops
        trim_runs = self._trims.due(workflow.id, added=1, retention=self.settings.run_retention)

        def transaction(
            conn: Connection,
        ) -> tuple[list[tuple[str, tuple[str, Any, dict[str, Any]]]], int] | None:
            if also is not None:
                also(conn)
            if store.get_sync(conn, workflow.owner_id, workflow.id) is None:
                return None  # deleted while it ran
            runs.insert_sync(conn, run)
            for step_id, db in (db_writes or {}).items():
                writes, deletes = db.get("writes") or {}, db.get("deletes") or []
                # The worker refuses a set() past the limit; this is the backstop for a result
                # that did not come from it (the store as it is now, under this transaction).
                state = runs.step_states_sync(conn, [step_id]).get(step_id, {})
                if limits.check_db(state, writes, deletes, self.settings.max_db_bytes):
                    log.warning(
                        "step %s's db writes are over max_db_bytes: not saved",
                        step_id,
                        extra={"action": "db_limit", "workflow": workflow.id, "step": step_id},
                    )
                    continue
                runs.write_step_state_sync(conn, workflow.id, step_id, writes, deletes)
            if trim_runs:
                runs.trim_sync(conn, workflow.id, self.settings.run_retention)
                events.trim_sync(conn, workflow.id, self.settings.event_retention)
            stored: list[tuple[str, tuple[str, Any, dict[str, Any]]]] = []
            queued = 0

            def append(channel: str, payload: Any) -> str:
                """Store one event of the workflow; its id."""
                item: tuple[str, Any, dict[str, Any]] = (channel, payload, {})
                [event_id] = events.append_sync(
                    conn,
                    emitter_id=workflow.id,
                    owner_id=workflow.owner_id,
                    now_ms=now_ms,
                    items=[item],
                )
                stored.append((event_id, item))
                return event_id

            links = None
            if run.status == "error" or any(s["type"] == "emit" for s in run.sends):
                links = subscriptions.from_emitter(
                    conn, workflow.owner_id, routing.emitter_patterns(workflow.id)
                )

            def forward(listeners: list[str], event_id: str, channel: str, event: Any) -> int:
                """This run's event to its listeners, carrying the chain (``hops``)."""
                return deliveries.forward_sync(
                    conn,
                    workflow.owner_id,
                    workflow.id,
                    listeners,
                    event_id,
                    channel,
                    event,
                    now_ms,
                    chain=chain,
                    max_hops=max_hops,
                )

            if run.status == "error":
                payload = error_events.event(run.error or {}, run.event, run.context)
                event_id = append(states.ERRORS, payload)
                listeners = routing.listeners(links or [], workflow.id, states.ERRORS)
                error_workflow = store.error_workflow_id_sync(conn, workflow.owner_id)
                if workflow.global_errors and error_workflow and error_workflow not in listeners:
                    listeners.append(error_workflow)
                queued += forward(listeners, event_id, states.ERRORS, payload)
            for idx, send in enumerate(run.sends):
                config = send.get("config") or {}
                if send["type"] == "emit":
                    channel = str(config.get("channel") or "")
                    raw = config.get("raw_event")
                    event_id = append(channel, {"raw_event": raw})
                    listeners = routing.listeners(links or [], workflow.id, channel)
                    queued += forward(listeners, event_id, channel, raw)
                elif send["type"] == "sse":
                    append(
                        states.SSE,
                        {"channel": config.get("channel"), "payload": config.get("payload")},
                    )
                elif send["type"] in DEFERRED_SENDS:
                    queued += 1
                    jobs.enqueue_sync(
                        conn,
                        kind=JobKind.SEND,
                        owner_id=workflow.owner_id,
                        target_id=workflow.id,
                        payload={"run_id": run.id, "idx": idx},
                        now_ms=now_ms,
                    )
            return stored, queued

        done = await self.writer(transaction)
        if done is None:
            return False
        stored, queued = done
        # After the commit: live streams see only durable events; the job worker wakes up.
        streams.publish_committed(self.broker, workflow.id, stored, [], queued)
        return True

    # ---- jobs -------------------------------------------------------------------------------

    async def load(self, owner_id: str, workflow_id: str) -> Workflow | None:
        if self.reader is not None:
            return await self.reader(lambda conn: store.get_sync(conn, owner_id, workflow_id))
        async with self.db.connect() as conn:
            return await store.get(conn, owner_id, workflow_id)

    async def handle_delivery(self, job: jobs.Job, finish: Finish) -> RunOutcome | None:
        """An ``emit`` job whose listener is a workflow: an error forwarded (``$errors``) or an
        event emitted by a source or a workflow. None when there was nothing to run."""
        workflow = await self.load(job.owner_id, job.target_id)
        if workflow is None or not workflow.active:
            return None
        payload = job.payload or {}
        hops = [str(h) for h in payload.get("hops") or []]
        if workflow.id in hops:
            return None
        channel = str(payload.get("channel") or "")
        emitter = str(payload.get("emitter_id") or "")
        if channel == states.ERRORS:
            source_type = "ERRORS"
        elif emitter.startswith("p_"):
            source_type = "EMIT"
        else:
            source_type = "COMPONENT"
        return await self.execute(
            workflow,
            payload.get("event"),
            source_type=source_type,
            also=finish,
            hops=hops,
            trigger_context={"emitter_id": emitter, "event_id": payload.get("event_id")},
        )
