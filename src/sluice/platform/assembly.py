"""The composition root: opens storage, the Node pool and the engine, gives each service what it
uses, builds the job worker's table of handlers; closes everything in reverse.

async with Platform.open(settings) as platform:
    await platform.sources.run(owner_id, "dc_…")
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, passwords
from sluice.clock import Clock, SystemClock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain.accounts import Account
from sluice.domain.states import JobKind
from sluice.engine.auth import accounts as new_accounts
from sluice.engine.auth.api_clients import ApiClients
from sluice.engine.auth.app_catalog import AppCatalog
from sluice.engine.auth.apps import Apps
from sluice.engine.auth.credentials import Credentials
from sluice.engine.auth.email_verification import EmailVerification
from sluice.engine.auth.logins import Logins
from sluice.engine.auth.oauth import OAuthConnect
from sluice.engine.checkpoints import Checkpointer, WalPolicy
from sluice.engine.components.actions import Actions
from sluice.engine.components.components import Components
from sluice.engine.components.core_components import CoreComponents
from sluice.engine.components.directory import EndpointDirectory
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.engine.components.options import Options
from sluice.engine.components.registry_import import RegistryImports
from sluice.engine.components.subscriptions import Subscriptions
from sluice.engine.components.workflows import Workflows
from sluice.engine.events import Events
from sluice.engine.handlers.email import EmailJobs
from sluice.engine.handlers.emit import EmitJobs
from sluice.engine.handlers.http import HttpJobs
from sluice.engine.handlers.release import ReleaseJobs
from sluice.engine.handlers.resume import ResumeJobs
from sluice.engine.handlers.send import SendJobs
from sluice.engine.handlers.timer import TimerJobs
from sluice.engine.handlers.workflow import WorkflowJobs
from sluice.engine.ingress import Ingress
from sluice.engine.mail_in import MailIn
from sluice.engine.notifications import Notifications
from sluice.engine.outbound import http_clients
from sluice.engine.outbound.deliveries import DeliveryConfig, DeliveryWorker
from sluice.engine.outbound.mailer import Mailer
from sluice.engine.outbound.webhooks import Webhooks
from sluice.engine.queue.admission import Admission, AdmissionPolicy
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.engine.queue.jobs import Handler, JobWorker, WorkerConfig
from sluice.engine.queue.scheduler import Scheduler
from sluice.engine.runs.client_runs import ClientRuns
from sluice.engine.runs.executor import Executor
from sluice.engine.runs.files import Files
from sluice.engine.runs.invoker import Invoker
from sluice.engine.runs.pauses import Pauses
from sluice.engine.runs.sources import Sources
from sluice.engine.runs.step_tests import StepTests
from sluice.engine.runs.workflow_runs import Runs
from sluice.engine.state import broker
from sluice.engine.state.broker import Broker, Waiters
from sluice.engine.state.commit import Commit
from sluice.engine.state.data_stores import DataStores
from sluice.platform.services import Services
from sluice.runtime.deps import DependencyStore
from sluice.runtime.npm_jail import NpmJail
from sluice.runtime.packages import PackageFetcher
from sluice.runtime.pool import PoolConfig, RunnerPool
from sluice.runtime.sandbox import Sandbox, SandboxConfig
from sluice.storage import accounts, database

log = logging.getLogger(__name__)


class Platform(Services):
    """Every engine service, opened together (``Platform.open``)."""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, settings: Settings, *, clock: Clock | None = None, background: bool = True
    ) -> AsyncIterator[Platform]:
        """Open everything; ``background`` starts the loops (job worker, scheduler). Tests
        leave it off and drive them step by step (``platform.jobs.drain()``).

        Built, then opened: each resource goes on one exit stack as it is opened, so they
        close in the reverse order, every one of them even when another fails to close:
        the loops stop first (the ingress, the scheduler, the deliveries, the job worker:
        the last two finish what they hold within ``shutdown_grace_seconds``), then the
        writers, then the upkeep (the admission's reads, the WAL's checkpointer: the WAL is
        checkpointed until the job worker has stopped, the SMTP listener), the Node runners,
        the outbound clients and last the database."""
        clock = clock or SystemClock()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        cipher = Cipher.load(settings.secret_key, settings.data_dir)
        async with contextlib.AsyncExitStack() as stack:
            db = await database.open_database(
                settings.resolved_database_url,
                idle_tx_ms=database.idle_tx_ms(int(settings.job_lease_seconds * 1000)),
            )
            stack.push_async_callback(db.dispose)
            reader = database.Reader(db)
            stack.callback(reader.dispose)
            # One shared client per egress policy for the process's own requests (webhooks).
            clients = await stack.enter_async_context(
                http_clients.Clients(
                    limits=httpx.Limits(
                        max_connections=max(100, settings.delivery_concurrency),
                        max_keepalive_connections=max(20, settings.delivery_concurrency),
                    )
                )
            )
            pool = await stack.enter_async_context(
                RunnerPool(
                    PoolConfig(
                        node=settings.node,
                        max_runners=settings.max_runners,
                        max_workers_per_runner=settings.max_workers_per_runner,
                        worker_idle_ms=int(settings.worker_idle_seconds * 1000),
                    ),
                    _sandbox(settings),
                    functools.partial(accounts.jail_uid, db, base=SandboxConfig.uid_base),
                )
            )
            platform = cls._assemble(settings, clock, db, reader, cipher, pool, clients)
            # Before any request: a fresh install's registry has its triggers and actions.
            await CoreComponents(db, platform.components, clock).seed()
            if settings.smtp_inbound_port:
                platform.mail_in = await stack.enter_async_context(
                    MailIn(
                        settings,
                        reader,
                        platform.enqueuer,
                        platform.jobs,
                        admission=platform.admission,
                        quota=platform.commit.quota,
                    )
                )
            if background:
                platform.checkpointer = _checkpointer(settings, reader)
                if platform.checkpointer is not None:
                    await stack.enter_async_context(platform.checkpointer)
                await stack.enter_async_context(platform.admission)
            stack.callback(platform.commit.dispose)
            stack.push_async_callback(platform.enqueuer.close)
            stack.push_async_callback(platform.jobs.stop, settings.shutdown_grace_seconds)
            stack.push_async_callback(platform.deliveries.stop, settings.shutdown_grace_seconds)
            stack.push_async_callback(platform.scheduler.stop)
            stack.push_async_callback(platform.ingress.close)
            if database.is_postgres(db):
                platform.notifications = platform._listen(settings)
                stack.push_async_callback(platform.notifications.close)
            if background:
                await platform.jobs.start()
                await platform.deliveries.start()
                await platform.scheduler.start()
            yield platform

    @classmethod
    def _assemble(
        cls,
        settings: Settings,
        clock: Clock,
        db: AsyncEngine,
        reader: database.Reader,
        cipher: Cipher,
        pool: RunnerPool,
        clients: http_clients.Clients,
    ) -> Platform:
        """Every engine service, each given what it uses (the ones that run user code and
        store what it did first: ``_Running``)."""
        run = _Running.build(settings, clock, db, reader, cipher, pool, clients)
        deps, components, credentials = run.deps, run.components, run.credentials
        return cls(
            settings=settings,
            clock=clock,
            db=db,
            reader=reader,
            cipher=cipher,
            pool=pool,
            deps=deps,
            components=components,
            invoker=run.invoker,
            commit=run.commit,
            sources=run.sources,
            actions=run.actions,
            dynamic_props=run.dynamic,
            options=Options(
                db, pool, components, cipher, settings, credentials=credentials, stores=run.stores
            ),
            registry_imports=RegistryImports(
                db,
                components,
                PackageFetcher(settings.npm_store_dir / ".packages", deps),
                run.catalog,
            ),
            apps=Apps(db, cipher, clock, run.catalog),
            catalog=run.catalog,
            oauth=OAuthConnect(
                db, cipher, clock, run.catalog, lambda: settings.resolved_public_url
            ),
            credentials=credentials,
            events=Events(db),
            subscriptions=Subscriptions(db),
            runs=Runs(db, run.client_runs),
            jobs=run.worker,
            scheduler=Scheduler(db, clock, notify=run.worker.notify),
            ingress=run.ingress,
            workflows=run.workflows,
            executor=run.executor,
            enqueuer=run.enqueuer,
            sends=run.sends,
            email_verification=EmailVerification(
                db, cipher, run.sends.mailer, settings, clock, run.commit
            ),
            logins=Logins(db, settings, clock),
            pauses=Pauses(run.commit, clock),
            data_stores=run.stores,
            files=run.files,
            api_clients=ApiClients(db, reader, clock, settings.oauth_token_ttl_seconds),
            webhooks=run.webhooks,
            deliveries=run.deliveries,
            admission=run.ingress.admission,
            step_tests=StepTests(db, run.executor, run.commit, clock),
        )

    @staticmethod
    def _handlers(
        settings: Settings,
        reader: database.Reader,
        invoker: Invoker,
        executor: Executor,
        waiters: Waiters,
        sends: SendJobs,
        webhooks: Webhooks,
    ) -> dict[str, Handler]:
        """The job worker's table: one handler per job kind (``engine/handlers/``)."""
        return {
            JobKind.HTTP: HttpJobs(
                reader, invoker, waiters, run_timeout_seconds=settings.http_source_timeout_seconds
            ),
            JobKind.TIMER: TimerJobs(reader, invoker, executor),
            JobKind.EMIT: EmitJobs(invoker, executor, webhooks),
            JobKind.WORKFLOW: WorkflowJobs(executor, waiters),
            JobKind.SEND: sends,
            JobKind.RESUME: ResumeJobs(executor.db, executor),
            JobKind.RELEASE: ReleaseJobs(invoker.commit),
            JobKind.EMAIL: EmailJobs(reader, invoker),
        }

    @staticmethod
    def _worker(
        db: AsyncEngine,
        clock: Clock,
        settings: Settings,
        enqueuer: Enqueuer,
        admission: Admission,
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
            # Requests first: the background loop yields while the endpoints are saturated,
            # unless a backlog grows toward the shedding bound (it could not be run in it so).
            pressure=(lambda: enqueuer.pressed() and not admission.backlogged())
            if settings.requests_first
            else None,
        )

    def _listen(self, settings: Settings) -> Notifications:
        """Commits of other processes, pushed here: a new job wakes the job worker, a stored
        event or log line the live streams of its emitter (``engine/notifications.py``)."""
        hub = self.commit.broker

        def stored(emitter_id: str) -> None:
            topic = broker.stored_topic(emitter_id)
            if hub.subscribers(topic):
                hub.publish(topic, [emitter_id])

        def jobs(owner_id: str | None, due_now: bool) -> None:
            self.jobs.notify(owner_id, due_now=due_now)

        listener = Notifications(settings.resolved_database_url, jobs, stored)
        listener.start()
        return listener


