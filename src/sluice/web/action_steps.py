"""A workflow's action steps in the builder: each action's props as a form (the same fields
as a source's deploy form), named ``step.<uid>.prop.<name>``, and back to the step's props."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from sluice import errors, ids
from sluice.platform import DeployRequest, Platform, SavedComponent
from sluice.web import props, render
from sluice.web import session as sessions
from sluice.web.workflow_form import Step, has_props_form, posted_steps

router = APIRouter(include_in_schema=False)


@dataclass
class ActionForm:
    """What the builder shows under an action step: its props' fields, or why not."""

    step: Step
    component: SavedComponent | None = None
    fields: list[props.Field] = field(default_factory=list)
    problem: str | None = None


async def _action(platform: Platform, owner_id: str, ref: str) -> SavedComponent:
    by_id = ids.has_prefix(ref, "sc")
    found = await platform.sources.resolve_component(
        owner_id,
        DeployRequest(component_id=ref if by_id else None, component_key=None if by_id else ref),
    )
    if found.component_type != "action":
        raise errors.InvalidRequest(f"{ref} ({found.name}) is a source, not an action")
    return found


async def form_of(platform: Platform, owner_id: str, step: Step) -> ActionForm:
    if not step.action.strip():
        return ActionForm(step, problem="Name an action (its key or sc_ id) to see its props.")
    try:
        component = await _action(platform, owner_id, step.action.strip())
    except errors.SluiceError as exc:
        return ActionForm(step, problem=exc.message)
    fields = props.fields(component.configurable_props, step.props_value())
    return ActionForm(step, component, fields)


async def forms(platform: Platform, owner_id: str, steps: list[Step]) -> dict[str, ActionForm]:
    """The props form of every action step, by step uid."""
    return {s.uid: await form_of(platform, owner_id, s) for s in steps if s.kind == "action"}


async def posted_props(
    platform: Platform, owner_id: str, form: FormData
) -> dict[str, dict[str, Any]]:
    """The props of the action steps posted with their props form, by step uid. A step whose
    action cannot be found is left out: the platform names it when the workflow is saved."""
    out: dict[str, dict[str, Any]] = {}
    for step in posted_steps(form):
        if step.kind != "action" or not has_props_form(form, step):
            continue
        try:
            component = await _action(platform, owner_id, step.action.strip())
        except errors.SluiceError:
            continue
        out[step.uid] = props.from_form(component.configurable_props, form, prefix=step.prefix)
    return out


@router.post("/workflows/action-props")
async def action_props(request: Request) -> Response:
    """One action step's props form (htmx, when its action changes): the builder's form is
    posted, and the ``HX-Trigger`` header (``step-action-<uid>``) names the step."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    uid = request.headers.get("hx-trigger", "").removeprefix("step-action-")
    steps = [s for s in posted_steps(form) if s.uid == uid]
    if len(steps) != 1:
        raise errors.InvalidRequest("name the step with HX-Trigger: step-action-<uid>")
    platform = sessions.platform_of(request)
    context = {
        "a": await form_of(platform, session.account.id, steps[0]),
        "accounts": await platform.apps.list(session.account.id),
        "error": None,
        "index": None,
    }
    return render.page(request, "action_props.html", context, session=session)
