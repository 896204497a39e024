"""Sluice's one exception tree.

Every error Sluice raises on purpose is a ``SluiceError``. A leaf's docstring is its default
message; its ``code`` is the stable machine-readable name that reaches API clients. Driver and
OS errors are translated where they enter (storage, runtime); the API edge alone maps these
classes to HTTP statuses (``sluice.api.errors``).

    SluiceError
    ├── InvalidRequest            the request itself is malformed (field, type, JSON)
    │   ├── InvalidComponent      a component breaks a rule of the component API
    │   ├── InvalidProps          configured prop values do not match the prop definitions
    │   └── InvalidSend           a ``$.send`` config is invalid (also a ``ValueError``)
    ├── Unauthorized              missing or wrong API key
    │   └── LoginRequired         a web UI page without a live session (redirect to sign in)
    ├── Forbidden                 the key is valid but may not do this
    │   ├── EgressRefused         the egress policy refuses that destination
    │   └── EmailRefused          ``$.send.email`` to an address not verified, or past its rate
    ├── NotFound                  no such resource (or it belongs to another account)
    ├── Conflict                  the resource exists or is in a state that forbids this
    │   └── ReconnectNeeded       a connected account's OAuth grant is gone: reconnect it
    ├── PayloadTooLarge           a body or value over a configured size limit
    │   └── DataStoreFull         a data store write past max_db_bytes
    ├── RateLimited               too many requests to one HTTP endpoint
    ├── QuotaExceeded             the account is at one of its quotas
    │   ├── StorageQuotaExceeded  it keeps stored as many bytes as it may (storage_quota_mb)
    │   └── NpmQuotaExceeded      its npm dependency sets fill its share of the store
    ├── NotSupported              a Pipedream feature Sluice does not have; names the equivalent
    ├── ComponentLoadFailed       Node could not load the component (syntax, missing module)
    ├── DependencyInstallFailed   npm could not install a package the component imports
    ├── FetchFailed               a component_url could not be fetched
    ├── HookFailed                a lifecycle hook threw during deploy/update/delete
    ├── OAuthRefused              an OAuth provider refused a code, state or refresh token
    ├── OAuthUnavailable          an OAuth provider could not be reached or answered nonsense
    ├── RunnerUnavailable         the Node runner crashed or could not start
    │   ├── RunnerCrashed         the runner died during an invocation (a job runs again)
    │   ├── OversizedLine         the runner wrote a line past the channel's limit
    │   └── SandboxUnavailable    the sandbox tool is missing or cannot start a jail
    │       └── SeccompUnavailable  libseccomp is missing or refused the filter
    ├── DeliveryFailed            an e-mail could not be delivered
    ├── ClientDisconnected        an HTTP endpoint's client left before its body was read
    ├── NotReady                  this process cannot work now (database, runner pool); a
    │   │                         503 with ``Retry-After``
    │   ├── StorageUnavailable    the store cannot be written or reached now (disk full, I/O
    │   │                         error, PostgreSQL down): nothing was stored
    │   └── Overloaded            the account's backlog is older than the shedding bound
    ├── LeaseLost                 a job's claim was taken over: its results are not stored
    ├── InternalError             a bug in Sluice
    └── CliError                  the CLI's own: one line the user must act on, with the code
                                  of the API's answer or the client's (``unreachable``…)

No module defines an exception class outside this tree (``tests/unit/test_error_tree.py``).
"""

from __future__ import annotations

from typing import Any


class SluiceError(Exception):
    """Something went wrong in Sluice."""

    #: Stable and machine-readable; a class attribute except for ``CliError``, which carries
    #: the code of the answer it reports.
    code: str = "internal_error"

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        self.field = field
        self.details = details or {}
        super().__init__(self.message)


class InvalidRequest(SluiceError):
    """The request is invalid."""

    code = "invalid_request"


class InvalidComponent(InvalidRequest):
    """The component does not follow the component API."""

    code = "invalid_component"


class InvalidProps(InvalidRequest):
    """The configured prop values do not match the component's props."""

    code = "invalid_props"


class Unauthorized(SluiceError):
    """Missing or invalid API key: send 'Authorization: Bearer <api key>'."""

    code = "unauthorized"


class LoginRequired(Unauthorized):
    """Sign in to see this page."""

    code = "login_required"


class Forbidden(SluiceError):
    """This API key may not do that."""

    code = "forbidden"


class EgressRefused(Forbidden):
    """The egress policy refuses that destination."""

    code = "egress_refused"


class NotFound(SluiceError):
    """Not found."""

    code = "not_found"


class Conflict(SluiceError):
    """The request conflicts with the current state of the resource."""

    code = "conflict"