@dataclass
class _Running:
    """The services that take requests, run user code and store what it did, and the job
    worker with its table of handlers (``engine/handlers/``), one per job kind."""

    deps: DependencyStore
    components: Components
    commit: Commit
    catalog: AppCatalog
    credentials: Credentials
    stores: DataStores
    invoker: Invoker
    directory: EndpointDirectory
    workflows: Workflows
    executor: Executor
    enqueuer: Enqueuer
    sends: SendJobs
    dynamic: DynamicProps
    worker: JobWorker
    client_runs: ClientRuns
    ingress: Ingress
    sources: Sources
    actions: Actions
    webhooks: Webhooks
    deliveries: DeliveryWorker
    files: Files

    @classmethod
    def build(
        cls,
        settings: Settings,
        clock: Clock,
        db: AsyncEngine,
        reader: database.Reader,
        cipher: Cipher,
        pool: RunnerPool,
        clients: http_clients.Clients,
    ) -> _Running:
        deps = DependencyStore(
            settings.npm_store_dir, npm=settings.npm, quota_bytes=settings.npm_quota_mb << 20
        )
        if pool.sandbox is not None:  # installs run jailed, under the account's uid
            deps.jail = NpmJail(pool.sandbox, uid_of=pool.uid_of)
        components = Components(db, pool, deps, settings, clock)
        commit = Commit(db, settings, clock, Broker())
        catalog = AppCatalog(db, cipher, clock)
        credentials = Credentials(db, cipher, clock, catalog)
        stores = DataStores(db, commit, settings, clock)
        invoker = Invoker(
            db, pool, components, cipher, settings, clock, commit, reader,
            credentials=credentials, stores=stores,
        )  # fmt: skip
        workflows = Workflows(
            db, components, cipher, settings, clock, credentials=credentials, reader=reader
        )
        executor = Executor(db, pool, workflows, commit, settings, clock, reader, stores=stores)
        waiters, enqueuer = Waiters(), Enqueuer(db, clock)
        sends = SendJobs(db, cipher, Mailer(settings), settings, clock, commit, clients)
        webhooks = Webhooks(db, settings, clock, clients)
        # Webhook deliveries: slots of their own, apart from the job worker's.
        deliveries = DeliveryWorker(db, clock, webhooks, DeliveryConfig.of(settings))
        commit.broker.on(broker.DELIVERIES, lambda _items: deliveries.notify())
        table = Platform._handlers(settings, reader, invoker, executor, waiters, sends, webhooks)
        admission = Admission(
            reader,
            clock,
            AdmissionPolicy(
                shed_after_ms=int(settings.shed_backlog_seconds * 1000),
                reserve_bytes=settings.disk_reserve_mb << 20,
            ),
        )
        worker = Platform._worker(db, clock, settings, enqueuer, admission, table)
        directory = EndpointDirectory(reader, components)
        client_runs = ClientRuns(executor, enqueuer, worker)
        files = Files(db, commit, settings.http_file_ttl_seconds, clock)
        ingress = Ingress(
            reader, directory, workflows, settings, clock, enqueuer=enqueuer, worker=worker,
            waiters=waiters, client_runs=client_runs, admission=admission, quota=commit.quota,
            files=files,
        )  # fmt: skip
        # Jobs this process enqueues with a run's results (emits, sends) wake its worker now.
        commit.broker.on(broker.JOBS, lambda _items: worker.notify())
        dynamic = DynamicProps(components, settings, credentials=credentials)
        sources = Sources(
            db, reader, pool, components, invoker, cipher, settings, clock, directory, dynamic
        )  # fmt: skip
        actions = Actions(
            db, pool, components, cipher, settings,
            credentials=credentials, stores=stores, dynamic=dynamic,
        )  # fmt: skip
        return cls(
            deps, components, commit, catalog, credentials, stores, invoker, directory,
            workflows, executor, enqueuer, sends, dynamic, worker, client_runs, ingress, sources,
            actions, webhooks, deliveries, files,
        )  # fmt: skip


