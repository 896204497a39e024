"""The platform's services and what the API edge asks of them beyond one service: the
``Services`` every engine service hangs on (built by ``assembly.py``), and the few queries and
commands that span services (accounts, pages of components and workflows, live streams)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import registry as registry_rules
from sluice.domain.accounts import Account
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.domain.paging import Page
from sluice.domain.workflows import Workflow
from sluice.engine import health, streams
from sluice.engine.auth import accounts as new_accounts
from sluice.engine.auth import logins
from sluice.engine.auth.api_clients import ApiClients
from sluice.engine.auth.app_catalog import AppCatalog
from sluice.engine.auth.apps import Apps
from sluice.engine.auth.credentials import Credentials
from sluice.engine.auth.email_verification import EmailVerification
from sluice.engine.auth.logins import SESSION_TTL_S, Logins
from sluice.engine.auth.oauth import OAuthConnect
from sluice.engine.checkpoints import Checkpointer
from sluice.engine.components.actions import Actions
from sluice.engine.components.components import Components
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.engine.components.options import Options
from sluice.engine.components.registry_import import RegistryImports
from sluice.engine.components.subscriptions import Subscriptions
from sluice.engine.components.workflows import Workflows
from sluice.engine.events import Events
from sluice.engine.handlers.send import SendJobs
from sluice.engine.ingress import Ingress
from sluice.engine.mail_in import MailIn
from sluice.engine.notifications import Notifications
from sluice.engine.outbound.deliveries import DeliveryWorker
from sluice.engine.outbound.webhooks import Webhooks
from sluice.engine.queue.admission import Admission
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.engine.queue.jobs import JobWorker
from sluice.engine.queue.scheduler import Scheduler
from sluice.engine.runs.executor import Executor
from sluice.engine.runs.files import Files
from sluice.engine.runs.invoker import Invoker
from sluice.engine.runs.pauses import Pauses
from sluice.engine.runs.sources import Sources, UpdateRequest
from sluice.engine.runs.step_tests import StepTests
from sluice.engine.runs.workflow_runs import Runs
from sluice.engine.state.commit import Commit
from sluice.engine.state.data_stores import DataStores
from sluice.engine.streams import Stream
from sluice.runtime.deps import DependencyStore
from sluice.runtime.pool import RunnerPool
from sluice.storage import accounts, database, events, oauth_clients, sessions, sources
from sluice.storage import components as component_store
from sluice.storage import subscriptions as subscription_store
from sluice.storage import workflows as workflow_store

log = logging.getLogger(__name__)


@dataclass
class Services:
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
    dynamic_props: DynamicProps
    registry_imports: RegistryImports
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
    #: Links that prove an account's e-mail address its own (``$.send.email`` needs one).
    email_verification: EmailVerification
    logins: Logins
    pauses: Pauses
    data_stores: DataStores
    #: Bodies and uploaded files endpoints keep behind secret URLs.
    files: Files
    #: OAuth API clients and the tokens they are issued (``client_credentials``).
    api_clients: ApiClients
    webhooks: Webhooks
    #: Posts webhook deliveries, on slots of its own (``engine/outbound/deliveries.py``).
    deliveries: DeliveryWorker
    #: Load shedding and the disk's reserve, asked by the endpoints.
    admission: Admission
    #: The builder's Test runs, and each step's last result kept.
    step_tests: StepTests
    #: The inbound SMTP listener of e-mail sources (None unless SLUICE_SMTP_INBOUND_PORT).
    mail_in: MailIn | None = None
    #: PostgreSQL: other processes' commits, pushed (None on SQLite).
    notifications: Notifications | None = None
    #: SQLite: keeps the WAL small while the platform runs (None on PostgreSQL, or when the
    #: background loops are off).
    checkpointer: Checkpointer | None = None

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
        async with self.db.begin() as conn:
            made = await new_accounts.create(
                conn,
                username=username,
                email=email,
                base_url=self.settings.resolved_public_url,
                now_s=self.clock.now_ms() // 1000,
                is_admin=is_admin,
            )
        assert made.api_key is not None
        return made.account, made.api_key

    async def create_owner(self, username: str, email: str | None, password: str) -> str:
        """The first account of a fresh install (an admin) with its password, as the web UI's
        first visitor makes it; a browser session token for it."""
        password_hash = await logins.hash_new_password(password)
        now_s = self.clock.now_ms() // 1000
        async with self.db.begin() as conn:
            if await accounts.count(conn) != 0:
                raise errors.Conflict("this install already has its owner: log in instead")
            made = await new_accounts.create(
                conn,
                username=username,
                email=email,
                base_url=self.settings.resolved_public_url,
                now_s=now_s,
                is_admin=True,
                with_key=False,
                password_hash=password_hash,
            )
            return await sessions.create(conn, made.account.id, now_s=now_s, ttl_s=SESSION_TTL_S)

    async def authenticate(self, api_key: str) -> Account | None:
        """The account of an API key, or of an OAuth access token (``slo_…``)."""
        if oauth_clients.is_token(api_key):
            return await self.api_clients.authenticate(api_key)
        return await self.reader(lambda conn: accounts.authenticate(conn, api_key))

    async def usage(self, account_id: str) -> dict[str, int]:
        """What the account uses of its quotas (``GET /v1/users/me``): stored bytes as counted
        (``engine/state/quotas.py``) and npm store bytes (``runtime/deps.py``), with the quotas
        (0: none)."""
        stored = await self.commit.quota.figure(self.reader, account_id)
        return {
            "stored_bytes": stored,
            "storage_quota_bytes": self.commit.quota.quota_bytes,
            "npm_bytes": await self.deps.owner_bytes(account_id),
            "npm_quota_bytes": self.deps.quota_bytes,
        }

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

    async def mark_builder_source(self, owner_id: str, source_id: str, workflow_id: str) -> None:
        """The source ``source_id`` was deployed by ``workflow_id``'s builder as its trigger
        (a "New source"): ``release_builder_source`` may remove it later."""
        async with self.db.begin() as conn:
            if await sources.get(conn, owner_id, source_id) is not None:
                await sources.set_builder_workflow(conn, source_id, workflow_id)

    async def release_builder_source(
        self, owner_id: str, workflow_id: str, trigger: dict[str, object] | None
    ) -> tuple[str, Deployment] | None:
        """Workflow ``workflow_id`` no longer uses ``trigger`` (its trigger changed, or it was
        deleted). When that trigger is a source its builder deployed for it and nothing else
        listens to the source (another workflow, a subscription; an account-wide
        auto-subscription does not count), the source goes: deleted, or, when it has events
        stored, stopped (deactivated: no timer, no endpoint, no mail) and kept with its events.
        A source the user picked that existed already is never touched. What was done
        (``"deleted"`` or ``"stopped"``) and the source, or None."""
        if not trigger or trigger.get("type") != "source":
            return None
        source_id = str(trigger.get("source_id") or "")
        async with self.db.connect() as conn:
            found = await sources.get(conn, owner_id, source_id)
            if found is None or found.builder_workflow_id != workflow_id:
                return None
            automatic = set(await subscription_store.auto_for(conn, owner_id))
            listeners = [
                s
                for s in await subscription_store.list_for(conn, owner_id)
                if s.emitter_id == source_id
                and s.listener_id != workflow_id
                and (s.listener_id, s.event_name) not in automatic
            ]
            has_events = await events.any_stored(conn, source_id)
        if listeners:
            return None
        if not has_events:
            await self.sources.delete(owner_id, source_id)
            return "deleted", found
        if found.active:
            try:
                found = await self.sources.update(owner_id, source_id, UpdateRequest(active=False))
            except errors.SluiceError as exc:  # its deactivate hook threw: it keeps running
                log.warning("source %s was not stopped: %s", source_id, exc.message)
                return None
        return "stopped", found

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
    ) -> Page[SavedComponent]:
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

    async def registry_search(
        self, query: str, *, component_type: str | None = None
    ) -> list[SavedComponent]:
        """The newest version of each registry component matching ``query`` (key, name or
        description), by key."""
        async with self.db.connect() as conn:
            found = await component_store.registry_search(
                conn, query.strip(), component_type=component_type, limit=2000
            )
        by_key: dict[str, list[SavedComponent]] = {}
        for component in found:
            by_key.setdefault(component.key or "", []).append(component)
        newest = []
        for versions in by_key.values():
            latest = registry_rules.latest([c.version for c in versions])
            newest.append(next(c for c in versions if c.version == latest))
        return newest

    async def component_versions(self, owner_id: str, key: str) -> list[SavedComponent]:
        """What a source of component ``key`` may move to: the account's saves of that key
        and the registry's versions, newest version first (the newest save first among
        equal versions)."""
        async with self.db.connect() as conn:
            found = await component_store.versions(conn, owner_id, key)
        order = registry_rules.ordered(sorted({c.version for c in found}))
        rank = {v: i for i, v in enumerate(order)}
        return sorted(
            found,
            key=lambda c: (rank.get(c.version, -1), c.registry, c.created_at, c.id),
            reverse=True,
        )

    async def registry_versions(self, key: str) -> list[SavedComponent]:
        """Every published version of the registry component ``key``."""
        async with self.db.connect() as conn:
            return await component_store.registry_versions(conn, key)
