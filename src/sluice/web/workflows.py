"""Workflows: the list, the builder (trigger, code and action steps, order), a workflow's page
(runs, ``$errors`` with replay, forwarding its errors), a run's page, and the global error
workflow setting."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.domain import states
from sluice.domain.routing import Link
from sluice.platform import Platform, Run, SavedComponent, Workflow, WorkflowInput
from sluice.web import action_steps, render, step_tests, workflow_form
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
    context = {"rows": rows, "total": total, "error_workflow": error_workflow}
    return render.page(request, "workflows.html", context, session=session)


async def _action_components(platform: Platform, owner_id: str) -> list[SavedComponent]:
    """The actions a step may use, one per key: the account's, then the registry's."""
    mine = await platform.component_page(
        owner_id, limit=100, before=None, after=None, component_type="action"
    )
    shared = await platform.registry_search("", component_type="action")
    seen: set[str] = set()
    out = []
    for c in [*mine.items, *shared]:
        ref = c.key or c.id
        if ref not in seen:
            seen.add(ref)
            out.append(c)
    return out


def _labels(found: list[SavedComponent]) -> list[tuple[str, str]]:
    """(key or id, label) for the action field's suggestions."""
    return [
        (c.key or c.id, f"{c.name} {c.version}" + (" (registry)" if c.registry else ""))
        for c in found
    ]


def _by_app(found: list[SavedComponent]) -> list[tuple[str, list[SavedComponent]]]:
    """The builder's action picker: actions grouped by app (a key's first part, as registry
    keys are ``<app>-<name>``), the account's unkeyed ones as "Your actions"; by app."""
    groups: dict[str, list[SavedComponent]] = {}
    for c in found:
        app = c.key.split("-", 1)[0] if c.key and "-" in c.key else "Your actions"
        groups.setdefault(app, []).append(c)
    return sorted(
        ((app, sorted(cs, key=lambda c: c.name.lower())) for app, cs in groups.items()),
        key=lambda group: (group[0] == "Your actions", group[0]),
    )


async def _builder(
    request: Request, session: sessions.Session, values: dict[str, Any], **extra: Any
) -> Response:
    platform = sessions.platform_of(request)
    page = await platform.sources.list(session.account.id, limit=100, before=None, after=None)
    found_actions = await _action_components(platform, session.account.id)
    context = {
        "sources": page.items,
        "v": values,
        "new_code": workflow_form.NEW_CODE,
        "action_forms": await action_steps.forms(platform, session.account.id, values["steps"]),
        "accounts": await platform.apps.list(session.account.id),
        "actions": _labels(found_actions),
        "action_apps": _by_app(found_actions),
        "test_url": f"/workflows/{values['id']}/test" if values.get("id") else "/workflows/test",
        "registry_sources": await platform.registry_search("", component_type="source"),
        "recent_events": await step_tests.recent_events(
            platform, session.account.id, values.get("id"), values.get("trigger")
        ),
        **extra,
    }
    status = 400 if extra.get("error") else 200
    return render.page(request, "workflow_edit.html", context, session=session, status=status)


@router.get("/workflows/new")
async def new(
    request: Request, action: str | None = None, trigger_source: str | None = None
) -> Response:
    """The builder for a new workflow (``action``: a first action step; ``trigger_source``:
    a source just deployed from the trigger picker, as the trigger)."""
    session = await sessions.required(request)
    steps = [workflow_form.Step("step_1", "code", workflow_form.NEW_CODE, "", "", "s1")]
    if action:
        steps.append(workflow_form.Step("step_2", "action", "", action, "{}", "s2"))
    trigger: dict[str, Any] = {"type": "http"}
    if trigger_source:
        trigger = {"type": "source", "source_id": trigger_source}
    values = {"name": "", "trigger": trigger, "steps": steps, "global_errors": True}
    return await _builder(request, session, values)


def _posted_values(form: Any, body: WorkflowInput) -> dict[str, Any]:
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
    }


async def _posted(request: Request, session: sessions.Session) -> tuple[Any, WorkflowInput]:
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    action_props = await action_steps.posted_props(platform, session.account.id, form)
    return form, workflow_form.workflow_input(form, action_props)


@router.post("/workflows")
async def create(request: Request) -> Response:
    session = await sessions.required(request)
    form, body = await _posted(request, session)
    try:
        workflow = await sessions.platform_of(request).workflows.create(session.account.id, body)
    except errors.SluiceError as exc:
        values = _posted_values(form, body)
        return await _builder(
            request, session, values, error=exc, **render.page_address(request, "/workflows/new")
        )
    return render.redirect(f"/workflows/{workflow.id}")


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
        await platform.workflows.update(session.account.id, workflow_id, body)
    except errors.SluiceError as exc:
        values = {**_posted_values(form, body), "id": workflow_id}
        address = render.page_address(request, f"/workflows/{workflow_id}/edit")
        return await _builder(request, session, values, error=exc, **address)
    return render.redirect(f"/workflows/{workflow_id}")


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
    context = {
        "w": found,
        "endpoint_url": platform.workflows.endpoint_url(found),
        "runs": runs,
        "total_runs": total,
        "errors": errors_page.items,
        "subscriptions": subscriptions,
        "others": [w for w in others if w.id != found.id],
        "step_names": {s["id"]: s["name"] for s in found.steps},
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
    await sessions.platform_of(request).workflows.delete(session.account.id, workflow_id)
    return render.redirect("/workflows")


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
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found, _ = await platform.workflow_page(session.account.id, limit=100, before=None, after=None)
    current = await platform.workflows.error_workflow_id(session.account.id)
    context = {"workflows": found, "current": current}
    return render.page(request, "settings.html", context, session=session)


@router.post("/settings/error_workflow")
async def set_error_workflow(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    chosen = render.text(form, "workflow_id") or None
    await sessions.platform_of(request).workflows.set_error_workflow(session.account.id, chosen)
    return render.redirect("/settings")
