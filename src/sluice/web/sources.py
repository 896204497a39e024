"""Sources: the list, the spec's deploy addresses (``/sources?action=create&key=…`` and
``&url=…``) and a new source from code, a source's page (its events and logs arrive live over
``/v1``'s SSE), edit its props, its code or its version, activate and deactivate, delete."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from sluice import errors
from sluice.domain import email_messages
from sluice.platform import (
    ComponentInput,
    Deployment,
    DeployRequest,
    OptionsRequest,
    Platform,
    SavedComponent,
    UpdateRequest,
)
from sluice.web import connected, props, render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)

#: What the "Write the code" editor starts with: a webhook source, as the quickstart's.
STARTER = """export default {
  name: "My webhook",
  version: "0.0.1",
  props: {
    http: { type: "$.interface.http", customResponse: true },
  },
  async run(event) {
    this.http.respond({ status: 200, body: { ok: true } });
    this.$emit(event.body, { summary: `${event.method} ${event.path}` });
  },
};
"""


async def _fetched(platform: Platform, owner_id: str, url: str) -> SavedComponent:
    """Fetch a component by URL into the account (its code is loaded in the account's runner
    to read its props): only ever on a POST with the CSRF token, never on a GET."""
    try:
        return await platform.sources.resolve_component(
            owner_id, DeployRequest(source=ComponentInput(code=None, url=url))
        )
    except errors.SluiceError as exc:
        raise type(exc)(exc.message, field="url", details=exc.details) from exc


async def _deploy_form(
    request: Request,
    session: sessions.Session,
    component: SavedComponent,
    values: dict[str, Any],
    **extra: Any,
) -> Response:
    platform = sessions.platform_of(request)
    context = {
        **render.page_address(request, f"/sources?action=create&component={component.id}"),
        "component": component,
        "fields": props.fields(component.configurable_props, values),
        "accounts": await platform.apps.list(session.account.id),
        **extra,
    }
    status = 400 if extra.get("error") else 200
    return render.page(request, "source_deploy.html", context, session=session, status=status)


async def _summary(platform: Platform, deployment: Deployment) -> dict[str, Any]:
    newest = await platform.events.page(
        deployment.id, channel=None, limit=1, window=1, before=None, after=None
    )
    logs = await platform.events.recent_logs(deployment.id, 1)
    timer = any(
        isinstance(v, dict) and ("intervalSeconds" in v or "cron" in v)
        for v in deployment.configured_props.values()
    )
    trigger = "HTTP" if deployment.endpoint_id else "timer" if timer else "manual"
    return {
        "d": deployment,
        "trigger": trigger,
        "last_event_ms": newest.items[0].ts_ms if newest.items else None,
        "failing": bool(logs) and logs[-1].level == "error",
    }


@router.get("/sources")
async def sources(
    request: Request,
    action: str | None = None,
    key: str | None = None,
    url: str | None = None,
    component: str | None = None,
) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    if action == "create":
        if not key and not component:
            # ``&url=…`` only fills the form in: fetching runs the file's code in this
            # account's runner, so it waits for the user's own POST (a link from another site
            # must not do it).
            blank = {"url": url, "code": STARTER}
            return render.page(request, "source_pick.html", blank, session=session)
        try:
            found = await platform.sources.resolve_component(
                session.account.id, DeployRequest(component_key=key, component_id=component)
            )
        except errors.SluiceError as exc:
            failed = {"error": exc, "key": key, "code": STARTER}
            return render.page(request, "source_pick.html", failed, session=session, status=400)
        chosen = props.just_connected(found.configurable_props, request.query_params)
        here = connected.here(request)
        return await _deploy_form(request, session, found, chosen, return_to=here)
    page = await platform.sources.list(session.account.id, limit=100, before=None, after=None)
    rows = [await _summary(platform, d) for d in page.items]
    listed = {"rows": rows, "total": page.total_count}
    return render.page(request, "sources.html", listed, session=session)


@router.post("/sources/fetch")
async def fetch(request: Request) -> Response:
    """The "From a URL" form: the component is fetched and saved, then configured."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    url = render.text(form, "url").strip()
    try:
        found = await _fetched(sessions.platform_of(request), session.account.id, url)
    except errors.SluiceError as exc:
        context = {"error": exc, "url": url, "code": STARTER}
        context.update(render.page_address(request, "/sources?action=create"))
        return render.page(request, "source_pick.html", context, session=session, status=400)
    return render.redirect(f"/sources?action=create&component={quote(found.id)}")


