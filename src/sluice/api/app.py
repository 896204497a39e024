"""The ASGI application: ``/v1`` routes, the error shape, and the platform's lifetime.

The app holds no platform: its lifespan opens one and hands it to every request as lifespan
state (``scope["state"]["platform"]``, read as ``request.state.platform``), as Starlette
documents. So one app can serve platforms opened elsewhere (``serving``: the tests' in-process
platforms), and FastAPI's analysis of each route, made at an app's first request to it, is paid
once per process rather than once per platform."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluice import __version__, metrics, public_url
from sluice.api import (
    accounts,
    actions,
    apps,
    bodies,
    catalog,
    components,
    connections,
    data_stores,
    env_vars,
    errors,
    fields,
    files,
    flow,
    ingress,
    oauth,
    oauth_clients,
    openapi,
    ops,
    options,
    registry,
    sources,
    streams,
    subscriptions,
    users,
    webhooks,
    workflows,
)
from sluice.clock import Clock
from sluice.config import Settings
from sluice.errors import SluiceError
from sluice.platform import Platform
from sluice.web import app as web
from sluice.web import assets


class App(FastAPI):
    """FastAPI, with the public endpoints (``/e/…``, the hot path) answered in front of it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        platform: Platform = scope["state"]["platform"]
        settings = platform.settings
        # An endpoint host answers nothing else: the web UI and /v1 never serve on it.
        to = ingress.target(scope, settings.endpoint_base, settings.proxies)
        if to is not None:
            await ingress.serve(platform, to, scope, receive, send)  # counts its own answers
            return
        send = _counted("api", send)
        if (picked := fields.wanted(scope)) is not None:
            send = fields.filtering(send, *picked)
        # The links this request's answer holds follow its URL (unless SLUICE_PUBLIC_URL).
        token = public_url.enter(scope, settings.proxies)
        try:
            # Before routing, so no route reads a body over the limit, or one it cannot store.
            try:
                receive = await bodies.checked_receive(scope, receive, settings.api_max_body_bytes)
            except SluiceError as exc:
                await errors.render(exc)(scope, receive, send)
                return
            await super().__call__(scope, receive, send)
        finally:
            public_url.leave(token)


def _counted(kind: str, send: Send) -> Send:
    """``send``, counting the answer's status in ``sluice_http_requests``."""

    async def counting(message: Message) -> None:
        if message["type"] == "http.response.start":
            metrics.request(kind, message["status"])
        await send(message)

    return counting


#: The /v1 routes, one module per resource; then the CLI's (prop options, the component list)
#: and the operators' (health, metrics).
ROUTERS = (
    users,
    components,
    sources,
    accounts,
    apps,
    oauth,
    oauth_clients,
    actions,
    subscriptions,
    streams,
    workflows,
    flow,
    files,
    data_stores,
    env_vars,
    webhooks,
    registry,
    options,
    catalog,
    ops,
)


def _on_second_signal(action: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, action)
        except (ValueError, RuntimeError, NotImplementedError):
            return  # not the main thread (tests): nothing to listen to


def create_app(settings: Settings, *, clock: Clock | None = None) -> App:
    """An app whose lifespan opens the platform ``settings`` describes (``sluice serve``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        # The "api" role leaves queued jobs and timers to "worker" processes.
        background = settings.role != "api"
        async with Platform.open(settings, clock=clock, background=background) as opened:
            # What startup built (FastAPI's routes, SQLAlchemy's tables, pydantic models) lives
            # as long as the process: out of the cyclic collector's way, which otherwise walks
            # it on every full collection (measured: 7-12% more endpoint requests a second).
            gc.collect()
            gc.freeze()
            # The endpoints' requests are taken off uvicorn's parser (api/connections).
            yield {"platform": opened, connections.DIRECT: ingress.Direct(opened)}
            # Shutting down: the jobs in flight get their grace period; a second signal (the
            # first one stopped the server) ends it.
            _on_second_signal(opened.jobs.hurry)

    return _build(settings, lifespan)


def _build(settings: Settings, lifespan: Callable[[FastAPI], Any] | None) -> App:
    app = App(
        title="Sluice",
        version=__version__,
        description="Self-hosted workflows and Pipedream-compatible components. "
        "Every /v1 route needs `Authorization: Bearer <api key>` (a browser logged in to the "
        "web UI may use its session cookie instead; writes then need `X-CSRF-Token`).",
        lifespan=lifespan,
        default_response_class=bodies.SafeJSONResponse,
        # /docs is the web UI's, from local assets (FastAPI's loads Swagger UI from a CDN).
        docs_url=None,
        redoc_url=None,
    )
    errors.install(app)
    openapi.install(app)
    for module in ROUTERS:
        app.include_router(module.router)
    web.install(app, settings)
    return app


#: The apps ``serving`` built, by the web UI's assets folder (the one thing of a platform's
#: settings an app is built with).
_served: dict[Path, App] = {}


def serving(platform: Platform) -> ASGIApp:
    """The app serving ``platform``, an open platform the caller owns, with no lifespan (the
    tests' in-process platforms; ``httpx.ASGITransport``, uvicorn with ``lifespan="off"``):
    one app per process (per web UI assets folder), ``platform`` put in each request's state."""
    key = assets.folder(platform.settings)
    app = _served.get(key)
    if app is None:
        app = _served[key] = _build(platform.settings, None)

    async def with_platform(scope: Scope, receive: Receive, send: Send) -> None:
        await app(
            {**scope, "state": {**scope.get("state", {}), "platform": platform}}, receive, send
        )

    return with_platform
