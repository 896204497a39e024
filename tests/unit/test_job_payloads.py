"""The payloads of durable jobs (``domain/jobs.py``) are stored as the shapes queued jobs
already have: a job enqueued by an earlier version runs the same, and one enqueued now runs on
an earlier version still running beside it (a rolling restart)."""

from __future__ import annotations

from sluice.domain import flow
from sluice.domain.jobs import (
    EmitJob,
    Emitter,
    Listener,
    ReleaseJob,
    ResumeJob,
    SendJob,
    WorkflowJob,
)


def test_stored_shapes_are_the_earlier_ones() -> None:
    # The dicts the enqueuers wrote before the payloads had classes (commit.py, pauses.py,
    # ingress.py, client_runs.py), plus the emit's listener kind.
    assert SendJob("r_1", 2).to_json() == {"run_id": "r_1", "idx": 2}
    assert ReleaseJob("e_1").to_json() == {"event_id": "e_1"}
    assert ResumeJob("r_1").to_json() == {"run_id": "r_1", "action": "due"}
    assert ResumeJob("r_1", flow.Action.CANCEL, {"q": 1}).to_json() == {
        "run_id": "r_1",
        "action": "cancel",
        "data": {"q": 1},
    }
    assert ResumeJob("r_1", flow.Action.RESUME, None).to_json() == {
        "run_id": "r_1",
        "action": "resume",
        "data": None,
    }
    assert WorkflowJob({"a": 1}, "HTTP").to_json() == {"event": {"a": 1}, "source_type": "HTTP"}
    assert WorkflowJob(1, "REPLAY", "r_2", "r_1").to_json() == {
        "event": 1,
        "source_type": "REPLAY",
        "run_id": "r_2",
        "replay_of": "r_1",
    }
    emit = EmitJob("e_1", "dc_a", "vip", {"n": 1}, Listener.SOURCE, hops=("p_b",))
    assert emit.to_json() == {
        "event_id": "e_1",
        "emitter_id": "dc_a",
        "channel": "vip",
        "event": {"n": 1},
        "listener": "source",
        "hops": ["p_b"],
    }
    assert "hops" not in EmitJob("e_1", "dc_a", "", None, Listener.WORKFLOW).to_json()
    said = EmitJob("e_1", "p_a", "", None, Listener.SOURCE, None, Emitter.WORKFLOW).to_json()
    assert said["from"] == "workflow"
    assert EmitJob.of(said, "dc_b").emitted_by == Emitter.WORKFLOW


def test_earlier_payloads_read_as_the_handlers_read_them() -> None:
    assert EmitJob.of(None, "p_x") == EmitJob("", "", "", None, Listener.WORKFLOW)
    assert EmitJob.of({"hops": ["p_a", 3]}, "dc_x").hops == ("p_a", "3")
    assert EmitJob.of({}, "wh_x").listener == Listener.WEBHOOK
    assert EmitJob.of({"listener": "source"}, "p_x").listener == Listener.SOURCE
    # Who emitted: stored since "from" was; before, from the emitter's id.
    assert EmitJob.of({"emitter_id": "p_a"}).emitted_by == Emitter.WORKFLOW
    assert EmitJob.of({"emitter_id": "dc_a"}).emitted_by == Emitter.SOURCE
    assert EmitJob.of({"emitter_id": "p_a", "from": "source"}).emitted_by == Emitter.SOURCE
    assert ResumeJob.of({"run_id": "r", "action": ""}) == ResumeJob("r", flow.Action.DUE, None)
    assert WorkflowJob.of({"event": 1}) == WorkflowJob(1, "MANUAL", None, None)
    assert SendJob.of({"run_id": "r", "idx": "3"}) == SendJob("r", 3)
    assert ReleaseJob.of(None) == ReleaseJob("")
