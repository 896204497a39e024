"""What each kind of durable job carries: one frozen dataclass per kind whose payload has
fields, read from the stored JSON once (``of``) and written to it once (``to_json``).

The stored shapes are the ones queued jobs already have (a job enqueued by an earlier
version runs the same): reading is as lenient as the handlers always were (a missing field
takes its default). The ``http`` and ``email`` jobs carry one value, not fields (the request
as it came, ``http_events.raw_request``; the parsed message), so they have no class here.

    >>> job = EmitJob("evt_1", "dc_a", "", {"n": 1}, Listener.WORKFLOW, hops=("p_x",))
    >>> EmitJob.of(job.to_json()) == job
    True
    >>> EmitJob.of({"emitter_id": "dc_a"}, "p_b").listener   # stored before it was carried
    <Listener.WORKFLOW: 'workflow'>
    >>> SendJob.of({"run_id": "r_1"})
    SendJob(run_id='r_1', idx=0)
    >>> TimerJob.of(TimerJob({"timestamp": 60}, Ticked.WORKFLOW).to_json(), "p_a")
    TimerJob(event={'timestamp': 60}, ticked=<Ticked.WORKFLOW: 'workflow'>)
    >>> TimerJob.of({"timestamp": 60}, "dc_a")   # stored before it was carried: the bare event
    TimerJob(event={'timestamp': 60}, ticked=<Ticked.SOURCE: 'source'>)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sluice.domain import flow


class Listener(StrEnum):
    """Who an ``emit`` job delivers its event to (its ``target_id``)."""

    SOURCE = "source"  #: a source (``dc_``): its ``run`` on the event
    WORKFLOW = "workflow"  #: a workflow (``p_``): a run on the event
    #: A webhook (``wh_``): only jobs queued before deliveries had their own queue.
    WEBHOOK = "webhook"

    @classmethod
    def of_id(cls, listener_id: str) -> Listener:
        """The listener an id names, by its prefix (``routing.listeners`` only gives ids)."""
        if listener_id.startswith("p_"):
            return cls.WORKFLOW
        if listener_id.startswith("wh_"):
            return cls.WEBHOOK
        return cls.SOURCE


class Emitter(StrEnum):
    """Who emitted an ``emit`` job's event: a workflow's run is labelled by it
    (``engine/handlers/emit.py``: ``EMIT`` for a workflow's ``$.send.emit``, else ``COMPONENT``)."""

    SOURCE = "source"  #: a source's ``$emit`` (or its ``$errors`` event)
    WORKFLOW = "workflow"  #: a workflow's run: ``$.send.emit``, its ``$errors`` event

    @classmethod
    def of_id(cls, emitter_id: str) -> Emitter:
        """What an id names, by its prefix: only for emit jobs stored before the kind was."""
        return cls.WORKFLOW if emitter_id.startswith("p_") else cls.SOURCE


def _fields(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class EmitJob:
    """A stored event (an emit, or a ``$errors`` event) for one listener (``engine/state/commit.py``
    enqueues it, ``engine/handlers/emit.py`` delivers it)."""

    event_id: str
    emitter_id: str
    channel: str
    event: Any
    listener: Listener
    #: The workflows the event went through (``None``: not forwarded; its emits are not
    #: chained): the listener's own emits never go back to one of them.
    hops: tuple[str, ...] | None = None
    #: Who emitted the event; None only in jobs stored before it was carried (``emitted_by``).
    emitter: Emitter | None = None

    @property
    def emitted_by(self) -> Emitter:
        """Who emitted the event (from the emitter's id for a job stored before it was said)."""
        return self.emitter if self.emitter is not None else Emitter.of_id(self.emitter_id)

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "event_id": self.event_id,
            "emitter_id": self.emitter_id,
            "channel": self.channel,
            "event": self.event,
            "listener": str(self.listener),
        }
        if self.hops is not None:
            value["hops"] = list(self.hops)
        if self.emitter is not None:
            value["from"] = str(self.emitter)
        return value

    @classmethod
    def of(cls, value: Any, target_id: str = "") -> EmitJob:
        """The job of a stored payload; one stored without ``listener`` (before it was
        carried) has it from its target's id, one without ``from`` none (``emitted_by``)."""
        fields = _fields(value)
        listener = fields.get("listener")
        hops = fields.get("hops")
        emitter = fields.get("from")
        return cls(
            str(fields.get("event_id") or ""),
            str(fields.get("emitter_id") or ""),
            str(fields.get("channel") or ""),
            fields.get("event"),
            Listener(listener) if listener else Listener.of_id(target_id),
            None if hops is None else tuple(str(h) for h in hops),
            Emitter(emitter) if emitter else None,
        )


@dataclass(frozen=True)
class WorkflowJob:
    """A workflow run on an event: its endpoint's request (``engine/ingress.py``), a manual run
    or a replay (``engine/runs/client_runs.py``)."""

    event: Any
    source_type: str = "MANUAL"
    #: The run's id when it was chosen before the job (a manual run, a replay).
    run_id: str | None = None
    replay_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"event": self.event, "source_type": self.source_type}
        if self.run_id is not None:
            value["run_id"] = self.run_id
        if self.replay_of is not None:
            value["replay_of"] = self.replay_of
        return value

    @classmethod
    def of(cls, value: Any) -> WorkflowJob:
        fields = _fields(value)
        return cls(
            fields.get("event"),
            str(fields.get("source_type") or "MANUAL"),
            fields.get("run_id"),
            fields.get("replay_of"),
        )


