"""Configured prop values, checked against the prop definitions at deploy and update time.

``check_configured`` returns the values to store, split into plain and secret ones (the caller
encrypts the secrets), and the connected accounts the app props refer to. Interface props take
their values from the platform (the HTTP endpoint) or from the user (a timer schedule).

Values are passed as Pipedream passes them: a user-input value reaches ``run()`` with the type
it has (an object given to a ``string`` prop stays an object, text that is not JSON given to an
``object`` prop stays text), because registry components rely on it (helper_functions'
convert-object-to-json-string takes an object in a string prop; export-variables validates its
own object prop). Refused are only what Pipedream refuses: a required prop without a value, a
prop the component does not have, an app prop without a connected account (unless its app
takes none: ``auth_free``, the apps whose ``auth_type`` is ``none``, whose ``$auth`` is ``{}``);
plus Sluice's limits (the value's size, a timer's schedule). docs/api.md, "Configured values".
"""

from __future__ import annotations

import json
from collections.abc import Collection
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
    auth_free: Collection[str] = (),
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
            account = _app_account(prop, value if present else None, where, auth_free)
            if account is not None:
                out.apps[name] = (account, str(prop.get("app")))
                out.plain[name] = {"authProvisionId": account}
            continue
        if not present:
            if not prop.get("optional") and "default" not in prop:
                label = prop.get("label") or name
                raise InvalidProps(f"prop {name!r} ({label}) is required", field=where)
            continue
        # Passed as given: the value's own type reaches run() (module docstring).
        if prop.get("secret"):
            out.secret[name] = value
        else:
            out.plain[name] = value
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


def _app_account(
    prop: dict[str, Any], value: Any, where: str, auth_free: Collection[str]
) -> str | None:
    """The connected account id an app prop's value names (``None`` when left out, if the
    prop is optional or its app takes no account)."""
    name = prop["name"]
    if prop.get("app") in auth_free and isinstance(value, dict):
        value = value.get("authProvisionId")  # {} or {"authProvisionId": null}: no account
        value = None if value is None else {"authProvisionId": value}
    if value is None:
        if not prop.get("optional") and prop.get("app") not in auth_free:
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
