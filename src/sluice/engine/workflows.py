"""Workflow definitions: create, update, delete, read (``/v1/workflows``).

A workflow is a trigger and ordered steps. Each step is a code step (a module in Pipedream's
``defineComponent`` shape, saved like a component: files laid out on disk, npm packages
installed, loaded once to check it) or an action step (a saved or registry action, by id or
key, with configured props). Steps keep their ``c_`` id across updates when their name stays;
a change of the trigger or of the steps makes a new deployment (``d_``).

Triggers: ``http`` (an endpoint, ``custom_response`` when its steps answer with
``$.respond``), ``timer`` (``intervalSeconds`` or ``cron`` + ``timezone``), ``source`` (a
subscription to a source's channel) and ``manual`` (runs started over the API only).

Each account has a global error workflow (``accounts.error_workflow_id``), created with it: one
code step that e-mails a summary of each error (``domain/error_workflow.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import components as rules
from sluice.domain import error_workflow, schedules, text
from sluice.domain import props as prop_rules
from sluice.domain import registry as registry_rules
from sluice.domain.routing import Link
from sluice.engine.components import ComponentInput, Components
from sluice.storage import apps, runs, sources, subscriptions, timers
from sluice.storage import components as component_store
from sluice.storage import workflows as store
from sluice.storage.components import SavedComponent
from sluice.storage.workflows import Workflow

TRIGGER_TYPES = ("http", "timer", "source", "manual")
STEP_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,63}$")
MAX_STEPS = 100
_REF = "{{"
_RESPOND = re.compile(r"\$\.?respond\s*\(")


@dataclass(frozen=True)
class WorkflowInput:
    """The body of ``POST /v1/workflows`` (and the workflow.yaml file); ``None`` fields of an
    update keep their current value."""

    name: str | None = None
    trigger: dict[str, Any] | None = None
    steps: list[dict[str, Any]] | None = None
    active: bool | None = None
    global_errors: bool | None = None


def step_secret_aad(workflow_id: str, step_id: str, prop: str) -> str:
    return f"workflows:{workflow_id}:{step_id}:props.{prop}"


def default_error_workflow(owner_id: str, *, base_url: str, now_s: int) -> Workflow:
    """The global error workflow an account starts with (stored without running Node: its
    code step is laid out on disk at its first run)."""
    return Workflow(**error_workflow.fields(owner_id, base_url=base_url, now_s=now_s))


async def create_default_error_workflow(
    conn: AsyncConnection, owner_id: str, *, base_url: str, now_s: int
) -> Workflow:
    workflow = default_error_workflow(owner_id, base_url=base_url, now_s=now_s)
    await store.insert(conn, workflow)
    await store.set_error_workflow_id(conn, owner_id, workflow.id)
    return workflow


class Workflows:
    def __init__(
        self,
        db: AsyncEngine,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self.db = db
        self.components = components
        self.cipher = cipher
        self.settings = settings
        self.clock = clock
        self._responds: dict[tuple[str, str], bool] = {}
        self._present: set[Path] = set()

    # ---- reading ----------------------------------------------------------------------------

    async def get(self, owner_id: str, workflow_id: str) -> Workflow:
        async with self.db.connect() as conn:
            found = await store.get(conn, owner_id, workflow_id)
        if found is None:
            raise errors.NotFound(f"workflow {workflow_id} not found")
        return found

    def endpoint_url(self, workflow: Workflow) -> str | None:
        if workflow.endpoint_id is None:
            return None
        return self.settings.resolved_endpoint_base_url + workflow.endpoint_id

    def to_api(self, workflow: Workflow, *, error_workflow_id: str | None = None) -> dict[str, Any]:
        trigger = dict(workflow.trigger)
        if workflow.trigger_type == "http":
            trigger["endpoint_url"] = self.endpoint_url(workflow)
        steps = []
        for step in workflow.steps:
            out: dict[str, Any] = {"id": step["id"], "name": step["name"], "type": step["type"]}
            if step["type"] == "code":
                out["code"] = step["code"]
            else:
                out["action"] = step["action"]
                out["component_id"] = step["component_id"]
            out["props"] = step.get("props") or {}
            if step.get("secret_props"):
                out["secret_props"] = sorted(step["secret_props"])
            steps.append(out)
        return {
            "id": workflow.id,
            "name": workflow.name,
            "active": workflow.active,
            "trigger": trigger,
            "steps": steps,
            "deployment_id": workflow.deployment_id,
            "endpoint_url": self.endpoint_url(workflow),
            "is_error_workflow": workflow.id == error_workflow_id,
            "global_errors": workflow.global_errors,
            "created_at": workflow.created_at,
            "updated_at": workflow.updated_at,
        }

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
        name = _check_name(body.name)
        trigger = await self._check_trigger(owner_id, body.trigger)
        steps = await self._build_steps(owner_id, workflow_id, body.steps, previous=[])
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
            await self._auto_subscribe(conn, workflow, now_s)
        return workflow

    async def update(self, owner_id: str, workflow_id: str, body: WorkflowInput) -> Workflow:
        current = await self.get(owner_id, workflow_id)
        changed = False
        trigger, steps = current.trigger, current.steps
        if body.trigger is not None:
            trigger = await self._check_trigger(owner_id, body.trigger)
            changed = changed or trigger != current.trigger
        if body.steps is not None:
            steps = await self._build_steps(owner_id, workflow_id, body.steps, current.steps)
            changed = changed or steps != current.steps
        endpoint_id = current.endpoint_id
        if trigger["type"] == "http":
            endpoint_id = endpoint_id or ids.random_token(20).lower()
        else:
            endpoint_id = None
        updated = replace(
            current,
            name=_check_name(body.name) if body.name is not None else current.name,
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
        return updated

    async def delete(self, owner_id: str, workflow_id: str) -> None:
        workflow = await self.get(owner_id, workflow_id)
        async with self.db.begin() as conn:
            await store.delete(conn, workflow.id)
            await subscriptions.delete_for_source(conn, workflow.id)
            await runs.delete_for_workflow(conn, workflow.id)
            if await store.error_workflow_id(conn, owner_id) == workflow.id:
                await store.set_error_workflow_id(conn, owner_id, None)

    async def set_error_workflow(self, owner_id: str, workflow_id: str | None) -> None:
        async with self.db.begin() as conn:
            if workflow_id is not None and await store.get(conn, owner_id, workflow_id) is None:
                raise errors.NotFound(f"workflow {workflow_id} not found", field="workflow_id")
            await store.set_error_workflow_id(conn, owner_id, workflow_id)

    async def error_workflow_id(self, owner_id: str) -> str | None:
        async with self.db.connect() as conn:
            return await store.error_workflow_id(conn, owner_id)

    # ---- triggers ---------------------------------------------------------------------------

    async def _check_trigger(self, owner_id: str, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise errors.InvalidRequest(
                'trigger must be an object such as {"type": "http"}', field="trigger"
            )
        kind = raw.get("type")
        if kind not in TRIGGER_TYPES:
            raise errors.InvalidRequest(
                f"trigger.type must be one of {', '.join(TRIGGER_TYPES)}, not {kind!r}",
                field="trigger.type",
            )
        allowed = {
            "http": {"type", "custom_response"},
            "timer": {"type", "intervalSeconds", "interval_seconds", "cron", "timezone"},
            "source": {"type", "source_id", "event_name"},
            "manual": {"type"},
        }[kind]
        for key in raw:
            if key not in allowed:
                raise errors.InvalidRequest(
                    f"a {kind} trigger takes {', '.join(sorted(allowed))}; not {key!r}",
                    field=f"trigger.{key}",
                )
        if kind == "http":
            custom = raw.get("custom_response")
            if custom is not None and not isinstance(custom, bool):
                raise errors.InvalidRequest(
                    "custom_response must be true or false", field="trigger.custom_response"
                )
            return {"type": "http", "custom_response": custom}
        if kind == "timer":
            timer = rules.check_timer_value(raw, "trigger", errors.InvalidRequest)
            schedules.validate(
                schedules.Schedule.from_value(timer),
                "trigger",
                min_interval_seconds=self.settings.timer_min_interval_seconds,
            )
            out = {"type": "timer", **{k: v for k, v in timer.items() if v is not None}}
            return out
        if kind == "source":
            source_id = raw.get("source_id")
            if not isinstance(source_id, str) or not ids.has_prefix(source_id, "dc"):
                raise errors.InvalidRequest(
                    "a source trigger needs source_id, a deployed source (dc_…)",
                    field="trigger.source_id",
                )
            event_name = raw.get("event_name") or ""
            if not isinstance(event_name, str) or event_name.startswith("$"):
                raise errors.InvalidRequest(
                    "event_name is a channel of the source (empty: the default channel)",
                    field="trigger.event_name",
                )
            text.check_name(event_name, "trigger.event_name", 300)
            async with self.db.connect() as conn:
                if await sources.get(conn, owner_id, source_id) is None:
                    raise errors.NotFound(
                        f"source {source_id} not found", field="trigger.source_id"
                    )
            return {"type": "source", "source_id": source_id, "event_name": event_name}
        return {"type": "manual"}

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

    async def _auto_subscribe(self, conn: AsyncConnection, workflow: Workflow, now_s: int) -> None:
        """``POST /v1/auto_subscriptions``: new workflows are subscribed to their listeners."""
        for listener_id, event_name in await subscriptions.auto_for(conn, workflow.owner_id):
            if listener_id == workflow.id:
                continue
            await subscriptions.create(
                conn, workflow.owner_id, Link(workflow.id, listener_id, event_name), now_s=now_s
            )

    # ---- steps ------------------------------------------------------------------------------

    async def _build_steps(
        self,
        owner_id: str,
        workflow_id: str,
        raw_steps: Any,
        previous: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        if not isinstance(raw_steps, list) or not raw_steps:
            raise errors.InvalidRequest("steps must be a non-empty list", field="steps")
        if len(raw_steps) > MAX_STEPS:
            raise errors.InvalidRequest(f"a workflow has at most {MAX_STEPS} steps", field="steps")
        ids_by_name = {s["name"]: s["id"] for s in previous}
        seen: set[str] = set()
        checked_hashes: set[str] = set()
        out = []
        for i, raw in enumerate(raw_steps):
            where = f"steps[{i}]"
            if not isinstance(raw, dict):
                raise errors.InvalidRequest(
                    'each step is {"name", "code"} or {"name", "action", "props"}', field=where
                )
            unknown = set(raw) - {"name", "code", "action", "props"}
            if unknown:
                raise errors.InvalidRequest(
                    f"unknown step field {sorted(unknown)[0]!r}; a step has name, code or "
                    "action, and props",
                    field=f"{where}.{sorted(unknown)[0]}",
                )
            name = raw.get("name")
            if not isinstance(name, str) or not STEP_NAME.match(name) or name == "trigger":
                raise errors.InvalidRequest(
                    "a step name is an identifier (letters, digits, _; not 'trigger'), read "
                    "by later steps as steps.<name>",
                    field=f"{where}.name",
                )
            if name in seen:
                raise errors.InvalidRequest(f"two steps are named {name!r}", field=f"{where}.name")
            seen.add(name)
            props = raw.get("props") or {}
            if not isinstance(props, dict):
                raise errors.InvalidRequest(
                    "props is an object {name: value}", field=f"{where}.props"
                )
            has_code, has_action = "code" in raw, "action" in raw
            if has_code == has_action:
                raise errors.InvalidRequest(
                    "a step has either code (a module) or action (an action's sc_ id or key)",
                    field=where,
                )
            step_id = ids_by_name.get(name) or ids.new_id("c")
            if has_code:
                step = await self._code_step(owner_id, raw["code"], where, checked_hashes)
                step.update({"id": step_id, "name": name, "props": props})
            else:
                before = next((s for s in previous if s["id"] == step_id), None)
                step = await self._action_step(
                    owner_id, workflow_id, step_id, raw, props, where, before
                )
                step.update({"id": step_id, "name": name})
            out.append(step)
        return out

    async def _code_step(
        self, owner_id: str, code: Any, where: str, checked: set[str]
    ) -> dict[str, Any]:
        if not isinstance(code, str) or not code.strip():
            raise errors.InvalidRequest(
                "code is the step's module source, e.g. export default defineComponent({ async "
                "run({ steps, $ }) { ... } })",
                field=f"{where}.code",
            )
        try:
            prepared = await self.components.prepare(
                ComponentInput(code=code, entry_path="step.mjs")
            )
            if prepared.code_hash not in checked:
                info = await self.components.inspect(owner_id, prepared)
                if not info.get("has_run"):
                    raise errors.InvalidComponent(
                        "the step must export a component with a run method: export default "
                        "defineComponent({ async run({ steps, $ }) { ... } })"
                    )
                checked.add(prepared.code_hash)
        except errors.SluiceError as exc:
            exc.field = f"{where}.code"
            raise
        return {
            "type": "code",
            "code": code,
            "entry_path": prepared.entry_path,
            "code_hash": prepared.code_hash,
            # Its $.service.db store is loaded for each run (Pipedream's per-step db).
            "uses_db": "$.service.db" in code,
        }

    async def _action_step(
        self,
        owner_id: str,
        workflow_id: str,
        step_id: str,
        raw: dict[str, Any],
        props: dict[str, Any],
        where: str,
        before: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        ref = raw["action"]
        if not isinstance(ref, str) or not ref:
            raise errors.InvalidRequest(
                "action is an action's id (sc_…) or key", field=f"{where}.action"
            )
        component = await self._find_action(owner_id, ref, f"{where}.action")
        # Values referring to earlier steps are known only at run time: checked then.
        deferred = {k: v for k, v in props.items() if _has_ref(v)}
        # Secrets left out of an update keep their stored value (as for sources), when the
        # step still uses the same action.
        kept: dict[str, str] = {}
        if before is not None and before.get("component_id") == component.id:
            kept = {k: v for k, v in (before.get("secret_props") or {}).items() if k not in props}
        try:
            configured = prop_rules.check_configured(
                [
                    {**p, "optional": True} if p["name"] in deferred or p["name"] in kept else p
                    for p in component.configurable_props
                ],
                {k: v for k, v in props.items() if k not in deferred},
                max_bytes=self.settings.max_prop_bytes,
            )
        except errors.SluiceError as exc:
            if exc.field and exc.field.startswith("configured_props"):
                exc.field = f"{where}.props" + exc.field[len("configured_props") :]
            raise
        async with self.db.connect() as conn:
            for prop, (account_id, app) in configured.apps.items():
                found = await apps.credentials(conn, self.cipher, owner_id, account_id)
                if found is None or found[0] != app:
                    raise errors.InvalidProps(
                        f"prop {prop!r} needs a connected {app} account; {account_id} is not one"
                        " of this account's",
                        field=f"{where}.props.{prop}",
                    )
        secret = dict(kept)
        for name, value in configured.secret.items():
            secret[name] = self.cipher.encrypt(
                json.dumps(value), step_secret_aad(workflow_id, step_id, name)
            )
        return {
            "type": "action",
            "action": ref,
            "component_id": component.id,
            "props": {**configured.plain, **deferred},
            "secret_props": secret,
        }

    async def _find_action(self, owner_id: str, ref: str, where: str) -> SavedComponent:
        async with self.db.connect() as conn:
            if ids.has_prefix(ref, "sc"):
                found = await component_store.get_deployable(conn, owner_id, ref)
            else:
                found = await component_store.get_by_key(conn, owner_id, ref)
                if found is None:
                    versions = await component_store.registry_versions(conn, ref)
                    newest = registry_rules.latest([c.version for c in versions])
                    found = next((c for c in versions if c.version == newest), None)
        if found is None:
            raise errors.NotFound(
                f"no action {ref!r} in the account or the public registry (publish it with "
                "`sluice publish`)",
                field=where,
            )
        if found.component_type != "action":
            raise errors.InvalidRequest(
                f"{ref} ({found.name}) is a source, not an action; a source triggers a "
                'workflow with {"type": "source", "source_id": "dc_…"}',
                field=where,
            )
        return found

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
                if _RESPOND.search(text):
                    cached = True
                    break
            if len(self._responds) > 4096:
                self._responds.clear()
            self._responds[key] = cached
        return cached

    async def step_entry(self, step: dict[str, Any]) -> Path:
        """The step's module on disk (laid out again when the data directory lost it)."""
        if step["type"] == "code":
            path: Path = self.settings.components_dir / step["code_hash"] / step["entry_path"]
            if path in self._present or path.exists():  # noqa: ASYNC240 - one stat, then cached
                self._present.add(path)
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
                async with self.db.connect() as conn:
                    found = await apps.credentials(
                        conn, self.cipher, workflow.owner_id, str(value["authProvisionId"])
                    )
                values[name] = {"$auth": found[1] if found else {}}
        return values


def _check_name(name: Any) -> str:
    if name is None:
        return "Untitled workflow"
    if not isinstance(name, str) or not name.strip():
        raise errors.InvalidRequest(
            "name is a non-empty string (300 characters at most)", field="name"
        )
    text.check_name(name, "name", 300)
    return name.strip()


def _has_ref(value: Any) -> bool:
    if isinstance(value, str):
        return _REF in value
    if isinstance(value, list):
        return any(_has_ref(v) for v in value)
    if isinstance(value, dict):
        return any(_has_ref(v) for v in value.values())
    return False
