"""Configured prop values, checked against the prop definitions at deploy and update time.

``check_configured`` returns the values to store, split into plain and secret ones (the caller
encrypts the secrets), and the connected accounts the app props refer to. Interface props take
their values from the platform (the HTTP endpoint) or from the user (a timer schedule).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.domain import components, schedules
from sluice.errors import InvalidProps

#: Types whose values the user never gives.
_NO_VALUE = frozenset({components.HTTP, components.DB, "alert", components.APPHOOK})

DEFAULT_TIMER = {"intervalSeconds": 3600, "cron": None}


@dataclass
class Configured:
    plain: dict[str, Any] = field(default_factory=dict)
    secret: dict[str, str] = field(default_factory=dict)
    #: prop name → (connected account id, expected app slug)
    apps: dict[str, tuple[str, str]] = field(default_factory=dict)


def check_configured(
    props: list[dict[str, Any]],
    values: Any,
    *,
    max_bytes: int = 65_536,
    min_timer_interval_seconds: int = schedules.DEFAULT_MIN_INTERVAL_SECONDS,
) -> Configured:
    values = _known_values(props, values)
    out = Configured()
    for prop in props:
        name = prop["name"]
        where = f"configured_props.{name}"
        typ = prop["type"]
        present = name in values and values[name] is not None
        value = values.get(name)
        if present and len(json.dumps(value, default=str)) > max_bytes:
            raise InvalidProps(f"prop {name!r}: the value is over {max_bytes} bytes", field=where)
        if typ in _NO_VALUE:
            continue
        if typ == components.TIMER:
            raw = value if present else prop.get("default", DEFAULT_TIMER)
            out.plain[name] = _timer(raw, where, min_timer_interval_seconds)
            continue
        if typ == "app":
            account = _app_account(prop, value if present else None, where)
            if account is not None:
                out.apps[name] = (account, str(prop.get("app")))
                out.plain[name] = {"authProvisionId": account}
            continue
        if not present:
            if not prop.get("optional") and "default" not in prop:
                label = prop.get("label") or name
                raise InvalidProps(f"prop {name!r} ({label}) is required", field=where)
            continue
        checked = check_value(prop, value, where)
        if prop.get("secret"):
            out.secret[name] = checked
        else:
            out.plain[name] = checked
    return out


def _known_values(props: list[dict[str, Any]], values: Any) -> dict[str, Any]:
    """The configured values as an object (``None``: none), each naming a defined prop."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise InvalidProps(
            "configured_props must be an object of {prop name: value}", field="configured_props"
        )
    known = {p["name"] for p in props}
    for name in values:
        if name not in known:
            hint = f"; the props are: {', '.join(sorted(known))}" if known else ""
            raise InvalidProps(f"unknown prop {name!r}{hint}", field=f"configured_props.{name}")
    return values


def _timer(raw: Any, where: str, min_interval_seconds: int) -> dict[str, Any]:
    """A timer prop's schedule as stored (``cron`` kept even when ``None``)."""
    timer = components.check_timer_value(raw, where, InvalidProps)
    schedules.validate(
        schedules.Schedule.from_value(timer),
        where,
        min_interval_seconds=min_interval_seconds,
    )
    return {k: v for k, v in timer.items() if v is not None or k == "cron"}


def _app_account(prop: dict[str, Any], value: Any, where: str) -> str | None:
    """The connected account id an app prop's value names (``None`` when left out, if the
    prop is optional)."""
    name = prop["name"]
    if value is None:
        if not prop.get("optional"):
            raise InvalidProps(
                f"prop {name!r} needs a connected {prop.get('app')} account: "
                '{"authProvisionId": "apn_..."}',
                field=where,
            )
        return None
    account = value.get("authProvisionId") if isinstance(value, dict) else None
    if not isinstance(account, str):
        raise InvalidProps(f'prop {name!r}: give {{"authProvisionId": "apn_..."}}', field=where)
    return account


def check_value(prop: dict[str, Any], value: Any, where: str) -> Any:
    """Type, range and options check of one user-input value; light coercion of strings."""
    if isinstance(value, dict) and set(value) == {"__lv"}:
        # withLabel props store {"__lv": {label, value}}; check the inner value.
        inner = value["__lv"]
        if not isinstance(inner, dict) or "value" not in inner:
            raise InvalidProps('a {"__lv": ...} value needs {label, value}', field=where)
        check_value(prop, inner["value"], where)
        return value
    typ: str = prop["type"]
    if typ.endswith("[]"):
        return _check_array(prop, value, where)
    checker = _SCALARS.get(typ)
    if checker is not None:
        value = checker(prop, value, where)
    _check_options(prop, value, where)
    return value


def _check_array(prop: dict[str, Any], value: Any, where: str) -> list[Any]:
    """An ``X[]`` prop: a list (a string is read as JSON, else as a one-item list), each item
    checked as an ``X``."""
    typ: str = prop["type"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]
    if not isinstance(value, list):
        raise InvalidProps(f"prop {prop['name']!r} is {typ}: give an array", field=where)
    item = {**prop, "type": typ[:-2]}
    return [check_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]


def _check_string(prop: dict[str, Any], value: Any, where: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidProps(f"prop {prop['name']!r} is a string, not {_kind(value)}", field=where)
    return value


def _check_integer(prop: dict[str, Any], value: Any, where: str) -> Any:
    name = prop["name"]
    value = _as_int(name, value, where)
    if "min" in prop and value < prop["min"]:
        raise InvalidProps(
            f"prop {name!r} must be at least {prop['min']}, not {value}", field=where
        )
    if "max" in prop and value > prop["max"]:
        raise InvalidProps(f"prop {name!r} must be at most {prop['max']}, not {value}", field=where)
    return value


def _check_boolean(prop: dict[str, Any], value: Any, where: str) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise InvalidProps(
            f"prop {prop['name']!r} is a boolean (true or false), not {_kind(value)}", field=where
        )
    return value


def _check_object(prop: dict[str, Any], value: Any, where: str) -> Any:
    name = prop["name"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InvalidProps(
                f"prop {name!r} is an object; the string is not JSON", field=where
            ) from exc
    if not isinstance(value, dict):
        raise InvalidProps(f"prop {name!r} is an object, not {_kind(value)}", field=where)
    return value


#: The check (and light coercion) of a value of each scalar type; other types pass as given.
_SCALARS: dict[str, Callable[[dict[str, Any], Any, str], Any]] = {
    "string": _check_string,
    "integer": _check_integer,
    "boolean": _check_boolean,
    "object": _check_object,
}


def _check_options(prop: dict[str, Any], value: Any, where: str) -> None:
    """A prop with ``options`` takes one of their values."""
    options = prop.get("options")
    if isinstance(options, list) and options:
        allowed = components.option_values(options)
        if value not in allowed:
            shown = ", ".join(json.dumps(v) for v in allowed[:20])
            raise InvalidProps(
                f"prop {prop['name']!r}: {json.dumps(value)} is not one of the options ({shown})",
                field=where,
            )


def _as_int(name: str, value: Any, where: str) -> int:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidProps(f"prop {name!r} is an integer, not {_kind(value)}", field=where)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "an array"
    return "an object"
