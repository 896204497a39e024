"""Workflows: the list, the builder (trigger, code and action steps, order), a workflow's page
(runs, ``$errors`` with replay, forwarding its errors), a run's page, and the global error
workflow setting."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.domain import states
from sluice.domain.routing import Link
from sluice.platform import (
    Deployment,
    Platform,
    Run,
    SavedComponent,
    Workflow,
    WorkflowInput,
)
from sluice.web import action_steps, pickers, render, step_tests, trigger_sources, workflow_form
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


async def _run_now(platform: Platform, workflow: Workflow, payload: dict[str, Any]) -> Run:
    """As ``POST /v1/workflows/{id}/runs`` and ``/v1/runs/{id}/replay``: the run, finished."""
    found = await platform.runs.run_now(
        workflow, payload, platform.settings.workflow_timeout_seconds + 5
    )
    if found is None:
        raise errors.RunnerUnavailable("the run could not finish now; it is queued and will run")
    return found


async def _row(platform: Platform, workflow: Workflow) -> dict[str, Any]:
    newest = await platform.events.page(
        workflow.id, channel=states.ERRORS, limit=1, window=100, before=None, after=None
    )
    return {
        "w": workflow,
        "errors": newest.total_count,
        "last_error_ms": newest.items[0].ts_ms if newest.items else None,
    }


@router.get("/workflows")
async def workflows(request: Request) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found, total = await platform.workflow_page(
        session.account.id, limit=100, before=None, after=None
    )
    error_workflow = await platform.workflows.error_workflow_id(session.account.id)
    rows = [await _row(platform, w) for w in found]
    context = {
        "rows": rows,
        "total": total,
        "error_workflow": error_workflow,
        "released": await _released_note(request, platform, session.account.id),
    }
    return render.page(request, "workflows.html", context, session=session)


def _labels(found: list[SavedComponent]) -> list[tuple[str, str]]:
    """(key or id, label) for the action field's suggestions."""
    return [
        (c.key or c.id, f"{c.name} {c.version}" + (" (registry)" if c.registry else ""))
        for c in found
    ]


async def _builder(
    request: Request, session: sessions.Session, values: dict[str, Any], **extra: Any
) -> Response:
    platform = sessions.platform_of(request)
    page = await platform.sources.list(session.account.id, limit=100, before=None, after=None)
    found_actions = await pickers.choices(platform, session.account.id, "action")
    found_sources = await pickers.choices(platform, session.account.id, "source")
    trigger = values.get("trigger") or {}
    trigger_form = None
    if trigger.get("type") == trigger_sources.NEW:
        trigger_form = await trigger_sources.form_of(
            platform,
            session.account.id,
            str(trigger.get("component") or ""),
            trigger.get("values") or {},
        )
    source_props = None
    shown_source = trigger.get("source_id") if trigger.get("type") == "source" else None
    shown_source = shown_source or (page.items[0].id if page.items else None)
    if shown_source:  # the props form of the source chosen under "A source's events"
        source_props = await trigger_sources.source_form(
            platform, session.account.id, str(shown_source), values.get("source_values")
        )
    context = {
        "sources": page.items,
        "source_props": source_props,
        "v": values,
        "new_code": workflow_form.NEW_CODE,
        "action_forms": await action_steps.forms(platform, session.account.id, values["steps"]),
        "accounts": await platform.apps.list(session.account.id),
        "actions": _labels(found_actions),
        "action_apps": await pickers.grouped(platform, found_actions),
        "source_apps": await pickers.grouped(platform, found_sources),
        "sample_kinds": {c.key or c.id: step_tests.sample_kind(c) for c in found_sources},
        "email_sample": step_tests.EMAIL_SAMPLE,
        "trigger_form": trigger_form,
        "kept_tests": (
            await platform.step_tests.last(session.account.id, values["id"])
            if values.get("id")
            else {}
        ),
        "test_url": f"/workflows/{values['id']}/test" if values.get("id") else "/workflows/test",
        "recent_events": await step_tests.recent_events(
            platform, session.account.id, values.get("id"), values.get("trigger")
        ),
        **extra,
    }
    status = 400 if extra.get("error") else 200
    return render.page(request, "workflow_edit.html", context, session=session, status=status)


@router.get("/workflows/new")
async def new(request: Request, action: str | None = None) -> Response:
    """The builder for a new workflow (``action``: a first action step)."""
    session = await sessions.required(request)
    steps = [workflow_form.Step("step_1", "code", workflow_form.NEW_CODE, "", "", "s1")]
    if action:
        steps.append(workflow_form.Step("step_2", "action", "", action, "{}", "s2"))
    values = {"name": "", "trigger": {"type": "http"}, "steps": steps, "global_errors": True}
    return await _builder(request, session, values)


