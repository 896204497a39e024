"""The ASGI application: ``/v1`` routes, the error shape, and the platform's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI
from starlette.types import Message, Receive, Scope, Send

from sluice import __version__, metrics, public_url
from sluice.api import (
    accounts,
    actions,
    apps,
    bodies,
    catalog,
    components,
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


class App(FastAPI):
    """FastAPI, with the public endpoints (``/e/…``, the hot path) answered in front of it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        settings = self.state.platform.settings
        # An endpoint host answers nothing else: the web UI and /v1 never serve on it.
        to = ingress.target(scope, settings.endpoint_base, settings.proxies)
        if to is not None:
            await ingress.serve(self.state.platform, to, scope, receive, _counted("endpoint", send))
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


def create_app(
    settings: Settings | None = None,
    *,
    platform: Platform | None = None,
    clock: Clock | None = None,
) -> App:
    """An app that opens its own platform from ``settings``, or serves a given open one."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if platform is not None:
            app.state.platform = platform
            yield
            return
        assert settings is not None
        # The "api" role leaves queued jobs and timers to "worker" processes.
        background = settings.role != "api"
        async with Platform.open(settings, clock=clock, background=background) as opened:
            app.state.platform = opened
            # What startup built (FastAPI's routes, SQLAlchemy's tables, pydantic models) lives
            # as long as the process: out of the cyclic collector's way, which otherwise walks
            # it on every full collection (measured: 7-12% more endpoint requests a second).
            gc.collect()
            gc.freeze()
            yield
            # Shutting down: the jobs in flight get their grace period; a second signal (the
            # first one stopped the server) ends it.
            _on_second_signal(opened.jobs.hurry)

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
    if platform is not None:
        app.state.platform = platform
    errors.install(app)
    openapi.install(app)
    for module in ROUTERS:
        app.include_router(module.router)
    web.install(app, platform.settings if platform is not None else settings or Settings())
    return app
