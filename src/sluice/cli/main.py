"""The ``sluice`` command. ``serve`` runs the API; ``accounts create`` works offline on the store;
the rest is the client (``login``, ``deploy``, ``dev``, ``publish``, ``list``, ``events``,
``logs``, ``update``, ``delete``, ``workflows``, ``apps``), talking to a server over the REST API
(docs/cli.md).

Server flags have a ``SLUICE_*`` environment variable, shown by ``--help``. A client command's
failure is one line on stderr (``error: …``) and exit status 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sluice import errors, logs
from sluice.cli import (
    apps,
    components,
    data_stores,
    dev,
    email,
    env,
    listing,
    login,
    oauth_clients,
    render,
    sources,
    subscriptions,
    webhooks,
    workflows,
)
from sluice.config import Settings
from sluice.errors import CliError


class _App(typer.Typer):
    """Client failures (``CliError``) end as one line on stderr and exit status 1."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except CliError as exc:
            render.error(exc.message)
            sys.exit(1)


app = _App(
    help="Sluice: self-hosted workflows and Pipedream-compatible components.",
    no_args_is_help=True,
    add_completion=True,
    # Markdown: docstring paragraphs wrap to the terminal (the rich mode keeps line breaks).
    rich_markup_mode="markdown",
    # A traceback's locals could show an API key.
    pretty_exceptions_show_locals=False,
)
accounts_app = typer.Typer(
    help="Manage accounts (works offline, on the store itself).", no_args_is_help=True
)
app.add_typer(accounts_app, name="accounts")
for module in (
    login,
    sources,
    dev,
    components,
    listing,
    workflows,
    apps,
    data_stores,
    subscriptions,
    webhooks,
    env,
    email,
    oauth_clients,
):
    module.register(app)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="SLUICE_DATA_DIR",
        help="Where Sluice keeps its SQLite database, secret key, components and npm store.",
    ),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="SLUICE_DATABASE_URL",
        help="postgresql://user@host/db to use PostgreSQL; default SQLite in the data dir.",
    ),
]


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(envvar="SLUICE_HOST", help="Interface to listen on [127.0.0.1].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(envvar="SLUICE_PORT", help="Port to listen on [8000].")
    ] = None,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
    log_level: Annotated[
        str | None, typer.Option(envvar="SLUICE_LOG_LEVEL", help="debug, info, warning [info].")
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            envvar="SLUICE_PUBLIC_URL",
            help="The URL users reach Sluice at, the base of every link it makes (endpoint "
            "URLs, OAuth callback, error e-mails) [http://HOST:PORT].",
        ),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option(envvar="SLUICE_LOG_FORMAT", help="text, or json: one object a line [text]."),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            envvar="SLUICE_ROLE",
            help="all: API, endpoints, jobs and timers; api: API and endpoints only (jobs run "
            "in worker processes); worker: jobs and timers, no HTTP [all].",
        ),
    ] = None,
) -> None:
    """Run Sluice: the API and HTTP endpoints, the job worker and the scheduler.

    Example: sluice serve --port 8000 --data-dir ./sluice-data

    Split across processes on one database: sluice serve --role api (one or more), and
    sluice serve --role worker (one or more).
    """
    settings = _settings(
        host=host,
        port=port,
        data_dir=data_dir,
        database_url=database_url,
        log_level=log_level,
        role=role,
        public_url=public_url,
        log_format=log_format,
    )
    _serve(settings)


def _serve(settings: Settings) -> None:
    """Run the role ``settings`` asks for until stopped: the worker, or the HTTP server."""
    # The server's modules without the cyclic collector (it walked the hundreds of thousands of
    # objects they make again and again: ~0.5 s of a ~3 s import), then those objects kept out
    # of its collections for good: they live as long as the process.
    gc.disable()
    try:
        import uvicorn

        from sluice.api import connections
        from sluice.api.app import create_app
    finally:
        gc.enable()
    gc.freeze()

    if settings.role not in ("all", "api", "worker"):
        typer.echo(f"error: --role is all, api or worker, not {settings.role!r}", err=True)
        raise typer.Exit(2)
    try:
        logs.configure(settings.log_level, settings.log_format)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _check_sandbox(settings)
    if settings.role == "worker":
        typer.echo(f"Sluice worker  data: {settings.data_dir}", err=True)
        if not settings.public_url:
            typer.echo(
                "warning: no --public-url (SLUICE_PUBLIC_URL): a worker answers no requests, so "
                "the links it makes (error e-mails, resume URLs) use "
                + settings.resolved_public_url,
                err=True,
            )
        asyncio.run(_work(settings))
        return
    listening = _bind(settings)
    _ui_assets(settings)
    typer.echo(
        f"Sluice on http://{settings.host}:{settings.port}  data: {settings.data_dir}"
        + ("  (role api: jobs run in worker processes)" if settings.role == "api" else ""),
        err=True,
    )
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        log_config=logs.uvicorn_config(settings.log_format),
        # X-Forwarded-* are read by the app itself, from SLUICE_TRUSTED_PROXIES only
        # (sluice/public_url.py): uvicorn's own reading (127.0.0.1 by default) is off.
        proxy_headers=False,
        # A head time-out and a cap per client: idle connections cannot starve others.
        **connections.server_options(settings),
    )
    config.load_app()
    server = uvicorn.Server(config)
    with listening, contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listening])
    if not server.started:
        raise typer.Exit(3)  # uvicorn's STARTUP_FAILURE; it logged why


