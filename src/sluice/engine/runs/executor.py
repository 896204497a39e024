"""Running workflows.

``execute`` runs every step of a workflow in one warm Node worker (a ``workflow`` call, see
docs/runner-protocol.md); ``domain/outcomes.py`` decides what its answer means, and
``engine/state/commit.py`` stores the run with what it caused (its ``$errors`` event and the
listeners' ``emit`` jobs, ``$.send`` events and jobs, step db writes) in one transaction
together with the job that asked for the run (``mark_done``). A run paused by ``$.flow`` is stored
with its wait, and its next part runs on a ``resume`` job (``handlers/resume.py``).

A crashed runner is Sluice's failure, not the run's: ``errors.RunnerCrashed`` goes up to the job
worker, nothing is stored and the job runs again; so a listener runs at least once, and a
stored run never again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import PLATFORM_VERSION, ids
from sluice.clock import Clock, iso_ms
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import flow, outcomes
from sluice.domain.runs import Run
from sluice.domain.states import RunStatus, SendStatus
from sluice.domain.workflows import Workflow
from sluice.engine.auth.credentials import CREDENTIAL_ERRORS
from sluice.engine.components import invocations
from sluice.engine.components.workflows import Workflows
from sluice.engine.outbound import sealed
from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.pauses import FlowUrls, Resumed
from sluice.engine.state.commit import DEFERRED_SENDS, Commit
from sluice.engine.state.data_stores import DataStores
from sluice.engine.state.scratch_stores import ScratchStores
from sluice.runtime.port import Invocation, Runner
from sluice.runtime.protocol import Response, Result
from sluice.storage import database, runs

log = logging.getLogger(__name__)

WORKFLOW_ENTRY = Path(__file__).resolve().parents[2] / "runtime" / "js" / "workflow-entry.mjs"


def _context(
    workflow: Workflow,
    run_id: str,
    now_ms: int,
    source_type: str,
    replay_of: str | None,
    hops: Sequence[str],
) -> dict[str, Any]:
    """The run's ``steps.trigger.context`` (Pipedream's fields, plus Sluice's ``hops``)."""
    return {
        "id": run_id,
        "ts": iso_ms(now_ms),
        "workflow_id": workflow.id,
        "deployment_id": workflow.deployment_id,
        "source_type": source_type,
        "verified": False,
        "owner_id": workflow.owner_id,
        "platform_version": PLATFORM_VERSION,
        "workflow_name": workflow.name,
        "replay": replay_of is not None,
        "hops": list(hops),
        "trace_id": run_id,
    }


def _response(responses: list[Response]) -> dict[str, Any] | None:
    """The run's ``$.respond`` answer: the first one."""
    if not responses:
        return None
    first = responses[0]
    return {
        "status": first.status,
        "headers": first.headers,
        "body": first.body,
        "body_encoding": first.body_encoding,
        "immediate": first.immediate,
    }


@dataclass
class StoredRun:
    """``run`` is None when nothing was stored: the workflow was deleted while it ran."""

    run: Run | None
    result: Result


