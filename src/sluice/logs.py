"""How ``sluice serve`` writes its log: ``SLUICE_LOG_FORMAT=text`` (one line a record) or
``json`` (one JSON object a line, for a log collector).

A JSON record has ``ts`` (ISO 8601 UTC), ``level``, ``logger``, ``msg``, the stack as ``exc``
when there is one, and every field the code passed in ``extra={...}``: ``action`` and the ids
(``job_id``, ``run_id``, ``owner_id``, ``emitter_id``, ``workflow``…), so logs can be filtered
by job, run or account. Beside the layers; imports none of them.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

#: What every LogRecord has: not an ``extra`` field.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
    }


class TextFormatter(logging.Formatter):
    """One line a record, then the fields it carries (``action`` and the ids) as key=value,
    so a console log can be searched by job, run or account as the JSON one can."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        return f"{line} [{fields}]" if fields else line


def configure(level: str, fmt: str) -> None:
    """The root logger (and uvicorn's, which keep their own handlers) in the chosen format."""
    if fmt not in ("text", "json"):
        raise ValueError(f"SLUICE_LOG_FORMAT is text or json, not {fmt!r}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic says "Running upgrade …" per migration: some 20 lines on a first start, which
    # buried the lines that matter. Kept for --log-level debug.
    logging.getLogger("alembic").setLevel(
        logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING
    )
    if fmt == "json":
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).handlers[:] = []
            logging.getLogger(name).propagate = True


def uvicorn_config(fmt: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config``: None (leave logging as ``configure`` set it) for JSON."""
    return None if fmt == "json" else dict(_uvicorn_default())


def _uvicorn_default() -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    return dict(LOGGING_CONFIG)
