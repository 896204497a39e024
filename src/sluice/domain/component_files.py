"""A component's files as a client sends them, as pure rules: the relative paths checked (inside
the component, not in ``node_modules``, of bounded length), the total size bounded, the entry
file's default name, and the ``package.json`` nearest the entry.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any

from sluice import errors
from sluice.domain import text as text_rules

_CODE_SUFFIXES = (".mjs", ".cjs", ".js")
_ESM_HINT = re.compile(
    r"^\s*(export\s+default|export\s*\{|import\s[\w*{$]|import\s*['\"])", re.MULTILINE
)


def code_hash(entry_path: str, files: dict[str, str]) -> str:
    """What names a component's tree on disk and tells two saves of the same code apart:
    sha256 of the entry's path and every file (the entry's included)."""
    laid_out = json.dumps({"entry": entry_path, "files": files}, sort_keys=True)
    return hashlib.sha256(laid_out.encode()).hexdigest()


def default_entry_name(code: str) -> str:
    return "component.mjs" if _ESM_HINT.search(code) else "component.cjs"


def entry_from_url(name: str) -> str | None:
    return name if name.endswith(_CODE_SUFFIXES) else None


def normalize_files(files: Any, code: str | None, max_bytes: int) -> dict[str, str]:
    """The files besides the entry, by their clean relative paths; with the entry's ``code``,
    at most ``max_bytes`` in all."""
    if not isinstance(files, dict):
        raise errors.InvalidRequest(
            "files must be an object of {relative path: file text}", field="files"
        )
    out: dict[str, str] = {}
    total = len((code or "").encode())
    for raw, text in files.items():
        # A long key is shown cut short: the error names it, not repeats it.
        path = clean_path(raw, f"files.{raw if len(raw) <= 80 else raw[:80] + '…'}")
        if not isinstance(text, str):
            raise errors.InvalidRequest(
                f"files[{raw!r}] must be the file's text", field=f"files.{raw}"
            )
        total += len(text.encode())
        out[path] = text
    if total > max_bytes:
        raise errors.PayloadTooLarge(
            f"the component's files are over {max_bytes} bytes", field="files"
        )
    return out


#: A path's limits: the entry path's column, and a segment's on common file systems (bytes).
MAX_PATH_CHARS = 500
MAX_SEGMENT_BYTES = 255


def clean_path(raw: str, where: str) -> str:
    if not isinstance(raw, str) or not raw or "\\" in raw:
        raise errors.InvalidRequest(f"{where}: not a valid relative path", field=where)
    text_rules.check_name(raw, where, MAX_PATH_CHARS)
    if any(len(part.encode()) > MAX_SEGMENT_BYTES for part in raw.split("/")):
        raise errors.InvalidRequest(
            f"{where}: a file or directory name is over {MAX_SEGMENT_BYTES} bytes", field=where
        )
    path = posixpath.normpath(raw)
    parts = path.split("/")
    if path.startswith("/") or parts[0] == ".." or path == ".":
        raise errors.InvalidRequest(
            f"{where}: {raw!r} must be a relative path inside the component", field=where
        )
    if "node_modules" in parts:
        raise errors.InvalidRequest(f"{where}: files cannot go in node_modules", field=where)
    return path


def nearest_package_json(files: dict[str, str], entry_path: str) -> dict[str, Any] | None:
    directory = posixpath.dirname(entry_path)
    while True:
        candidate = posixpath.join(directory, "package.json") if directory else "package.json"
        if candidate in files:
            try:
                parsed = json.loads(files[candidate])
            except ValueError as exc:
                raise errors.InvalidRequest(
                    f"{candidate} is not valid JSON", field=f"files.{candidate}"
                ) from exc
            return parsed if isinstance(parsed, dict) else None
        if not directory:
            return None
        directory = posixpath.dirname(directory)