def _bind(settings: Settings) -> socket.socket:
    """The server's socket, bound and listening now (as uvicorn binds: SO_REUSEADDR, IPv6 when
    the host has a colon) and handed to uvicorn, which accepts on it once the app has started
    (it then logs no "Uvicorn running on" line: "Sluice on http://..." above says where). A
    taken port stops the start at once, before the database is migrated and the runners
    start; and no other process can take the port in between. A probe that bound and closed
    again left that window open for the whole start (~1 s): a test's server on a port picked
    free found it taken by then, said "Application startup complete" and exited (seen with
    three test processes)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        typer.echo(
            f"error: cannot listen on {settings.host}:{settings.port}: "
            f"{exc.strerror or exc} "
            "(another Sluice running? choose another with --port or SLUICE_PORT)",
            err=True,
        )
        raise typer.Exit(1) from None
    # Listening from now: a client that connects during the start waits in the backlog for
    # the app (uvicorn's own default backlog) instead of being refused.
    sock.listen(2048)
    return sock


def _ui_assets(settings: Settings) -> None:
    """The web UI's npm packages, installed on first use (``bin/sluice`` has done it already)."""
    from sluice.web import assets

    if assets.installed(settings) is None:
        typer.echo("Installing the web UI's packages from the npm registry ...", err=True)
        try:
            assets.ensure(settings)
        except errors.SluiceError as exc:
            typer.echo(f"error: {exc.message}", err=True)
            raise typer.Exit(1) from exc


def _check_sandbox(settings: Settings) -> None:
    """Make sure user code can be jailed before serving: install bubblewrap where we can (root
    with apt-get), else stop with a one-line instruction. SLUICE_SANDBOX=off skips this."""
    import shutil
    import subprocess

    from sluice import platform

    if settings.sandbox == "off":
        return
    if shutil.which("bwrap") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        typer.echo("Installing bubblewrap (the sandbox for user code) with apt-get ...", err=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "bubblewrap"]
        out = subprocess.DEVNULL
        if subprocess.run(install, env=env, stdout=out, check=False).returncode != 0:
            # A fresh machine's package lists may be empty: refresh once, then try again.
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=out, check=False)
            subprocess.run(install, env=env, stdout=out, check=False)
    try:
        platform.check_sandbox(settings)
    except errors.SluiceError as exc:  # the sandbox, or SLUICE_EGRESS_ALLOW
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


async def _work(settings: Settings) -> None:
    """The worker role: jobs and timers until SIGINT or SIGTERM."""
    import signal

    # Here, not at the top: every client command imports this module, and prometheus_client
    # is ~25 ms of its ~0.25 s start.
    from sluice import metrics
    from sluice.platform import Platform

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Platform.open(settings, background=True) as platform:
        # No API here: its counters (runs, errors, limits, runner restarts) on a port of
        # their own, when asked for.
        if settings.metrics_port:
            metrics.serve(settings.host, settings.metrics_port)
            where = f"http://{settings.host}:{settings.metrics_port}/metrics"
            typer.echo(f"Sluice worker metrics: {where}", err=True)
        typer.echo("Sluice worker ready", err=True)
        await stop.wait()
        # The jobs in flight get SLUICE_SHUTDOWN_GRACE_SECONDS; a second signal ends the wait.
        typer.echo("stopping: finishing the jobs in flight (signal again to stop now)", err=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, platform.jobs.hurry)


@accounts_app.command("create")
def accounts_create(
    name: Annotated[str, typer.Option("--name", help="The account's user name.")],
    email: Annotated[str | None, typer.Option("--email", help="Where error e-mails go.")] = None,
    admin: Annotated[
        bool, typer.Option("--admin", help="May publish to the public registry.")
    ] = False,
    password: Annotated[
        bool,
        typer.Option(
            "--password",
            help="Ask for a password (typed twice, without echo), to log in from a browser.",
        ),
    ] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create an account and print its id and API key as JSON. The key is shown only once.

    Example: sluice accounts create --name ada --email ada@example.com --password
    """
    from sluice.platform import create_account_offline

    settings = _settings(data_dir=data_dir, database_url=database_url)
    secret: str | None = None
    if password:
        secret = typer.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    try:
        account, key = asyncio.run(
            create_account_offline(settings, name, email, is_admin=admin, password=secret)
        )
    except errors.SluiceError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps({"id": account.id, "api_key": key}))


def _settings(**flags: Any) -> Settings:
    try:
        return Settings.from_env(**flags)
    except errors.SluiceError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc


if __name__ == "__main__":
    app()
