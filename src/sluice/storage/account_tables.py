"""The schema of accounts and what they connect: accounts, API keys, OAuth API clients and
their tokens, browser sessions,
connected accounts (``$auth``), the app catalog, OAuth states, environment variables,
webhooks and their deliveries. Part of ``tables.py``'s schema (same ``metadata``);
migrations mirror it by hand."""

from __future__ import annotations

import sqlalchemy as sa

from sluice.storage.columns import JSON, Str, Txt, metadata

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
    # time, without holding a transaction over the provider's answer (engine/credentials.py).
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
