"""The builder's Test, as Pipedream's: a step's **Test** button runs the workflow as it is in
the form (not deployed), up to and including that step, on the test event, in the sandbox, and
shows each step's exports, return value, logs and error under the step. Test runs are not
the workflow's runs and reach no ``$errors``; a deployed workflow's step keeps its last test's
result, shown again when the builder opens (``engine/runs/step_tests.py``).

Also what the test event starts from: a sample per trigger type, or a recent event (the
workflow's last runs, the trigger source's last events)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.domain import email_messages
from sluice.platform import Platform, SavedComponent
from sluice.web import action_steps, render, trigger_sources, workflow_form
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


#: A generated e-mail source event, shaped as ``domain/email_messages.event_of`` makes them.
_ADA = {"name": "Ada", "address": "ada@example.com", "text": "Ada <ada@example.com>"}
EMAIL_SAMPLE: dict[str, Any] = {
    "messageId": "<test@example.com>",
    "date": "Fri, 27 Nov 2026 12:00:00 +0000",
    "subject": "A test message",
    "from": _ADA,
    "to": [],
    "cc": [],
    "replyTo": [],
    "headers": {"from": "Ada <ada@example.com>", "subject": "A test message"},
    "text": "Hello from a test message.\n",
    "html": None,
    "attachments": [],
    "envelope": {"mailFrom": "ada@example.com", "rcptTo": []},
    "size": 0,
}


def sample_kind(component: SavedComponent) -> str | None:
    """Which generated event a source's trigger gets: ``http``, ``timer``, ``email`` or none."""
    if component.key == email_messages.SOURCE_KEY:
        return "email"
    types = {p.get("type") for p in component.configurable_props}
    if "$.interface.http" in types:
        return "http"
    return "timer" if "$.interface.timer" in types else None


def sample_event(trigger: dict[str, Any] | None, now_s: int) -> Any:
    """A generated test event shaped as the trigger's events are (``{"type": "email"}``: an
    e-mail source's)."""
    kind = (trigger or {}).get("type")
    if kind == "email":
        return EMAIL_SAMPLE
    if kind == "http":
        body = {"hello": "world"}
        return {
            "method": "POST",
            "path": "/",
            "query": {},
            "headers": {"content-type": "application/json"},
            "bodyRaw": json.dumps(body),
            "body": body,
        }
    if kind == "timer":
        every = (trigger or {}).get("intervalSeconds") or (trigger or {}).get("interval_seconds")
        return {"timestamp": now_s, "interval_seconds": every}
    return {}


async def recent_events(
    platform: Platform, owner_id: str, workflow_id: str | None, trigger: dict[str, Any] | None
) -> list[tuple[str, str]]:
    """(label, JSON) of up to 10 recent events the trigger gave: a source trigger's newest
    events, else the workflow's last runs' events."""
    out: list[tuple[str, str]] = []
    source_id = (trigger or {}).get("source_id")
    if (trigger or {}).get("type") == "source" and source_id:
        try:
            page = await platform.events.page(
                str(source_id), channel=None, limit=10, window=10, before=None, after=None
            )
        except errors.SluiceError:
            return []
        for event in page.items:
            label = f"{event.id} · {event.meta.get('summary') or ''}".strip(" ·")
            out.append((label, json.dumps(event.payload, indent=2)))
        return out
    if workflow_id:
        runs, _ = await platform.runs.page(workflow_id, limit=10, before=None, after=None)
        for run in runs:
            label = f"run {run.id[:10]}… · {run.status}"
            out.append((label, json.dumps(run.event, indent=2)))
    return out


async def _test(request: Request, workflow_id: str | None) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    form = await render.checked_form(request, session)
    action_props = await action_steps.posted_props(platform, session.account.id, form)
    body = workflow_form.workflow_input(form, action_props)
    sample_trigger = body.trigger
    if trigger_sources.chosen(form):  # not deployed yet: its events' shape, from its props
        component = await trigger_sources.picked(platform, session.account.id, form)
        sample_trigger = {"type": sample_kind(component) if component else None}
    uid = render.text(form, "test_uid")
    uids = [s.uid for s in workflow_form.posted_steps(form)]
    context: dict[str, Any] = {"uid": uid}
    try:
        if uid not in uids:
            raise errors.InvalidRequest("the step to test is not in the form", field="test_uid")
        upto = uids.index(uid) + 1
        raw = render.text(form, "test_event").strip()
        try:
            event = (
                json.loads(raw)
                if raw
                else sample_event(sample_trigger, platform.clock.now_ms() // 1000)
            )
        except ValueError as exc:
            raise errors.InvalidRequest(
                f"the test event is not JSON: {exc}", field="test_event"
            ) from exc
        cut = replace(body, steps=(body.steps or [])[:upto])
        draft = await platform.workflows.draft(session.account.id, cut, workflow_id)
        keep = workflow_id is not None
        context["run"] = await platform.step_tests.test(draft, event, keep=keep)
        context["tested"] = draft.steps[-1]["name"]
        context["kept"] = keep
    except errors.SluiceError as exc:
        context["error"] = exc
    return render.page(request, "step_test.html", context, session=session)


@router.post("/workflows/test")
async def test_new(request: Request) -> Response:
    """Test a step of a workflow not deployed yet."""
    return await _test(request, None)


@router.post("/workflows/{workflow_id}/test")
async def test_edited(request: Request, workflow_id: str) -> Response:
    """Test a step of a deployed workflow as edited in the builder (not deployed)."""
    return await _test(request, workflow_id)
