"""``email`` jobs: an ``email-new-messages`` source run on one message its address received.

The inbound SMTP listener (``engine/mail_in.py``) stored the message, parsed into the event
(``domain/email_messages.py``), before it answered 250; here the source runs on it. A source
deleted or deactivated since is skipped (the job is done).
"""

from __future__ import annotations

from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.invoker import Invoker
from sluice.storage import database, sources
from sluice.storage.jobs import Job


class EmailJobs:
    def __init__(self, reader: database.Reader, invoker: Invoker) -> None:
        self.reader = reader
        self.invoker = invoker

    async def __call__(self, job: Job, finish: Finish) -> None:
        owner_id, target_id = job.owner_id, job.target_id
        found = await self.reader(lambda conn: sources.get_with_state(conn, owner_id, target_id))
        if found is None or not found[0].active:
            return
        deployment, snapshot = found
        await self.invoker.invoke(
            deployment, {"kind": "run", "event": job.payload}, snapshot=snapshot, mark_done=finish
        )
