"""Configured prop values for deploy, dev and update: from ``--prop``/``--props``, else asked.

``--prop name=value`` is typed by the prop's definition: a string prop keeps the text as it
is, an app prop takes a connected account id (``--prop slack=apn_…``), other props parse the
text as JSON when it parses (``--prop count=5``, ``--prop tags='["a","b"]'``), else keep the
string. Required props still without a value are asked for on a terminal (label, description,
default, options: static ones, or the prop's async ``options()`` through the API); without a
terminal the command fails naming them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from sluice.cli import render
from sluice.cli.client import Client, segment
from sluice.errors import CliError

PropOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--prop",
        help="A prop value, NAME=VALUE (repeatable). JSON when it parses; for an app prop, a "
        "connected account id: --prop slack=apn_…",
    ),
]
PropsFileOpt = Annotated[
    Path | None,
    typer.Option("--props", help="A JSON file of {prop name: value}; --prop wins over it."),
]

#: App-specific prop types (``$.discord.channel``): their values are ids, i.e. strings.
_APP_SPECIFIC = re.compile(r"^\$\.(?!interface\.|service\.)[a-z0-9_]+\.[A-Za-z]+$")
#: Props whose value the platform provides or defaults (timer: the prop's default, or hourly).
_NOT_ASKED = frozenset(
    {"$.interface.http", "$.interface.timer", "$.service.db", "alert", "$.interface.apphook"}
)


def given(
    assignments: list[str] | None, props_file: Path | None, definitions: list[dict[str, Any]]
) -> dict[str, Any]:
    """The values from ``--props FILE`` then ``--prop NAME=VALUE``, typed by ``definitions``."""
    by_name = {p["name"]: p for p in definitions}
    values: dict[str, Any] = {}
    if props_file is not None:
        try:
            loaded = json.loads(props_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CliError(f"--props {props_file}: not a readable JSON file ({exc})") from exc
        if not isinstance(loaded, dict):
            raise CliError(f"--props {props_file}: give a JSON object of {{name: value}}")
        for name, value in loaded.items():
            values[name] = _app_value(by_name.get(name), value)
    for item in assignments or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CliError(f"--prop {item!r}: write NAME=VALUE", code="usage")
        values[name] = parse(by_name.get(name), raw)
    return values


def parse(prop: dict[str, Any] | None, raw: str) -> Any:
    """One ``--prop`` (or typed answer) as the value to send for ``prop``."""
    typ = (prop or {}).get("type", "")
    if typ == "string" or _APP_SPECIFIC.match(typ):
        decoded = _json(raw)
        return decoded if isinstance(decoded, str) else raw
    if typ == "app":
        return _app_value(prop, _json(raw, raw))
    decoded = _json(raw, raw)
    if typ.endswith("[]") and not isinstance(decoded, list):
        items = [part.strip() for part in raw.split(",") if part.strip()]
        return [parse({"type": typ[:-2]}, part) for part in items]
    return decoded


def _json(raw: str, default: Any = None) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return default


def _app_value(prop: dict[str, Any] | None, value: Any) -> Any:
    if (prop or {}).get("type") == "app" and isinstance(value, str):
        return {"authProvisionId": value}
    return value


def missing(
    definitions: list[dict[str, Any]], values: dict[str, Any], auth_free: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The required props without a value, in the component's order; an app prop of an app
    in ``auth_free`` (one that takes no connected account) is not required."""
    return [
        p
        for p in definitions
        if p.get("type") not in _NOT_ASKED
        and not p.get("optional")
        and "default" not in p
        and p["name"] not in values
        and not (p.get("type") == "app" and p.get("app") in auth_free)
    ]


def _auth_free(api: Client, definitions: list[dict[str, Any]], seen: dict[str, bool]) -> set[str]:
    """The apps of these props' app props that take no connected account (``auth_type``
    ``none`` in the catalog); each app asked once (``seen``)."""
    for slug in {str(p.get("app")) for p in definitions if p.get("type") == "app"} - set(seen):
        try:
            seen[slug] = api.get(f"/v1/apps/{segment(slug)}")["data"].get("auth_type") == "none"
        except CliError:
            seen[slug] = False  # not in the catalog: an account is asked for
    return {slug for slug, free in seen.items() if free}


