"""Prefixed identifiers and event cursors.

Resource ids follow Pipedream's prefixes (``u_`` user, ``sc_`` saved component, ``dc_``
deployed component, ``p_`` workflow, ``d_`` deployment, ``c_`` code cell, ``sub_``
subscription, ``apn_`` connected account, ``app_`` app, ``ds_`` data store, ``wh_`` webhook,
``dlv_`` a delivery to a webhook, ``fl_`` a stored request body or uploaded file).
The part after the prefix is random base62, so ids reveal nothing about creation order or about
other accounts.

Event ids are ``<epoch_ms>-<seq>`` (``1606370816223-0``): they sort by time, and the same
string serves as the pagination cursor of event lists.
"""

from __future__ import annotations

import base64
import re
import secrets
import string

_ALPHABET = string.ascii_letters + string.digits
#: Byte b → the symbol ``b % 62``; bytes 248..255 are dropped (``_UNEVEN``) so each symbol is
#: equally likely.
_BASE62 = bytes((_ALPHABET * 5)[:256], "ascii")
_UNEVEN = bytes(range(248, 256))

PREFIXES = frozenset(
    {"u", "sc", "dc", "p", "d", "c", "sub", "apn", "app", "key", "hi", "ti", "job", "ds", "wh"}
    | {"dlv", "fl"}
)


def new_id(prefix: str, length: int = 12) -> str:
    """A fresh random id such as ``dc_Ab3xY9...``."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{random_token(length)}"


def random_token(length: int) -> str:
    # One urandom call and one C pass, not one call per character (secrets.choice is ~2 µs
    # each, on hot paths): bytes 0..247 map evenly onto the 62 symbols (248 = 4 * 62), the
    # rest are dropped, and the few missing characters are drawn again.
    out = b""
    while len(out) < length:
        out += secrets.token_bytes(length + 8).translate(_BASE62, _UNEVEN)
    return out[:length].decode("ascii")


def has_prefix(value: str, prefix: str) -> bool:
    return value.startswith(prefix + "_") and len(value) > len(prefix) + 1


_EVENT_ID = re.compile(r"^(\d{1,16})-(\d{1,9})$")


def event_id(epoch_ms: int, seq: int) -> str:
    return f"{epoch_ms}-{seq}"


def parse_event_id(value: str) -> tuple[int, int] | None:
    """``"1606370816223-4"`` → ``(1606370816223, 4)``; None when the shape is wrong."""
    m = _EVENT_ID.match(value)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2))


def encode_cursor(resource_id: str) -> str:
    """Resource-list cursors are unpadded base64url of the id, as Pipedream's are."""
    return base64.urlsafe_b64encode(resource_id.encode()).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> str | None:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None
