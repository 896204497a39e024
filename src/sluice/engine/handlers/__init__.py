"""One module per job kind (``domain.states.JobKind``), each a handler class whose instances are
called as ``await handler(job, finish)``. A job's payload is read with its kind's class in
``domain/jobs.py`` (the ``http``, ``timer`` and ``email`` jobs carry one value: the request as
it came, the tick's event, the message).

``finish`` marks the job done inside the transaction that stores the job's results, so a
completed job never runs again (``engine/queue/jobs.py``). A handler that raises (a crashed runner
is ``errors.RunnerCrashed``) has its job run again later, with backoff.
``platform/assembly.py`` builds the table ``{JobKind: handler}`` and hands it to the job
worker; nothing registers itself.

    http      a source behind an HTTP endpoint, on the request its endpoint stored
    timer     a timer source or a timer-triggered workflow, for one tick
    emit      an emitted (or $errors) event delivered to one listener, source or workflow
    workflow  a workflow run: its endpoint, a manual run, a replay
    send      a run's $.send.http / email / s3
    resume    a paused run ($.flow) woken
    release   a source's scheduled emit ($in) emitted at its delivery_ts
    email     an e-mail source, on one message its address received

Handlers import the engine's services (invoker, executor); nothing imports handlers but the
platform.
"""
