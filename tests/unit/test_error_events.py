"""domain/error_events.py: one $errors shape for workflows and sources."""

from sluice.domain import error_events


def test_the_error_takes_the_runtime_code_else_the_name() -> None:
    timeout = {"name": "TimeoutError", "code": "TIMEOUT", "message": "too slow", "stack": "s"}
    assert error_events.error_of(timeout, cell_id="c_1", ts="T") == {
        "code": "TIMEOUT",
        "msg": "too slow",
        "cellId": "c_1",
        "ts": "T",
        "stack": "s",
        "name": "TimeoutError",
    }
    bare = error_events.error_of({"message": "boom"}, cell_id="dc_1", ts="T")
    assert (bare["code"], bare["name"], bare["stack"]) == ("Error", "Error", "Error: boom")


def test_the_event_wraps_the_error_with_what_triggered_it() -> None:
    made = error_events.event({"code": "E"}, {"n": 1}, {"id": "r"})
    assert made == {
        "error": {"code": "E"},
        "original_event": {"n": 1},
        "original_context": {"id": "r"},
    }