class Executor:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        workflows: Workflows,
        commit: Commit,
        settings: Settings,
        clock: Clock,
        reader: database.Reader | None = None,
        cipher: Cipher | None = None,
        *,
        stores: DataStores | None = None,
    ) -> None:
        self.db = db
        self.stores = stores  # answers the steps' data_store calls
        #: Hot-path reads (the workflow of a job): inline on SQLite.
        self.reader = reader
        self.cipher = cipher or workflows.cipher
        self.pool = pool
        self.workflows = workflows
        #: The one writer of results (``engine/state/commit.py``).
        self.commit = commit
        self.settings = settings
        self.clock = clock
        self._paths = re.compile(
            r"(?:file://)?(?:"
            + re.escape(str(settings.components_dir))
            + r"/[0-9a-f]{64}/|"
            + re.escape(str(settings.npm_store_dir))
            + r"/[^/\s]+/)"
        )

    # ---- running ----------------------------------------------------------------------------

    async def execute(
        self,
        workflow: Workflow,
        event: Any,
        *,
        source_type: str,
        run_id: str | None = None,
        mark_done: Finish | None = None,
        on_respond: Callable[[Response], None] | None = None,
        hops: Sequence[str] = (),
        replay_of: str | None = None,
        trigger_context: dict[str, Any] | None = None,
        resumed: Resumed | None = None,
        before_commit: Callable[[], Awaitable[object]] | None = None,
    ) -> StoredRun:
        """Run the workflow and store the run (``before_commit`` is awaited between the two)."""
        now_ms = self.clock.now_ms()
        if resumed is not None:
            run_id, context = resumed.run.id, resumed.run.context
        else:
            run_id = run_id or ids.random_token(27)
            context = {
                **_context(workflow, run_id, now_ms, source_type, replay_of, hops),
                **(trigger_context or {}),
            }
        urls = FlowUrls.new(self.settings.public_url_for(workflow.owner_id))
        if resumed is not None and resumed.start is None:  # cancelled: nothing runs
            return await self._store(
                workflow, resumed, Result(ok=True), [], now_ms, urls, mark_done
            )
        refused: Result | None = None
        call: dict[str, Any] = {}
        try:
            call = await self._workflow_call(workflow, event, context, urls.call(run_id), resumed)
        except CREDENTIAL_ERRORS as exc:  # a step's account to reconnect: the run fails, no Node
            refused = Result.failure(exc.code, exc.message)
            refused.error = {**(refused.error or {}), "step": exc.details.get("step")}
        responses: list[Response] = []

        def responded(response: Response) -> None:
            responses.append(response)
            if on_respond is not None:
                on_respond(response)

        env = {} if refused else await self.workflows.env_vars.values(workflow.owner_id)
        result = refused or await self.pool.invoke(self._invocation(workflow, call, env), responded)
        if before_commit is not None:
            await before_commit()
        if resumed is not None:
            return await self._store(workflow, resumed, result, responses, now_ms, urls, mark_done)
        run, db_writes = self._record(
            workflow, context, event, result, responses, now_ms, replay_of, urls
        )
        stored = await self.commit.run(
            run,
            global_errors=workflow.global_errors,
            db_writes=db_writes,
            hops=hops,
            mark_done=mark_done,
        )
        return StoredRun(run if stored else None, result)

    async def test(self, workflow: Workflow, event: Any) -> Run:
        """A test run (the builder's Test): every step of ``workflow`` (a draft, cut after the
        step being tested) runs in the sandbox as in a real run, and the run is returned, not
        stored: no run in the workflow's list, no ``$errors``, no step db writes, no
        ``$.send`` delivered (the run lists them). Data store writes go to a scratch copy
        discarded after the test (``engine/state/scratch_stores.py``): the steps read the real
        records and their own writes, and nothing stored changes."""
        now_ms = self.clock.now_ms()
        run_id = ids.random_token(27)
        context = {**_context(workflow, run_id, now_ms, "TEST", None, ()), "test": True}
        urls = FlowUrls.new(self.settings.public_url_for(workflow.owner_id))
        responses: list[Response] = []
        try:
            call = await self._workflow_call(workflow, event, context, urls.call(run_id), None)
        except CREDENTIAL_ERRORS as exc:
            result = Result.failure(exc.code, exc.message)
            result.error = {**(result.error or {}), "step": exc.details.get("step")}
        else:
            env = await self.workflows.env_vars.values(workflow.owner_id)
            invocation = self._invocation(workflow, call, env)
            if self.stores is not None:
                scratch = ScratchStores(
                    self.stores, workflow.owner_id, self.clock, self.settings.max_db_bytes
                )
                invocation = replace(invocation, on_store=scratch.answer)
            result = await self.pool.invoke(invocation, responses.append)
        run, _ = self._record(workflow, context, event, result, responses, now_ms, None, urls)
        log.info(
            "workflow tested",
            extra={"action": "workflow_test", "workflow_id": workflow.id, "status": run.status},
        )
        return run

    def _invocation(self, workflow: Workflow, call: dict[str, Any], env: Any) -> Invocation:
        return invocations.of_workflow(
            self.settings,
            workflow.owner_id,
            workflow.id,
            workflow.deployment_id,
            WORKFLOW_ENTRY,
            call,  # lone surrogates become U+FFFD on the pipe (protocol.encode)
            env=env,
            on_store=self.stores.runner_call(workflow.owner_id) if self.stores else None,
        )

    async def _workflow_call(
        self,
        workflow: Workflow,
        event: Any,
        context: dict[str, Any],
        urls: dict[str, str],
        resumed: Resumed | None,
    ) -> dict[str, Any]:
        """The runner's ``workflow`` call (a resumed one: ``start``, ``prior`` and ``run``)."""
        call: dict[str, Any] = {
            "kind": "workflow",
            "event": event,
            "context": context,
            "steps": await self._call_steps(workflow),
            "flow": urls,
        }
        if resumed is not None:
            call |= {
                "start": resumed.start,
                "prior": flow.prior_steps(resumed.run.steps),
                "run": resumed.context_run or {"runs": 1},
            }
        return call

    async def _store(
        self,
        workflow: Workflow,
        resumed: Resumed,
        result: Result,
        responses: list[Response],
        now_ms: int,
        urls: FlowUrls,
        mark_done: Finish | None = None,
    ) -> StoredRun:
        """A resumed part stored into its run: the earlier steps and sends, then the new."""
        before = resumed.run
        part, db_writes = self._record(
            workflow,
            before.context,
            before.event,
            result,
            responses,
            now_ms,
            before.replay_of,
            urls,
            resumed.runs_of(workflow.steps),
            len(before.sends),
        )
        run = replace(
            before,
            status=RunStatus.CANCELLED if resumed.start is None else part.status,
            steps=before.steps + part.steps,
            error=part.error,
            flow_exit=part.flow_exit,
            duration_ms=before.duration_ms + part.duration_ms,
            sends=before.sends + part.sends,
            pause=part.pause,  # None when cancelled: nothing ran
        )
        stored = await self.commit.run(
            run,
            global_errors=workflow.global_errors,
            db_writes=db_writes,
            hops=[str(h) for h in before.context.get("hops") or []],
            mark_done=mark_done,
            sends_from=len(before.sends),
        )
        return StoredRun(run if stored else None, result)

    async def _call_steps(self, workflow: Workflow) -> list[dict[str, Any]]:
        """Each step as the runner's ``workflow`` call takes it: entry, props, time-out, and
        the step's db for code steps that use one."""
        step_s = (
            self.settings.workflow_step_timeout_seconds or self.settings.workflow_timeout_seconds
        )
        with_db = [step["id"] for step in workflow.steps if step.get("uses_db")]
        step_db: dict[str, dict[str, Any]] = {}
        if with_db:
            async with self.db.connect() as conn:
                step_db = await conn.run_sync(runs.step_states_sync, with_db)
        return [
            {
                "id": step["id"],
                "name": step["name"],
                "kind": step["type"],  # an action's run() never sees process.env
                "entry": str(await self.workflows.step_entry(step)),
                "props": await self.workflows.step_props(workflow, step),
                "timeout_ms": int(step_s * 1000),
                **(
                    {"db": step_db.get(step["id"], {}), "max_db_bytes": self.settings.max_db_bytes}
                    if step.get("uses_db")
                    else {}
                ),
            }
            for step in workflow.steps
        ]

    def _scrub(self, text: Any) -> Any:
        """Component paths become relative; Sluice's own frames are left out."""
        if not isinstance(text, str):
            return text
        runtime = str(WORKFLOW_ENTRY.parent)
        lines = [line for line in text.split("\n") if runtime not in line]
        return self._paths.sub("", "\n".join(lines))

    def _record(
        self,
        workflow: Workflow,
        context: dict[str, Any],
        event: Any,
        result: Result,
        responses: list[Response],
        now_ms: int,
        replay_of: str | None,
        urls: FlowUrls,
        runs_of: dict[str, int] | None = None,
        sends_from: int = 0,
    ) -> tuple[Run, dict[str, dict[str, Any]]]:
        """The run to store (``domain/outcomes.py`` decides its steps and status) and its code
        steps' db writes. A pause keeps only the hashes of its URLs' secrets."""
        end_ms = now_ms + int(result.duration_ms)
        decided = outcomes.run_outcome(
            workflow.steps,
            result.steps,
            logs=result.logs,
            ok=result.ok,
            error=result.error,
            ts=iso_ms(end_ms),
            scrub=self._scrub,
            now_ms=self.clock.now_ms(),  # a pause counts from the end of its step
            runs=runs_of,
        )
        pause = decided.pause
        if pause is not None:
            pause.resume_hash = flow.secret_hash(urls.resume_secret)
            pause.cancel_hash = flow.secret_hash(urls.cancel_secret)
        run = Run(
            id=context["id"],
            owner_id=workflow.owner_id,
            workflow_id=workflow.id,
            deployment_id=workflow.deployment_id,
            status=decided.status,
            event=event,
            context=context,
            steps=decided.steps,
            error=decided.error,
            flow_exit=result.flow_exit,
            response=_response(responses),
            started_ms=now_ms,
            duration_ms=float(result.duration_ms),
            replay_of=replay_of,
            sends=self._sends(result.sends, context["id"], sends_from),
            pause=pause.to_json() if pause is not None else None,
        )
        return run, decided.db_writes

    def _sends(self, sends: list[dict[str, Any]], run_id: str, first: int) -> list[dict[str, Any]]:
        """The run's ``$.send`` records, configs sealed (``first``: the index of the first)."""
        return [
            {
                "type": str(send.get("type")),
                "step": send.get("step"),
                "config": sealed.seal(self.cipher, send.get("config"), run_id, first + idx),
                "status": SendStatus.QUEUED
                if send.get("type") in DEFERRED_SENDS
                else SendStatus.DONE,
            }
            for idx, send in enumerate(sends)
        ]

    # ---- jobs -------------------------------------------------------------------------------

    async def load(self, owner_id: str, workflow_id: str) -> Workflow | None:
        return await self.workflows.current(owner_id, workflow_id)
