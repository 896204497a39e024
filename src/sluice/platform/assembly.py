"""The composition root: opens storage, the Node pool and the outbound clients, builds every
engine service with what it uses (the job worker with its table of handlers), then opens what
the services hold; closes everything in reverse.

async with Platform.open(settings) as platform:
    await platform.sources.run(owner_id, "dc_…")
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator

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
from sluice.engine.components.workflows import Changes, Workflows
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
from sluice.engine.notifications import Notifications, PushedChanges
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
from sluice.storage.change_counters import ChangeCounter

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

        Built, then opened: the resources every service needs (the database, the outbound
        clients, the Node runners) are opened first, then every service is built, each given
        what it uses (``_assemble``), then what has something to open is opened. Each goes on
        one exit stack as it is opened, so they close in the reverse order, every one of them
        even when another fails to close: the loops stop first (the ingress, the scheduler,
        the deliveries, the job worker: the last two finish what they hold within
        ``shutdown_grace_seconds``), then the writers, then the upkeep (the admission's reads,
        the WAL's checkpointer: the WAL is checkpointed until the job worker has stopped, the
        SMTP listener), the Node runners, the outbound clients and last the database."""
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
            # Workflow rows' changes, counted for every process (a run's read of its workflow
            # skips the database while the count stands still): on this SQLite file a shared
            # counter, on PostgreSQL what the notifications push (heard only once listening).
            workflow_changes: Changes = PushedChanges()
            if reader.sqlite_path is not None:
                counter = ChangeCounter.beside(reader.sqlite_path, "workflow")
                stack.callback(counter.close)
                workflow_changes = counter
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
            platform = cls._assemble(
                settings, clock, db, reader, cipher, pool, clients,
                workflow_changes=workflow_changes, background=background,
            )  # fmt: skip
            # Before any request: a fresh install's registry has its triggers and actions.
            await CoreComponents(db, platform.components, clock).seed()
            if platform.mail_in is not None:
                await stack.enter_async_context(platform.mail_in)
            if background:
                if platform.checkpointer is not None:
                    await stack.enter_async_context(platform.checkpointer)
                await stack.enter_async_context(platform.admission)
            stack.callback(platform.commit.dispose)
            stack.push_async_callback(platform.enqueuer.close)
            stack.push_async_callback(platform.jobs.stop, settings.shutdown_grace_seconds)
            stack.push_async_callback(platform.deliveries.stop, settings.shutdown_grace_seconds)
            stack.push_async_callback(platform.scheduler.stop)
            stack.push_async_callback(platform.ingress.close)
            if platform.notifications is not None:
                platform.notifications.start()
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
        *,
        workflow_changes: Changes,
        background: bool,
    ) -> Platform:
        """Every engine service, each given what it uses when it is made; nothing is opened
        or started here (``open`` does it)."""
        deps = DependencyStore(
            settings.npm_store_dir,
            npm=settings.npm,
            quota_bytes=settings.npm_quota_mb << 20,
            # Installs run jailed, under the account's uid (none without a sandbox).
            jail=NpmJail(pool.sandbox, uid_of=pool.uid_of) if pool.sandbox is not None else None,
        )
        components = Components(db, pool, deps, settings, clock)
        webhooks = Webhooks(db, settings, clock, clients)
        # Webhook deliveries: slots of their own, apart from the job worker's.
        deliveries = DeliveryWorker(db, clock, webhooks, DeliveryConfig.of(settings))
        # What a commit stores wakes this process's loops: its deliveries the delivery worker,
        # the jobs it enqueued (emits, sends) the job worker. The job worker is made below,
        # from handlers that store through this commit: the callback finds it when called.
        hub = Broker(
            callbacks={
                broker.DELIVERIES: [lambda _items: deliveries.notify()],
                broker.JOBS: [lambda _items: worker.notify()],
            }
        )
        commit = Commit(db, settings, clock, hub)
        catalog = AppCatalog(db, cipher, clock)
        credentials = Credentials(db, cipher, clock, catalog)
        stores = DataStores(db, commit, settings, clock)
        invoker = Invoker(
            db, pool, components, cipher, settings, clock, commit, reader,
            credentials=credentials, stores=stores,
        )  # fmt: skip
        workflows = Workflows(
            db, components, cipher, settings, clock,
            credentials=credentials, reader=reader, changes=workflow_changes,
        )  # fmt: skip
        executor = Executor(db, pool, workflows, commit, settings, clock, reader, stores=stores)
        waiters, enqueuer = Waiters(), Enqueuer(db, clock)
        sends = SendJobs(db, cipher, Mailer(settings), settings, clock, commit, clients)
        admission = Admission(
            reader,
            clock,
            AdmissionPolicy(
                shed_after_ms=int(settings.shed_backlog_seconds * 1000),
                reserve_bytes=settings.disk_reserve_mb << 20,
                requests_first_ms=max(0, int(settings.requests_first_wait_seconds * 1000))
                if settings.requests_first
                else 0,
            ),
        )
        handlers = handler_table(settings, reader, invoker, executor, waiters, sends, webhooks)
        worker = job_worker(db, clock, settings, enqueuer, admission, handlers)
        directory = EndpointDirectory(reader, components)
        client_runs = ClientRuns(executor, enqueuer, worker)
        files = Files(db, commit, settings.http_file_ttl_seconds, clock)
        ingress = Ingress(
            reader, directory, workflows, settings, clock, enqueuer=enqueuer, worker=worker,
            waiters=waiters, client_runs=client_runs, admission=admission, quota=commit.quota,
            files=files,
        )  # fmt: skip
        dynamic = DynamicProps(components, settings, credentials=credentials)
        mail_in = (
            MailIn(settings, reader, enqueuer, worker, admission=admission, quota=commit.quota)
            if settings.smtp_inbound_port
            else None
        )
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
                db, reader, pool, components, invoker, cipher, settings, clock, directory, dynamic
            ),
            actions=Actions(
                db,
                pool,
                components,
                cipher,
                settings,
                credentials=credentials,
                stores=stores,
                dynamic=dynamic,
            ),
            dynamic_props=dynamic,
            options=Options(
                db, pool, components, cipher, settings, credentials=credentials, stores=stores
            ),
            registry_imports=RegistryImports(
                db,
                components,
                PackageFetcher(settings.npm_store_dir / ".packages", deps),
                catalog,
            ),
            apps=Apps(db, cipher, clock, catalog),
            catalog=catalog,
            oauth=OAuthConnect(db, cipher, clock, catalog, lambda: settings.resolved_public_url),
            credentials=credentials,
            events=Events(db),
            subscriptions=Subscriptions(db),
            runs=Runs(db, client_runs),
            jobs=worker,
            scheduler=Scheduler(db, clock, notify=worker.notify),
            ingress=ingress,
            workflows=workflows,
            executor=executor,
            enqueuer=enqueuer,
            sends=sends,
            email_verification=EmailVerification(db, cipher, sends.mailer, settings, clock, commit),
            logins=Logins(db, settings, clock),
            pauses=Pauses(commit, clock),
            data_stores=stores,
            files=files,
            api_clients=ApiClients(db, reader, clock, settings.oauth_token_ttl_seconds),
            webhooks=webhooks,
            deliveries=deliveries,
            admission=admission,
            step_tests=StepTests(db, executor, commit, clock),
            mail_in=mail_in,
            notifications=(
                _notifications(settings, hub, worker, workflow_changes)
                if database.is_postgres(db)
                else None
            ),
            checkpointer=_checkpointer(settings, reader) if background else None,
        )


