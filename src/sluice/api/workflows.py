"""``/v1/workflows``: define, read, run and replay workflows; their runs, errors and emits.

See docs/api.md, "Workflows". ``GET /v1/workflows/{id}/$errors/event_summaries`` is the spec's
error list: the newest 100 errors, newest first, ``expand=event`` for the full error.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from sluice import errors
from sluice.api import bodies, paging, render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import ErrorWorkflow, WorkflowCreate, WorkflowRun
from sluice.domain import states, text
from sluice.platform import Platform, Run, Workflow, WorkflowInput

router = APIRouter()

Limit = Annotated[int, Query(ge=1, le=100)]


async def _render(platform: Platform, workflow: Workflow) -> dict[str, Any]:
    error_workflow = await platform.workflows.error_workflow_id(workflow.owner_id)
    return render.workflow(
        workflow,
        endpoint_url=platform.workflows.endpoint_url(workflow),
        error_workflow_id=error_workflow,
    )


def _input(body: WorkflowCreate) -> WorkflowInput:
    return WorkflowInput(
        name=body.name,
        trigger=body.trigger,
        steps=body.steps,
        active=body.active,
        global_errors=body.global_errors,
    )


@router.post("/v1/workflows")
async def create(
    body: WorkflowCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    workflow = await platform.workflows.create(account.id, _input(body))
    return {"data": await _render(platform, workflow)}


@router.get("/v1/users/me/workflows")
async def list_mine(
    account: AccountDep,
    platform: PlatformDep,
    limit: Limit = 10,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    before_id, after_id = paging.cursors(before, after, "p")
    found, total = await platform.workflow_page(
        account.id, limit=limit, before=before_id, after=after_id
    )
    error_workflow = await platform.workflows.error_workflow_id(account.id)
    data = [
        render.workflow(
            w, endpoint_url=platform.workflows.endpoint_url(w), error_workflow_id=error_workflow
        )
        for w in found
    ]
    return paging.body(data, total)


@router.get("/v1/workflows/{workflow_id}")
async def read(workflow_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    workflow = await platform.workflows.get(account.id, workflow_id)
    return {"data": await _render(platform, workflow)}


@router.put("/v1/workflows/{workflow_id}")
async def update(
    workflow_id: str, body: WorkflowCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    previous = await platform.workflows.get(account.id, workflow_id)
    workflow = await platform.workflows.update(account.id, workflow_id, _input(body))
    if previous.trigger != workflow.trigger:  # the UI builder's source for it goes too
        await platform.release_builder_source(account.id, workflow.id, previous.trigger)
    return {"data": await _render(platform, workflow)}


@router.delete("/v1/workflows/{workflow_id}")
async def delete(workflow_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.workflows.get(account.id, workflow_id)
    await platform.workflows.delete(account.id, workflow_id)
    await platform.release_builder_source(account.id, found.id, found.trigger)
    return {}


# ---- runs -----------------------------------------------------------------------------------


def _redact(run: Run) -> dict[str, Any]:
    """A run for the API: ``$.send.http`` passwords are not echoed."""
    data = render.run(run)
    for send in data["sends"]:
        auth = (send.get("config") or {}).get("auth")
        if isinstance(auth, dict) and "password" in auth:
            # Stored encrypted; never shown.
            send["config"] = {**send["config"], "auth": {**auth, "password": "********"}}
    return data


async def _run_now(platform: Platform, workflow: Workflow, payload: dict[str, Any]) -> Run:
    found = await platform.runs.run_now(
        workflow, payload, platform.settings.workflow_timeout_seconds + 5
    )
    if found is None:
        raise errors.RunnerUnavailable(
            "the run could not finish now (its Node runner crashed, or the run could not be "
            "stored: the server's log says which); it is queued and will run again: see "
            f"GET /v1/workflows/{workflow.id}/runs"
        )
    return found


@router.post("/v1/workflows/{workflow_id}/runs")
async def run(
    workflow_id: str, account: AccountDep, platform: PlatformDep, body: WorkflowRun | None = None
) -> dict[str, Any]:
    """Run the workflow now on ``event`` (a manual trigger) and answer with the run."""
    workflow = await platform.workflows.get(account.id, workflow_id)
    if not workflow.active:
        raise errors.Conflict(
            f'workflow {workflow.id} is inactive; activate it with PUT {{"active": true}}',
            field="active",
        )
    event = body.event if body is not None else None
    found = await _run_now(platform, workflow, {"event": event, "source_type": "MANUAL"})
    return {"data": _redact(found)}


@router.get("/v1/workflows/{workflow_id}/runs")
async def list_runs(
    workflow_id: str,
    account: AccountDep,
    platform: PlatformDep,
    limit: Limit = 10,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """Newest first; ``before``/``after`` are run ids (the cursors of ``page_info``)."""
    workflow = await platform.workflows.get(account.id, workflow_id)
    found, total = await platform.runs.page(workflow.id, limit=limit, before=before, after=after)
    data = [_redact(r) for r in found]
    return paging.id_body(data, total)


async def _get_run(platform: Platform, owner_id: str, run_id: str) -> Run:
    found = await platform.runs.get(owner_id, run_id)
    if found is None:
        raise errors.NotFound(f"run {run_id} not found")
    return found


@router.get("/v1/runs/{run_id}")
async def read_run(run_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    return {"data": _redact(await _get_run(platform, account.id, run_id))}


@router.post("/v1/runs/{run_id}/replay")
async def replay(run_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """Run the workflow again on the run's original event (the workflow as it is now)."""
    original = await _get_run(platform, account.id, run_id)
    workflow = await platform.workflows.get(account.id, original.workflow_id)
    payload = {
        "event": original.event,
        "source_type": original.context.get("source_type") or "MANUAL",
        "replay_of": original.id,
    }
    return {"data": _redact(await _run_now(platform, workflow, payload))}


