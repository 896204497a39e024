"""Settings: built once at the edge (CLI flags over ``SLUICE_*`` variables) and passed down.

Every field has an environment variable named ``SLUICE_<FIELD>``; ``sluice serve --help`` lists
the flags. Construction reads nothing but the environment mapping it is given, so tests build
Settings from a plain dict.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from sluice import errors
from sluice import public_url as public_urls
from sluice.domain import endpoint_origins


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "sluice"


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=_default_data_dir)
    #: SQLAlchemy URL; empty means SQLite at ``<data_dir>/sluice.db``. ``postgresql://`` works.
    database_url: str = ""
    #: Base64 of 32 random bytes. Empty: read or create ``<data_dir>/secret.key``.
    secret_key: str = ""
    #: Public base URL of this Sluice: the base of every link it makes (endpoint URLs, the
    #: OAuth callback, $.flow resume/cancel URLs, error e-mails, read at each send). Empty:
    #: ``http://<host>:<port>``.
    public_url: str = ""
    #: Base of generated HTTP endpoint URLs (the spec's ``{endpoint_host}``): the id is
    #: appended to it, or, with ``{id}`` in its host (``https://{id}.hooks.example.com/``),
    #: every endpoint answers on a host of its own and requests to such a host are routed to
    #: it (docs/deploy.md, "Endpoints on their own hosts"). Empty: ``<public url>/e/``, on
    #: the web UI's origin (then no cookie reaches or leaves an endpoint).
    endpoint_base_url: str = ""
    #: Proxies whose ``X-Forwarded-Proto``/``-Host``/``-For`` headers are believed (when no
    #: public URL is set, links follow the request's URL): a comma list of addresses or
    #: networks (``10.0.0.0/8``), or ``*``. Empty: none, the headers are ignored.
    trusted_proxies: str = ""
    #: The npm store (installed dependency sets). Empty: ``<data_dir>/npm-store``.
    npm_store: str = ""
    node: str = "node"
    npm: str = "npm"
    #: Where the web UI's front-end packages (htmx, the code editor, Swagger UI: from the npm
    #: registry) are installed, one folder per set of versions. Empty: ``~/.cache/sluice/ui``.
    ui_assets: str = ""
    #: Wall-clock limit of one source invocation (run or hook), seconds.
    source_timeout_seconds: float = 300.0
    #: Wall-clock limit of one action invocation, seconds.
    action_timeout_seconds: float = 30.0
    #: Heap limit of a component's worker, MB.
    memory_mb: int = 256
    #: Node runner processes kept at most (one per account); idle ones are stopped first.
    #: Memory is about runners * (45 MB + workers * 8 MB): the defaults cap it near 1.4 GB.
    max_runners: int = 8
    #: ``on``: every runner starts in a bubblewrap jail (docs/runtime.md, "The sandbox").
    #: ``off``: user code runs with this server's rights, for development on systems without
    #: namespaces only (logged loudly at startup).
    sandbox: str = "on"
    #: Memory of one account's whole runner (heap, buffers, child processes), MB: the jail's
    #: cgroup limit, or its RSS watchdog's where cgroups are not writable.
    runner_memory_mb: int = 1024
    #: Processes and threads in one account's jail (Node uses about 12, plus 1 a worker).
    runner_max_processes: int = 256
    #: Size of a jail's private /tmp, MB.
    sandbox_tmp_mb: int = 64
    #: Warm worker threads per runner at most: one per deployment, each its own realm
    #: (docs/runtime.md, "Warm workers"), least recently used stopped first.
    max_workers_per_runner: int = 16
    #: A warm worker unused this long is stopped, seconds.
    worker_idle_seconds: float = 300.0
    #: ``$emit`` calls one invocation may make; past it the invocation fails with
    #: ``EMIT_LIMIT`` and only the first ones are kept (Pipedream documents no number).
    max_emits_per_invocation: int = 1000
    #: Largest component upload (all files together), bytes.
    max_component_bytes: int = 2_000_000
    #: Largest configured prop value, bytes (Pipedream: 64 KB).
    max_prop_bytes: int = 65_536
    #: Largest ``$.service.db`` store of one component, bytes (Pipedream: 60 KB).
    max_db_bytes: int = 61_440
    #: Bytes one account may keep stored (events, runs, logs, ``$.service.db`` stores, data
    #: stores), MB; past it new runs, events and writes are refused with
    #: ``storage_quota_exceeded`` (docs/errors.md). 0: no quota.
    storage_quota_mb: int = 1024
    #: npm bytes one account's components' dependency sets may hold in the npm store, MB (a
    #: set several accounts use counts for each); past it a save is refused with
    #: ``npm_quota_exceeded``. 0: no quota.
    npm_quota_mb: int = 1024
    #: Events kept in storage per source (the API serves the newest 100).
    event_retention: int = 1000
    #: Logs kept per source.
    log_retention: int = 1000
    #: Shortest timer interval a source may be deployed with, seconds (Pipedream: 15).
    timer_min_interval_seconds: int = 15
    #: Largest request body an HTTP endpoint takes, bytes; larger gets 413 (Pipedream: 512 KB).
    http_max_body_bytes: int = 524_288
    #: Largest body an endpoint stores behind a URL (``x-pd-upload-body: 1``, or a
    #: ``multipart/form-data`` request's file parts), bytes; larger gets 413. Each stored file
    #: counts against the storage quota while it is kept.
    http_max_upload_bytes: int = 52_428_800
    #: How long a stored body or uploaded file is kept and its URL answers, seconds
    #: (Pipedream: 30 minutes).
    http_file_ttl_seconds: int = 1800
    #: Lifetime of the bearer tokens OAuth API clients are issued (``POST /v1/oauth/token``,
    #: ``client_credentials``), seconds (Pipedream: 3600).
    oauth_token_ttl_seconds: int = 3600
    #: Largest request body of the ``/v1`` API, bytes; larger gets 413. Above
    #: ``max_component_bytes``, as a component's files travel JSON-escaped.
    api_max_body_bytes: int = 5_242_880
    #: A request's head (request line and headers) must arrive within this many seconds of
    #: its connection's start (or of its first byte, on a kept-alive connection), else the
    #: connection is closed; 0: no limit (docs/deploy.md, "Connections").
    http_head_timeout_seconds: float = 10.0
    #: A request's body must arrive within this many seconds of its head's end, plus one
    #: second per ``http_body_min_bytes_per_second`` bytes received; else the connection is
    #: closed (a client trickling its body held a connection forever). 0: no limit.
    http_body_timeout_seconds: float = 10.0
    #: The body's slowest sustained rate, bytes a second (see ``http_body_timeout_seconds``).
    http_body_min_bytes_per_second: int = 4096
    #: A kept-alive connection idle this long after an answer is closed, seconds (uvicorn's
    #: ``timeout_keep_alive``).
    http_keep_alive_seconds: float = 5.0
    #: Open connections one client address may hold in one process; past it new ones are
    #: closed at once. ``SLUICE_TRUSTED_PROXIES`` are exempt. 0: no limit.
    http_max_connections_per_client: int = 256
    #: Requests a second one HTTP endpoint sustains, else 429 (Pipedream: 10 on average); a
    #: token bucket per endpoint, kept per process. 0: no limit.
    http_rate_per_second: float = 10.0
    #: Requests an endpoint may take at once above that rate (the bucket's size).
    http_rate_burst: int = 50
    #: How long a ``customResponse`` source has to call ``respond()`` before its client gets
    #: 504, seconds. 0: the source time-out (``source_timeout_seconds``).
    http_response_timeout_seconds: float = 0.0
    #: Wall-clock limit of the run of a source behind an HTTP endpoint *without*
    #: ``customResponse`` (its client is answered at once), seconds: short, so a source that
    #: never resolves cannot hold a job slot for long. 0: the source time-out
    #: (``source_timeout_seconds``, 300, what Pipedream documents for every source).
    http_source_timeout_seconds: float = 30.0
    #: Fetching ``component_url``: time limit (s), size limit (bytes), and (deprecated: use
    #: ``egress_allow``) hosts allowed though private, for ``component_url`` only.
    fetch_timeout_seconds: float = 10.0
    fetch_max_bytes: int = 2_000_000
    fetch_allow_hosts: str = ""
    #: Destinations reachable though loopback, private, link-local or reserved, for user code
    #: (through the egress proxy), ``$.send.http`` and ``component_url``: comma-separated
    #: ``host:port`` entries (a name, ``*.suffix``, IPv4, CIDR or ``[IPv6]``; port or ``*``),
    #: e.g. ``db.internal:5432,10.1.0.0/16:443`` (docs/runtime.md, "Network egress").
    egress_allow: str = ""
    #: The authoring rules components users save are held to: ``spec`` (every rule of the
    #: spec) or ``pipedream`` (the compatibility rules: the spec's rules that Pipedream's own
    #: published components break are waived, each waiver kept as a warning on the component;
    #: docs/api.md, "Compatibility rules"). Imported registry packages always get ``pipedream``.
    component_rules: str = "spec"
    #: Deprecated: ``accept`` means ``component_rules=pipedream``; ``reject`` changes nothing.
    required_prop_defaults: str = "reject"
    #: A live stream (SSE) sends a ``: keepalive`` comment this often, seconds (Pipedream: 15).
    sse_keepalive_seconds: float = 15.0
    #: Wall-clock limit of one workflow run (all its steps), seconds (Pipedream's default: 30).
    workflow_timeout_seconds: float = 30.0
    #: Wall-clock limit of one workflow step, seconds. 0: the run's limit.
    workflow_step_timeout_seconds: float = 0.0
    #: Runs kept in storage per workflow (newest first; the error list serves 100).
    run_retention: int = 1000
    #: Forwarding chains (errors to listeners, emits between workflows) stop after this many
    #: hops: a backstop; a workflow already on a chain never receives its event again.
    max_hops: int = 16
    #: Outgoing mail: ``smtp://user:pass@host:port`` (``smtps://`` for TLS, ``?starttls=1``).
    #: Empty: messages are written to ``<data_dir>/outbox`` instead.
    smtp_url: str = ""
    #: Inbound mail for ``email-new-messages`` sources: the SMTP port to listen on (0: off),
    #: its host, the largest message accepted (bytes), and the domain of the sources'
    #: addresses (``<source id>@<domain>``; empty: the public URL's host).
    smtp_inbound_port: int = 0
    smtp_inbound_host: str = "127.0.0.1"
    smtp_inbound_max_bytes: int = 10 * 1024 * 1024
    email_domain: str = ""
    #: ``$.send.email`` messages one account may send in an hour (to its verified address);
    #: past it a send fails, its outcome saying why. 0: no limit.
    email_max_per_hour: int = 50
    #: The From address of mail Sluice sends.
    mail_from: str = "sluice@localhost"
    #: The default global error workflow e-mails one error per workflow and code at most this
    #: often, seconds (Pipedream: once a day).
    error_email_throttle_seconds: int = 86_400
    #: ``$.send.http``: time limit of the request, seconds (Pipedream: 5, no retries).
    send_http_timeout_seconds: float = 5.0
    #: Webhook (``wh_``) deliveries (docs/deploy.md, "Webhook deliveries"): a failed one is
    #: tried again after a random delay up to a ceiling that starts at this many seconds and
    #: doubles each attempt...
    delivery_backoff_seconds: float = 1.0
    #: ...up to this many seconds between attempts at most.
    delivery_backoff_max_seconds: float = 900.0
    #: No retry starts later than this after the event (or a retry by hand), seconds; then
    #: the delivery is dead (listed, retried by hand: API, CLI, UI).
    delivery_max_age_seconds: int = 86_400
    #: Attempts of one delivery at most; 0: only ``delivery_max_age_seconds`` bounds them.
    delivery_max_attempts: int = 0
    #: Time limit of one delivery's request, seconds.
    delivery_timeout_seconds: float = 10.0
    #: Deliveries in flight at once in one worker process, all webhooks together: their own
    #: slots, apart from the job worker's (a slow URL never holds the account's jobs)...
    delivery_concurrency: int = 64
    #: ...and to one webhook at most, so a slow or unreachable URL holds only its own.
    delivery_per_webhook: int = 8
    #: Delivered deliveries are deleted this many seconds after (dead ones are kept).
    delivery_retention_seconds: int = 3600
    #: ``$.send.s3``: an S3-compatible endpoint (``https://s3.amazonaws.com``, MinIO, ...) and
    #: its credentials. Empty endpoint: ``$.send.s3`` fails with a clear error in the run.
    s3_endpoint_url: str = ""
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    #: What this process does: ``all`` (the API, HTTP endpoints, the job worker and the
    #: scheduler), ``api`` (the API and endpoints only: jobs are left to worker processes), or
    #: ``worker`` (the job worker and the scheduler, no HTTP). Several processes of any role
    #: share one database (PostgreSQL for more than one machine).
    role: str = "all"
    #: Jobs of one account a job worker runs at once, of its 8 slots: the other slots stay free
    #: for other accounts (a share per worker process, docs/runtime.md). Its other jobs wait,
    #: queued in order. 0 or 8 and more: no share.
    account_max_concurrency: int = 6
    #: How often an idle job worker looks for jobs enqueued by other processes, seconds.
    job_poll_seconds: float = 1.0
    #: A job whose worker died or stalled (kill -9, a lost machine, SIGSTOP) is taken over by
    #: another worker within this, seconds; its worker renews its hold every quarter of it
    #: while it holds the job (engine/queue/jobs.py).
    job_lease_seconds: float = 30.0
    #: On SIGTERM: how long jobs in flight may go on finishing, seconds. Those still running
    #: then are stopped and queued again at once (a second signal stops at once too).
    shutdown_grace_seconds: float = 30.0
    #: Requests first: while the HTTP endpoints are saturated (many requests share each
    #: commit), this process's job worker runs one batch of jobs at a time with a pause after
    #: each, so the endpoints keep accepting (docs/api.md, "HTTP endpoints"). False: jobs keep
    #: their full concurrency and share the core with the endpoints.
    requests_first: bool = True
    #: ... with the pause only while the queued work waits less than this, seconds: past it the
    #: batches run back to back, so under a sustained load the events are stored within about
    #: a second of their request (not only once the shedding bound is near); past eight times
    #: this, or an eighth of ``shed_backlog_seconds``, every slot runs. 0: the pause holds until
    #: that eighth.
    requests_first_wait_seconds: float = 0.25
    #: Load shedding: an account whose oldest due job has waited longer than this gets 503
    #: ``overloaded`` with ``Retry-After`` on its HTTP endpoints until its backlog is back
    #: under it, seconds (docs/deploy.md, "Faults"). 0: never shed.
    shed_backlog_seconds: float = 60.0
    #: Below this much free disk where the SQLite database is, HTTP endpoints answer 503
    #: ``storage_unavailable`` (no new request is taken), MB: the rest is kept for the work
    #: already accepted to finish (its runs, their done marks, a checkpoint). 0: off.
    disk_reserve_mb: int = 128
    #: SQLite: the write-ahead log is checkpointed this often, seconds (0: never while Sluice
    #: runs, as before: the WAL then grows without bound; for measurements only) ...
    sqlite_checkpoint_seconds: float = 1.0
    #: ... and truncated once its file is larger than this, MB.
    sqlite_wal_max_mb: int = 64
    #: Done jobs (the queue's record of each request, tick and delivery, payload included)
    #: are deleted this many seconds after they finished; 0 keeps them. Failed jobs are kept.
    job_retention_seconds: int = 3600
    #: How often a live stream (SSE) also reads storage for events and logs that *other*
    #: processes stored, seconds; 0: only this process's. Default: 0.5 for the api role
    #: (its runs happen in worker processes), 0 for all.
    stream_poll_seconds: float = -1.0
    log_level: str = "info"
    #: ``text``: one line a record; ``json``: one JSON object a record, with the ids the code
    #: logs (``run_id``, ``job_id``, ``owner_id``…) as fields (``sluice/logs.py``).
    log_format: str = "text"
    #: When set, ``GET /metrics`` needs ``Authorization: Bearer <this>``; empty: open (the
    #: metrics are sums over all accounts, with no account's ids or names: docs/deploy.md).
    metrics_token: str = ""
    #: The worker role (no API) serves ``/metrics`` on this port when set; 0: not at all.
    metrics_port: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``SLUICE_*`` variables, then explicit overrides (CLI flags).

        ``Settings.from_env({"SLUICE_PORT": "9000"}).port == 9000``. Overrides that are None
        are ignored, so CLI flags left unset fall through to the environment.
        """
        env = os.environ if env is None else env
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f"SLUICE_{f.name.upper()}")
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, hints[f.name], raw)
        for name, value in overrides.items():
            if value is not None:
                values[name] = (
                    _convert(name, hints[name], value) if isinstance(value, str) else value
                )
        return cls(**values)

    def __post_init__(self) -> None:
        # Absolute: the paths are mounted into jails and handed to runners whose cwd differs.
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())
        if self.npm_store:
            object.__setattr__(self, "npm_store", str(Path(self.npm_store).absolute()))
        if self.component_rules not in ("spec", "pipedream"):
            raise errors.InvalidRequest(
                f"setting component_rules (SLUICE_COMPONENT_RULES): {self.component_rules!r} "
                "is not 'spec' or 'pipedream'",
                field="component_rules",
            )
        if self.sandbox not in ("on", "off"):
            raise errors.InvalidRequest(
                f"setting sandbox (SLUICE_SANDBOX): {self.sandbox!r} is not 'on' or 'off'",
                field="sandbox",
            )
        try:
            endpoint_origins.parse(self.endpoint_base_url)
        except ValueError as exc:
            raise errors.InvalidRequest(
                f"setting endpoint_base_url (SLUICE_ENDPOINT_BASE_URL): {exc}",
                field="endpoint_base_url",
            ) from None
        try:
            public_urls.TrustedProxies(self.trusted_proxies)
        except ValueError as exc:
            raise errors.InvalidRequest(
                f"setting trusted_proxies (SLUICE_TRUSTED_PROXIES): {exc}",
                field="trusted_proxies",
            ) from None

    @property
    def compat_rules(self) -> bool:
        """Whether components users save get the compatibility rules (the old
        ``SLUICE_REQUIRED_PROP_DEFAULTS=accept`` still turns them on)."""
        return self.component_rules == "pipedream" or self.required_prop_defaults == "accept"

    @property
    def resolved_database_url(self) -> str:
        url = self.database_url or f"sqlite:///{self.data_dir / 'sluice.db'}"
        return url

    @functools.cached_property
    def proxies(self) -> public_urls.TrustedProxies:
        return public_urls.TrustedProxies(self.trusted_proxies)

    @property
    def resolved_public_url(self) -> str:
        """The base of the links made now: ``public_url``, else the URL of the request being
        answered, else ``http://<host>:<port>`` (sluice/public_url.py)."""
        return (
            self.public_url or public_urls.current() or f"http://{self.host}:{self.port}"
        ).rstrip("/")

    @property
    def resolved_email_domain(self) -> str:
        """The domain of the sources' inbound addresses: ``email_domain``, else the host of
        ``public_url``, else ``localhost``."""
        if self.email_domain:
            return self.email_domain.lower()
        return (urllib.parse.urlsplit(self.public_url).hostname or "localhost").lower()

    def public_url_for(self, owner_id: str) -> str:
        """As ``resolved_public_url``, for links made for ``owner_id`` with no request at hand:
        then the URL of that account's last request to this process comes before the default."""
        return (
            self.public_url
            or public_urls.current()
            or public_urls.last_known(owner_id)
            or f"http://{self.host}:{self.port}"
        ).rstrip("/")

    @functools.cached_property
    def endpoint_base(self) -> endpoint_origins.EndpointBase:
        return endpoint_origins.parse(self.endpoint_base_url)

    def endpoint_url(self, endpoint_id: str, public_url: str | None = None) -> str:
        """The public URL of an endpoint; ``public_url`` is the base of its default
        ``…/e/<id>`` (else ``resolved_public_url``)."""
        default = f"{public_url or self.resolved_public_url}/e/"
        return endpoint_origins.url(self.endpoint_base, default, endpoint_id)

    @property
    def components_dir(self) -> Path:
        return self.data_dir / "components"

    @property
    def resolved_stream_poll_seconds(self) -> float:
        if self.stream_poll_seconds >= 0:
            return self.stream_poll_seconds
        return 0.5 if self.role == "api" else 0.0

    @property
    def outbox_dir(self) -> Path:
        return self.data_dir / "outbox"

    @property
    def ui_assets_dir(self) -> Path:
        if self.ui_assets:
            return Path(self.ui_assets).absolute()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "sluice" / "ui"

    @property
    def npm_store_dir(self) -> Path:
        return Path(self.npm_store) if self.npm_store else self.data_dir / "npm-store"


def _convert(name: str, hint: Any, raw: str) -> Any:
    try:
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint is bool:
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        if hint is Path:
            return Path(raw).expanduser()
    except ValueError as exc:
        raise errors.InvalidRequest(
            f"setting {name} (SLUICE_{name.upper()}): {raw!r} is not a valid {hint.__name__}",
            field=name,
        ) from exc
    return raw
