"""``sluice publish``: save a component to the account (or the public registry) by its key;
``sluice registry import``: fill the public registry from ``@pipedream/*`` npm packages or
from Pipedream's monorepo (a checkout, a directory or an archive: ``cli/monorepo.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sluice.cli import config, files, monorepo, render
from sluice.cli.client import Client

#: One package's import may install npm dependencies for the first time: minutes, not seconds.
_IMPORT_TIMEOUT = 1800.0


def register(app: typer.Typer) -> None:
    app.command()(publish)
    registry_app = typer.Typer(help="The public component registry.", no_args_is_help=True)
    registry_app.command("import")(import_packages)
    app.add_typer(registry_app, name="registry")


def publish(
    file: Annotated[Path, typer.Argument(help="The component's entry file.")],
    registry: Annotated[
        bool,
        typer.Option(
            "--registry", help="Publish to the public registry (admin keys only; semver)."
        ),
    ] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Publish an action (or a source) to the account, or to the public registry.

    Workflows and deploys use it by key. Publishing again saves a new version (a new sc_ id,
    the same key); lookups by key take the newest.

    Example: sluice publish actions/send-message/send-message.mjs
    """
    bundle = files.collect(file)
    api = Client(config.resolve(profile))
    path = "/v1/components/registry" if registry else "/v1/components"
    with render.spinner(f"Publishing {bundle.entry_path}…"):
        saved = api.post(path, bundle.body())["data"]
    if json_:
        render.data(saved)
        return
    where = "the public registry" if registry else "the account"
    render.line(
        ("Published ", "bold green"),
        (saved["id"], "bold"),
        f" to {where}: {saved.get('name')} {saved.get('version')} ({saved.get('component_type')})",
    )
    key = saved.get("key")
    if not key:
        render.warn(f"it has no key: refer to it by its id, {saved['id']}")
    elif saved.get("component_type") == "source":
        render.line("  Deploy it: ", (f"sluice deploy {key}", "bold"))
    else:
        render.line("  Key:       ", (key, "bold"), " (workflows use the newest version)")
    for warning in saved.get("warnings") or []:
        render.warn(str(warning.get("message", warning) if isinstance(warning, dict) else warning))


def import_packages(
    packages: Annotated[
        list[str],
        typer.Argument(
            help="npm package specs (@pipedream/slack@0.10.3, @pipedream/notion, …), or "
            "paths: a checkout of Pipedream's monorepo, an app directory "
            "(components/<app>/), or an archive of either (.tar.gz, .tgz, .tar)."
        ),
    ],
    app: Annotated[
        list[str] | None,
        typer.Option(
            "--app",
            help="Only this app of a monorepo path (components/<app>/); repeat for more. "
            "Default: every app the path holds.",
        ),
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Import Pipedream's components into the public registry (admin keys only).

    From published @pipedream/* npm packages, or from Pipedream's monorepo checked out here
    (each components/<app>/ with its package.json is imported as its npm package would be).
    Every action and source is saved under its own key and version, with its app file,
    common modules and package.json (its dependencies installed as a package's); importing a
    version again changes nothing. Prints, per component, whether it loaded, was skipped
    (why) or failed (the error).

    Examples: sluice registry import @pipedream/slack@0.10.3 @pipedream/notion;
    sluice registry import ~/src/pipedream --app rss --app github
    """
    api = Client(config.resolve(profile))
    reports = []

    def send(label: str, body: dict[str, Any]) -> None:
        with render.spinner(f"Importing {label}…"):
            answer = api.post("/v1/registry/imports", body, timeout=_IMPORT_TIMEOUT)["data"]
        for report in answer["packages"]:
            reports.append(report)
            if not json_:
                _show_import(report)

    for i, spec in enumerate(packages, 1):
        if monorepo.is_local(spec):
            for name, tree in monorepo.app_directories(spec, app or []):
                send(f"{name} from {spec}", {"directories": [tree]})
        else:
            send(f"{spec} ({i}/{len(packages)})", {"packages": [spec]})
    if json_:
        render.data({"packages": reports})


def _show_import(report: dict[str, Any]) -> None:
    title = f"{report.get('name') or report['spec']} {report.get('version') or ''}".strip()
    if report.get("error"):
        render.error(f"{title}: {report['error']}")
        return
    counts = report["counts"]
    render.line(
        (title, "bold"),
        f": {counts['found']} components, {counts['loaded']} loaded, "
        f"{counts['skipped']} skipped, {counts['failed']} failed",
    )
    app = report.get("app")
    if app:
        why = f" ({app['reason']})" if app.get("reason") else ""
        render.line("  ", ("app     ", "cyan"), f"{app['name_slug']} {app['status']}{why}")
    for item in report["components"]:
        if item["status"] == "loaded":
            render.line("  ", ("loaded  ", "green"), f"{item.get('key')} {item.get('version')}")
        elif item["status"] == "skipped":
            render.line("  ", ("skipped ", "yellow"), f"{item['path']}: {item.get('reason')}")
        else:
            render.line("  ", ("failed  ", "red"), f"{item['path']}: {item.get('reason')}")
