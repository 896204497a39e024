"""A component's ``configurable_props`` as a form, and a posted form back as
``configured_props``. The values are checked by the platform, as for the API: its errors name
``configured_props.<prop>``, and the page shows them on that field.

Each prop's inputs are named ``prop.<name>`` (timer: ``prop.<name>.interval``, ``.cron``,
``.timezone``); option values travel JSON-encoded, so an option keeps its type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData

from sluice.domain import apps as app_rules

#: Props the platform provides: no input (the endpoint, the db, hooks).
PROVIDED = frozenset({"$.interface.http", "$.service.db", "alert", "$.interface.apphook"})
TIMER = "$.interface.timer"


def _takes_no_account(app: Any) -> bool:
    """A built-in app whose ``auth_type`` is none (``rss``, ``http``, …): its app props need
    no connected account, so the form does not require one (docs/apps.md)."""
    found = app_rules.BUILTIN_BY_SLUG.get(str(app))
    return found is not None and found.auth_type == "none"


@dataclass(frozen=True)
class Field:
    """One prop as the form shows it."""

    prop: dict[str, Any]
    widget: str  # text, password, number, checkbox, textarea, json, select, async, app, timer
    value: Any  # what the input shows (never a secret)

    @property
    def name(self) -> str:
        return str(self.prop["name"])

    @property
    def label(self) -> str:
        return str(self.prop.get("label") or self.prop["name"])

    @property
    def required(self) -> bool:
        if self.widget == "app" and _takes_no_account(self.prop.get("app")):
            return False
        return not self.prop.get("optional") and "default" not in self.prop

    @property
    def options(self) -> list[tuple[str, str]]:
        """Static options as (JSON value, label)."""
        out = []
        for option in self.prop.get("options") or []:
            if isinstance(option, dict) and "value" in option:
                out.append((json.dumps(option["value"]), str(option.get("label", option["value"]))))
            else:
                out.append((json.dumps(option), str(option)))
        return out


def _widget(prop: dict[str, Any]) -> str:
    typ = str(prop.get("type", ""))
    if typ == "app":
        return "app"
    if typ == TIMER:
        return "timer"
    if prop.get("remoteOptions") or (
        prop.get("options") is not None and not isinstance(prop.get("options"), list)
    ):
        return "async"
    if isinstance(prop.get("options"), list):
        return "select"
    if prop.get("secret"):
        return "password"
    return {
        "integer": "number",
        "boolean": "checkbox",
        "string[]": "textarea",
        "integer[]": "textarea",
        "object": "json",
        "any": "json",
    }.get(typ, "text")


def _shown(widget: str, value: Any) -> Any:
    if value is None or widget == "password":
        return None
    if widget == "textarea" and isinstance(value, list):
        return "\n".join(v if isinstance(v, str) else json.dumps(v) for v in value)
    if widget == "json":
        return json.dumps(value, indent=2)
    if widget in ("select", "async"):
        return json.dumps(value)
    if widget == "app" and isinstance(value, dict):
        return value.get("authProvisionId")
    return value


def fields(definitions: list[dict[str, Any]], values: dict[str, Any]) -> list[Field]:
    """The form's fields, with ``values`` (configured or posted) shown, secrets never."""
    out = []
    for prop in definitions:
        if prop.get("type") in PROVIDED or prop.get("hidden"):
            continue
        widget = _widget(prop)
        value = values.get(prop["name"], prop.get("default"))
        if isinstance(value, str) and "{{" in value and widget not in ("password", "app"):
            widget = "text"  # a workflow step's reference to an earlier step, kept as written
        out.append(Field(prop, widget, value if widget == "timer" else _shown(widget, value)))
    return out


def just_connected(definitions: list[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """The account a Connect button just made (the callback's ``?account_id=…&app=…``),
    chosen in the app props of that app."""
    account_id, app = query.get("account_id"), query.get("app")
    if not account_id or not app:
        return {}
    return {
        str(p["name"]): {"authProvisionId": account_id}
        for p in definitions
        if p.get("type") == "app" and p.get("app") == app
    }


def decoded(raw: str) -> Any:
    """JSON text as its value; text that is not JSON as itself."""
    return _decoded(raw)


def _decoded(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _timer(form: FormData, key: str) -> dict[str, Any] | None:
    cron = str(form.get(f"{key}.cron") or "").strip()
    if cron:
        timezone = str(form.get(f"{key}.timezone") or "").strip()
        return {"cron": cron, "timezone": timezone or "UTC"}
    interval = str(form.get(f"{key}.interval") or "").strip()
    if interval:
        return {"intervalSeconds": int(interval) if interval.isdigit() else interval}
    return None


def _one(field: Field, form: FormData, key: str) -> tuple[bool, Any]:
    """(given, value) of one field in the posted form."""
    if field.widget == "timer":
        timer = _timer(form, key)
        return timer is not None, timer
    if field.widget == "checkbox":
        return f"{key}.present" in form, key in form
    raw = form.get(key)
    if not isinstance(raw, str) or raw.strip() == "":
        return False, None
    typ = field.prop.get("type")
    if field.widget in ("select", "async"):
        return True, _decoded(raw)
    if field.widget == "app":
        return True, {"authProvisionId": raw}
    if field.widget == "number":
        return True, int(raw) if raw.strip().lstrip("-").isdigit() else raw
    if field.widget == "json":
        return True, _decoded(raw)
    if field.widget == "textarea":
        items = [line.strip() for line in raw.splitlines() if line.strip()]
        if typ == "integer[]":
            return True, [int(i) if i.lstrip("-").isdigit() else i for i in items]
        return True, items
    return True, raw


def from_form(
    definitions: list[dict[str, Any]], form: FormData, *, prefix: str = "prop"
) -> dict[str, Any]:
    """``configured_props`` from a posted form (inputs ``<prefix>.<name>``): props left empty
    are left out (defaults apply; on an update a secret left empty keeps its value)."""
    configured: dict[str, Any] = {}
    for field in fields(definitions, {}):
        given, value = _one(field, form, f"{prefix}.{field.name}")
        if given:
            configured[field.name] = value
    return configured
