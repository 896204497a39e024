"""Is this a component, and what does it ask the user for?

``validate_shape`` takes what Node reported when it loaded a module (the runner's ``inspect``
result, docs/runner-protocol.md) and applies every rule of the spec's component and prop tables;
each failure is an ``InvalidComponent`` naming the field (``props.count.min``). The types the
spec lists are accepted, and so are the ones Pipedream documents and real registry components
use (``any``, ``alert``, ``$.interface.apphook``, ``data_store``, ...), so those deploy unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from sluice.domain import text as text_rules
from sluice.errors import InvalidComponent, InvalidRequest

Kind = Literal["source", "action"]

HTTP = "$.interface.http"
TIMER = "$.interface.timer"
DB = "$.service.db"
APPHOOK = "$.interface.apphook"

#: Types only a source may declare (the spec's "sources only" rows, plus apphook).
SOURCE_ONLY = frozenset({HTTP, TIMER, DB, APPHOOK})
#: Types with a ``[]`` array form.
ARRAYABLE = frozenset({"boolean", "integer", "string"})
#: Every plain type accepted: the spec's table, then Pipedream's documented extras.
SCALAR_TYPES = (
    frozenset(
        {
            "app",
            "boolean",
            "integer",
            "string",
            "object",
            "any",
            "alert",
            "data_store",
            "http_request",
            "sql",
            "dir",
        }
    )
    | SOURCE_ONLY
)
#: App-specific types from Pipedream's SDK: ``$.discord.channel``, ``$.airtable.baseId[]``.
_APP_SPECIFIC = re.compile(r"^\$\.(?!interface\.|service\.)[a-z0-9_]+\.[A-Za-z]+(\[\])?$")

HOOKS = ("deploy", "activate", "deactivate")
DEDUPE = ("unique", "greatest", "last")
#: Fields of a definition that are plumbing, not part of ``configurable_props``.
_INTERNAL = frozenset({"propDefinition", "functionFields", "propDefinitions", "methods"})


@dataclass(frozen=True)
class Shape:
    """A validated component."""

    kind: Kind
    name: str
    key: str | None
    version: str
    description: str | None
    dedupe: str | None
    configurable_props: list[dict[str, Any]]
    #: Rules waived by settings, each naming the prop (see ``required_defaults``).
    warnings: list[str]


def component_kind(raw_type: Any) -> Kind:
    # Real sources say type: "source"; the spec says a component without type is one.
    if raw_type is None or raw_type == "source":
        return "source"
    if raw_type == "action":
        return "action"
    raise InvalidComponent(
        f'type must be "action" (or "source", or absent for a source), not {raw_type!r}',
        field="type",
    )


def validate_shape(info: dict[str, Any], *, compat: bool = False) -> Shape:
    """Apply the spec's rules to what Node reported.

    ``compat`` applies the compatibility rules (docs/api.md, "Compatibility rules"): the
    spec's rules that Pipedream's own published components break, and what Pipedream accepts
    that the spec refuses, are waived, each waiver kept as a warning. A ``default`` on a prop
    that is not optional (helper functions' compare-arrays) makes the prop optional with that
    default; a source-only prop in an action (an action's ``$.service.db``) is accepted as
    Pipedream accepts it; a source without ``version`` is ``0.0.1``; a source with a timer
    prop and no ``run()`` emits each tick's event (Pipedream's schedule sources); an
    ``http_request`` prop may leave out its type (the runner reads it from its default); an
    entry an ``additionalProps()`` returns as ``undefined`` is left out.
    """
    kind = component_kind(info.get("type"))
    warnings: list[str] = []
    compat_warnings = warnings if compat else None
    name, version, key, description = _top_fields(info, kind, compat_warnings)
    reported_props = [p for p in info.get("props") or [] if not _undefined_prop(p, compat_warnings)]
    if info.get("run_type") != "function" and not _emits_ticks(
        info, kind, reported_props, compat_warnings
    ):
        what = "missing" if info.get("run_type") in (None, "undefined") else "not a function"
        raise InvalidComponent(
            f"run is required: an (async) function, and it is {what}", field="run"
        )
    _check_hooks(info, kind)
    dedupe = info.get("dedupe")
    if dedupe is not None:
        if kind == "action":
            raise InvalidComponent(
                "dedupe is for sources only; actions cannot dedupe", field="dedupe"
            )
        if dedupe not in DEDUPE:
            raise InvalidComponent(
                f"dedupe must be one of {', '.join(DEDUPE)}, not {dedupe!r}", field="dedupe"
            )
    props = [_prop_entry(reported, kind, compat_warnings) for reported in reported_props]
    return Shape(kind, name, key, version, description, dedupe, props, warnings)


#: The version a source without one gets under the compatibility rules.
ASSUMED_VERSION = "0.0.1"


def _top_fields(
    info: dict[str, Any], kind: Kind, warnings: list[str] | None
) -> tuple[str, str, str | None, str | None]:
    """``name``, ``version``, ``key`` and ``description``, checked."""
    name = info.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidComponent("name is required: a non-empty string", field="name")
    version = info.get("version")
    if version is None and kind == "source" and warnings is not None:
        # Pipedream deploys a source without a version (its quickstart's examples have none).
        warnings.append(f"version: none given; {ASSUMED_VERSION} assumed (compatibility rules)")
        version = ASSUMED_VERSION
    if not isinstance(version, str) or not version.strip():
        raise InvalidComponent('version is required: a string such as "0.0.1"', field="version")
    key = info.get("key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise InvalidComponent("key must be a non-empty string", field="key")
    description = info.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidComponent("description must be a string", field="description")
    _check_text(name, "name", 300)
    _check_text(version, "version", 100)
    _check_text(key, "key", 300)
    return name, version, key, description


def _undefined_prop(reported: dict[str, Any], warnings: list[str] | None) -> bool:
    """Whether a prop entry is ``undefined`` and left out (compatibility rules): Pipedream
    skips such entries (shopify's metafield actions return some from additionalProps())."""
    if not reported.get("undefined") or warnings is None:
        return False
    warnings.append(f"props.{reported.get('name', '?')}: undefined; left out (compatibility rules)")
    return True


def _emits_ticks(
    info: dict[str, Any], kind: Kind, props: list[dict[str, Any]], warnings: list[str] | None
) -> bool:
    """Whether a component without ``run()`` is a schedule source the runner runs by emitting
    each tick (compatibility rules; Pipedream's ``schedule`` app's sources have no run())."""
    if warnings is None or kind != "source" or info.get("run_type") not in (None, "undefined"):
        return False
    timers = [
        p.get("name", "?")
        for p in props
        if isinstance(p.get("definition"), dict) and p["definition"].get("type") == TIMER
    ]
    if not timers:
        return False
    warnings.append(
        f"run: none; each tick of props.{timers[0]} is emitted as the event (compatibility rules)"
    )
    return True


def _prop_entry(reported: dict[str, Any], kind: Kind, warnings: list[str] | None) -> dict[str, Any]:
    """One prop's ``configurable_props`` entry; ``warnings`` (compatibility rules) collects
    the waivers instead of failing."""
    prop_name = reported.get("name", "?")
    definition = reported.get("definition")
    if reported.get("inferred_type"):
        if warnings is None:
            raise InvalidComponent(
                f"prop {prop_name!r} has no type", field=f"props.{prop_name}.type"
            )
        warnings.append(
            f"props.{prop_name}: no type; {reported['inferred_type']} read from its default "
            "(compatibility rules)"
        )
    if warnings is not None and isinstance(definition, dict):
        if _required_with_default(definition):
            warnings.append(
                f"props.{prop_name}: default on a prop that is not optional; treated as "
                "optional (compatibility rules)"
            )
            reported = {**reported, "definition": {**definition, "optional": True}}
        typ = str(definition.get("type", ""))
        if kind == "action" and typ in SOURCE_ONLY:
            warnings.append(
                f"props.{prop_name}: {typ} in an action, which the spec keeps to sources "
                "(compatibility rules)"
            )
            return validate_prop(prop_name, reported, "source")
    return validate_prop(prop_name, reported, kind)


def _check_text(value: Any, field: str, max_chars: int) -> None:
    # Stored in columns of that size; JavaScript strings may hold what storage cannot.
    try:
        text_rules.check_name(value, field, max_chars)
    except InvalidRequest as exc:
        raise InvalidComponent(exc.message, field=field) from exc


def _required_with_default(d: dict[str, Any]) -> bool:
    typ = str(d.get("type", ""))
    return "default" in d and not d.get("optional") and typ not in (TIMER, HTTP, DB, "alert")


def _check_hooks(info: dict[str, Any], kind: Kind) -> None:
    hook_types: dict[str, str] = info.get("hook_types") or {}
    if not hook_types:
        return
    if kind == "action":
        raise InvalidComponent("hooks are for sources only; actions have no hooks", field="hooks")
    for hook, typ in hook_types.items():
        if hook not in HOOKS:
            raise InvalidComponent(
                f"unknown hook {hook!r}: hooks are {', '.join(HOOKS)}", field=f"hooks.{hook}"
            )
        if typ != "function":
            raise InvalidComponent(f"hooks.{hook} must be a function", field=f"hooks.{hook}")


def validate_prop(name: str, reported: dict[str, Any], kind: Kind) -> dict[str, Any]:
    """Check one prop definition; return its ``configurable_props`` entry."""
    where = f"props.{name}"
    if reported.get("error"):
        raise InvalidComponent(f"prop {name!r}: {reported['error']}", field=where)
    d = reported.get("definition")
    if not isinstance(d, dict):
        raise InvalidComponent(f"prop {name!r} must be an object or a type string", field=where)
    typ = d.get("type")
    if not isinstance(typ, str) or not typ:
        raise InvalidComponent(f"prop {name!r} has no type", field=f"{where}.type")
    base = typ[:-2] if typ.endswith("[]") else typ
    if _APP_SPECIFIC.match(typ):
        pass
    elif base not in SCALAR_TYPES:
        raise InvalidComponent(
            f"prop {name!r}: {typ!r} is not a valid prop type", field=f"{where}.type"
        )
    elif typ.endswith("[]") and base not in ARRAYABLE:
        raise InvalidComponent(
            f"prop {name!r}: {base!r} has no array form ({typ!r}); arrays exist for "
            "boolean[], integer[] and string[]",
            field=f"{where}.type",
        )
    if base in SOURCE_ONLY and kind != "source":
        raise InvalidComponent(
            f"prop {name!r}: {typ} props are for sources only", field=f"{where}.type"
        )
    _check_fields(name, d, typ, base)
    entry = {"name": name, **{k: v for k, v in d.items() if k not in _INTERNAL}}
    if typ == "app":
        entry = {"name": name, "type": "app", "app": d.get("app")}
        for k in ("label", "description", "optional", "reloadProps"):
            if k in d:
                entry[k] = d[k]
    return entry


def _check_fields(name: str, d: dict[str, Any], typ: str, base: str) -> None:
    where = f"props.{name}"
    for text in ("label", "description"):
        if text in d and not isinstance(d[text], str):
            raise InvalidComponent(
                f"prop {name!r}: {text} must be a string", field=f"{where}.{text}"
            )
    for flag in ("optional", "secret", "customResponse", "hidden", "disabled", "reloadProps"):
        if flag in d and not isinstance(d[flag], bool):
            raise InvalidComponent(
                f"prop {name!r}: {flag} must be true or false", field=f"{where}.{flag}"
            )
    if typ == "app" and (not isinstance(d.get("app"), str) or not d["app"]):
        raise InvalidComponent(
            f"prop {name!r}: an app prop needs app: the app's name slug", field=f"{where}.app"
        )
    if d.get("secret") and typ != "string":
        raise InvalidComponent(
            f"prop {name!r}: secret is allowed only on string props, not on {typ}",
            field=f"{where}.secret",
        )
    for bound in ("min", "max"):
        if bound in d:
            if base != "integer":
                raise InvalidComponent(
                    f"prop {name!r}: {bound} is allowed only on integer props, not on {typ}",
                    field=f"{where}.{bound}",
                )
            if not _is_int(d[bound]):
                raise InvalidComponent(
                    f"prop {name!r}: {bound} must be an integer", field=f"{where}.{bound}"
                )
    if "min" in d and "max" in d and d["min"] > d["max"]:
        raise InvalidComponent(
            f"prop {name!r}: min ({d['min']}) is greater than max ({d['max']})",
            field=f"{where}.min",
        )
    if typ == TIMER:
        if "default" in d:
            check_timer_value(d["default"], f"{where}.default")
    elif "default" in d and not d.get("optional") and base not in (HTTP, DB, "alert"):
        raise InvalidComponent(
            f"prop {name!r}: default is allowed only on optional props; add optional: true "
            "or remove the default",
            field=f"{where}.default",
        )
    if "options" in d:
        _check_options(name, d["options"])


def _check_options(name: str, options: Any) -> None:
    where = f"props.{name}.options"
    if not isinstance(options, list):
        raise InvalidComponent(
            f"prop {name!r}: options must be an array or an async method", field=where
        )
    for i, option in enumerate(options):
        if isinstance(option, dict):
            if "value" not in option:
                raise InvalidComponent(
                    f"prop {name!r}: options[{i}] is an object without value; use {{label, value}}",
                    field=f"{where}[{i}]",
                )
        elif not isinstance(option, str | int | float | bool):
            raise InvalidComponent(
                f"prop {name!r}: options[{i}] must be a value or {{label, value}}",
                field=f"{where}[{i}]",
            )


#: Ten years: far past any schedule, far short of overflowing a 64-bit count of milliseconds.
MAX_INTERVAL_SECONDS = 10 * 365 * 24 * 3600


def check_timer_value(
    value: Any, where: str, error: type[InvalidRequest] = InvalidComponent
) -> dict[str, Any]:
    """``{intervalSeconds: N}`` or ``{cron: "…", timezone?: "…"}``; returns it normalized."""
    if not isinstance(value, dict):
        raise error("a timer is {intervalSeconds: <integer>} or {cron: <string>}", field=where)
    interval = value.get("intervalSeconds", value.get("interval_seconds"))
    cron = value.get("cron")
    if interval is not None and cron is not None:
        raise error("a timer has intervalSeconds or cron, not both", field=where)
    if interval is not None:
        if not _is_int(interval) or not 1 <= interval <= MAX_INTERVAL_SECONDS:
            raise error(
                f"intervalSeconds must be a positive integer, at most {MAX_INTERVAL_SECONDS} "
                "(ten years)",
                field=f"{where}.intervalSeconds",
            )
        return {"intervalSeconds": interval, "cron": None}
    if cron is not None:
        if not isinstance(cron, str) or len(cron.split()) != 5:
            raise error(
                f"cron must be a five-field cron expression such as '0 * * * *', not {cron!r}",
                field=f"{where}.cron",
            )
        timezone = value.get("timezone")
        if timezone is not None and not isinstance(timezone, str):
            raise error(
                "timezone must be a string such as 'Europe/Paris'", field=f"{where}.timezone"
            )
        return {"intervalSeconds": None, "cron": cron, "timezone": timezone}
    raise error("a timer needs intervalSeconds or cron", field=where)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SavedComponent:
    id: str
    owner_id: str
    key: str | None
    name: str
    version: str
    component_type: str
    description: str | None
    entry_path: str
    files: dict[str, str]
    code_hash: str
    dependencies: dict[str, str]
    component_url: str | None
    shape: dict[str, Any]
    configurable_props: list[dict[str, Any]]
    registry: bool
    created_at: int
    updated_at: int

    @property
    def code(self) -> str:
        return self.files[self.entry_path]


@dataclass(frozen=True)
class User:
    """A deployment of the account that runs a component: a source, or a workflow's step."""

    kind: str  #: ``source`` or ``workflow``
    id: str
    name: str