async def _posted_values(
    platform: Platform, owner_id: str, form: Any, body: WorkflowInput
) -> dict[str, Any]:
    """The builder as it was posted, to show again with the platform's error."""
    steps = [
        replace(step, props=json.dumps(sent["props"]))
        if step.kind == "action" and isinstance(sent.get("props"), dict)
        else step
        for step, sent in zip(workflow_form.posted_steps(form), body.steps or [], strict=False)
    ]
    return {
        "name": body.name or "",
        "trigger": body.trigger,
        "steps": steps,
        "global_errors": body.global_errors,
        "source_values": await trigger_sources.posted_source_values(platform, owner_id, form),
    }


async def _posted(request: Request, session: sessions.Session) -> tuple[Any, WorkflowInput]:
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    action_props = await action_steps.posted_props(platform, session.account.id, form)
    body = workflow_form.workflow_input(form, action_props)
    if trigger_sources.chosen(form):
        new_source = await trigger_sources.posted(platform, session.account.id, form)
        body = replace(body, trigger=new_source)
    return form, body


async def _saved(
    platform: Platform, owner_id: str, body: WorkflowInput, workflow_id: str | None
) -> tuple[Workflow, str]:
    """Create (``workflow_id`` None) or update the workflow; a new-source trigger is deployed
    first and becomes the trigger (marked as the builder's), and is deleted again when the
    workflow is refused. The source the builder made for the trigger it had goes when that
    trigger changes (``Services.release_builder_source``). The workflow and its page's
    address (saying what became of that source)."""
    trigger = body.trigger or {}
    previous = None if workflow_id is None else await platform.workflows.get(owner_id, workflow_id)
    made = None
    if trigger.get("type") == trigger_sources.NEW:
        made = await trigger_sources.deploy(platform, owner_id, trigger)
        body = replace(body, trigger={"type": "source", "source_id": made.id})
    try:
        if workflow_id is None:
            saved = await platform.workflows.create(owner_id, body)
        else:
            saved = await platform.workflows.update(owner_id, workflow_id, body)
    except errors.SluiceError:
        if made is not None:
            await platform.sources.delete(owner_id, made.id)
        raise
    if made is not None:
        await platform.mark_builder_source(owner_id, made.id, saved.id)
    address = f"/workflows/{saved.id}"
    if previous is not None and previous.trigger != saved.trigger:
        released = await platform.release_builder_source(owner_id, saved.id, previous.trigger)
        address += _released_query(released)
    return saved, address


def _released_query(released: tuple[str, Deployment] | None) -> str:
    """The query that tells the next page what became of the builder's old trigger source."""
    if released is None:
        return ""
    what, source = released
    return f"?old_source={what}&source_id={source.id}"


async def _released_note(
    request: Request, platform: Platform, owner_id: str
) -> dict[str, Any] | None:
    """What the query of ``_released_query`` says, for the page: ``{"what", "source"}`` (the
    source as it is now; None once deleted)."""
    what = request.query_params.get("old_source")
    if what not in ("deleted", "stopped"):
        return None
    source = None
    with contextlib.suppress(errors.NotFound):
        source = await platform.sources.get(owner_id, request.query_params.get("source_id", ""))
    if what == "stopped" and source is None:
        return None
    return {"what": what, "source": source}


@router.post("/workflows")
async def create(request: Request) -> Response:
    session = await sessions.required(request)
    form, body = await _posted(request, session)
    platform = sessions.platform_of(request)
    try:
        await trigger_sources.save_source_props(platform, session.account.id, form)
        _, address = await _saved(platform, session.account.id, body, None)
    except errors.SluiceError as exc:
        values = await _posted_values(platform, session.account.id, form, body)
        return await _builder(
            request, session, values, error=exc, **render.page_address(request, "/workflows/new")
        )
    return render.redirect(address)


