"""``release`` jobs: a source's scheduled emit (``$emit(event, {delivery_ts})``) waited in its
``$in`` channel; at ``delivery_ts`` it is taken out and emitted on its own channel, to that
channel's listeners (``Commit.release``). One deleted from ``$in`` meanwhile (Pipedream's
scheduled-tasks source cancels a task so) is not emitted; the job is then simply done.
"""

from __future__ import annotations

import logging

from sluice.domain.jobs import ReleaseJob
from sluice.engine.queue.jobs import Finish
from sluice.engine.state.commit import Commit
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


class ReleaseJobs:
    def __init__(self, commit: Commit) -> None:
        self.commit = commit

    async def __call__(self, job: Job, finish: Finish) -> None:
        event_id = ReleaseJob.of(job.payload).event_id
        released = await self.commit.release(job.owner_id, job.target_id, event_id, finish)
        if not released:
            log.info(
                "scheduled emit not released: deleted from $in, or its source is gone",
                extra={"action": "release_skipped", "job_id": job.id, "event_id": event_id},
            )
