"""HTTP endpoints of sources and workflows: a request becomes a durable job before it is
answered, unless its answer is a run's.

``accept``: find the endpoint's active deployment (``EndpointDirectory``, cached; else 404),
take a token from the endpoint's bucket (else 429), ask ``Admission`` (503 while the
account's backlog is too old or the disk is down to its reserve), check the body's size (413; by
``Content-Length`` before reading it), and enqueue the job (``Enqueuer``: concurrent requests
share a transaction). A source's job holds the request as it came
(``http_events.raw_request``); the event is built when the job runs, off the request's path. The
client is answered only after that commit: an acknowledged request is never lost (after a
crash the job's lease expires and it runs again, at-least-once).

A body sent with ``x-pd-upload-body: 1`` (or ``?pipedream_upload_body=1``), and the file parts of
a ``multipart/form-data`` body, may be as large as ``SLUICE_HTTP_MAX_UPLOAD_BYTES``: they are
stored first (``engine/runs/files.py``, 507 at the storage quota), and the event holds their URLs
(``body.raw_body_url``; ``{url, filename, mimetype}`` per file part), as on Pipedream. A
multipart body's other fields stay within ``SLUICE_HTTP_MAX_BODY_BYTES``.

Without ``customResponse`` the answer is an immediate 200 ``{"success":true}`` and the job
worker is woken to run the job soon. With it, the job runs at once in this process, and the
request waits for the first ``respond()`` (through a future per job, ``broker.Waiters``, that the
job's handler settles: ``handlers/http.py``, ``handlers/workflow.py``), for the end of
``run()``, or for the response time-out: either of the last two answers 504 ``no_response``.
The rate-limit buckets and the futures are per process.

A workflow's endpoint is the same without a custom response (a ``workflow`` job, 200 at once).
With one, the client's answer is the run's own: the run is not stored as a job first but run
at once and stored with its results (``engine/runs/client_runs.py``), and the client is answered by
its first immediate ``$.respond`` or, after the run is stored, by its first ``$.respond``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sluice import errors
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import http_events
from sluice.domain.http_events import Answer, Bucket, Refusal
from sluice.domain.jobs import WorkflowJob
from sluice.domain.states import JobKind, Unanswered
from sluice.domain.workflows import Workflow
from sluice.engine.components.directory import EndpointDirectory
from sluice.engine.components.workflows import Workflows
from sluice.engine.queue.admission import Admission
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.engine.queue.jobs import JobWorker, RanNow
from sluice.engine.runs.client_runs import ClientRun, ClientRuns
from sluice.engine.runs.files import OCTET_STREAM, Files, NewFile
from sluice.engine.state.broker import Ended, Settlement, Waiters
from sluice.engine.state.quotas import StorageQuota
from sluice.storage import database, endpoints
from sluice.storage.jobs import NewJob

log = logging.getLogger(__name__)

#: Past this many buckets, those that have refilled (the same as none) are forgotten.
_PRUNE_AT = 4096


@dataclass(frozen=True)
class EndpointLimits:
    max_body_bytes: int
    #: A body stored behind a URL (``x-pd-upload-body``, multipart file parts).
    max_upload_bytes: int
    rate_per_second: float
    burst: int
    response_timeout_seconds: float

    @classmethod
    def from_settings(cls, settings: Settings) -> EndpointLimits:
        return cls(
            max_body_bytes=settings.http_max_body_bytes,
            max_upload_bytes=settings.http_max_upload_bytes,
            rate_per_second=settings.http_rate_per_second,
            burst=settings.http_rate_burst,
            response_timeout_seconds=settings.http_response_timeout_seconds
            or settings.source_timeout_seconds,
        )


@dataclass(frozen=True)
class IncomingRequest:
    """What the edge hands over. ``read_body(limit)`` returns the body, or its first
    ``limit + 1`` bytes when it is longer (the rest is not read)."""

    method: str
    path: str
    query_string: str
    headers: list[tuple[str, str]]
    read_body: Callable[[int], Awaitable[bytes]]
    #: ``(base URL, client address)`` the request came with, its proxies' headers applied:
    #: asked only for a workflow's event (Pipedream's ``url`` and ``client_ip``).
    origin: Callable[[], tuple[str, str]] = lambda: ("", "")


class Ingress:
    def __init__(
        self,
        reader: database.Reader,
        directory: EndpointDirectory,
        workflows: Workflows,
        settings: Settings,
        clock: Clock,
        *,
        enqueuer: Enqueuer,
        worker: JobWorker,
        waiters: Waiters,
        client_runs: ClientRuns,
        admission: Admission,
        quota: StorageQuota,
        files: Files,
    ) -> None:
        self.reader = reader
        self.directory = directory
        self.workflows = workflows
        self.settings = settings
        self.clock = clock
        self.enqueuer = enqueuer
        #: Woken when a job is stored; runs a waiting request's job at once (``run_now``).
        self.worker = worker
        self.waiters = waiters
        #: Workflows answering with their ``$.respond`` run there, without a job.
        self.client_runs = client_runs
        #: Load shedding and the disk's reserve: asked before a request is read.
        self.admission = admission
        #: The accounts at their storage quota: their endpoints take nothing (a dict lookup).
        self.quota = quota
        #: Large bodies and uploaded files, kept behind URLs the event holds.
        self.files = files
        #: Replaceable as a whole (``dataclasses.replace``), e.g. by tests.
        self.limits = EndpointLimits.from_settings(settings)
        self._buckets: dict[str, Bucket] = {}
        self._prune_at = _PRUNE_AT
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- requests ---------------------------------------------------------------------------

    def _where(self, endpoint_id: str, request: IncomingRequest) -> dict[str, str]:
        """A workflow event's ``url`` (the endpoint's URL as this request reached it, with its
        path and query) and ``client_ip``."""
        came_to, client = request.origin()
        s = self.settings
        endpoint = s.endpoint_url(endpoint_id, s.public_url or came_to or None)
        query = f"?{request.query_string}" if request.query_string else ""
        return {"url": endpoint + request.path + query, "client_ip": client}

    async def preflight(self, endpoint_id: str, headers: list[tuple[str, str]]) -> Answer:
        """A CORS preflight (``OPTIONS``): answered here, the source is not run."""
        await self.directory.find(endpoint_id)
        requested = next(
            (v for k, v in headers if k.lower() == "access-control-request-headers"), None
        )
        return http_events.preflight_answer(requested)

    async def accept(self, endpoint_id: str, request: IncomingRequest) -> Answer | Refusal:
        entry = self.directory.cached(endpoint_id) or await self.directory.find(endpoint_id)
        endpoint = entry.endpoint
        self._take_token(endpoint_id)
        self.admission.check(endpoint.owner_id)
        if not endpoint.workflow:  # a source's request always queues a job
            self.admission.take(endpoint.owner_id)
        self.quota.check(endpoint.owner_id)
        limit = self.limits.max_body_bytes
        upload = http_events.pd_flag(
            request.headers, request.query_string, "x-pd-upload-body", "pipedream_upload_body"
        )
        content_type = _header(request.headers, "content-type")
        form = http_events.media_type(content_type) == "multipart/form-data"
        if upload or form:
            limit = max(limit, self.limits.max_upload_bytes)
        declared = http_events.declared_length(request.headers)
        if declared is not None and declared > limit:
            raise self._too_large(limit, upload or form)
        raw = await request.read_body(limit)
        if len(raw) > limit:
            raise self._too_large(limit, upload or form)
        if endpoint.workflow and http_events.pd_flag(
            request.headers, request.query_string, "x-pd-notrigger"
        ):
            # Pipedream's test request: received and answered, the workflow not run.
            return http_events.default_answer()
        stored_body: Any = None
        if upload:
            mimetype = http_events.media_type(content_type) or OCTET_STREAM
            [url] = await self.files.store(
                endpoint.owner_id, [NewFile(raw, mimetype)], self._files_base(request)
            )
            stored_body, raw = {"raw_body_url": url}, b""
        elif form:
            stored_body, raw = await self._store_form(endpoint.owner_id, content_type, raw, request)
        if endpoint.workflow:
            event = http_events.build_event(
                request.method,
                request.path,
                request.query_string,
                request.headers,
                raw,
                stored_body,
            )
            event.update(self._where(endpoint_id, request))
            workflow = await self._workflow(endpoint)
            if await self.workflows.custom_response(workflow):
                return await self._client_run(workflow, event)
            self.admission.take(workflow.owner_id)
            job = NewJob(
                JobKind.WORKFLOW,
                workflow.owner_id,
                workflow.id,
                WorkflowJob(event, "HTTP").to_json(),
            )
            custom = False
        else:
            # The request as it came: the http job's handler builds the event
            # (handlers/http.py), off the request's path.
            payload = http_events.raw_request(
                request.method,
                request.path,
                request.query_string,
                request.headers,
                raw,
                stored_body,
            )
            job = NewJob(JobKind.HTTP, endpoint.owner_id, endpoint.deployment_id, payload)
            custom = entry.custom
        if not custom:
            await self.enqueuer.enqueue(job)
            # Committed: the request is durable from here on, and only now is it answered.
            self.worker.notify(job.owner_id, due_now=True)
            return http_events.default_answer()
        waiter: asyncio.Future[Settlement] = asyncio.get_running_loop().create_future()

        registered: list[int] = []

        def register(job_id: int) -> None:
            # At the commit, before any worker can claim the job and run() can respond().
            self.waiters.add(job_id, waiter)
            registered.append(job_id)

        try:
            job_id = await self.enqueuer.enqueue(job, on_id=register)
        except BaseException:  # the client went away: the stored job runs on the worker
            for stale in registered:
                self.waiters.discard(stale)
            self.worker.notify()
            raise
        assert job_id is not None
        return await self._await_response(job_id, waiter, self.limits.response_timeout_seconds)

    def _too_large(self, limit: int, stored: bool) -> errors.PayloadTooLarge:
        if stored:
            return errors.PayloadTooLarge(
                f"the request body is over the limit of {limit} bytes for bodies and files "
                "stored behind a URL (the operator's SLUICE_HTTP_MAX_UPLOAD_BYTES)"
            )
        return errors.PayloadTooLarge(
            f"the request body is over this endpoint's limit of {limit} bytes: send it with "
            "the header x-pd-upload-body: 1 to have it stored behind a URL (the event's "
            "body.raw_body_url)"
        )

    def _files_base(self, request: IncomingRequest) -> str:
        """Where file URLs point: the public URL, else the one the request came to (an
        endpoint's own host serves only the endpoint: then the API's last known URL)."""
        s = self.settings
        if s.public_url:
            return s.public_url
        came_to, _ = request.origin()
        if came_to and not s.endpoint_base.per_endpoint_hosts:
            return came_to
        return s.resolved_public_url

    async def _store_form(
        self, owner_id: str, content_type: str, raw: bytes, request: IncomingRequest
    ) -> tuple[Any, bytes]:
        """A multipart body with file parts: the files stored, the body with their URLs (and
        no raw bytes); any other body as it came, within the endpoint's limit."""
        limit = self.limits.max_body_bytes
        parts = http_events.multipart_parts(content_type, raw)
        files = [p for p in parts or () if p.filename is not None]
        if not files:
            if len(raw) > limit:
                raise self._too_large(limit, False)
            return None, raw
        assert parts is not None
        fields = sum(len(p.data) for p in parts if p.filename is None)
        if fields > limit:
            raise errors.PayloadTooLarge(
                f"the form's fields other than files are over this endpoint's limit of {limit} "
                "bytes (files are stored behind URLs; fields are in the event)"
            )
        new = [NewFile(p.data, p.mimetype, p.filename) for p in files]
        urls = iter(await self.files.store(owner_id, new, self._files_base(request)))
        by_part = {i: next(urls) for i, p in enumerate(parts) if p.filename is not None}
        return http_events.stored_form(parts, by_part), b""

    def _take_token(self, endpoint_id: str) -> None:
        rate, burst = self.limits.rate_per_second, self.limits.burst
        if rate <= 0:
            return
        now = self.clock.now_ms()
        bucket, wait_ms = http_events.take(
            self._buckets.get(endpoint_id), now, rate=rate, burst=burst
        )
        self._buckets[endpoint_id] = bucket
        if len(self._buckets) > self._prune_at:
            self._buckets = {
                k: b
                for k, b in self._buckets.items()
                if not http_events.is_full(b, now, rate=rate, burst=burst)
            }
            # Grow the threshold with the live buckets, so pruning stays amortized O(1).
            self._prune_at = max(_PRUNE_AT, 2 * len(self._buckets))
        if wait_ms:
            seconds = math.ceil(wait_ms / 1000)
            raise errors.RateLimited(
                f"too many requests to this endpoint (at most {rate:g} a second, bursts of "
                f"{burst}); retry in {seconds} s",
                retry_after_seconds=seconds,
            )

    async def _await_response(
        self, job_id: int, waiter: asyncio.Future[Settlement], wait_s: float
    ) -> Answer | Refusal:
        task = asyncio.create_task(self._run_now(job_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            outcome = await asyncio.wait_for(waiter, wait_s)
        except TimeoutError:
            return Refusal(Unanswered.NO_RESPONSE, f"no respond() within {wait_s:g} s")
        finally:
            self.waiters.discard(job_id)
        return _outcome_answer(outcome)

    async def _run_now(self, job_id: int) -> None:
        try:
            ran = await self.worker.run_now(job_id)
        except Exception:  # the claim failed (database); the job stays queued for the worker
            log.exception("could not run http job %s now", job_id)
            self.waiters.settle(job_id, Ended("the request was stored but could not run now"))
            return
        # ELSEWHERE: a worker of this process claimed it first (its run settles the future), or
        # another process did (the request then waits for its time-out). Settled here only
        # when the run did not settle it itself (the first settlement counts).
        if ran is RanNow.DONE:
            self.waiters.settle(job_id, Ended("the source's run() ended without calling respond()"))
        elif ran is RanNow.AGAIN:
            # Its run failed in Sluice (not in the source: that is a stored error), or its lease
            # passed: the stored request runs again later, with no client waiting.
            self.waiters.settle(
                job_id,
                Ended(
                    "the request was stored, but its run could not finish now; it runs again",
                    Unanswered.RETRYING,
                ),
            )

    # ---- workflows ----------------------------------------------------------------------------

    async def _workflow(self, endpoint: endpoints.Endpoint) -> Workflow:
        owner_id, workflow_id = endpoint.owner_id, endpoint.deployment_id
        workflow = await self.workflows.current(owner_id, workflow_id)
        # The directory's entry may be a second old: the workflow itself decides.
        if workflow is None or not workflow.active or workflow.endpoint_id != endpoint.endpoint_id:
            raise errors.NotFound(f"no active endpoint {endpoint.endpoint_id!r}")
        return workflow

    async def _client_run(self, workflow: Workflow, event: Any) -> Answer | Refusal:
        """A workflow that answers with its steps' ``$.respond``: run now, without a job
        (``engine/runs/client_runs.py``); answered by the first immediate ``$.respond``, else at the
        end of the run (once it is stored), at the latest by the end of its time-out."""
        answer: asyncio.Future[Settlement] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            self.client_runs.run(workflow, event, source_type="HTTP", answer=answer)
        )
        self._tasks.add(task)

        def ended(task: asyncio.Task[ClientRun]) -> None:
            self._tasks.discard(task)
            if answer.done() or task.cancelled():
                return
            exc = task.exception()
            if exc is not None:
                log.error("a workflow run for a request failed", exc_info=exc)
                answer.set_result(Ended("the run could not finish", Unanswered.RETRYING))
            else:
                answer.set_result(task.result().answer)

        task.add_done_callback(ended)
        wait_s = self.settings.workflow_timeout_seconds + 1
        # A timer settles the answer at the deadline (no timeout scope nor shield per request);
        # a client that goes away cancels only ``answer``: the run goes on, unanswered.
        late = Ended(f"no respond() within {wait_s:g} s", Unanswered.NO_RESPONSE)
        timer = asyncio.get_running_loop().call_later(wait_s, _settle, answer, late)
        try:
            return _outcome_answer(await answer)
        finally:
            timer.cancel()

    async def idle(self) -> None:
        """Wait for the runs started for requests to end (a ``respond()`` answers before)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the runs started for waiting requests; their jobs run again once their
        leases expire (as the job worker's own)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _settle(answer: asyncio.Future[Settlement], outcome: Settlement) -> None:
    if not answer.done():
        answer.set_result(outcome)


def _outcome_answer(outcome: Settlement) -> Answer | Refusal:
    if isinstance(outcome, Ended):
        return Refusal(outcome.reason, outcome.message)
    return http_events.answer(outcome.status, outcome.headers, outcome.body, outcome.body_encoding)


def _header(headers: list[tuple[str, str]], name: str) -> str:
    return next((v for k, v in headers if k.lower() == name), "")
