"""Mounts the web UI on the app: its routes, its static files, the npm packages it serves."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from sluice import errors
from sluice.config import Settings
from sluice.web import (
    account_email,
    action_steps,
    assets,
    catalog,
    connected,
    docs,
    env_vars,
    logins,
    render,
    sources,
    step_tests,
    trigger_sources,
    webhooks,
    workflows,
)
from sluice.web import session as sessions

ROUTERS = (
    logins, sources, action_steps, step_tests, trigger_sources, workflows, catalog, connected,
    docs, env_vars, webhooks, account_email,
)  # fmt: skip


async def _login_required(request: Request, _exc: Exception) -> Response:
    platform = sessions.platform_of(request)
    if await platform.logins.needs_owner():
        return render.redirect("/setup")
    if request.method != "GET":
        return render.redirect("/login")
    # Back to this page after the login (the spec's deploy addresses are links to follow).
    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return render.redirect("/login?" + urlencode({"next": wanted}))


def install(app: FastAPI, settings: Settings) -> None:
    for module in ROUTERS:
        app.include_router(module.router)
    app.add_exception_handler(errors.LoginRequired, _login_required)
    vendor = assets.folder(settings) / "node_modules"
    for name, inside in assets.VENDOR.items():
        app.mount(
            f"/assets/vendor/{name}",
            StaticFiles(directory=vendor / inside, check_dir=False),
            name=f"vendor-{name}",
        )
    own = Path(str(resources.files("sluice.web").joinpath("static")))
    app.mount("/assets", StaticFiles(directory=own), name="assets")
