"""What the ``$.send.*`` performers share: ``errors.InvalidSend`` and the readers of a config's
fields, whose errors name the destination and the field (``$.send.s3: bucket is required``)."""

from __future__ import annotations

import time
from typing import Any

from sluice import errors


def invalid(kind: str, name: str, message: str) -> errors.InvalidSend:
    return errors.InvalidSend(f"$.send.{kind}: {name} {message}", field=name)


def mapping(kind: str, config: object) -> dict[str, Any]:
    """The config, which must be an object."""
    if not isinstance(config, dict):
        raise errors.InvalidSend(f"$.send.{kind}: the config must be an object", field="config")
    return config


def string(kind: str, config: dict[str, Any], name: str, *, default: str | None = None) -> str:
    """The string field ``name``; required unless it has a ``default``."""
    value = config.get(name)
    if value is None:
        if default is None:
            raise invalid(kind, name, "is required")
        return default
    if not isinstance(value, str):
        raise invalid(kind, name, f"must be a string, not {type(value).__name__}")
    return value


def elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