# ---- errors and emits -----------------------------------------------------------------------


@router.get("/v1/workflows/{workflow_id}/$errors/event_summaries")
async def error_summaries(
    workflow_id: str,
    account: AccountDep,
    platform: PlatformDep,
    expand: str | None = None,
    limit: Limit = 100,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """The newest errors of the workflow (at most 100), newest first. With ``expand=event``
    each item has ``event: {original_event, original_context, error}``; without it, the
    item has ``error: {code, msg, cellId, ts}`` instead (no stack, event or context)."""
    expanded = paging.check_expand(expand)
    workflow = await platform.workflows.get(account.id, workflow_id)
    page = await paging.event_page(
        platform, workflow.id, channel=states.ERRORS, limit=limit, before=before, after=after
    )
    items = []
    for event in page.items:
        item: dict[str, Any] = {
            "id": event.id,
            "indexed_at_ms": event.ts_ms,
            "metadata": {
                "emitter_id": event.emitter_id,
                "emit_id": event.emit_id,
                "name": states.ERRORS,
            },
        }
        payload = event.payload or {}
        if expanded:
            item["event"] = {
                "original_event": payload.get("original_event"),
                "original_context": payload.get("original_context"),
                "error": payload.get("error"),
            }
        else:
            error = payload.get("error") or {}
            item["error"] = {k: error.get(k) for k in ("code", "msg", "cellId", "ts")}
        items.append(item)
    return paging.id_body(items, page.total_count)


@router.get("/v1/workflows/{workflow_id}/event_summaries")
async def emit_summaries(
    workflow_id: str,
    account: AccountDep,
    platform: PlatformDep,
    expand: str | None = None,
    limit: Limit = 100,
    before: str | None = None,
    after: str | None = None,
    event_name: str | None = None,
) -> dict[str, Any]:
    """Events the workflow emitted with ``$.send.emit`` (newest 100 of the channel
    ``event_name``, default ``""``): ``event: {raw_event}`` with ``expand=event``."""
    expanded = paging.check_expand(expand)
    channel = event_name or ""
    if channel.startswith("$"):
        raise errors.InvalidRequest(
            "event_name: $errors are at /$errors/event_summaries", field="event_name"
        )
    workflow = await platform.workflows.get(account.id, workflow_id)
    page = await paging.event_page(
        platform, workflow.id, channel=channel, limit=limit, before=before, after=after
    )
    items = [render.event_summary(e, expand=expanded) for e in page.items]
    return paging.id_body(items, page.total_count)


@router.get("/v1/workflows/{workflow_id}/sse", response_class=EventSourceResponse)
async def sse(workflow_id: str, account: AccountDep, platform: PlatformDep) -> EventSourceResponse:
    """``$.send.sse({channel, payload})`` of the workflow: on connect the newest 100, then
    live; the states.SSE ``event:`` field is the channel, ``data:`` the payload as JSON."""
    workflow = await platform.workflows.get(account.id, workflow_id)
    stream = platform.open_emits(workflow.id, after=(0, 0), channel=states.SSE)

    async def messages() -> Any:
        async for message_id, event in stream.items():
            body = event.payload if isinstance(event.payload, dict) else {}
            data = bodies.dumps(body.get("payload"))
            channel = body.get("channel")
            yield ServerSentEvent(
                data, id=message_id, event=text.clean(str(channel)) if channel else None, sep="\n"
            )

    return EventSourceResponse(
        messages(),
        ping=platform.settings.sse_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
        sep="\n",
        background=BackgroundTask(stream.close),
    )


# ---- the global error workflow --------------------------------------------------------------


@router.get("/v1/users/me/error_workflow")
async def get_error_workflow(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    workflow_id = await platform.workflows.error_workflow_id(account.id)
    return {"data": {"workflow_id": workflow_id}}


@router.put("/v1/users/me/error_workflow")
async def set_error_workflow(
    body: ErrorWorkflow, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    """Make ``workflow_id`` the global error workflow (every error of the account's workflows
    triggers it), or ``null`` for none."""
    await platform.workflows.set_error_workflow(account.id, body.workflow_id)
    return {"data": {"workflow_id": body.workflow_id}}
