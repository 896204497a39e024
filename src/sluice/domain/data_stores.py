"""Data stores: the rules of an account's key-value stores (``data_store`` props, ``/v1``).
Pure.

A store holds JSON values by string key. Its size is the sum of its records' sizes, each the
UTF-8 JSON text of ``{key: value}`` (as ``$.service.db`` is measured, ``domain/limits.py``);
a write that would take a store past ``max_db_bytes`` is refused (a store may always shrink).
A record with a TTL is gone once ``expires_ms`` passed: never read, never counted.

>>> record_size("k", {"a": 1})
13
>>> expires_at(1_000, 2.5), expires_at(1_000, None)
(3500, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sluice import errors
from sluice.domain import limits

#: The operations a component's ``data_store`` prop makes (``runtime/js/instance.mjs``).
OPS = frozenset({"get", "set", "delete", "has", "keys", "entries", "clear", "setTtl"})
MAX_KEY_CHARS = 500
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,199}$")


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise errors.InvalidRequest(
            "a data store name is 1 to 200 letters, digits, spaces, '_', '.' or '-', "
            "starting with a letter or digit",
            field="name",
        )
    return name


def check_key(key: Any) -> str:
    if isinstance(key, int | float) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise errors.InvalidRequest(
            f"a data store key is a string of 1 to {MAX_KEY_CHARS} characters", field="key"
        )
    return key


#: The longest TTL and timer interval: ten years, in seconds (far past any use, far short of
#: overflowing a 64-bit count of milliseconds).
MAX_SECONDS = 10 * 365 * 24 * 3600


def check_ttl(ttl: Any) -> float | None:
    """Seconds (a positive number up to ten years), or None: no expiry.

    >>> check_ttl(60), check_ttl(None)
    (60.0, None)
    >>> check_ttl(1e30)
    Traceback (most recent call last):
    sluice.errors.InvalidRequest: ttl is at most 315360000 seconds (ten years), or null
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise errors.InvalidRequest("ttl is a positive number of seconds, or null", field="ttl")
    if ttl > MAX_SECONDS:
        raise errors.InvalidRequest(
            f"ttl is at most {MAX_SECONDS} seconds (ten years), or null", field="ttl"
        )
    return float(ttl)


def expires_at(now_ms: int, ttl: float | None) -> int | None:
    return None if ttl is None else now_ms + int(ttl * 1000)


def record_size(key: str, value: Any) -> int:
    return limits.store_bytes({key: value})


def check_size(total: int, old: int, new: int, max_bytes: int) -> None:
    """Raise ``DataStoreFull`` when replacing a record of ``old`` bytes by one of ``new`` takes
    a store of ``total`` bytes past ``max_bytes`` (0: no limit)."""
    after = total - old + new
    if max_bytes > 0 and after > max_bytes and new > old:
        raise errors.DataStoreFull(
            f"the data store would hold {after} bytes, over the limit of {max_bytes} bytes"
        )


@dataclass(frozen=True)
class DataStore:
    id: str
    owner_id: str
    name: str
    created_at: int
    record_count: int = 0
    size: int = 0
