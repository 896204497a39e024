"""A real OAuth 2 authorization server on loopback, for the managed-auth tests.

Authlib's Flask ``AuthorizationServer`` with the authorization code grant (PKCE required:
RFC 7636 ``CodeChallenge``) and the refresh token grant (rotating: each refresh issues a new
refresh token and revokes the old one), a consent page, and a protected API (``/api/me``,
Authlib's ``ResourceProtector``). Served by werkzeug in a thread on 127.0.0.1, on a free port.

Time is the test's ``FakeClock``: tokens and codes expire when the test moves the clock. The
server counts the token requests it answers per grant type (``calls``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector, current_token
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenValidator
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

from sluice.clock import Clock

CLIENT_ID = "sluice-test-client"
CLIENT_SECRET = "sluice-test-secret"
ACCESS_TOKEN_SECONDS = 3600
CODE_SECONDS = 300

CONSENT = """<!doctype html><title>Approve</title>
<form method=post><input type=hidden name=user value="{user}">
<p>Let {client} read your profile?</p><button name=confirm value=yes>Approve</button>
<button name=confirm value=no>Deny</button></form>"""


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in (scope or "").split() if s in ("profile", "read"))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None
    expires_at: float

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class Token(TokenMixin):  # type: ignore[misc]
    provider: Provider
    client_id: str
    user: str
    scope: str
    access_token: str
    refresh_token: str | None
    issued_at: float
    expires_in: int
    revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return self.provider.now() >= self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> Client:
        return self.provider.client


@dataclass
class Provider:
    clock: Clock
    redirect_uri: str
    client: Client = field(init=False)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: list[Token] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    #: Set when a refresh request arrives; while ``hold`` is set, the refresh waits for
    #: ``release`` (a test holds one process's refresh while another tries its own).
    arrived: threading.Event = field(default_factory=threading.Event)
    hold: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    #: How long its access tokens live (Keycloak's default is 300 s).
    token_seconds: int = ACCESS_TOKEN_SECONDS

    def __post_init__(self) -> None:
        self.client = Client(CLIENT_ID, CLIENT_SECRET, [self.redirect_uri])

    def now(self) -> float:
        return self.clock.now_ms() / 1000

    def token_by(self, **match: str) -> Token | None:
        with self.lock:
            for t in self.tokens:
                if all(getattr(t, k) == v for k, v in match.items()):
                    return t
        return None

    def revoke_refresh_tokens(self, user: str) -> None:
        with self.lock:
            for t in self.tokens:
                if t.user == user:
                    t.refresh_revoked = True


def _grants(provider: Provider) -> tuple[type[Any], type[Any]]:
    class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

        def save_authorization_code(self, code: str, req: Any) -> None:
            data = req.payload.data
            with provider.lock:
                provider.codes[code] = Code(
                    code,
                    req.client.client_id,
                    req.payload.redirect_uri,
                    req.payload.scope or "",
                    req.user,
                    data.get("code_challenge"),
                    data.get("code_challenge_method"),
                    provider.now() + CODE_SECONDS,
                )

        def query_authorization_code(self, code: str, client: Client) -> Code | None:
            with provider.lock:
                found = provider.codes.get(code)
            if found and found.client_id == client.client_id and found.expires_at > provider.now():
                return found
            return None

        def delete_authorization_code(self, authorization_code: Code) -> None:
            with provider.lock:
                provider.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code: Code) -> str:
            return authorization_code.user

    class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
        INCLUDE_NEW_REFRESH_TOKEN = True  # rotation

        def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
            found = provider.token_by(refresh_token=refresh_token)
            if found is not None and not found.refresh_revoked:
                return found
            return None

        def authenticate_user(self, credential: Token) -> str:
            return credential.user

        def revoke_old_credential(self, credential: Token) -> None:
            with provider.lock:
                credential.refresh_revoked = True
                credential.revoked = True

    return CodeGrant, RefreshGrant


def create_app(provider: Provider) -> Flask:
    app = Flask("loopback-oauth")
    app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {
        "authorization_code": provider.token_seconds,
        "refresh_token": provider.token_seconds,
    }

    def query_client(client_id: str) -> Client | None:
        return provider.client if client_id == provider.client.client_id else None

    def save_token(token: dict[str, Any], req: Any) -> None:
        with provider.lock:
            provider.tokens.append(
                Token(
                    provider,
                    req.client.client_id,
                    req.user,
                    token.get("scope", ""),
                    token["access_token"],
                    token.get("refresh_token"),
                    provider.now(),
                    int(token["expires_in"]),
                )
            )

    server = AuthorizationServer(app, query_client=query_client, save_token=save_token)
    code_grant, refresh_grant = _grants(provider)
    server.register_grant(code_grant, [CodeChallenge(required=True)])
    server.register_grant(refresh_grant)

    _routes(app, server, provider)
    return app


def _routes(app: Flask, server: AuthorizationServer, provider: Provider) -> None:
    """The consent page, the token endpoint (counted) and the protected API."""

    class Validator(BearerTokenValidator):  # type: ignore[misc]
        def authenticate_token(self, token_string: str) -> Token | None:
            return provider.token_by(access_token=token_string)

    require_oauth = ResourceProtector()
    require_oauth.register_token_validator(Validator())

    @app.route("/authorize", methods=["GET", "POST"])
    def authorize() -> Any:
        user = request.form.get("user") or request.args.get("user") or "ada"
        grant = server.get_consent_grant(end_user=user)  # validates client, redirect, PKCE
        if request.method == "GET":
            return CONSENT.format(user=user, client=CLIENT_ID)
        granted = user if request.form.get("confirm") == "yes" else None
        return server.create_authorization_response(grant_user=granted, grant=grant)

    @app.route("/token", methods=["POST"])
    def issue_token() -> Any:
        grant = request.form.get("grant_type", "?")
        with provider.lock:
            provider.calls[grant] += 1
        if grant == "refresh_token":
            provider.arrived.set()
            if provider.hold:
                provider.release.wait(timeout=30)
        return server.create_token_response()

    @app.route("/api/me")
    @require_oauth("profile")
    def me() -> Any:
        return jsonify(id=current_token.user, login=current_token.user)


@contextlib.contextmanager
def serve(
    clock: Clock, redirect_uri: str, token_seconds: int = ACCESS_TOKEN_SECONDS
) -> Iterator[Provider]:
    """The provider, listening on 127.0.0.1 until the block ends."""
    # Authlib refuses plain http unless told: the server is on loopback only.
    before = os.environ.get("AUTHLIB_INSECURE_TRANSPORT")
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    provider = Provider(clock, redirect_uri, token_seconds=token_seconds)
    http = make_server("127.0.0.1", 0, create_app(provider), threaded=True)
    provider.url = f"http://127.0.0.1:{http.server_port}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        http.shutdown()
        thread.join(timeout=10)
        http.server_close()
        if before is None:
            os.environ.pop("AUTHLIB_INSECURE_TRANSPORT", None)
        else:
            os.environ["AUTHLIB_INSECURE_TRANSPORT"] = before
