"""Thin async orchestration over storage and runtime: saving components, deploying and
invoking sources, running workflows and actions, and the queue that runs them durably.

Sub-packages by concern, each importing only the ones below it (the import-linter contract
"engine: entries -> runs -> components -> auth -> state -> (queue | outbound)" in
pyproject.toml checks it)::

    handlers/       one handler per job kind, the worker's table (built by the platform)
    runs/           running user code: sources deployed and run, workflows run and tested,
                    runs a client waits for, paused runs, files endpoints keep
    components/     what user code is: components saved and imported, workflows defined,
                    props resolved (options, dynamic props), actions run, the one builder of
                    every ``Invocation``, endpoints' directory, subscriptions
    auth/           accounts, logins, API keys and clients, the app catalog, connected
                    accounts and their OAuth tokens, verified e-mail addresses
    state/          the one writer of what invocations did (``commit``), its in-process
                    fan-out (``broker``), storage quotas, data stores
    queue/          the durable job queue: the worker, its slots and leases, the enqueuer's
                    group commit, the due timer, the scheduler, load shedding
    outbound/       what Sluice sends out: the egress-vetted HTTP clients, webhooks and their
                    deliveries, the mailer, the ``$.send.*`` destinations

The modules left at this level are entries and process-wide services the platform wires:
``ingress`` (HTTP endpoints), ``mail_in`` (inbound SMTP), ``events`` and ``streams`` (what
the API reads of stored and live events), ``health``, ``checkpoints`` (SQLite's WAL) and
``notifications`` (PostgreSQL's LISTEN). Nothing below them imports them.
"""
