"""User text that storage and the Node runner cannot take as it is, as pure decisions.

Two kinds of character in a Python ``str`` cannot be stored everywhere:

- NUL (``\\x00``): PostgreSQL's ``text`` and ``jsonb`` refuse it (JSON's ``\\u0000`` too).
- Lone surrogates (U+D800 to U+DFFF): JSON's ``"\\ud800"`` parses to one, so do JavaScript
  strings, but they are not Unicode text: UTF-8 cannot encode them (SQLite, asyncpg, the Node
  runner's pipe), and ``jsonb`` refuses the escape.

JSON values are stored faithfully: one that holds either kind (or that looks like the wrapper
itself) is stored as ``{"$sluice:json": "<its JSON, ASCII>"}`` and read back as it was
(``to_stored``/``from_stored``). Plain text columns (names, log lines) get U+FFFD instead
(``clean``): a log line is for reading, and names are checked at the API before they get there.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from sluice.errors import InvalidRequest

#: The key of a stored JSON value that holds characters storage cannot take.
MARKER = "$sluice:json"
#: Nesting deeper than this is refused at the API, and a webhook body nested deeper stays
#: its text: far below Python's recursion limit, which every layer (JSON codecs, the ORM,
#: the Node runner's pipe) shares with the frames of the request around it.
MAX_DEPTH = 128

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_clean(text: str) -> bool:
    """Whether ``text`` has neither NUL nor a lone surrogate (the fast path: one C scan)."""
    return _UNSTORABLE.search(text) is None


def clean(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD."""
    return text if is_clean(text) else _UNSTORABLE.sub("\ufffd", text)


def clean_json(value: Any, pattern: re.Pattern[str] = _UNSTORABLE) -> Any:
    """A JSON value with ``clean`` applied to every string and key (the same object when
    there is nothing to clean)."""
    if isinstance(value, str):
        return pattern.sub("\ufffd", value) if pattern.search(value) else value
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, v in value.items():
            k2, v2 = clean_json(k, pattern), clean_json(v, pattern)
            changed = changed or k2 is not k or v2 is not v
            out[k2] = v2
        return out if changed else value
    if isinstance(value, list):
        cleaned = [clean_json(v, pattern) for v in value]
        return value if all(a is b for a, b in zip(cleaned, value, strict=True)) else cleaned
    return value


def for_runner(value: Any) -> Any:
    """A JSON value the Node runner's pipe (UTF-8) takes: lone surrogates become U+FFFD (NUL
    travels as JSON's ``\\u0000``). They come back from JavaScript in emitted events and db
    values; the same object when there are none."""
    return clean_json(value, _SURROGATE)


def _needs_wrapper(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_clean(item):
                return True
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and not is_clean(k):
                    return True
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _is_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(MARKER), str)


def to_stored(value: Any) -> Any:
    """What a JSON column stores for ``value``: the value itself, or, when it holds a NUL or
    a lone surrogate (or is shaped like the wrapper), ``{MARKER: <its JSON in ASCII>}``, where
    they are escapes that every store keeps as plain characters.

    ``to_stored({"a": 1}) == {"a": 1}``; ``to_stored("\\ud800") == {MARKER: '"\\\\ud800"'}``."""
    if _needs_wrapper(value) or _is_wrapper(value):
        return {MARKER: json.dumps(value, ensure_ascii=True)}
    return value


def stored_json(value: Any) -> str:
    """``json.dumps(to_stored(value))``, what a JSON column stores as text (compact, UTF-8),
    with one orjson dump for the usual value (about a tenth of ``json.dumps``' CPU: the job of
    each request to an endpoint is one): orjson refuses lone surrogates (and what else it
    cannot dump as ``json`` would, e.g. keys that are not strings), and writes NUL as
    ``\\u0000``; those values, and one shaped like the wrapper, take ``to_stored``'s way.

    >>> stored_json({"a": [1, "b"], "é": None})
    '{"a":[1,"b"],"é":null}'
    >>> stored_json("\\ud800") == json.dumps({MARKER: '"\\\\ud800"'})
    True
    >>> stored_json({1: "\\x00"}) == json.dumps({MARKER: json.dumps({1: "\\x00"})})
    True
    """
    if value is None:
        return "null"
    try:
        dumped = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(to_stored(value))
    if b"\\u0000" in dumped or _is_wrapper(value):
        return json.dumps(to_stored(value))
    return dumped.decode()


def from_stored(value: Any) -> Any:
    """The value ``to_stored`` was given."""
    if _is_wrapper(value):
        return json.loads(value[MARKER])
    return value


def loads_stored(stored: str | bytes | None) -> Any:
    """The value a JSON column's text holds, read on the driver's cursor (a SQL NULL is None):
    one orjson load (``json``'s for what orjson refuses: NaN, integers past 64 bits), then
    ``from_stored``.

    >>> loads_stored('{"a":[1,"b"]}')
    {'a': [1, 'b']}
    >>> loads_stored(stored_json("\\ud800")) == "\\ud800"
    True
    >>> loads_stored("[NaN, 184467440737095516160]")
    [nan, 184467440737095516160]
    """
    if stored is None:
        return None
    try:
        value = orjson.loads(stored)
    except orjson.JSONDecodeError:
        value = json.loads(stored)
    return from_stored(value)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON value nests more than ``limit`` levels of arrays and objects
    (``[[1]]`` is two)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((v, level + 1) for v in children if isinstance(v, (dict, list)))
    return False