class ReconnectNeeded(Conflict):
    """The connected account needs reconnecting: its provider refused to refresh its token."""

    code = "reconnect_needed"


class NotSupported(SluiceError):
    """Sluice does not have this Pipedream feature."""

    code = "not_supported"


class PayloadTooLarge(SluiceError):
    """The payload is larger than the configured limit."""

    code = "payload_too_large"


class DataStoreFull(PayloadTooLarge):
    """The data store would grow past its size limit (max_db_bytes)."""

    code = "data_store_full"


class QuotaExceeded(SluiceError):
    """The account is at one of its quotas."""

    code = "quota_exceeded"


class StorageQuotaExceeded(QuotaExceeded):
    """The account keeps stored as many bytes as it may: delete events, runs or data store
    records, or ask the operator for more (SLUICE_STORAGE_QUOTA_MB)."""

    code = "storage_quota_exceeded"


class EmailRefused(Forbidden):
    """$.send.email may send only to addresses the account has verified, at a bounded rate."""

    code = "email_refused"


class NpmQuotaExceeded(QuotaExceeded):
    """The account's npm dependencies fill its share of the npm store (SLUICE_NPM_QUOTA_MB)."""

    code = "npm_quota_exceeded"


class RateLimited(SluiceError):
    """Too many requests to this endpoint; retry later."""

    code = "rate_limited"

    def __init__(self, message: str | None = None, *, retry_after_seconds: int = 1) -> None:
        super().__init__(message, details={"retry_after_seconds": retry_after_seconds})
        self.retry_after_seconds = retry_after_seconds


class ComponentLoadFailed(SluiceError):
    """Node.js could not load the component."""

    code = "component_load_failed"


class DependencyInstallFailed(SluiceError):
    """An npm package the component imports could not be installed."""

    code = "dependency_install_failed"


class FetchFailed(SluiceError):
    """The component URL could not be fetched."""

    code = "fetch_failed"


class HookFailed(SluiceError):
    """A lifecycle hook of the component threw an error."""

    code = "hook_failed"


class OAuthRefused(SluiceError):
    """The OAuth provider refused the request."""

    code = "oauth_refused"


class OAuthUnavailable(SluiceError):
    """The OAuth provider could not be reached or gave an answer that is not OAuth 2."""

    code = "oauth_unavailable"


class RunnerUnavailable(SluiceError):
    """The Node.js runner is unavailable; the invocation did not complete."""

    code = "runner_unavailable"


class OversizedLine(RunnerUnavailable):
    """The runner sent more than the channel's limit without a newline; it is stopped."""

    code = "runner_oversized_line"


class RunnerCrashed(RunnerUnavailable):
    """The Node runner crashed during the invocation; it was restarted."""

    code = "runner_crashed"


class SandboxUnavailable(RunnerUnavailable):
    """The sandbox for user code cannot start."""

    code = "sandbox_unavailable"


class SeccompUnavailable(SandboxUnavailable):
    """libseccomp is missing or refused the filter."""

    code = "seccomp_unavailable"


class InvalidSend(InvalidRequest, ValueError):
    """A ``$.send`` config is invalid."""

    code = "invalid_send"


class DeliveryFailed(SluiceError):
    """An e-mail could not be delivered."""

    code = "delivery_failed"


class ClientDisconnected(SluiceError):
    """The client went away before its body was read: nothing is stored, nobody to answer."""

    code = "client_disconnected"


class NotReady(SluiceError):
    """Sluice is not ready."""

    code = "not_ready"
    #: What ``Retry-After`` says, seconds.
    retry_after_seconds: int = 5

    def __init__(self, message: str | None = None, *, retry_after_seconds: int | None = None):
        super().__init__(message)
        if retry_after_seconds is not None:
            self.retry_after_seconds = retry_after_seconds


class StorageUnavailable(NotReady):
    """The database cannot store this now (disk full, I/O error, or unreachable); nothing was
    stored: retry later."""

    code = "storage_unavailable"


class Overloaded(NotReady):
    """This account's work is queued for longer than this server allows; retry later."""

    code = "overloaded"


class LeaseLost(SluiceError):
    """This worker's lease on the job passed and another worker took it over."""

    code = "lease_lost"


class InternalError(SluiceError):
    """An internal error occurred; it has been logged."""

    code = "internal_error"


class CliError(SluiceError):
    """Something the user of the CLI must act on; ``message`` is one line.

    ``code`` is the API's error code (``not_found``, ``invalid_props``…) or the client's own:
    ``unreachable``, ``not_logged_in``, ``bad_config``, ``bad_answer``, ``usage``; ``status``
    is the API's HTTP status when the error is its answer.
    """

    code = "error"

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.code = code
        self.status = status
