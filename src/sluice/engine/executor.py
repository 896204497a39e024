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

A crashed runner is Sluice's failure, not the run's: nothing is stored and the job runs again
(``RunOutcome.crashed``); so a listener runs at least once, and a stored run never again.
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
from sluice.domain import routing, text
from sluice.engine import destinations, streams
from sluice.engine.broker import Broker
from sluice.engine.jobs import Finish, Retry
from sluice.engine.mailer import Mailer
from sluice.engine.workflows import Workflows
from sluice.runtime import protocol
from sluice.runtime.pool import Invocation, RunnerPool
from sluice.runtime.protocol import Response, Result
from sluice.storage import database, events, jobs, runs, subscriptions
from sluice.storage import workflows as store
from sluice.storage.runs import Run
from sluice.storage.workflows import Workflow

log = logging.getLogger(__name__)

WORKFLOW_ENTRY = Path(__file__).resolve().parent.parent / "runtime" / "js" / "workflow-entry.mjs"
ERRORS = "$errors"
#: The channel under which ``$.send.sse`` events are stored (the workflow's live stream).
SSE = "$sse"
#: Job kinds: run a workflow on an event; perform one ``$.send``.
RUN_KIND = "workflow"
SEND_KIND = "send"
#: Sends performed by a job after the run is stored; the others are stored with the run.
DEFERRED_SENDS = ("http", "email", "s3")
EMIT_KIND = "emit"
#: Marks an encrypted value in a stored send config.
SEALED = "$sealed"


@dataclass
class RunOutcome:
    """``run`` is None when nothing was stored: the runner crashed (run it again), or the
    workflow was deleted while it ran."""

    run: Run | None
    result: Result
    crashed: bool = False


