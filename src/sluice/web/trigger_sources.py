"""The builder's "New source" trigger, as Pipedream's builder has it: a source component (the
registry's or the account's) is picked from a list in the builder, its props are filled in
the builder itself (inputs ``trigger.prop.<name>``, the deploy form's fields), and it is
deployed when the workflow is saved, becoming the workflow's trigger (``{"type": "source"}``).
A new workflow and an existing one (whose trigger changes) both have it.

The source's props are checked by the platform when it deploys; its errors come back named
``trigger.configured_props.<prop>`` and are shown on that field of the builder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from sluice import errors, ids
from sluice.platform import Deployment, DeployRequest, Platform, SavedComponent
from sluice.web import props, render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)

#: ``trigger.type`` of the builder's new-source trigger (the builder's only: the platform's
#: trigger is ``source``, with the deployed source's id).
NEW = "new_source"
PREFIX = "trigger.prop"


@dataclass
class TriggerForm:
    """What the builder shows for the picked source: its props' fields, or why not."""

    ref: str
    component: SavedComponent | None = None
    fields: list[props.Field] = field(default_factory=list)
    problem: str | None = None


async def _source(platform: Platform, owner_id: str, ref: str) -> SavedComponent:
    by_id = ids.has_prefix(ref, "sc")
    found = await platform.sources.resolve_component(
        owner_id,
        DeployRequest(component_id=ref if by_id else None, component_key=None if by_id else ref),
    )
    if found.component_type != "source":
        raise errors.InvalidRequest(f"{ref} ({found.name}) is an action, not a source")
    return found


async def form_of(
    platform: Platform, owner_id: str, ref: str, values: dict[str, Any]
) -> TriggerForm:
    if not ref.strip():
        return TriggerForm(ref, problem="Pick a source to see its props.")
    try:
        component = await _source(platform, owner_id, ref.strip())
    except errors.SluiceError as exc:
        return TriggerForm(ref, problem=exc.message)
    return TriggerForm(ref, component, props.fields(component.configurable_props, values))


def chosen(form: FormData) -> bool:
    return render.text(form, "trigger.type") == NEW


async def picked(platform: Platform, owner_id: str, form: FormData) -> SavedComponent | None:
    """The source component picked in the posted builder, if any (and found)."""
    ref = render.text(form, "trigger.component").strip()
    try:
        return await _source(platform, owner_id, ref) if ref else None
    except errors.SluiceError:
        return None


async def posted(platform: Platform, owner_id: str, form: FormData) -> dict[str, Any]:
    """The builder's trigger as posted, to show again: ``{"type": "new_source", "component",
    "name", "values"}`` (``values``: the props typed, secrets left out by the form)."""
    ref = render.text(form, "trigger.component").strip()
    values: dict[str, Any] = {}
    component = await picked(platform, owner_id, form)
    if component is not None:
        values = props.from_form(component.configurable_props, form, prefix=PREFIX)
    return {
        "type": NEW,
        "component": ref,
        "name": render.text(form, "trigger.source_name").strip(),
        "values": values,
    }


async def deploy(platform: Platform, owner_id: str, trigger: dict[str, Any]) -> Deployment:
    """Deploy the posted new-source trigger (``posted``); an error names its field in the
    builder (``trigger.component``, ``trigger.configured_props.<prop>``)."""
    ref = str(trigger.get("component") or "")
    try:
        if not ref:
            raise errors.InvalidRequest("pick the source to use as the trigger")
        component = await _source(platform, owner_id, ref)
    except errors.SluiceError as exc:
        raise type(exc)(exc.message, field="trigger.component", details=exc.details) from exc
    request = DeployRequest(
        component_id=component.id,
        name=trigger.get("name") or None,
        configured_props=trigger.get("values") or {},
    )
    try:
        return await platform.sources.deploy(owner_id, request)
    except errors.SluiceError as exc:
        # configured_props.<prop> → trigger.configured_props.<prop>, as trigger_props.html
        # names its fields' errors.
        named = f"trigger.{exc.field}" if exc.field else None
        raise type(exc)(exc.message, field=named, details=exc.details) from exc


@router.post("/workflows/trigger-props")
async def trigger_props(request: Request) -> Response:
    """The picked source's props form (htmx, when the pick changes): the builder's form is
    posted."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    ref = render.text(form, "trigger.component")
    context = {
        "tf": await form_of(platform, session.account.id, ref, {}),
        "accounts": await platform.apps.list(session.account.id),
        "error": None,
    }
    return render.page(request, "trigger_props.html", context, session=session)
