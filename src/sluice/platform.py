"""The composition root: opens storage, the Node pool and the engine; closes them in reverse.

async with Platform.open(settings) as platform:
    await platform.sources.run(owner_id, "dc_…")
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import ids
from sluice.clock import Clock, SystemClock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain.apps import App
from sluice.domain.states import JobKind
from sluice.engine import broker, health, streams
from sluice.engine.actions import ActionRun, Actions
from sluice.engine.app_catalog import AppCatalog
from sluice.engine.apps import Apps
from sluice.engine.broker import Broker
from sluice.engine.commit import Commit
from sluice.engine.components import ComponentInput, Components
from sluice.engine.credentials import Credentials
from sluice.engine.directory import EndpointDirectory
from sluice.engine.enqueuer import Enqueuer
from sluice.engine.error_workflows import create_default_error_workflow
from sluice.engine.events import Events
from sluice.engine.executor import Executor
from sluice.engine.handlers.emit import EmitJobs
from sluice.engine.handlers.http import HttpJobs
from sluice.engine.handlers.send import SendJobs
from sluice.engine.handlers.timer import TimerJobs
from sluice.engine.handlers.workflow import WorkflowJobs
from sluice.engine.ingress import IncomingRequest, Ingress
from sluice.engine.invoker import Invoker
from sluice.engine.invoker import Outcome as InvocationOutcome
from sluice.engine.jobs import Handler, JobWorker, WorkerConfig
from sluice.engine.mailer import Mailer
from sluice.engine.notifications import Notifications
from sluice.engine.oauth import OAuthConnect
from sluice.engine.options import Options, OptionsPage, OptionsRequest
from sluice.engine.runs import Runs
from sluice.engine.scheduler import Scheduler
from sluice.engine.sources import DeployRequest, Sources, UpdateRequest
from sluice.engine.streams import Stream
from sluice.engine.subscriptions import Subscriptions
from sluice.engine.waiters import Waiters
from sluice.engine.workflow_input import WorkflowInput
from sluice.engine.workflows import Workflows
from sluice.runtime.deps import DependencyStore
from sluice.runtime.pool import PoolConfig, RunnerPool
from sluice.runtime.sandbox import Sandbox, SandboxConfig
from sluice.storage import accounts, database
from sluice.storage import components as component_store
from sluice.storage import workflows as workflow_store
from sluice.storage.accounts import Account
from sluice.storage.apps import ConnectedAccount
from sluice.storage.components import SavedComponent
from sluice.storage.events import Page as EventPage
from sluice.storage.runs import Run
from sluice.storage.sources import Deployment
from sluice.storage.subscriptions import AutoSubscription, Subscription
from sluice.storage.workflows import Workflow

log = logging.getLogger(__name__)

# What the API edge names in its annotations, re-exported so api/ reaches no deeper layer.
__all__ = [
    "Account",
    "ActionRun",
    "App",
    "AutoSubscription",
    "ComponentInput",
    "ConnectedAccount",
    "DeployRequest",
    "Deployment",
    "EventPage",
    "IncomingRequest",
    "InvocationOutcome",
    "OptionsPage",
    "OptionsRequest",
    "Platform",
    "Run",
    "SavedComponent",
    "Stream",
    "Subscription",
    "UpdateRequest",
    "Workflow",
    "WorkflowInput",
    "check_sandbox",
    "create_account_offline",
]


@dataclass
class Platform:
    settings: Settings
    clock: Clock
    db: AsyncEngine
    reader: database.Reader
    cipher: Cipher
    pool: RunnerPool
    deps: DependencyStore
    components: Components
    invoker: Invoker
    commit: Commit
    sources: Sources
    actions: Actions
    options: Options
    apps: Apps
    catalog: AppCatalog
    oauth: OAuthConnect
    credentials: Credentials
    events: Events
    subscriptions: Subscriptions
    runs: Runs
    jobs: JobWorker
    scheduler: Scheduler
    ingress: Ingress
    workflows: Workflows
    executor: Executor
    enqueuer: Enqueuer
    sends: SendJobs
    #: PostgreSQL: other processes' commits, pushed (None on SQLite).
    notifications: Notifications | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, settings: Settings, *, clock: Clock | None = None, background: bool = True
    ) -> AsyncIterator[Platform]:
        """Open everything; ``background`` starts the loops (job worker, scheduler). Tests
        leave it off and drive them step by step (``platform.jobs.drain()``)."""
        clock = clock or SystemClock()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        cipher = Cipher.load(settings.secret_key, settings.data_dir)
        db = await database.open_database(settings.resolved_database_url)
        reader = database.Reader(db)
        try:
            async with RunnerPool(
                PoolConfig(
                    node=settings.node,
                    max_runners=settings.max_runners,
                    max_workers_per_runner=settings.max_workers_per_runner,
                    worker_idle_ms=int(settings.worker_idle_seconds * 1000),
                ),
                _sandbox(settings),
            ) as pool:
                platform = cls._assemble(settings, clock, db, reader, cipher, pool)
                if database.is_postgres(db):
                    platform.notifications = platform._listen(settings)
                if background:
                    await platform.jobs.start()
                    await platform.scheduler.start()
                try:
                    yield platform
                finally:
                    if platform.notifications is not None:
                        await platform.notifications.close()
                    await platform.ingress.close()
                    await platform.scheduler.stop()
                    await platform.jobs.stop(settings.shutdown_grace_seconds)
                    await platform.enqueuer.close()
                    platform.commit.dispose()
        finally:
            reader.dispose()
            await db.dispose()

    @classmethod
    def _assemble(
        cls,
        settings: Settings,
        clock: Clock,
        db: AsyncEngine,
        reader: database.Reader,
        cipher: Cipher,
        pool: RunnerPool,
    ) -> Platform:
        """Every engine service, each given what it uses; the job worker gets its table of
        handlers (``engine/handlers/``), one per job kind."""
        deps = DependencyStore(settings.npm_store_dir, npm=settings.npm)
        components = Components(db, pool, deps, settings, clock)
        commit = Commit(db, settings, clock, Broker())
        catalog = AppCatalog(db, cipher, clock)
        credentials = Credentials(db, cipher, clock, catalog)
        invoker = Invoker(
            db, pool, components, cipher, settings, clock, commit, reader, credentials=credentials
        )
        directory = EndpointDirectory(reader, components)
        workflows = Workflows(db, components, cipher, settings, clock, credentials=credentials)
        executor = Executor(db, pool, workflows, commit, settings, clock, reader)
        waiters = Waiters()
        enqueuer = Enqueuer(db, clock)
        sends = SendJobs(db, cipher, Mailer(settings), settings, clock, commit)
        table = cls._handlers(settings, reader, invoker, executor, waiters, sends)
        worker = cls._worker(db, clock, settings, enqueuer, table)
        ingress = Ingress(
            reader,
            directory,
            workflows,
            settings,
            clock,
            enqueuer=enqueuer,
            worker=worker,
            waiters=waiters,
        )
        # Jobs this process enqueues with a run's results (emits, sends) wake its worker now.
        commit.broker.on(broker.JOBS, lambda _items: worker.notify())
        return cls(
            settings=settings,
            clock=clock,
            db=db,
            reader=reader,
            cipher=cipher,
            pool=pool,
            deps=deps,
            components=components,
            invoker=invoker,
            commit=commit,
            sources=Sources(
                db, reader, pool, components, invoker, cipher, settings, clock, directory
            ),
            actions=Actions(db, pool, components, cipher, settings, credentials=credentials),
            options=Options(db, pool, components, cipher, settings, credentials=credentials),
            apps=Apps(db, cipher, clock, catalog),
            catalog=catalog,
            oauth=OAuthConnect(db, cipher, clock, catalog, settings.resolved_public_url),
            credentials=credentials,
            events=Events(db),
            subscriptions=Subscriptions(db),
            runs=Runs(db, ingress),
            jobs=worker,
            scheduler=Scheduler(db, clock, notify=worker.notify),
            ingress=ingress,
            workflows=workflows,
            executor=executor,
            enqueuer=enqueuer,
            sends=sends,
        )

    @staticmethod
    def _handlers(
        settings: Settings,
        reader: database.Reader,
        invoker: Invoker,
        executor: Executor,
        waiters: Waiters,
        sends: SendJobs,
    ) -> dict[str, Handler]:
        """The job worker's table: one handler per job kind (``engine/handlers/``)."""
        return {
            JobKind.HTTP: HttpJobs(
                reader, invoker, waiters, run_timeout_seconds=settings.http_source_timeout_seconds
            ),
            JobKind.TIMER: TimerJobs(reader, invoker, executor),
            JobKind.EMIT: EmitJobs(invoker, executor),
            JobKind.WORKFLOW: WorkflowJobs(executor, waiters),
            JobKind.SEND: sends,
        }

    @staticmethod
    def _worker(
        db: AsyncEngine,
        clock: Clock,
        settings: Settings,
        enqueuer: Enqueuer,
        handlers: dict[str, Handler],
    ) -> JobWorker:
        """The job worker with its table of handlers, one per job kind."""
        return JobWorker(
            db,
            clock,
            WorkerConfig(
                lease_ms=int(settings.job_lease_seconds * 1000),
                poll_seconds=settings.job_poll_seconds,
                retention_ms=settings.job_retention_seconds * 1000,
                account_share=settings.account_max_concurrency,
            ),
            handlers,
            # Requests first: the background loop yields while the endpoints are saturated.
            pressure=enqueuer.pressed if settings.requests_first else None,
        )

    def _listen(self, settings: Settings) -> Notifications:
        """Commits of other processes, pushed here: a new job wakes the job worker, a stored
        event or log line the live streams of its emitter (``engine/notifications.py``)."""
        hub = self.commit.broker

        def stored(emitter_id: str) -> None:
            topic = broker.stored_topic(emitter_id)
            if hub.subscribers(topic):
                hub.publish(topic, [emitter_id])

        listener = Notifications(settings.resolved_database_url, self.jobs.notify, stored)
        listener.start()
        return listener

    async def ready(self) -> None:
        """Raises ``errors.NotReady`` unless the database answers and the runner pool works."""
        await health.ready(self.db, self.pool)

    async def read_queue(self) -> None:
        """The shared job queue, read into ``sluice.metrics``' gauges."""
        await health.read_queue(self.db, self.clock.now_ms())

    def endpoint_url(self, endpoint_id: str | None) -> str | None:
        """The public URL of an HTTP endpoint (``SLUICE_ENDPOINT_BASE_URL`` + its id)."""
        return self.invoker.endpoint_url(endpoint_id)

    async def create_account(
        self, username: str, email: str | None = None, *, is_admin: bool = False
    ) -> tuple[Account, str]:
        """A new account and its first API key (shown this once)."""
        now_s = self.clock.now_ms() // 1000
        async with self.db.begin() as conn:
            account = await accounts.create(
                conn, username=username, email=email, now_s=now_s, is_admin=is_admin
            )
            key = await accounts.create_key(conn, account.id, now_s=now_s)
            await create_default_error_workflow(
                conn, account.id, base_url=self.settings.resolved_public_url, now_s=now_s
            )
        return account, key

    async def authenticate(self, api_key: str) -> Account | None:
        return await self.reader(lambda conn: accounts.authenticate(conn, api_key))

    async def set_email(self, account_id: str, email: str | None) -> Account:
        """Change (``None``: remove) the account's e-mail address; the account as it is now."""
        async with self.db.begin() as conn:
            await accounts.set_email(conn, account_id, email)
            found = await accounts.get(conn, account_id)
        assert found is not None
        return found

    def open_emits(
        self, emitter_id: str, *, after: tuple[int, int] | None, channel: str | None
    ) -> Stream:
        """The emitter's emits as they are stored, first the stored ones after ``after`` when
        given (``streams.open_emits``); storage is also polled (``stream_poll_seconds``)."""
        return streams.open_emits(
            self.db,
            self.commit.broker,
            emitter_id,
            after=after,
            channel=channel,
            poll_seconds=self.settings.resolved_stream_poll_seconds,
        )

    def open_logs(self, emitter_id: str, *, after: int | None) -> Stream:
        """The emitter's log lines as they are stored, first the stored ones after ``after``."""
        return streams.open_logs(
            self.db,
            self.commit.broker,
            emitter_id,
            after=after,
            poll_seconds=self.settings.resolved_stream_poll_seconds,
        )

    async def workflow_page(
        self, owner_id: str, *, limit: int, before: str | None, after: str | None
    ) -> tuple[list[Workflow], int]:
        """The account's workflows, newest first (``before``/``after``: ``p_`` ids), and the
        total count."""
        async with self.db.connect() as conn:
            return await workflow_store.page(
                conn, owner_id, limit=limit, before=before, after=after
            )

    async def component_page(
        self,
        owner_id: str,
        *,
        limit: int,
        before: str | None,
        after: str | None,
        component_type: str | None,
    ) -> component_store.Page:
        """The account's saved components, newest first (``before``/``after``: ``sc_`` ids)."""
        async with self.db.connect() as conn:
            return await component_store.page(
                conn,
                owner_id,
                limit=limit,
                before=before,
                after=after,
                component_type=component_type,
            )

    async def find_component(self, owner_id: str, key_or_id: str) -> SavedComponent | None:
        """The account's saved component by ``sc_`` id, else its newest with that key."""
        async with self.db.connect() as conn:
            found = None
            if ids.has_prefix(key_or_id, "sc"):
                found = await component_store.get(conn, owner_id, key_or_id)
            if found is None:
                found = await component_store.get_by_key(conn, owner_id, key_or_id)
        return found

    async def registry_versions(self, key: str) -> list[SavedComponent]:
        """Every published version of the registry component ``key``."""
        async with self.db.connect() as conn:
            return await component_store.registry_versions(conn, key)