class Executor:
    def __init__(
        self,
        db: AsyncEngine,
        pool: RunnerPool,
        workflows: Workflows,
        broker: Broker,
        settings: Settings,
        clock: Clock,
        mailer: Mailer,
        reader: database.Reader | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        self.db = db
        #: Hot-path reads (the workflow of a job): inline on SQLite.
        self.reader = reader
        self.mailer = mailer
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
        self._since_trim: dict[str, int] = {}

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
                **({"db": states.get(step["id"], {})} if step.get("uses_db") else {}),
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
        if result.error and result.error.get("code") == protocol.RUNNER_CRASHED:
            return RunOutcome(None, result, crashed=True)
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
                raw = record["error"] or {}
                error = {
                    "code": str(raw.get("code") or raw.get("name") or "Error"),
                    "msg": raw.get("message") or "",
                    "cellId": record["id"],
                    "ts": iso_ms(now_ms + int(result.duration_ms)),
                    "stack": raw.get("stack")
                    or f"{raw.get('name', 'Error')}: {raw.get('message')}",
                    "name": raw.get("name") or "Error",
                    "step_name": record["name"],
                }
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
                    "config": self._seal(send.get("config"), context["id"], idx),
                    "status": runs.QUEUED if kind in DEFERRED_SENDS else "done",
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

    def _seal(self, config: Any, run_id: str, idx: int) -> Any:
        """A ``$.send.http`` password is stored encrypted (bound to the run and the send)."""
        auth = config.get("auth") if isinstance(config, dict) else None
        if not isinstance(auth, dict) or not isinstance(auth.get("password"), str):
            return config
        token = self.cipher.encrypt(auth["password"], f"run_sends:{run_id}:{idx}:password")
        return {**config, "auth": {**auth, "password": {SEALED: token}}}

    def _unseal(self, config: Any, run_id: str, idx: int) -> dict[str, Any]:
        if not isinstance(config, dict):
            return {}
        auth = config.get("auth")
        if not isinstance(auth, dict):
            return config
        sealed = auth.get("password")
        if isinstance(sealed, dict) and SEALED in sealed:
            password = self.cipher.decrypt(sealed[SEALED], f"run_sends:{run_id}:{idx}:password")
            return {**config, "auth": {**auth, "password": password}}
        return config

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
        trim_runs = self._due_for_trim(workflow.id)

        def transaction(
            conn: Connection,
        ) -> tuple[list[tuple[str, tuple[str, Any, dict[str, Any]]]], int] | None:
            if also is not None:
                also(conn)
            if store.get_sync(conn, workflow.owner_id, workflow.id) is None:
                return None  # deleted while it ran
            runs.insert_sync(conn, run)
            for step_id, db in (db_writes or {}).items():
                runs.write_step_state_sync(
                    conn, workflow.id, step_id, db.get("writes") or {}, db.get("deletes") or []
                )
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
            if run.status == "error":
                payload = {
                    "error": run.error,
                    "original_event": run.event,
                    "original_context": run.context,
                }
                event_id = append(ERRORS, payload)
                listeners = routing.listeners(links or [], workflow.id, ERRORS)
                error_workflow = store.error_workflow_id_sync(conn, workflow.owner_id)
                if workflow.global_errors and error_workflow and error_workflow not in listeners:
                    listeners.append(error_workflow)
                queued += self._forward(
                    conn, workflow, listeners, chain, max_hops, event_id, ERRORS, payload, now_ms
                )
            for idx, send in enumerate(run.sends):
                config = send.get("config") or {}
                if send["type"] == "emit":
                    channel = str(config.get("channel") or "")
                    raw = config.get("raw_event")
                    event_id = append(channel, {"raw_event": raw})
                    listeners = routing.listeners(links or [], workflow.id, channel)
                    queued += self._forward(
                        conn, workflow, listeners, chain, max_hops, event_id, channel, raw, now_ms
                    )
                elif send["type"] == "sse":
                    append(
                        SSE, {"channel": config.get("channel"), "payload": config.get("payload")}
                    )
                elif send["type"] in DEFERRED_SENDS:
                    queued += 1
                    jobs.enqueue_sync(
                        conn,
                        kind=SEND_KIND,
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

    def _forward(
        self,
        conn: Connection,
        workflow: Workflow,
        listeners: list[str],
        chain: list[str],
        max_hops: int,
        event_id: str,
        channel: str,
        event: Any,
        now_ms: int,
    ) -> int:
        count = 0
        for listener in listeners:
            if listener in chain:
                continue  # it is on this event's way already: never a loop
            if len(chain) >= max_hops:
                log.warning(
                    "forwarding stopped after %d hops",
                    len(chain),
                    extra={"action": "hops_exceeded", "workflow_id": workflow.id},
                )
                return count
            jobs.enqueue_sync(
                conn,
                kind=EMIT_KIND,
                owner_id=workflow.owner_id,
                target_id=listener,
                payload={
                    "event_id": event_id,
                    "emitter_id": workflow.id,
                    "channel": channel,
                    "event": event,
                    "hops": chain,
                },
                now_ms=now_ms,
            )
            count += 1
        return count

    def _due_for_trim(self, workflow_id: str) -> bool:
        count = self._since_trim.get(workflow_id, 0) + 1
        if count >= max(1, self.settings.run_retention // 10):
            self._since_trim.pop(workflow_id, None)
            return True
        self._since_trim[workflow_id] = count
        return False

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
        if channel == ERRORS:
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

    async def handle_timer(self, job: jobs.Job, finish: Finish) -> None:
        """A ``timer`` job of a workflow: run it with the tick's event."""
        workflow = await self.load(job.owner_id, job.target_id)
        if workflow is None or not workflow.active:
            return
        outcome = await self.execute(workflow, job.payload, source_type="TIMER", also=finish)
        if outcome.crashed:
            raise Retry(f"the runner crashed running {workflow.id}")

    async def handle_send(self, job: jobs.Job, finish: Finish) -> None:
        """A ``send`` job: perform one ``$.send.http/email/s3`` of a stored run and write its
        outcome into the run. No retries (Pipedream: none for ``$.send.http``): a failure is
        an outcome, kept with the run. ``$.send.email`` with ``dedupe_key`` sends at most one
        message per key per ``error_email_throttle_seconds`` (the global error workflow's
        once-a-day rule)."""
        payload = job.payload or {}
        run_id, idx = str(payload.get("run_id")), int(payload.get("idx", 0))
        async with self.db.connect() as conn:
            send = await runs.get_send(conn, run_id, idx)
            email = await runs.account_email(conn, job.owner_id)
        if send is None or send["status"] != runs.QUEUED:
            return  # the run was trimmed or deleted, or the send was done already
        config = self._unseal(send["config"], run_id, idx)
        kind = send["type"]
        now_ms = self.clock.now_ms()
        throttle_key: str | None = None
        try:
            if kind == "http":
                outcome = await destinations.send_http(
                    config, time_limit=self.settings.send_http_timeout_seconds
                )
            elif kind == "s3":
                outcome = await destinations.send_s3(self.settings, config, now_ms=now_ms)
            else:
                key = config.get("dedupe_key")
                window_ms = self.settings.error_email_throttle_seconds * 1000
                if key is not None:
                    throttle_key = f"email:{key}"
                    slot = throttle_key

                    def claim(conn: Connection) -> bool:
                        return runs.claim_mail_slot_sync(
                            conn, job.owner_id, slot, now_ms=now_ms, window_ms=window_ms
                        )

                    if not await self.writer(claim):
                        throttle_key = None
                        outcome = {
                            "status": "skipped",
                            "reason": f"an e-mail for {key!r} went out less than "
                            f"{self.settings.error_email_throttle_seconds} s ago",
                        }
                        await self._finish_send(run_id, idx, outcome, finish)
                        return
                mail = {k: v for k, v in config.items() if k in ("subject", "text", "html")}
                outcome = await destinations.send_email(self.mailer, to=email, config=mail)
        except destinations.InvalidSend as exc:
            outcome = {"status": "failed", "error": exc.message}
        if throttle_key is not None and outcome.get("status") == "failed":
            released = throttle_key
            await self.writer(
                lambda conn: runs.release_mail_slot_sync(conn, job.owner_id, released, now_ms)
            )
        await self._finish_send(run_id, idx, outcome, finish)

    async def _finish_send(
        self, run_id: str, idx: int, outcome: dict[str, Any], finish: Finish
    ) -> None:
        status = str(outcome.get("status") or "failed")
        now_ms = self.clock.now_ms()

        def transaction(conn: Connection) -> None:
            finish(conn)
            runs.set_send_sync(conn, run_id, idx, status=status, outcome=outcome, now_ms=now_ms)

        await self.writer(transaction)
