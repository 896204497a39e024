"""JSON log records (``sluice/logs.py``) and the default error workflow's link base."""

from __future__ import annotations

import doctest
import json
import logging

from sluice import logs
from sluice.domain import default_error_workflow


def test_error_workflow_doctests() -> None:
    assert doctest.testmod(default_error_workflow).failed == 0


def test_the_default_error_step_links_to_the_public_url_of_the_moment() -> None:
    made = default_error_workflow.fields("u_1", base_url="http://127.0.0.1:8000", now_s=0)
    step = made["steps"][0]
    props = default_error_workflow.run_props(step, step["props"], "https://sluice.example.com/")
    assert props == {"base_url": "https://sluice.example.com"}
    edited = {**step, "code_hash": "0" * 64}  # the user changed its code: their values stand
    assert default_error_workflow.run_props(edited, step["props"], "https://x") == step["props"]


def test_a_json_record_carries_the_ids_logged_with_it() -> None:
    record = logging.LogRecord(
        "sluice.engine.queue.jobs", logging.WARNING, "f.py", 1, "job %s failed", (7,), None
    )
    record.__dict__.update({"action": "job_failed", "job_id": 7, "owner_id": "u_1"})
    out = json.loads(logs.JsonFormatter().format(record))
    assert out["msg"] == "job 7 failed" and out["level"] == "warning"
    assert out["logger"] == "sluice.engine.queue.jobs" and out["ts"].endswith("+00:00")
    assert {k: out[k] for k in ("action", "job_id", "owner_id")} == {
        "action": "job_failed",
        "job_id": 7,
        "owner_id": "u_1",
    }
    assert "args" not in out and "levelno" not in out


def test_a_stack_is_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, "f.py", 1, "failed", (), sys.exc_info())
    out = json.loads(logs.JsonFormatter().format(record))
    assert "ValueError: boom" in out["exc"]


def test_a_text_record_carries_the_ids_too_before_its_stack() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "sluice.engine.queue.jobs", logging.ERROR, "f.py", 1, "job %s failed", (7,), exc_info
    )
    record.__dict__.update({"action": "job_failed", "job_id": 7})
    text = logs.TextFormatter(logs.TEXT_FORMAT).format(record)
    first, *rest = text.splitlines()
    assert first.endswith("sluice.engine.queue.jobs: job 7 failed [action=job_failed job_id=7]")
    assert rest[0].startswith("Traceback") and rest[-1] == "ValueError: boom"
    plain = logging.LogRecord("x", logging.INFO, "f.py", 1, "hello", (), None)
    assert logs.TextFormatter(logs.TEXT_FORMAT).format(plain).endswith("x: hello")


def test_migrations_say_nothing_at_info() -> None:
    logs.configure("info", "text")
    try:
        assert not logging.getLogger("alembic.runtime.migration").isEnabledFor(logging.INFO)
        logs.configure("debug", "text")
        assert logging.getLogger("alembic.runtime.migration").isEnabledFor(logging.DEBUG)
    finally:
        logging.getLogger().handlers[:] = []
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.NOTSET)
