"""The builder's "New source" trigger, as Pipedream's builder has it: a source component (the
registry's or the account's) is picked from a list in the builder, its props are filled in
the builder itself (inputs ``trigger.prop.<name>``, the deploy form's fields), and it is
deployed when the workflow is saved, becoming the workflow's trigger (``{"type": "source"}``).
A new workflow and an existing one (whose trigger changes) both have it.

The source's props are checked by the platform when it deploys; its errors come back named
``trigger.configured_props.<prop>`` and are shown on that field of the builder.

A deployed source as the trigger ("A source's events": the one a New source became, or any
other) has its props form in the builder too (inputs ``trigger.sprop.<name>``, the same
fields): changed values are saved to the source (the spec's update, as on its page) when the
workflow is saved; its errors are named ``trigger.source.configured_props.<prop>``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from sluice import errors, ids
from sluice.platform import Deployment, DeployRequest, Platform, SavedComponent, UpdateRequest
from sluice.web import props, render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)

#: ``trigger.type`` of the builder's new-source trigger (the builder's only: the platform's
#: trigger is ``source``, with the deployed source's id).
NEW = "new_source"
PREFIX = "trigger.prop"
#: The inputs of a deployed trigger source's props.
SOURCE_PREFIX = "trigger.sprop"


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


@dataclass
class SourceProps:
    """A deployed trigger source's props form: its fields (with its values, or those posted
    again after an error) and its secret props that have a stored value."""

    source: Deployment
    component: SavedComponent
    fields: list[props.Field]
    secret_names: list[str]
    #: How many workflows (this one included) listen to the source.
    listeners: int = 0


async def source_form(
    platform: Platform, owner_id: str, source_id: str, values: dict[str, Any] | None = None
) -> SourceProps | None:
    try:
        source = await platform.sources.get(owner_id, source_id)
    except errors.NotFound:
        return None
    component = await platform.components.by_id(source.component_id)
    listeners = {
        s.listener_id
        for s in await platform.subscriptions.list_for(owner_id)
        if s.emitter_id == source.id and ids.has_prefix(s.listener_id, "p")
    }
    shown = {**source.configured_props, **(values or {})}
    return SourceProps(
        source,
        component,
        props.fields(component.configurable_props, shown),
        sorted(source.secret_props),
        len(listeners),
    )


def _changed(found: SourceProps, configured: dict[str, Any]) -> bool:
    """Whether the posted props differ from the source's (a default counts as its value; a
    secret typed is a change, one left empty keeps the stored value)."""
    stored = found.source.configured_props
    for f in found.fields:
        if f.widget == "password":
            if configured.get(f.name) not in (None, ""):
                return True
            continue
        default = f.prop.get("default")
        if configured.get(f.name, default) != stored.get(f.name, default):
            return True
    return False


def posted_source_props(form: FormData) -> tuple[str, bool]:
    """The source whose props form was posted with the builder (``""``: none) and whether it
    is the trigger's source (the form is of the source chosen when it loaded)."""
    shown = render.text(form, "trigger.sprops_for")
    return shown, bool(shown) and shown == render.text(form, "trigger.source_id")


async def posted_source_values(
    platform: Platform, owner_id: str, form: FormData
) -> dict[str, Any] | None:
    """The trigger source's props as posted with the builder (to show again after an error),
    or None when the form had none for the trigger's source."""
    shown, current = posted_source_props(form)
    if not current:
        return None
    found = await source_form(platform, owner_id, shown)
    if found is None:
        return None
    return props.from_form(found.component.configurable_props, form, prefix=SOURCE_PREFIX)


async def save_source_props(platform: Platform, owner_id: str, form: FormData) -> None:
    """Save the trigger source's props posted with the builder, when they changed (an update
    runs the source's deactivate and activate hooks, so an unchanged form updates nothing).
    Before the workflow is saved: a bad value saves neither."""
    shown, current = posted_source_props(form)
    if render.text(form, "trigger.type") != "source" or not current:
        return
    found = await source_form(platform, owner_id, shown)
    if found is None:
        return
    configured = props.from_form(found.component.configurable_props, form, prefix=SOURCE_PREFIX)
    if not _changed(found, configured):
        return
    try:
        await platform.sources.update(owner_id, shown, UpdateRequest(configured_props=configured))
    except errors.SluiceError as exc:
        named = exc.field
        if named and named.startswith("configured_props"):
            named = "trigger.source." + named
        raise type(exc)(exc.message, field=named, details=exc.details) from exc


@router.post("/workflows/trigger-source-props")
async def trigger_source_props(request: Request) -> Response:
    """The chosen deployed source's props form (htmx, when the builder's source changes)."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    source_id = render.text(form, "trigger.source_id")
    context = {
        "sf": await source_form(platform, session.account.id, source_id) if source_id else None,
        "accounts": await platform.apps.list(session.account.id),
        "error": None,
    }
    return render.page(request, "trigger_source_props.html", context, session=session)


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
