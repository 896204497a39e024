"""The schema, one SQLAlchemy Core table per stored noun (the column types are in
``columns.py``). Migrations mirror it by hand.

Times are integers: ``*_at`` columns epoch seconds (Pipedream's ``created_at``), ``*_ms``
epoch milliseconds. JSON columns are JSONB on PostgreSQL and text on SQLite.

First the accounts and what they connect: accounts, API keys, OAuth API clients and their
tokens, browser sessions, connected accounts (``$auth``), the app catalog, OAuth states,
environment variables, webhooks and their deliveries; then components, sources, workflows,
what they store and the job queue.
"""

from __future__ import annotations

import sqlalchemy as sa

from sluice.storage.columns import JSON, StoredJSON, Str, Txt, metadata

__all__ = ["JSON", "StoredJSON", "Str", "Txt", "metadata"]

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column("username", Str(200), nullable=False),
    sa.Column("email", Str(320)),
    # The address is the account's own, proven by a link sent to it (or given by the operator
    # at creation): ``$.send.email`` sends only to a verified address.
    sa.Column("email_verified", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    # The global error workflow (p_): every workflow error goes to it. Null: none.
    sa.Column("error_workflow_id", Str(40)),
    # argon2id (PHC string) of the browser password; null: no browser login (API keys only).
    sa.Column("password_hash", Str(200)),
    # The uid its runners' jails run under (as root): one per account in every process that
    # shares the database, assigned on first need. Null: none yet.
    sa.Column("jail_uid", sa.BigInteger, index=True, unique=True),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    # The public half of the key (``slk_<id>_<secret>``): the lookup index.
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "account_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    # sha256 of the secret half; the key itself is never stored.
    sa.Column("secret_hash", Str(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("last_used_at", sa.BigInteger),
    sa.Column("revoked_at", sa.BigInteger),
    # What the person called it on the API keys page; null for keys made before names.
    sa.Column("name", Str(200)),
)

oauth_clients = sa.Table(
    "oauth_clients",
    metadata,
    # An account's OAuth API client (Pipedream's ``client_credentials`` clients): its
    # ``client_id`` and the sha256 of its secret (the secret is never stored).
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "account_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("name", Str(200), nullable=False),
    sa.Column("secret_hash", Str(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

oauth_tokens = sa.Table(
    "oauth_tokens",
    metadata,
    # A short-lived bearer token a client was issued (``slo_<id>_<secret>``): the lookup id and
    # the sha256 of the secret half. Deleting the client deletes its tokens.
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "client_id",
        Str(40),
        sa.ForeignKey("oauth_clients.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("secret_hash", Str(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
)

browser_sessions = sa.Table(
    "browser_sessions",
    metadata,
    # sha256 of the cookie's token: a stolen database row does not log anyone in.
    sa.Column("id", Str(64), primary_key=True),
    sa.Column(
        "account_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
)

connected_accounts = sa.Table(
    "connected_accounts",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("app", Str(200), nullable=False),
    sa.Column("name", Str(200)),
    # AES-GCM token of the JSON credentials, bound to this row.
    sa.Column("credentials", Txt, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    # OAuth accounts: who the provider says the user is (reconnecting them updates this row),
    # when the access token expires (null: never or not OAuth), why the account needs
    # reconnecting (null: it does not), and the refresh lease: one process refreshes at a
    # time, without holding a transaction over the provider's answer (engine/auth/credentials.py).
    sa.Column("provider_uid", Str(300)),
    sa.Column("expires_at_ms", sa.BigInteger),
    sa.Column("reconnect_reason", Txt),
    sa.Column("refresh_lease_ms", sa.BigInteger),
    sa.Column("refresh_holder", Str(40)),
    sa.Index("ix_connected_accounts_identity", "owner_id", "app", "provider_uid"),
)

# Apps an operator registered or edited (over a built-in of the same slug): the catalog.
apps = sa.Table(
    "apps",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column("name_slug", Str(100), nullable=False, unique=True),
    # {name, auth_type, description, categories, img_src, fields, oauth, imported_from,
    # managed_auth} (domain/apps.py).
    sa.Column("spec", JSON, nullable=False),
    # AES-GCM token of the OAuth client secret, bound to the slug; never returned.
    sa.Column("client_secret", Txt),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# OAuth connections under way: from the authorize URL to the provider's redirect back.
oauth_states = sa.Table(
    "oauth_states",
    metadata,
    # sha256 of the state parameter: the state itself travels only in URLs.
    sa.Column("state_hash", Str(64), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("app", Str(100), nullable=False),
    sa.Column("name", Str(200)),
    # AES-GCM token of the PKCE code verifier (null: the app does not use PKCE).
    sa.Column("verifier", Txt),
    sa.Column("return_to", Str(1000)),
    sa.Column("expires_at_ms", sa.BigInteger, nullable=False, index=True),
    # domain.oauth.browser_hash of the cookie of the browser that opened the start link; null
    # until one did. Only that browser's callback finishes the connection.
    sa.Column("browser_hash", Str(64)),
)

#: An account's environment variables (``process.env`` of its workflows' code steps), each
#: value encrypted (bound to its account and name).
env_vars = sa.Table(
    "env_vars",
    metadata,
    sa.Column(
        "owner_id", Str(40), sa.ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("name", Str(100), primary_key=True),
    sa.Column("value", Txt, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

#: Pipedream's webhooks (``wh_…``): a URL that subscriptions deliver events to.
webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id", Str(40), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("url", Txt, nullable=False),
    sa.Column("name", Str(200)),
    sa.Column("description", Txt),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Index("ix_webhooks_owner", "owner_id", "id"),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    # dlv_…: also the Idempotency-Key of each of its attempts.
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "webhook_id", Str(40), sa.ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("owner_id", Str(40), nullable=False),
    # {event_id, emitter_id, channel, event}
    sa.Column("payload", JSON),
    # pending → delivered | dead; dead → pending (retried by hand): domain/deliveries.py.
    sa.Column("status", Str(20), nullable=False),
    # Attempts since made (or retried by hand).
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    # Claims ever: the fencing token of an attempt's outcome (storage/deliveries.py).
    sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
    # Pending: when it is due (in flight: the end of its worker's lease).
    sa.Column("next_ms", sa.BigInteger, nullable=False),
    # The start of its retry schedule (made, or retried by hand): the max age counts from it.
    sa.Column("since_ms", sa.BigInteger, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("finished_ms", sa.BigInteger),
    sa.Column("last_status", sa.Integer),
    sa.Column("last_error", Txt),
    # Claims: the pending ones in due order.
    sa.Index("ix_deliveries_due", "status", "next_ms"),
    sa.Index("ix_deliveries_webhook", "webhook_id", "status", "created_ms"),
)


saved_components = sa.Table(
    "saved_components",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("key", Str(300)),
    sa.Column("name", Str(300), nullable=False),
    sa.Column("version", Str(100), nullable=False),
    sa.Column("component_type", Str(20), nullable=False),
    sa.Column("description", Txt),
    # The entry file's path inside the component and every file, {path: text}.
    sa.Column("entry_path", Str(500), nullable=False),
    sa.Column("files", JSON, nullable=False),
    sa.Column("code_hash", Str(64), nullable=False),
    # {package: range} after scanning imports; installed into the npm store by key.
    sa.Column("dependencies", JSON, nullable=False),
    sa.Column("component_url", Txt),
    # What Node reported when it loaded the component (see docs/runner-protocol.md, inspect).
    sa.Column("shape", JSON, nullable=False),
    sa.Column("configurable_props", JSON, nullable=False),
    # True for components of the public registry (any account may deploy them by key).
    sa.Column("registry", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Index("ix_saved_components_owner_key", "owner_id", "key"),
    sa.Index("ix_saved_components_registry_key", "registry", "key"),
    # One row per registry key and version, even when two publishes race.
    sa.Index(
        "uq_saved_components_registry_version",
        "key",
        "version",
        unique=True,
        sqlite_where=sa.text("registry"),
        postgresql_where=sa.text("registry"),
    ),
)

deployed_components = sa.Table(
    "deployed_components",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("component_id", Str(40), sa.ForeignKey("saved_components.id"), nullable=False),
    sa.Column("name", Str(300), nullable=False),
    sa.Column("name_slug", Str(300), nullable=False),
    # Configured values of non-secret props, as validated.
    sa.Column("configured_props", JSON, nullable=False),
    # {prop name: AES-GCM token}, bound to (row, prop).
    sa.Column("secret_props", JSON, nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("endpoint_id", Str(40), unique=True),
    # The dedupe strategy's cache (ids seen, greatest id, last id); see domain/dedupe.py.
    sa.Column("dedupe_state", JSON),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    # The workflow whose builder deployed it as its "New source" trigger (migration 0023): it
    # goes when that workflow stops using it and nothing else does (platform/services.py).
    sa.Column("builder_workflow_id", Str(40)),
    sa.UniqueConstraint("owner_id", "name_slug", name="uq_deployed_components_owner_slug"),
)

component_state = sa.Table(
    "component_state",
    metadata,
    sa.Column(
        "deployment_id",
        Str(40),
        sa.ForeignKey("deployed_components.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("key", Str(500), primary_key=True),
    sa.Column("value", JSON),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column(
        "pk",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("emitter_id", Str(40), nullable=False),
    sa.Column("owner_id", Str(40), nullable=False),
    # ``<ts_ms>-<seq>``, unique per emitter; also the cursor of event lists.
    sa.Column("id", Str(40), nullable=False),
    sa.Column("ts_ms", sa.BigInteger, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    # The channel; "" is the default channel.
    sa.Column("channel", Str(300), nullable=False, server_default=""),
    sa.Column("emit_id", Str(40), nullable=False),
    sa.Column("payload", JSON),
    # The $emit options: id, summary, ts (and anything else given).
    sa.Column("meta", JSON, nullable=False),
    sa.UniqueConstraint("emitter_id", "ts_ms", "seq", name="uq_events_emitter_position"),
    sa.Index("ix_events_emitter_channel", "emitter_id", "channel", "ts_ms", "seq"),
)

logs = sa.Table(
    "logs",
    metadata,
    sa.Column(
        "pk",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("emitter_id", Str(40), nullable=False),
    sa.Column("owner_id", Str(40), nullable=False),
    sa.Column("ts_ms", sa.BigInteger, nullable=False),
    sa.Column("level", Str(20), nullable=False),
    sa.Column("msg", Txt, nullable=False),
    sa.Column("invocation_id", Str(40)),
    sa.Index("ix_logs_emitter", "emitter_id", "pk"),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    # What to do: "http" (an endpoint request), "timer" (a tick), "emit" (deliver to a listener).
    sa.Column("kind", Str(40), nullable=False),
    sa.Column("owner_id", Str(40), nullable=False),
    # The deployment (or workflow) that runs it.
    sa.Column("target_id", Str(40), nullable=False),
    sa.Column("payload", JSON),
    # queued → running → done | failed; a running job whose lease passed is queued again.
    sa.Column("status", Str(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    # The fencing token: +1 on every claim, never less. A holder's writes (done, retry,
    # release, renew) apply only while it is still the claim it took (``storage/jobs.py``).
    sa.Column("claim", sa.Integer, nullable=False, server_default="0"),
    sa.Column("run_after_ms", sa.BigInteger, nullable=False),
    sa.Column("locked_until_ms", sa.BigInteger),
    sa.Column("worker_id", Str(60)),
    sa.Column("last_error", Txt),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("finished_ms", sa.BigInteger),
    # Claims walk it in id order within a status (``storage.jobs.claim_sync``).
    sa.Index("ix_jobs_status_id", "status", "id"),
    # The deferred queued jobs (a retry's backoff, a pause): the due timer's "next job due
    # after now" is one probe (``jobs.next_due_sync``); the claims cannot use it.
    sa.Index(
        "ix_jobs_deferred",
        "run_after_ms",
        postgresql_where=sa.text("status = 'queued' AND run_after_ms > created_ms"),
        sqlite_where=sa.text("status = 'queued' AND run_after_ms > created_ms"),
    ),
    sa.Index("ix_jobs_target", "target_id"),
)

timers = sa.Table(
    "timers",
    metadata,
    # The source (dc_) or workflow (p_) the timer triggers; deleted with it by the code (no
    # foreign key: it references either table).
    sa.Column("deployment_id", Str(40), primary_key=True),
    sa.Column("owner_id", Str(40), nullable=False),
    # What it ticks for (``domain.jobs.Ticked``): "source" or "workflow".
    sa.Column("kind", Str(16), nullable=False),
    sa.Column("interval_seconds", sa.Integer),
    sa.Column("cron", Str(200)),
    sa.Column("timezone", Str(80)),
    # The next tick to fire; a claimed tick moves it forward in the same transaction that
    # enqueues its job, so no tick fires twice and none is lost.
    sa.Column("next_run_ms", sa.BigInteger, nullable=False),
    sa.Column("last_run_ms", sa.BigInteger),
    sa.Index("ix_timers_due", "next_run_ms"),
)

subscriptions = sa.Table(
    "subscriptions",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    # A dc_/p_ id, or a glob "dc_*" / "p_*" for all of the account's sources / workflows.
    sa.Column("emitter_id", Str(40), nullable=False),
    sa.Column("listener_id", Str(40), nullable=False),
    # "" is the default channel; "$errors" the errors of a workflow.
    sa.Column("event_name", Str(300), nullable=False, server_default=""),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint(
        "owner_id", "emitter_id", "listener_id", "event_name", name="uq_subscriptions_link"
    ),
    sa.Index("ix_subscriptions_emitter", "owner_id", "emitter_id", "event_name"),
)

workflows = sa.Table(
    "workflows",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("name", Str(300), nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    # {"type": "http" | "timer" | "source" | "manual", ...its settings}.
    sa.Column("trigger", JSON, nullable=False),
    # The steps as deployed: [{id: c_, name, type: code | action, ...}];
    # see engine/components/workflows.py.
    sa.Column("steps", JSON, nullable=False),
    # A new d_ id on each change of the trigger or the steps.
    sa.Column("deployment_id", Str(40), nullable=False),
    sa.Column("endpoint_id", Str(40), unique=True),
    # False: its errors do not go to the global error workflow (subscribers still get them).
    sa.Column("global_errors", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Index("ix_workflows_owner", "owner_id", "created_at"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column(
        "pk",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("id", Str(40), nullable=False, unique=True),
    sa.Column("owner_id", Str(40), nullable=False),
    sa.Column("workflow_id", Str(40), nullable=False),
    sa.Column("deployment_id", Str(40), nullable=False),
    # success | error | exited | delayed | suspended | cancelled
    sa.Column("status", Str(20), nullable=False),
    sa.Column("event", JSON),
    sa.Column("context", JSON, nullable=False),
    # One record per step that ran: status, return value, exports, logs, duration, error.
    sa.Column("steps", JSON, nullable=False),
    # {code, msg, cellId, ts, stack} when the run failed.
    sa.Column("error", JSON),
    sa.Column("flow_exit", JSON),
    sa.Column("response", JSON),
    sa.Column("started_ms", sa.BigInteger, nullable=False),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("replay_of", Str(40)),
    # While a step's $.flow.delay/suspend/rerun holds it: its wait (domain.flow.Pause).
    sa.Column("pause", JSON, nullable=True),
    sa.Index("ix_runs_workflow", "workflow_id", "pk"),
)

run_sends = sa.Table(
    "run_sends",
    metadata,
    sa.Column("run_id", Str(40), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("owner_id", Str(40), nullable=False),
    sa.Column("workflow_id", Str(40), nullable=False),
    # http | email | s3 | emit | sse
    sa.Column("type", Str(20), nullable=False),
    sa.Column("step_id", Str(40)),
    sa.Column("config", JSON),
    # queued | sent | written | failed | skipped | done
    sa.Column("status", Str(20), nullable=False),
    sa.Column("outcome", JSON),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

account_usage = sa.Table(
    "account_usage",
    metadata,
    # What the account keeps stored, counted as it is written (storage/usage.py), bytes.
    sa.Column(
        "owner_id", Str(40), sa.ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("stored_bytes", sa.BigInteger, nullable=False),
    # When ``stored_bytes`` was last counted exactly (a recount finds what trims freed).
    sa.Column("counted_ms", sa.BigInteger, nullable=False),
)

mail_throttle = sa.Table(
    "mail_throttle",
    metadata,
    sa.Column("owner_id", Str(40), primary_key=True),
    sa.Column("key", Str(300), primary_key=True),
    sa.Column("sent_ms", sa.BigInteger, nullable=False),
)

auto_subscriptions = sa.Table(
    "auto_subscriptions",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("listener_id", Str(40), nullable=False),
    sa.Column("event_name", Str(300), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("owner_id", "listener_id", "event_name", name="uq_auto_subscriptions"),
)

step_state = sa.Table(
    "step_state",
    metadata,
    # ``$.service.db`` of a workflow code step: its store, by the step's c_ id.
    sa.Column("step_id", Str(40), primary_key=True),
    sa.Column("key", Str(500), primary_key=True),
    sa.Column("workflow_id", Str(40), nullable=False, index=True),
    sa.Column("value", JSON),
)

data_stores = sa.Table(
    "data_stores",
    metadata,
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("name", Str(200), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("owner_id", "name", name="uq_data_stores_name"),
)

data_store_records = sa.Table(
    "data_store_records",
    metadata,
    sa.Column(
        "store_id",
        Str(40),
        sa.ForeignKey("data_stores.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("key", Str(500), primary_key=True),
    sa.Column("value", JSON),
    # Characters of the value's JSON: the store's size is their sum (max_db_bytes).
    sa.Column("size", sa.Integer, nullable=False),
    # Past it the record is gone (a TTL); null: kept.
    sa.Column("expires_ms", sa.BigInteger),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)

step_tests = sa.Table(
    "step_tests",
    metadata,
    # The builder's Test (web/step_tests.py): the last test result of each step of a deployed
    # workflow, by the step's name, shown again when the builder is opened. Not a run.
    sa.Column(
        "workflow_id",
        Str(40),
        sa.ForeignKey("workflows.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("step_name", Str(200), primary_key=True),
    sa.Column("owner_id", Str(40), nullable=False),
    # {status, duration_ms, steps, response, flow_exit, paused, sends}: what the builder shows.
    sa.Column("result", JSON, nullable=False),
    sa.Column("tested_ms", sa.BigInteger, nullable=False),
)

files = sa.Table(
    "files",
    metadata,
    # A request body (``x-pd-upload-body``) or a multipart file part an endpoint stored, served
    # at ``/files/<id>/<secret>`` until ``expires_ms`` (storage/files.py).
    sa.Column("id", Str(40), primary_key=True),
    sa.Column(
        "owner_id",
        Str(40),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    # sha256 of the URL's secret; the secret itself is never stored.
    sa.Column("secret_hash", Str(64), nullable=False),
    sa.Column("filename", Txt),
    sa.Column("mimetype", Str(200), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("expires_ms", sa.BigInteger, nullable=False),
    sa.Index("ix_files_owner_expires", "owner_id", "expires_ms"),
)
