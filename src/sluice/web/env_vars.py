"""Settings → environment variables: the ``process.env`` of the account's workflows' code
steps. Values are write-only, as over ``/v1/env_vars``: the page lists names."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.web import render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


async def _page(request: Request, session: sessions.Session, **extra: Any) -> Response:
    env_vars = sessions.platform_of(request).workflows.env_vars
    found = await env_vars.names(session.account.id)
    status = 400 if extra.get("error") else 200
    context = {"env_vars": found, **extra, **render.page_address(request, "/settings/env")}
    return render.page(request, "env_vars.html", context, session=session, status=status)


@router.get("/settings/env")
async def env_vars(request: Request) -> Response:
    return await _page(request, await sessions.required(request))


@router.post("/settings/env")
async def set_env_var(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    name, value = render.text(form, "name").strip(), render.text(form, "value")
    try:
        await sessions.platform_of(request).workflows.env_vars.set(session.account.id, name, value)
    except errors.SluiceError as exc:
        return await _page(request, session, error=exc, name=name)
    return render.redirect("/settings/env")


@router.post("/settings/env/{name}/delete")
async def delete_env_var(request: Request, name: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).workflows.env_vars.delete(session.account.id, name)
    return render.redirect("/settings/env")
