"""The workflow builder's form, both ways: a workflow as the form shows it, and a posted form
as the ``WorkflowInput`` the platform takes (as ``POST /v1/workflows``'s body)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData

from sluice.platform import WorkflowInput
from sluice.web.render import text


@dataclass(frozen=True)
class Step:
    name: str
    kind: str  # code or action
    code: str
    action: str
    props: str  # JSON text
    uid: str = ""  # names the step's prop inputs: step.<uid>.prop.<name>
    secret_names: tuple[str, ...] = ()  # its secret props that have a stored value

    @property
    def prefix(self) -> str:
        return f"step.{self.uid}.prop"

    def props_value(self) -> dict[str, Any]:
        decoded = _props(self.props)
        return decoded if isinstance(decoded, dict) else {}


NEW_CODE = """export default defineComponent({
  async run({ steps, $ }) {
    return steps.trigger.event;
  },
});
"""


def steps_of(stored: list[dict[str, Any]]) -> list[Step]:
    """A workflow's stored steps as the builder shows them (secret props are not in
    ``props``: left empty, they keep their values)."""
    out = []
    for i, s in enumerate(stored, start=1):
        props = json.dumps(s.get("props") or {}, indent=2) if s.get("props") else ""
        action = s.get("action") or ""
        secrets = tuple(sorted(s.get("secret_props") or {}))
        code = s.get("code") or ""
        out.append(Step(s["name"], s["type"], code, action, props, f"s{i}", secrets))
    return out


def _trigger(form: FormData) -> dict[str, Any]:
    kind = text(form, "trigger.type", "manual")
    if kind == "http":
        return {"type": "http", "custom_response": "trigger.custom_response" in form}
    if kind == "timer":
        cron = text(form, "trigger.cron").strip()
        if cron:
            return {
                "type": "timer",
                "cron": cron,
                "timezone": text(form, "trigger.timezone") or "UTC",
            }
        interval = text(form, "trigger.interval").strip()
        return {
            "type": "timer",
            "intervalSeconds": int(interval) if interval.isdigit() else interval,
        }
    if kind == "source":
        return {
            "type": "source",
            "source_id": text(form, "trigger.source_id"),
            "event_name": text(form, "trigger.event_name"),
        }
    return {"type": "manual"}


def _props(raw: str) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # the platform names the step whose props are not an object


def posted_steps(form: FormData) -> list[Step]:
    names, kinds = form.getlist("step.name"), form.getlist("step.kind")
    codes, actions, props = (form.getlist(k) for k in ("step.code", "step.action", "step.props"))
    uids = form.getlist("step.uid")
    return [
        # A textarea's line breaks come as CRLF (render.code).
        Step(str(n), str(k), str(c).replace("\r\n", "\n"), str(a), str(p), str(u))
        for n, k, c, a, p, u in zip(names, kinds, codes, actions, props, uids, strict=False)
    ]


def has_props_form(form: FormData, step: Step) -> bool:
    """True when the step's props were edited in their form (else its JSON is used)."""
    return f"step.{step.uid}.form" in form


def workflow_input(form: FormData, action_props: dict[str, dict[str, Any]]) -> WorkflowInput:
    """The posted workflow; ``action_props``: the props of the action steps that had their
    props form, by step uid (``props.from_form`` on the action's definitions)."""
    steps: list[Any] = []
    for step in posted_steps(form):
        if step.kind == "action":
            given = action_props.get(step.uid)
            props = given if given is not None else _props(step.props)
            steps.append({"name": step.name, "action": step.action, "props": props})
        else:
            steps.append({"name": step.name, "code": step.code})
    return WorkflowInput(
        name=text(form, "name").strip() or None,
        trigger=_trigger(form),
        steps=steps,
        active=True,
        global_errors="global_errors" in form,
    )