@dataclass(frozen=True)
class SendJob:
    """One deferred ``$.send`` of a stored run: ``run.sends[idx]``."""

    run_id: str
    idx: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "idx": self.idx}

    @classmethod
    def of(cls, value: Any) -> SendJob:
        fields = _fields(value)
        return cls(str(fields.get("run_id")), int(fields.get("idx", 0)))


@dataclass(frozen=True)
class ResumeJob:
    """A paused run woken: due (its wait ended), or by its resume or cancel URL with what
    that request carried (``data``)."""

    run_id: str
    action: flow.Action = flow.Action.DUE
    data: Any = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"run_id": self.run_id, "action": str(self.action)}
        if self.action != flow.Action.DUE or self.data is not None:
            value["data"] = self.data
        return value

    @classmethod
    def of(cls, value: Any) -> ResumeJob:
        fields = _fields(value)
        return cls(
            str(fields.get("run_id")),
            flow.Action(str(fields.get("action") or flow.Action.DUE)),
            fields.get("data"),
        )


@dataclass(frozen=True)
class ReleaseJob:
    """A source's scheduled emit (its ``$in`` event) released at its ``delivery_ts``."""

    event_id: str

    def to_json(self) -> dict[str, Any]:
        return {"event_id": self.event_id}

    @classmethod
    def of(cls, value: Any) -> ReleaseJob:
        return cls(str(_fields(value).get("event_id") or ""))


class Ticked(StrEnum):
    """What a timer ticks for (``timers.kind``): a ``timer`` job's target."""

    SOURCE = "source"  #: a source with a timer prop (``dc_``): its ``run`` on the tick
    WORKFLOW = "workflow"  #: a workflow with a timer trigger (``p_``): a run on the tick

    @classmethod
    def of_id(cls, target_id: str) -> Ticked:
        """What an id names, by its prefix: only for ticks stored before the kind was."""
        return cls.WORKFLOW if target_id.startswith("p_") else cls.SOURCE


@dataclass(frozen=True)
class TimerJob:
    """One tick of a timer (``storage/timers.claim_due`` enqueues it, ``engine/handlers/timer.py``
    runs it): the event ``run`` gets (``schedules.tick_event``) and what it ticks for.

    Stored as ``{"tick": event, "for": kind}``. A tick stored before the kind was carried is the
    bare event, which ``schedules.tick_event`` makes and never with a ``tick`` key: its kind
    comes from the target's id."""

    event: Any
    ticked: Ticked

    def to_json(self) -> dict[str, Any]:
        return {"tick": self.event, "for": str(self.ticked)}

    @classmethod
    def of(cls, value: Any, target_id: str) -> TimerJob:
        fields = _fields(value)
        if "tick" in fields and fields.get("for") in set(Ticked):
            return cls(fields["tick"], Ticked(fields["for"]))
        return cls(value, Ticked.of_id(target_id))