def handler_table(
    settings: Settings,
    reader: database.Reader,
    invoker: Invoker,
    executor: Executor,
    waiters: Waiters,
    sends: SendJobs,
    webhooks: Webhooks,
) -> dict[JobKind, Handler]:
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


def job_worker(
    db: AsyncEngine,
    clock: Clock,
    settings: Settings,
    enqueuer: Enqueuer,
    admission: Admission,
    handlers: dict[JobKind, Handler],
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
        # Requests first: the background loop yields while the endpoints are saturated; once
        # a backlog waits past SLUICE_REQUESTS_FIRST_WAIT_SECONDS it keeps up, and toward the
        # shedding bound it runs every slot (the backlog could not be run in the bound so).
        pace=(lambda: admission.pace(pressed=enqueuer.pressed()))
        if settings.requests_first
        else None,
    )


def _notifications(
    settings: Settings, hub: Broker, worker: JobWorker, workflow_changes: Changes
) -> Notifications:
    """Commits of other processes, pushed here (PostgreSQL): a new job wakes the job worker, a
    stored event or log line the live streams of its emitter, a changed workflow the runs'
    copies (``engine/notifications.py``)."""

    def stored(emitter_id: str) -> None:
        topic = broker.stored_topic(emitter_id)
        if hub.subscribers(topic):
            hub.publish(topic, [emitter_id])

    def jobs(owner_id: str | None, due_now: bool) -> None:
        worker.notify(owner_id, due_now=due_now)

    pushed = workflow_changes if isinstance(workflow_changes, PushedChanges) else None
    return Notifications(settings.resolved_database_url, jobs, stored, pushed)


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
