"""Workflow definitions: create, update, delete, read (``/v1/workflows``), and what a run
needs of them (each step's module on disk and its props, whether the trigger waits for
``$.respond``).

A workflow is a trigger and ordered steps, checked by ``engine/components/workflow_input.py``.
A change of the trigger or of the steps makes a new deployment (``d_``); timers and source
subscriptions follow the trigger. The global error workflow an account starts with is
``engine/auth/accounts.py``'s (``domain/default_error_workflow.py``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import default_error_workflow, tokens
from sluice.domain.jobs import Ticked
from sluice.domain.routing import Link
from sluice.domain.workflows import Workflow
from sluice.engine.auth.credentials import CREDENTIAL_ERRORS, Credentials
from sluice.engine.components.components import ComponentInput, Components
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.engine.components.env_vars import EnvVars
from sluice.engine.components.subscriptions import auto_subscribe
from sluice.engine.components.workflow_input import (
    WorkflowChecks,
    WorkflowInput,
    check_name,
    step_secret_aad,
)
from sluice.storage import database, runs, subscriptions, timers
from sluice.storage import workflows as store

#: A workflow this process read is read again (its stamp) once this old, even when no process
#: counted a change (``ChangeCounter``: a process that died between its commit and its count).
_RECHECK_MS = 5_000


class Changes(Protocol):
    """A count of changes to workflow rows that every process sees: SQLite's shared
    ``storage/change_counters.ChangeCounter``, PostgreSQL's ``engine/notifications.PushedChanges``
    (None while nobody listens: nothing is trusted then)."""

    def value(self) -> int | None: ...

    def bump(self) -> None: ...


class Workflows:
    def __init__(
        self,
        db: AsyncEngine,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        clock: Clock,
        *,
        credentials: Credentials,
        reader: database.Reader | None = None,
        changes: Changes | None = None,
    ) -> None:
        self.db = db
        #: Hot-path reads (inline on SQLite): the workflow of a run.
        self.reader = reader
        #: Changes to workflow rows, counted across the processes (a SQLite file's shared
        #: counter; PostgreSQL's pushed notifications): moved after each change here commits
        #: (``_changed``).
        self.changes = changes
        #: The workflows read for runs, by id: their stamps, the change count they were read
        #: under and when (``current``).
        self._current: dict[str, tuple[store.Stamp, Workflow, int | None, int]] = {}
        self.credentials = credentials
        self.components = components
        self.cipher = cipher
        #: ``process.env`` of the workflows' code steps.
        self.env_vars = EnvVars(db, cipher, clock)
        self.settings = settings
        self.clock = clock
        self._checks = WorkflowChecks(
            db,
            components,
            cipher,
            settings,
            dynamic=DynamicProps(components, settings, credentials=credentials),
        )
        self._responds: dict[tuple[str, str], bool] = {}
        #: Code steps' modules known to be on disk, by (code hash, entry path).
        self._present: dict[tuple[str, str], Path] = {}

    # ---- reading ----------------------------------------------------------------------------

    async def get(self, owner_id: str, workflow_id: str) -> Workflow:
        found = await self.current(owner_id, workflow_id)
        if found is None:
            raise errors.NotFound(f"workflow {workflow_id} not found")
        return found

    async def current(self, owner_id: str, workflow_id: str) -> Workflow | None:
        """The workflow as stored now, for a run. The copy this process read is used while no
        process has changed a workflow since (``changes``, a memory read: on PostgreSQL only
        while its notifications are heard) and it is under ``_RECHECK_MS`` old; else a small
        row (its stamp: deployment, active, name …) is read, and the whole row (its steps) only
        when the stamp changed."""
        if self.reader is None:
            async with self.db.connect() as conn:
                return await store.get(conn, owner_id, workflow_id)
        # The count first, then the rows: a change counted after this read is seen next time.
        counted = self.changes.value() if self.changes is not None else None
        now_ms = self.clock.now_ms()
        cached = self._current.get(workflow_id)
        if cached is not None and cached[1].owner_id != owner_id:
            cached = None
        if (
            cached is not None
            and counted is not None
            and cached[2] == counted
            and now_ms - cached[3] < _RECHECK_MS
        ):
            return cached[1]
        stamp = await self.reader(lambda conn: store.stamp_sync(conn, owner_id, workflow_id))
        if stamp is None:
            return None
        if cached is not None and cached[0] == stamp:
            found: Workflow | None = cached[1]
        else:
            found = await self.reader(lambda conn: store.get_sync(conn, owner_id, workflow_id))
        if found is not None:
            if len(self._current) > 4096:
                self._current.clear()
            self._current[workflow_id] = (store.stamp_of(found), found, counted, now_ms)
        return found

    def _changed(self) -> None:
        """After a change to a workflow row has committed, before its caller hears of it."""
        if self.changes is not None:
            self.changes.bump()

    def endpoint_url(self, workflow: Workflow) -> str | None:
        if workflow.endpoint_id is None:
            return None
        return self.settings.endpoint_url(workflow.endpoint_id)

    # ---- writing ----------------------------------------------------------------------------

    async def create(self, owner_id: str, body: WorkflowInput) -> Workflow:
        if body.trigger is None:
            raise errors.InvalidRequest(
                'a workflow needs a trigger, e.g. {"type": "http"}', field="trigger"
            )
        if body.steps is None:
            raise errors.InvalidRequest("a workflow needs steps (a list)", field="steps")
        now_s = self.clock.now_ms() // 1000
        workflow_id = ids.new_id("p")
        name = check_name(body.name)
        trigger = await self._checks.trigger(owner_id, body.trigger)
        steps = await self._checks.steps(owner_id, workflow_id, body.steps, previous=[])
        workflow = Workflow(
            id=workflow_id,
            owner_id=owner_id,
            name=name,
            active=True if body.active is None else body.active,
            trigger=trigger,
            steps=steps,
            deployment_id=ids.new_id("d"),
            endpoint_id=ids.random_token(20).lower() if trigger["type"] == "http" else None,
            created_at=now_s,
            updated_at=now_s,
            global_errors=True if body.global_errors is None else body.global_errors,
        )
        async with self.db.begin() as conn:
            await store.insert(conn, workflow)
            await self._sync_trigger(conn, workflow, previous=None)
            await auto_subscribe(conn, workflow.owner_id, workflow.id, now_s)
        return workflow

    async def draft(
        self, owner_id: str, body: WorkflowInput, workflow_id: str | None = None
    ) -> Workflow:
        """The workflow ``body`` describes, checked as a deploy checks it (code steps laid
        out and loaded, action props checked) but stored nowhere: what the builder's Test
        runs. ``workflow_id``: the stored workflow being edited, whose steps' secrets carry
        over by step name."""
        previous = await self.get(owner_id, workflow_id) if workflow_id else None
        draft_id = previous.id if previous is not None else ids.new_id("p")
        if not body.steps:
            raise errors.InvalidRequest("a workflow needs steps (a list)", field="steps")
        trigger = await self._checks.trigger(owner_id, body.trigger or {"type": "manual"})
        steps = await self._checks.steps(
            owner_id, draft_id, body.steps, previous.steps if previous is not None else []
        )
        now_s = self.clock.now_ms() // 1000
        return Workflow(
            id=draft_id,
            owner_id=owner_id,
            name=check_name(body.name),
            active=False,
            trigger=trigger,
            steps=steps,
            # A deployment of its own: a test never runs in the deployed version's worker.
            deployment_id=ids.new_id("d"),
            endpoint_id=None,
            created_at=now_s,
            updated_at=now_s,
            global_errors=False,
        )

    async def update(self, owner_id: str, workflow_id: str, body: WorkflowInput) -> Workflow:
        current = await self.get(owner_id, workflow_id)
        changed = False
        trigger, steps = current.trigger, current.steps
        if body.trigger is not None:
            trigger = await self._checks.trigger(owner_id, body.trigger)
            changed = changed or trigger != current.trigger
        if body.steps is not None:
            steps = await self._checks.steps(owner_id, workflow_id, body.steps, current.steps)
            changed = changed or steps != current.steps
        endpoint_id = current.endpoint_id
        if trigger["type"] == "http":
            endpoint_id = endpoint_id or ids.random_token(20).lower()
        else:
            endpoint_id = None
        updated = replace(
            current,
            name=check_name(body.name) if body.name is not None else current.name,
            active=current.active if body.active is None else body.active,
            global_errors=(
                current.global_errors if body.global_errors is None else body.global_errors
            ),
            trigger=trigger,
            steps=steps,
            endpoint_id=endpoint_id,
            deployment_id=ids.new_id("d") if changed else current.deployment_id,
            updated_at=self.clock.now_ms() // 1000,
        )
        async with self.db.begin() as conn:
            await store.replace(conn, updated)
            await self._sync_trigger(conn, updated, previous=current)
        self._changed()
        return updated

    async def delete(self, owner_id: str, workflow_id: str) -> None:
        workflow = await self.get(owner_id, workflow_id)
        async with self.db.begin() as conn:
            await store.delete(conn, workflow.id)
            await subscriptions.delete_for_source(conn, workflow.id)
            await runs.delete_for_workflow(conn, workflow.id)
            if await store.error_workflow_id(conn, owner_id) == workflow.id:
                await store.set_error_workflow_id(conn, owner_id, None)
        self._changed()

    async def set_error_workflow(self, owner_id: str, workflow_id: str | None) -> None:
        async with self.db.begin() as conn:
            if workflow_id is not None and await store.get(conn, owner_id, workflow_id) is None:
                raise errors.NotFound(f"workflow {workflow_id} not found", field="workflow_id")
            await store.set_error_workflow_id(conn, owner_id, workflow_id)

    async def error_workflow_id(self, owner_id: str) -> str | None:
        async with self.db.connect() as conn:
            return await store.error_workflow_id(conn, owner_id)

    # ---- triggers ---------------------------------------------------------------------------

    async def _sync_trigger(
        self, conn: AsyncConnection, workflow: Workflow, *, previous: Workflow | None
    ) -> None:
        """Timers and source subscriptions follow the trigger (and ``active``)."""
        now_ms = self.clock.now_ms()
        now_s = now_ms // 1000
        trigger = workflow.trigger
        schedule = None
        if trigger["type"] == "timer":
            schedule = {k: trigger.get(k) for k in ("intervalSeconds", "cron", "timezone")}
        await timers.sync(
            conn,
            deployment_id=workflow.id,
            owner_id=workflow.owner_id,
            ticked=Ticked.WORKFLOW,
            schedule=schedule,
            active=workflow.active,
            now_ms=now_ms,
        )
        old = previous.trigger if previous is not None else None
        if old is not None and old.get("type") == "source" and old != trigger:
            await subscriptions.delete(
                conn,
                workflow.owner_id,
                Link(old["source_id"], workflow.id, old.get("event_name") or ""),
            )
        if trigger["type"] == "source":
            await subscriptions.create(
                conn,
                workflow.owner_id,
                Link(trigger["source_id"], workflow.id, trigger.get("event_name") or ""),
                now_s=now_s,
            )

    # ---- what a run needs -------------------------------------------------------------------

    async def custom_response(self, workflow: Workflow) -> bool:
        """Whether HTTP clients wait for the steps' ``$.respond``: the trigger's
        ``custom_response``, or when unset, whether any step's code calls ``$.respond(``."""
        explicit = workflow.trigger.get("custom_response")
        if explicit is not None:
            return bool(explicit)
        key = (workflow.id, workflow.deployment_id)
        cached = self._responds.get(key)
        if cached is None:
            cached = False
            for step in workflow.steps:
                if step["type"] == "code":
                    text = step["code"]
                else:
                    text = (await self.components.by_id(step["component_id"])).code
                if tokens.calls_respond(text):
                    cached = True
                    break
            if len(self._responds) > 4096:
                self._responds.clear()
            self._responds[key] = cached
        return cached

    async def step_entry(self, step: dict[str, Any]) -> Path:
        """The step's module on disk (laid out again when the data directory lost it)."""
        if step["type"] == "code":
            key = (step["code_hash"], step["entry_path"])
            found = self._present.get(key)
            if found is not None:
                return found
            path: Path = self.settings.components_dir / key[0] / key[1]
            if path.exists():  # noqa: ASYNC240 - one stat, then cached
                if len(self._present) > 4096:
                    self._present.clear()
                self._present[key] = path
                return path
            prepared = await self.components.prepare(
                ComponentInput(code=step["code"], entry_path=step["entry_path"])
            )
            return prepared.entry
        component = await self.components.by_id(step["component_id"])
        entry: Path = await self.components.materialize(component)
        return entry

    async def step_props(self, workflow: Workflow, step: dict[str, Any]) -> dict[str, Any]:
        """Configured values with secrets decrypted and app props as ``{$auth}``."""
        values: dict[str, Any] = dict(step.get("props") or {})
        for name, token in (step.get("secret_props") or {}).items():
            values[name] = json.loads(
                self.cipher.decrypt(token, step_secret_aad(workflow.id, step["id"], name))
            )
        for name, value in list(values.items()):
            if isinstance(value, dict) and set(value) == {"authProvisionId"}:
                try:
                    found = await self.credentials.auth(
                        workflow.owner_id, str(value["authProvisionId"])
                    )
                except CREDENTIAL_ERRORS as exc:
                    exc.details["step"] = step["id"]  # the run's failed step (executor.py)
                    raise
                values[name] = {"$auth": found[1] if found else {}}
        return default_error_workflow.run_props(
            step, values, self.settings.public_url_for(workflow.owner_id)
        )