def configure(api: Client, component: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` completed with an answer for each required prop that has none.

    A component with ``reloadProps`` props asks the API for its full prop list (its
    ``additionalProps()`` run with the values so far) at the start and after each such answer,
    so the props it adds are asked too.
    """
    definitions: list[dict[str, Any]] = component.get("configurable_props") or []
    if any(p.get("reloadProps") for p in definitions):
        definitions = reload(api, component, values)
    started = False
    seen: dict[str, bool] = {}
    while todo := missing(definitions, values, _auth_free(api, missing(definitions, values), seen)):
        if not sys.stdin.isatty():
            shown = ", ".join(_describe(p) for p in todo)
            example = todo[0]["name"]
            raise CliError(
                f"missing required props: {shown}; give them with --prop NAME=VALUE "
                f"(e.g. --prop {example}=…) or run on a terminal to be asked",
                code="usage",
            )
        if not started:
            render.note("Configuring props…", style="bold")
            started = True
        prop = todo[0]
        values[prop["name"]] = _ask(api, component, prop, values)
        if prop.get("reloadProps"):
            definitions = reload(api, component, values)
    return values


def reload(api: Client, component: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    """The component's full prop list for ``values`` (the API's reload props)."""
    with render.spinner("Loading props…"):
        answer = api.post(
            f"/v1/components/{segment(component['id'])}/props", {"configured_props": values}
        )["data"]
    for problem in answer.get("errors") or []:
        render.warn(f"additionalProps(): {problem}")
    props: list[dict[str, Any]] = answer["dynamicProps"]["configurableProps"]
    return props


def _describe(prop: dict[str, Any]) -> str:
    if prop.get("type") == "app":
        return f"{prop['name']} (a connected {prop.get('app')} account: apn_…)"
    label = prop.get("label")
    return f"{prop['name']} ({label})" if label and label != prop["name"] else prop["name"]


def _ask(
    api: Client, component: dict[str, Any], prop: dict[str, Any], values: dict[str, Any]
) -> Any:
    name, typ = prop["name"], str(prop.get("type"))
    label = prop.get("label") or name
    header = Text.assemble((label, "bold"), (f" ({name}, {typ})", "dim"))
    render.err.print(header)
    if prop.get("description"):
        render.err.print(Text("  " + str(prop["description"]), style="dim"))
    if "default" in prop:
        render.err.print(Text(f"  default: {json.dumps(prop['default'])}", style="dim"))
    if typ == "app":
        return _ask_account(api, prop)
    if isinstance(prop.get("options"), list) or prop.get("remoteOptions"):
        return _ask_option(api, component, prop, values)
    if typ == "boolean":
        return typer.confirm(f"{label}?", default=bool(prop.get("default", False)), err=True)
    while True:
        raw = typer.prompt(
            label, err=True, hide_input=bool(prop.get("secret")), default=_default_text(prop)
        )
        value = parse(prop, raw)
        problem = _problem(prop, value)
        if problem is None:
            return value
        render.error(problem)


def _default_text(prop: dict[str, Any]) -> str | None:
    if "default" not in prop:
        return None
    default = prop["default"]
    return default if isinstance(default, str) else json.dumps(default)


def _problem(prop: dict[str, Any], value: Any) -> str | None:
    typ = prop.get("type")
    if typ == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return "give a whole number"
        if "min" in prop and value < prop["min"]:
            return f"give at least {prop['min']}"
        if "max" in prop and value > prop["max"]:
            return f"give at most {prop['max']}"
    if typ == "object" and not isinstance(value, dict):
        return 'give a JSON object, e.g. {"key": "value"}'
    if typ == "string" and value == "":
        return "a value is required"
    return None


def _ask_account(api: Client, prop: dict[str, Any]) -> dict[str, str]:
    app = str(prop.get("app"))
    accounts = api.get("/v1/accounts", app=app)["data"]
    if not accounts:
        raise CliError(
            f"prop {prop['name']!r} needs a connected {app} account and the account has none: "
            "add one (POST /v1/accounts, see docs/api.md), then deploy again",
            code="usage",
        )
    for i, account in enumerate(accounts, 1):
        text = Text(f"  {i}) {account.get('name') or app}  ")
        text.append(account["id"], style="dim")
        render.err.print(text)
    while True:
        raw = typer.prompt(f"Which {app} account? 1-{len(accounts)}", err=True, default="1")
        chosen = _pick(raw, len(accounts))
        if chosen is not None:
            return {"authProvisionId": accounts[chosen]["id"]}
        if raw.startswith("apn_"):
            return {"authProvisionId": raw}
        render.error(f"give a number from 1 to {len(accounts)}")


def _ask_option(
    api: Client, component: dict[str, Any], prop: dict[str, Any], values: dict[str, Any]
) -> Any:
    label = prop.get("label") or prop["name"]
    many = str(prop.get("type", "")).endswith("[]")
    pager = _Pager(api, component, prop, values) if prop.get("remoteOptions") else None
    options: list[Any] = list(prop.get("options") or [])
    _show_options(options, start=1)
    if pager is not None:
        if prop.get("useQuery"):
            pager.query = typer.prompt("Search", err=True, default="", show_default=False) or None
        options += pager.next(start=1)
    while True:
        hint = "numbers, comma-separated" if many else f"1-{len(options)}"
        if pager is not None and pager.more:
            hint += ", m for more"
        raw = typer.prompt(f"{label} ({hint}, or type a value)", err=True)
        if pager is not None and pager.more and raw.strip().lower() == "m":
            options += pager.next(start=len(options) + 1, seen=options)
            continue
        picked = [_pick(part, len(options)) for part in (raw.split(",") if many else [raw])]
        if options and all(i is not None for i in picked):
            chosen = [_option_value(options[i]) for i in picked if i is not None]
            return chosen if many else chosen[0]
        return parse(prop, raw)


class _Pager:
    """The pages of a prop's async ``options()``, through the API's options call."""

    def __init__(
        self, api: Client, component: dict[str, Any], prop: dict[str, Any], values: dict[str, Any]
    ) -> None:
        self.api, self.values = api, values
        self.path = (
            f"/v1/components/{segment(component['id'])}/props/{segment(prop['name'])}/options"
        )
        self.page, self.context, self.more = 0, None, True
        self.query: str | None = None

    def next(self, start: int, seen: list[Any] | None = None) -> list[Any]:
        body = {
            "configured_props": self.values,
            "page": self.page,
            "prev_context": self.context,
            "query": self.query,
        }
        with render.spinner("Loading options…"):
            answer = self.api.post(self.path, body)["data"]
        known = {json.dumps(_option_value(o), sort_keys=True) for o in seen or []}
        fresh = [
            o
            for o in answer.get("options") or []
            if json.dumps(_option_value(o), sort_keys=True) not in known
        ]
        self.page += 1
        self.context = answer.get("context")
        # Options that ignore the page repeat themselves: nothing new means no more.
        self.more = bool(fresh)
        if not fresh and seen is not None:
            render.note("  no more options")
        _show_options(fresh, start)
        return fresh


def _show_options(options: list[Any], start: int) -> None:
    for i, option in enumerate(options, start):
        label, value = _option_label(option), _option_value(option)
        text = Text(f"  {i}) {label}")
        if json.dumps(value) != json.dumps(label) and str(value) != label:
            text.append(f"  {json.dumps(value)}", style="dim")
        render.err.print(text)


def _option_label(option: Any) -> str:
    if isinstance(option, dict) and "label" in option:
        return str(option["label"])
    return str(option)


def _option_value(option: Any) -> Any:
    if isinstance(option, dict) and "value" in option:
        return option["value"]
    return option


def _pick(raw: str, count: int) -> int | None:
    raw = raw.strip()
    if raw.isdigit() and 1 <= int(raw) <= count:
        return int(raw) - 1
    return None
