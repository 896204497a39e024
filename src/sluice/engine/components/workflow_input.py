"""What a workflow is made of, checked: the body of ``POST /v1/workflows`` (``WorkflowInput``),
its name, its trigger and its steps, as ``engine/components/workflows.py`` stores them.

A step is a code step (a module in Pipedream's ``defineComponent`` shape, saved like a
component: files laid out on disk, npm packages installed, loaded once to check it) or an
action step (a saved or registry action, by id or key, with configured props; secret props are
stored encrypted). Steps keep their ``c_`` id across updates when their name stays.

Triggers: ``http`` (an endpoint, ``custom_response`` when its steps answer with
``$.respond``), ``timer`` (``intervalSeconds`` or ``cron`` + ``timezone``), ``source`` (a
subscription to a source's channel) and ``manual`` (runs started over the API only).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import components as rules
from sluice.domain import props as prop_rules
from sluice.domain import registry as registry_rules
from sluice.domain import schedules, text
from sluice.domain.components import SavedComponent
from sluice.engine.components.components import ComponentInput, Components
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.storage import apps, sources
from sluice.storage import components as component_store

TRIGGER_TYPES = ("http", "timer", "source", "manual")
STEP_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,63}$")
MAX_STEPS = 100
_REF = "{{"
#: The keys each trigger type takes.
_TRIGGER_KEYS = {
    "http": {"type", "custom_response"},
    "timer": {"type", "intervalSeconds", "interval_seconds", "cron", "timezone"},
    "source": {"type", "source_id", "event_name"},
    "manual": {"type"},
}
_STEP_KEYS = {"name", "code", "action", "props"}


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


def check_name(name: Any) -> str:
    if name is None:
        return "Untitled workflow"
    if not isinstance(name, str) or not name.strip():
        raise errors.InvalidRequest(
            "name is a non-empty string (300 characters at most)", field="name"
        )
    text.check_name(name, "name", 300)
    return name.strip()


class WorkflowChecks:
    """The checks of a workflow's trigger and steps that need the account's data: the source a
    trigger names, the actions and connected accounts steps use, code steps loaded once."""

    def __init__(
        self,
        db: AsyncEngine,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        *,
        dynamic: DynamicProps,
    ) -> None:
        self.db = db
        self.components = components
        self.cipher = cipher
        self.settings = settings
        #: Action steps with additionalProps(): their values are checked against its props.
        self.dynamic = dynamic

    # ---- the trigger ------------------------------------------------------------------------

    async def trigger(self, owner_id: str, raw: Any) -> dict[str, Any]:
        """The trigger to store (``raw``: the request's)."""
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
        allowed = _TRIGGER_KEYS[kind]
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
            return self._timer_trigger(raw)
        if kind == "source":
            return await self._source_trigger(owner_id, raw)
        return {"type": "manual"}

    def _timer_trigger(self, raw: dict[str, Any]) -> dict[str, Any]:
        timer = rules.check_timer_value(raw, "trigger", errors.InvalidRequest)
        schedules.validate(
            schedules.Schedule.from_value(timer),
            "trigger",
            min_interval_seconds=self.settings.timer_min_interval_seconds,
        )
        out = {"type": "timer", **{k: v for k, v in timer.items() if v is not None}}
        return out

    async def _source_trigger(self, owner_id: str, raw: dict[str, Any]) -> dict[str, Any]:
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
                raise errors.NotFound(f"source {source_id} not found", field="trigger.source_id")
        return {"type": "source", "source_id": source_id, "event_name": event_name}

    # ---- the steps --------------------------------------------------------------------------

    async def steps(
        self,
        owner_id: str,
        workflow_id: str,
        raw_steps: Any,
        previous: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """The steps to store (``raw_steps``: the request's; ``previous``: the stored ones,
        whose ids and secrets carry over by step name)."""
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
            name, props = _check_step(raw, where, seen)
            step_id = ids_by_name.get(name) or ids.new_id("c")
            if "code" in raw:
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
                ComponentInput(code=code, entry_path="step.mjs"), owner_id
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
        given = {k: v for k, v in props.items() if k not in deferred}
        try:
            every = await self.dynamic.props_for(owner_id, component, given)
            configured = prop_rules.check_configured(
                [
                    {**p, "optional": True} if p["name"] in deferred or p["name"] in kept else p
                    for p in every
                ],
                given,
                max_bytes=self.settings.max_prop_bytes,
                auth_free=await self.dynamic.catalog.auth_free(every),
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


def _check_step(raw: Any, where: str, seen: set[str]) -> tuple[str, dict[str, Any]]:
    """The name and props of a step in the request, with code or an action (not both); the
    name joins ``seen``, the names of the steps before it."""
    if not isinstance(raw, dict):
        raise errors.InvalidRequest(
            'each step is {"name", "code"} or {"name", "action", "props"}', field=where
        )
    unknown = set(raw) - _STEP_KEYS
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
        raise errors.InvalidRequest("props is an object {name: value}", field=f"{where}.props")
    if ("code" in raw) == ("action" in raw):
        raise errors.InvalidRequest(
            "a step has either code (a module) or action (an action's sc_ id or key)",
            field=where,
        )
    return name, props


def _has_ref(value: Any) -> bool:
    if isinstance(value, str):
        return _REF in value
    if isinstance(value, list):
        return any(_has_ref(v) for v in value)
    if isinstance(value, dict):
        return any(_has_ref(v) for v in value.values())
    return False