async def create_account_offline(
    settings: Settings, username: str, email: str | None = None, *, is_admin: bool = False
) -> tuple[Account, str]:
    """Create an account straight in the store: no runner, no npm, no server needed."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = await database.open_database(settings.resolved_database_url)
    try:
        now_s = SystemClock().now_ms() // 1000
        async with db.begin() as conn:
            account = await accounts.create(
                conn, username=username, email=email, now_s=now_s, is_admin=is_admin
            )
            key = await accounts.create_key(conn, account.id, now_s=now_s)
            await create_default_error_workflow(
                conn, account.id, base_url=settings.resolved_public_url, now_s=now_s
            )
        return account, key
    finally:
        await db.dispose()


def check_sandbox(settings: Settings) -> None:
    """Start one empty jail and stop it: raises ``SandboxUnavailable`` (with the fix in its
    message) when user code cannot be jailed here. Blocking."""
    sandbox = _sandbox(settings)
    if sandbox is not None:
        try:
            sandbox.open()
        finally:
            sandbox.close()


def _sandbox(settings: Settings) -> Sandbox | None:
    """The jails user code runs in; None with ``SLUICE_SANDBOX=off`` (warned about loudly)."""
    sandbox = Sandbox(
        SandboxConfig(
            enabled=settings.sandbox == "on",
            node=settings.node,
            components_dir=settings.components_dir,
            npm_store_dir=settings.npm_store_dir,
            memory_mb=settings.runner_memory_mb,
            max_processes=settings.runner_max_processes,
            tmp_mb=settings.sandbox_tmp_mb,
            egress_allow=settings.egress_allow,
        )
    )
    if settings.sandbox == "off":
        sandbox.open()  # only logs the warning
        return None
    return sandbox