@router.post("/sources/code")
async def from_code(request: Request) -> Response:
    """The "Write the code" form: the code is saved (loaded in the account's runner to read
    its props), then configured and deployed as any component is."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    code = render.code(form, "code")
    platform = sessions.platform_of(request)
    try:
        found = await platform.sources.resolve_component(
            session.account.id, DeployRequest(source=ComponentInput(code=code))
        )
        if found.component_type != "source":
            raise errors.InvalidComponent(
                'this is an action: a source has no type, or type: "source"', field="type"
            )
    except errors.SluiceError as exc:
        context = {"code_error": exc, "code": code}
        context.update(render.page_address(request, "/sources?action=create"))
        return render.page(request, "source_pick.html", context, session=session, status=400)
    return render.redirect(f"/sources?action=create&component={quote(found.id)}")


@router.post("/sources")
async def deploy(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    component = await platform.sources.resolve_component(
        session.account.id, DeployRequest(component_id=render.text(form, "component_id"))
    )
    configured = props.from_form(component.configurable_props, form)
    name = render.text(form, "name").strip() or None
    try:
        deployment = await platform.sources.deploy(
            session.account.id,
            DeployRequest(component_id=component.id, name=name, configured_props=configured),
        )
    except errors.SluiceError as exc:
        return await _deploy_form(
            request,
            session,
            component,
            configured,
            error=exc,
            name=name,
            return_to=connected.here(request),
        )
    return render.redirect(f"/sources/{deployment.id}")


async def _source_page(
    request: Request, session: sessions.Session, source_id: str, **extra: Any
) -> Response:
    platform = sessions.platform_of(request)
    deployment = await platform.sources.get(session.account.id, source_id)
    component = await platform.components.by_id(deployment.component_id)
    chosen: dict[str, Any] = {}
    if request.method == "GET":  # back from a Connect button: the new account chosen
        chosen = props.just_connected(component.configurable_props, request.query_params)
    shown = {**deployment.configured_props, **chosen, **extra.pop("values", {})}
    versions = []
    if component.key:
        versions = await platform.component_versions(session.account.id, component.key)
    context = {
        "d": deployment,
        "component": component,
        "code": component.code,
        "versions": versions,
        "updated": request.query_params.get("updated") if request.method == "GET" else None,
        **render.page_address(request, f"/sources/{deployment.id}"),
        "endpoint_url": platform.endpoint_url(deployment.endpoint_id),
        "mail_address": (
            f"{deployment.id}@{platform.settings.resolved_email_domain}"
            if component.key == email_messages.SOURCE_KEY
            else None
        ),
        "mail_listening": platform.mail_in is not None,
        "fields": props.fields(component.configurable_props, shown),
        "secret_names": sorted(deployment.secret_props),
        "accounts": await platform.apps.list(session.account.id),
        "return_to": connected.here(request),
        **extra,
    }
    status = 400 if extra.get("error") else 200
    return render.page(request, "source.html", context, session=session, status=status)


@router.get("/sources/{source_id}")
async def source(request: Request, source_id: str) -> Response:
    session = await sessions.required(request)
    return await _source_page(request, session, source_id)


@router.post("/sources/{source_id}/update")
async def update(request: Request, source_id: str) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    deployment = await platform.sources.get(session.account.id, source_id)
    component = await platform.components.by_id(deployment.component_id)
    configured = props.from_form(component.configurable_props, form)
    change = UpdateRequest(
        name=render.text(form, "name").strip() or None, configured_props=configured
    )
    try:
        await platform.sources.update(session.account.id, source_id, change)
    except errors.SluiceError as exc:
        return await _source_page(request, session, source_id, error=exc, values=configured)
    return render.redirect(f"/sources/{source_id}")


@router.post("/sources/{source_id}/code")
async def update_code(request: Request, source_id: str) -> Response:
    """New code for a deployed source (its other files kept): the spec's update, so the same
    id, endpoint and db state; deactivate runs with the old code, activate with the new."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    deployment = await platform.sources.get(session.account.id, source_id)
    component = await platform.components.by_id(deployment.component_id)
    code = render.code(form, "code")
    others = {p: t for p, t in component.files.items() if p != component.entry_path}
    source = ComponentInput(code=code, entry_path=component.entry_path, files=others)
    try:
        await platform.sources.update(
            session.account.id, source_id, UpdateRequest(component=DeployRequest(source=source))
        )
    except errors.SluiceError as exc:
        return await _source_page(request, session, source_id, code_error=exc, code=code)
    return render.redirect(f"/sources/{source_id}?updated=code#code")