async def create_account_offline(
    settings: Settings,
    username: str,
    email: str | None = None,
    *,
    is_admin: bool = False,
    password: str | None = None,
) -> tuple[Account, str]:
    """Create an account straight in the store: no runner, no npm, no server needed. With
    ``password``, the account can also log in from a browser."""
    if password is not None and (problem := passwords.problem(password)) is not None:
        raise errors.InvalidRequest(problem, field="password")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = await database.open_database(settings.resolved_database_url)
    try:
        password_hash = passwords.hash_password(password) if password is not None else None
        async with db.begin() as conn:
            made = await new_accounts.create(
                conn,
                username=username,
                email=email,
                base_url=settings.resolved_public_url,
                now_s=SystemClock().now_ms() // 1000,
                is_admin=is_admin,
                password_hash=password_hash,
            )
        assert made.api_key is not None
        return made.account, made.api_key
    finally:
        await db.dispose()


def _checkpointer(settings: Settings, reader: database.Reader) -> Checkpointer | None:
    """The SQLite database's checkpointer (None on PostgreSQL, or turned off)."""
    path = reader.sqlite_path
    if path is None or settings.sqlite_checkpoint_seconds <= 0:
        return None
    return Checkpointer(
        path, WalPolicy(settings.sqlite_checkpoint_seconds, settings.sqlite_wal_max_mb << 20)
    )


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