@router.get("/workflows/{workflow_id}/edit")
async def edit(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    workflow = await platform.workflows.get(session.account.id, workflow_id)
    values = {
        "id": workflow.id,
        "name": workflow.name,
        "trigger": workflow.trigger,
        "steps": workflow_form.steps_of(workflow.steps),
        "global_errors": workflow.global_errors,
    }
    return await _builder(request, session, values)


@router.post("/workflows/{workflow_id}/edit")
async def update(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    form, body = await _posted(request, session)
    platform = sessions.platform_of(request)
    try:
        await trigger_sources.save_source_props(platform, session.account.id, form)
        _, address = await _saved(platform, session.account.id, body, workflow_id)
    except errors.SluiceError as exc:
        values = {
            **await _posted_values(platform, session.account.id, form, body),
            "id": workflow_id,
        }
        page_address = render.page_address(request, f"/workflows/{workflow_id}/edit")
        return await _builder(request, session, values, error=exc, **page_address)
    return render.redirect(address)


@router.get("/workflows/{workflow_id}")
async def workflow(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found = await platform.workflows.get(session.account.id, workflow_id)
    runs, total = await platform.runs.page(found.id, limit=25, before=None, after=None)
    errors_page = await platform.events.page(
        found.id, channel=states.ERRORS, limit=100, window=100, before=None, after=None
    )
    subscriptions = [
        s
        for s in await platform.subscriptions.list_for(session.account.id)
        if s.emitter_id == found.id and s.event_name == states.ERRORS
    ]
    others, _ = await platform.workflow_page(session.account.id, limit=100, before=None, after=None)
    source_id = found.trigger.get("source_id") if found.trigger_type == "source" else None
    trigger_source = None
    if source_id:
        with contextlib.suppress(errors.NotFound):
            trigger_source = await platform.sources.get(session.account.id, str(source_id))
    context = {
        "w": found,
        "trigger_source": trigger_source,
        "endpoint_url": platform.workflows.endpoint_url(found),
        "runs": runs,
        "total_runs": total,
        "errors": errors_page.items,
        "subscriptions": subscriptions,
        "others": [w for w in others if w.id != found.id],
        "step_names": {s["id"]: s["name"] for s in found.steps},
        "released": await _released_note(request, platform, session.account.id),
    }
    return render.page(request, "workflow.html", context, session=session)


@router.get("/workflows/{workflow_id}/runs")
async def runs_table(request: Request, workflow_id: str) -> Response:
    """The runs table alone: the workflow page refreshes it with htmx."""
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found = await platform.workflows.get(session.account.id, workflow_id)
    runs, total = await platform.runs.page(found.id, limit=25, before=None, after=None)
    context = {"w": found, "runs": runs, "total_runs": total}
    return render.page(request, "runs_table.html", context, session=session)


@router.post("/workflows/{workflow_id}/run")
async def run(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    found = await platform.workflows.get(session.account.id, workflow_id)
    raw = render.text(form, "event").strip()
    try:
        event = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise errors.InvalidRequest(f"the event is not JSON: {exc}", field="event") from exc
    done = await _run_now(platform, found, {"event": event, "source_type": "MANUAL"})
    return render.redirect(f"/runs/{done.id}")


@router.post("/workflows/{workflow_id}/active")
async def set_active(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    active = render.text(form, "active") == "true"
    await sessions.platform_of(request).workflows.update(
        session.account.id, workflow_id, WorkflowInput(active=active)
    )
    return render.redirect(f"/workflows/{workflow_id}")


@router.post("/workflows/{workflow_id}/delete")
async def delete(request: Request, workflow_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    found = await platform.workflows.get(session.account.id, workflow_id)
    await platform.workflows.delete(session.account.id, workflow_id)
    released = await platform.release_builder_source(session.account.id, found.id, found.trigger)
    return render.redirect("/workflows" + _released_query(released))


@router.post("/workflows/{workflow_id}/forward")
async def forward(request: Request, workflow_id: str) -> Response:
    """Forward (``remove``: stop forwarding) this workflow's ``$errors`` to a listener."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    link = Link(workflow_id, render.text(form, "listener_id"), states.ERRORS)
    if "remove" in form:
        await platform.subscriptions.delete(session.account.id, link)
    else:
        now_s = platform.clock.now_ms() // 1000
        await platform.subscriptions.create(session.account.id, link, now_s=now_s)
    return render.redirect(f"/workflows/{workflow_id}#errors")


@router.get("/runs/{run_id}")
async def run_page(request: Request, run_id: str) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found = await platform.runs.get(session.account.id, run_id)
    if found is None:
        raise errors.NotFound(f"run {run_id} not found")
    owner = await platform.workflows.get(session.account.id, found.workflow_id)
    names = {s["id"]: s["name"] for s in owner.steps}
    context = {"run": found, "w": owner, "step_names": names}
    return render.page(request, "run.html", context, session=session)


@router.post("/runs/{run_id}/replay")
async def replay(request: Request, run_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    original = await platform.runs.get(session.account.id, run_id)
    if original is None:
        raise errors.NotFound(f"run {run_id} not found")
    found = await platform.workflows.get(session.account.id, original.workflow_id)
    payload = {
        "event": original.event,
        "source_type": original.context.get("source_type") or "MANUAL",
        "replay_of": original.id,
    }
    done = await _run_now(platform, found, payload)
    return render.redirect(f"/runs/{done.id}")


@router.get("/settings")
async def settings(request: Request) -> Response:
    return await settings_page(request, await sessions.required(request))


async def settings_page(request: Request, session: sessions.Session, **extra: Any) -> Response:
    """The settings page; ``extra`` for its e-mail section (``web/account_email.py``)."""
    platform = sessions.platform_of(request)
    found, _ = await platform.workflow_page(session.account.id, limit=100, before=None, after=None)
    current = await platform.workflows.error_workflow_id(session.account.id)
    context = {"workflows": found, "current": current, **extra}
    if extra:  # after a POST: the address bar shows the page's own GET
        context |= render.page_address(request, "/settings")
    status = 400 if extra.get("email_error") else 200
    if isinstance(extra.get("email_error"), errors.RateLimited):
        status = 429
    return render.page(request, "settings.html", context, session=session, status=status)


@router.post("/settings/error_workflow")
async def set_error_workflow(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    chosen = render.text(form, "workflow_id") or None
    await sessions.platform_of(request).workflows.set_error_workflow(session.account.id, chosen)
    return render.redirect("/settings")