def json_problem(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first part of a JSON value storage or the runner cannot take, as ``(field, what is
    wrong)``: a lone surrogate in a string or key, a number that is not finite, or nesting
    deeper than ``MAX_DEPTH``. None when there is none. NUL is fine in values (``to_stored``).

    ``json_problem({"a": ["x", "\\ud800"]}) == ("a.1", "…lone surrogate…")``."""
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, at, level = stack.pop()
        if level > MAX_DEPTH and isinstance(item, (dict, list)):
            return at, f"nesting deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return at, _SURROGATE_MESSAGE
        elif isinstance(item, float):
            if not math.isfinite(item):
                return at, "a number too large for a 64-bit float"
        elif isinstance(item, dict):
            for k, v in reversed(list(item.items())):
                inner = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and _SURROGATE.search(k):
                    return inner, _SURROGATE_MESSAGE
                stack.append((v, inner, level + 1))
        elif isinstance(item, list):
            for i in range(len(item) - 1, -1, -1):
                stack.append((item[i], f"{at}.{i}" if at else str(i), level + 1))
    return None


_SURROGATE_MESSAGE = (
    "a lone surrogate (a \\ud800-\\udfff escape without its pair), which is not Unicode text"
)


#: The columns' sizes of what user code names at run time: an emit's channel, a db key.
MAX_CHANNEL_CHARS = 300
MAX_DB_KEY_CHARS = 500


def storable_results(
    emits: list[dict[str, Any]], writes: dict[str, Any], deletes: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any], list[str], list[str]]:
    """What a run's emits and db changes storage can keep, and why it drops the rest (a line
    for the source's logs each): an emit whose channel name, or a db write whose key, is over
    its column's size. Dropped, not failed: the run's other results (and its job) are kept."""
    reasons: list[str] = []
    kept: list[dict[str, Any]] = []
    for emit in emits:
        name = str((emit.get("meta") or {}).get("name") or "")
        if len(name) > MAX_CHANNEL_CHARS:
            reasons.append(
                f"$emit dropped: its channel name is {len(name)} characters long; at most "
                f"{MAX_CHANNEL_CHARS} are kept"
            )
        else:
            kept.append(emit)
    long_keys = [k for k in writes if len(k) > MAX_DB_KEY_CHARS]
    for key in long_keys:
        reasons.append(
            f"db.set dropped: its key is {len(key)} characters long; at most "
            f"{MAX_DB_KEY_CHARS} are kept"
        )
    if long_keys:
        writes = {k: v for k, v in writes.items() if len(k) <= MAX_DB_KEY_CHARS}
    # A longer key was never stored: nothing to delete.
    deletes = [k for k in deletes if len(k) <= MAX_DB_KEY_CHARS]
    return kept, writes, deletes, reasons


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
#: An environment variable's value, at most (UTF-8 bytes): Pipedream's prop size.
MAX_ENV_VALUE_BYTES = 64 * 1024


def check_env_var(name: str, value: Any) -> None:
    """An environment variable as ``process.env`` holds one: a name of letters, digits and
    ``_`` (not starting with a digit, at most 100), a string value of at most 64 KB without NUL.

    >>> check_env_var("API_TOKEN", "x")
    >>> try:
    ...     check_env_var("1X", "x")
    ... except InvalidRequest as exc:
    ...     print(exc.field)
    name
    """
    if not _ENV_NAME.fullmatch(name):
        raise InvalidRequest(
            "an environment variable's name is letters, digits and _, not starting with a "
            f"digit, at most 100 characters: {name[:120]!r}",
            field="name",
        )
    if not isinstance(value, str):
        raise InvalidRequest("value must be a string", field="value")
    if "\x00" in value or len(value.encode("utf-8", "surrogatepass")) > MAX_ENV_VALUE_BYTES:
        raise InvalidRequest(
            f"value must be at most {MAX_ENV_VALUE_BYTES} bytes, without NUL", field="value"
        )


def check_email_address(value: str, field: str = "email") -> None:
    """Refuse what is not an e-mail address (one ``@`` between two non-empty parts, no space or
    control character, at most 320 characters): ``ada@example.com`` passes, ``notanemail``
    does not."""
    local, at, domain = value.partition("@")
    if (
        not at
        or not local
        or not domain.strip(".")
        or "@" in domain
        or len(value) > 320
        or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in value)
    ):
        raise InvalidRequest("email must be an address such as ada@example.com", field=field)


def check_name(value: Any, field: str, max_chars: int) -> None:
    """Refuse a user-given name or path that storage or a file system cannot take: longer
    than ``max_chars``, or holding a control character or a lone surrogate."""
    if not isinstance(value, str):
        return
    if len(value) > max_chars:
        raise InvalidRequest(
            f"{field} is {len(value)} characters long; at most {max_chars} are allowed",
            field=field,
        )
    if _NAME_BAD.search(value):
        raise InvalidRequest(
            f"{field} holds a control character or a lone surrogate ({value[:40]!r})",
            field=field,
        )


_NAME_BAD = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