@router.post("/sources/{source_id}/version")
async def move_version(request: Request, source_id: str) -> Response:
    """Move a source to another version of its component (a registry version or one of the
    account's saves of that key)."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    change = UpdateRequest(
        component=DeployRequest(component_id=render.text(form, "component_id").strip())
    )
    try:
        await platform.sources.update(session.account.id, source_id, change)
    except errors.SluiceError as exc:
        return await _source_page(request, session, source_id, version_error=exc)
    return render.redirect(f"/sources/{source_id}?updated=version#code")


@router.post("/sources/{source_id}/run")
async def run(request: Request, source_id: str) -> Response:
    """Run the source now on an event (as ``POST /v1/sources/{id}/run``); what it emits and
    logs arrives on its page live."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    raw = render.text(form, "event").strip()
    event = props.decoded(raw) if raw else None
    await sessions.platform_of(request).sources.run(session.account.id, source_id, event)
    return render.redirect(f"/sources/{source_id}")


@router.post("/sources/{source_id}/active")
async def set_active(request: Request, source_id: str) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    active = render.text(form, "active") == "true"
    await sessions.platform_of(request).sources.update(
        session.account.id, source_id, UpdateRequest(active=active)
    )
    return render.redirect(f"/sources/{source_id}")


@router.post("/sources/{source_id}/delete")
async def delete(request: Request, source_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).sources.delete(session.account.id, source_id)
    return render.redirect("/sources")


@router.post("/components/{component_id}/props/{prop}/options")
async def options(
    request: Request,
    component_id: str,
    prop: str,
    prefix: Annotated[str, Query(pattern=r"^[A-Za-z0-9_.]{1,80}$")] = "prop",
    page: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> Response:
    """A page of a prop's async options as ``<option>``s (htmx swaps them into the select);
    the form's values so far (inputs named ``<prefix>.<prop>``) are passed to ``options()``
    as Pipedream does, with the search text and the previous page's context."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    component = await platform.sources.resolve_component(
        session.account.id, DeployRequest(component_id=component_id)
    )
    configured = props.from_form(component.configurable_props, form, prefix=prefix)
    configured.pop(prop, None)
    key = f"{prefix}.{prop}"
    query = render.text(form, f"query.{key}").strip() or None
    previous = props.decoded(render.text(form, f"ctx.{key}")) if page > 0 else None
    request_ = OptionsRequest(
        prop=prop, configured_props=configured, page=page, prev_context=previous, query=query
    )
    found = await platform.options.list(session.account.id, component, request_)
    context = {
        "options": found.options or [],
        "context": found.context,
        # More while the component hands back a context for the next page (Pipedream's
        # pagination) and this page was not empty.
        "more": bool(found.context) and bool(found.options),
        # The choice so far stays chosen when the list is fetched again.
        "current": render.text(form, key),
        "page": page,
        "key": key,
        "fid": prefix.replace(".", "-") + "-" + prop,
        "url": f"/components/{component_id}/props/{prop}/options?prefix={prefix}",
    }
    return render.page(request, "options.html", context, session=session)
