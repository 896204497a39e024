"""The names every layer shares: job kinds, job and run states, channel names. Defined once.

``StrEnum`` members are strings: they compare equal to their values, are stored as them, and
serialize to JSON as them.

A job's states (``storage/jobs.py`` moves it; ``engine/queue/jobs.py`` decides)::

    queued ──claim──► running ──done mark (with its results)──► done
      ▲                  │
      └──retry/release───┤
                         └──attempts used up──► failed

A run's status is decided once, from its steps (``domain/outcomes.py``): ``success``,
``error`` when a step threw, ``exited`` when a step called ``$.flow.exit``; ``delayed`` or
``suspended`` while a step's ``$.flow.delay``/``rerun``/``suspend`` holds it, then one of the
others, or ``cancelled`` (``domain/flow.py`` draws the pauses). A ``$.send`` of a
run is ``queued`` (a ``send`` job delivers it), then ``done`` or ``failed``; ``emit``/``sse``
sends are ``done`` when the run is stored.
"""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    """What a durable job does; each kind has one handler (``engine/handlers/``)."""

    HTTP = "http"  #: run a source on a request stored by its endpoint
    TIMER = "timer"  #: run a timer source, or a timer-triggered workflow, for one tick
    EMIT = "emit"  #: deliver an emitted event (or a $errors event) to one listener
    WORKFLOW = "workflow"  #: run a workflow (its endpoint, a manual run, a replay)
    SEND = "send"  #: deliver a run's $.send.http / email / s3
    RESUME = "resume"  #: wake a paused run ($.flow.delay/suspend/rerun): due, resumed, cancelled
    RELEASE = "release"  #: emit a source's scheduled event ($in) at its delivery_ts
    EMAIL = "email"  #: run an email source on a message its address received (engine/mail_in)


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class RunStatus(StrEnum):
    SUCCESS = "success"
    ERROR = "error"
    EXITED = "exited"  #: a step called $.flow.exit and none failed
    DELAYED = "delayed"  #: a step called $.flow.delay or $.flow.rerun: the run waits for a time
    SUSPENDED = "suspended"  #: a step called $.flow.suspend: the run waits for its resume URL
    CANCELLED = "cancelled"  #: a paused run's cancel URL was called, or its suspend timed out


class StepStatus(StrEnum):
    """A workflow step's record (the runner's, ``runtime/js/steps.mjs``)."""

    SUCCESS = "success"
    ERROR = "error"
    EXITED = "exited"
    DELAYED = "delayed"  #: it called $.flow.delay; the next step runs later
    SUSPENDED = "suspended"  #: it called $.flow.suspend; the next step runs when resumed
    RERUN = "rerun"  #: it called $.flow.rerun; it runs again later (this record is replaced)
    CANCELLED = "cancelled"  #: it paused the run, which was then cancelled or timed out


class SendStatus(StrEnum):
    QUEUED = "queued"
    DONE = "done"
    FAILED = "failed"


class Unanswered(StrEnum):
    """Why an HTTP endpoint's client gets Sluice's answer instead of the run's own
    (``respond()``/``$.respond``). Each has one HTTP status and error code, decided in
    ``api/errors.py`` (docs/errors.md)."""

    #: A source's run ended, threw or timed out without respond(), or none came in time.
    NO_RESPONSE = "no_response"
    #: A workflow's run ended without $.respond (Pipedream's 400).
    NO_WORKFLOW_RESPONSE = "no_workflow_response"
    #: The workflow was deleted or deactivated before its run started.
    GONE = "gone"
    #: A workflow's step threw before $.respond.
    WORKFLOW_FAILED = "workflow_failed"
    #: The runner crashed first; the stored request runs again.
    RUNNER_CRASHED = "runner_crashed"
    #: The run could not finish for another reason (storage); the stored request runs again.
    RETRYING = "retrying"
    #: respond() gave a status that cannot be sent.
    INVALID_STATUS = "invalid_response_status"
    #: respond() gave headers or a body that cannot be sent.
    INVALID_RESPONSE = "invalid_response"


#: The channel of a workflow's or a source's errors (the spec's ``$errors``).
ERRORS = "$errors"
#: The channel of a source's or a workflow's console logs, forwarded to its subscribers (one
#: event per invocation or run that logged; ``domain/log_events.py``), never kept as events.
LOGS = "$logs"
#: The channel of a workflow's ``$.send.sse`` events.
SSE = "$sse"
#: The queue of a source's scheduled emits (``$emit(e, {delivery_ts})``), each listed and
#: deletable there until its time comes (Pipedream's ``$in``).
QUEUED = "$in"
#: Channels a source's event list and stream leave out unless asked for by name.
UNLISTED = (ERRORS, QUEUED)
