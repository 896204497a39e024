"""The app catalog's rules: what an app is (Pipedream's shape), the apps built in, an
operator's registration checked, and a key app's credentials checked against its fields.

An app is ``auth_type`` ``"oauth"`` (OAuth 2: Sluice runs the authorization code flow and keeps
the tokens fresh), ``"keys"`` (the user pastes the fields ``custom_fields_json`` lists) or
``"none"``. Components read the connected account as ``this.<app>.$auth``; OAuth apps' fields
are Pipedream's: ``oauth_access_token``, ``oauth_refresh_token``, ``oauth_uid``,
``oauth_client_id`` (``../shared/reference/pipedream-compat.md`` §1.11).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any

from sluice import errors

AUTH_TYPES = ("oauth", "keys", "none")
#: What ``this.<app>.$auth`` holds for every OAuth app.
OAUTH_FIELDS = ("oauth_access_token", "oauth_refresh_token", "oauth_uid", "oauth_client_id")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_]{0,99}$")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_CLIENT_AUTH = ("post", "basic")


@dataclass(frozen=True)
class Field:
    """One credential a key app asks for (an entry of ``custom_fields_json``)."""

    name: str
    label: str
    secret: bool = False
    optional: bool = False
    description: str | None = None


@dataclass(frozen=True)
class OAuthConfig:
    """How Sluice talks to an OAuth 2 provider. The client secret is kept apart, encrypted."""

    authorize_url: str
    token_url: str
    scopes: tuple[str, ...] = ()
    pkce: bool = True
    client_id: str | None = None
    #: How the client authenticates at the token endpoint: form fields or HTTP Basic.
    client_auth: str = "post"
    #: Where the provider says who the user is (``oauth_uid``); else the token response.
    user_info_url: str | None = None
    #: The dotted path of the user's id in that answer (``authed_user.id``).
    uid_field: str = "id"
    #: Extra authorize-URL parameters (Google's ``access_type=offline``).
    authorize_params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class App:
    name_slug: str
    name: str
    auth_type: str
    id: str = ""
    description: str | None = None
    categories: tuple[str, ...] = ()
    img_src: str | None = None
    fields: tuple[Field, ...] = ()
    oauth: OAuthConfig | None = None
    #: Whether an operator stored a client secret (the secret itself never leaves storage).
    has_client_secret: bool = False
    builtin: bool = False
    #: The package an imported app came from (``@pipedream/notion@1.0.6``): its catalog entry
    #: was read from the package's app file (``domain/app_files.py``), not set by an operator.
    imported_from: str | None = None
    #: Whether Sluice knows how the app authenticates (OAuth endpoints, or the fields a user
    #: types): False for an imported app, whose ``auth_type`` is read from its code and whose
    #: accounts take credentials as given, until an operator registers it (``PUT``).
    managed_auth: bool = True

    @property
    def connectable(self) -> bool:
        """OAuth apps need a client id and secret before anyone can connect."""
        if self.auth_type != "oauth":
            return True
        return bool(self.oauth and self.oauth.client_id and self.has_client_secret)


def builtin_id(slug: str) -> str:
    """A built-in app's id, the same on every install: ``app_`` and 6 base62 characters."""
    n = int.from_bytes(hashlib.sha256(slug.encode()).digest()[:8], "big")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    out = ""
    for _ in range(6):
        n, r = divmod(n, 62)
        out += alphabet[r]
    return f"app_{out}"


def _builtin(slug: str, name: str, auth_type: str, **rest: Any) -> App:
    return App(slug, name, auth_type, id=builtin_id(slug), builtin=True, **rest)


#: The apps of the components Sluice ships and imports (``@pipedream/slack``,
#: ``@pipedream/helper_functions``, ``@pipedream/data_stores``, ``@pipedream/rss``, the ``http``
#: interface), and well-known providers with their public endpoints pre-filled: an operator
#: adds only a client id and secret.
BUILTIN: tuple[App, ...] = (
    _builtin(
        "http",
        "HTTP / Webhook",
        "none",
        description="Receive and send HTTP requests.",
        categories=("Developer Tools",),
    ),
    _builtin(
        "helper_functions",
        "Helper Functions",
        "none",
        description="Pre-built functions for common workflow tasks.",
        categories=("Developer Tools",),
    ),
    _builtin(
        "data_stores",
        "Data Stores",
        "none",
        description="The account's key-value data stores.",
        categories=("Developer Tools",),
    ),
    _builtin(
        "rss",
        "RSS",
        "none",
        description="Read public RSS and Atom feeds.",
        categories=("Developer Tools",),
    ),
    # Pipedream's apps that take no account: their components (``@pipedream/formatting``,
    # ``schedule``'s sources, ...) declare an app prop of them, and their app files read
    # nothing from ``$auth`` but a scaffold's ``Object.keys(this.$auth)``.
    *(
        _builtin(slug, name, "none", description=description, categories=("Developer Tools",))
        for slug, name, description in (
            ("pipedream_utils", "Pipedream Utils", "Pre-built functions: dates, text, JSON."),
            ("formatting", "Formatting", "Format text, numbers, dates and data."),
            ("schedule", "Schedule", "Run on a schedule: an interval or a cron expression."),
            ("emit", "Emit", "Emit events from a workflow or a source."),
            ("delay", "Delay", "Pause a workflow for a time."),
            ("filter", "Filter", "Continue or end a workflow on a condition."),
            ("email", "Email", "Send an email to yourself."),
        )
    ),
    _builtin(
        "slack",
        "Slack",
        "oauth",
        description="Slack is a channel-based messaging platform.",
        categories=("Communication",),
        oauth=OAuthConfig(
            "https://slack.com/oauth/v2/authorize",
            "https://slack.com/api/oauth.v2.access",
            scopes=("channels:read", "chat:write"),
            pkce=False,
            uid_field="authed_user.id",
        ),
    ),
    _builtin(
        "slack_bot",
        "Slack Bot",
        "keys",
        description="Interact with Slack with your own bot user.",
        categories=("Communication",),
        fields=(Field("bot_token", "Bot Token", secret=True),),
    ),
    _builtin(
        "github",
        "GitHub",
        "oauth",
        description="Where the world builds software.",
        categories=("Developer Tools",),
        oauth=OAuthConfig(
            "https://github.com/login/oauth/authorize",
            "https://github.com/login/oauth/access_token",
            scopes=("repo",),
            user_info_url="https://api.github.com/user",
        ),
    ),
    _builtin(
        "google",
        "Google",
        "oauth",
        description="Google accounts (Drive, Sheets, Gmail, Calendar).",
        categories=("Productivity",),
        oauth=OAuthConfig(
            "https://accounts.google.com/o/oauth2/v2/auth",
            "https://oauth2.googleapis.com/token",
            scopes=("openid", "email"),
            user_info_url="https://openidconnect.googleapis.com/v1/userinfo",
            uid_field="sub",
            authorize_params={"access_type": "offline", "prompt": "consent"},
        ),
    ),
    _builtin(
        "discord_bot",
        "Discord Bot",
        "keys",
        description="Use your own Discord bot.",
        categories=("Communication",),
        fields=(
            Field("bot_token", "Bot Token", secret=True),
            Field("guild_id", "Guild ID", optional=True),
        ),
    ),
    _builtin(
        "openai",
        "OpenAI",
        "keys",
        description="OpenAI's models over its API.",
        categories=("Artificial Intelligence",),
        fields=(Field("api_key", "API Key", secret=True),),
    ),
    _builtin(
        "pipedream",
        "Pipedream",
        "keys",
        description="The Pipedream-compatible REST API (an API key).",
        categories=("Developer Tools",),
        fields=(Field("api_key", "API Key", secret=True),),
    ),
)
BUILTIN_BY_SLUG = {a.name_slug: a for a in BUILTIN}


def custom_fields_json(app: App) -> list[dict[str, Any]]:
    """Pipedream's ``custom_fields_json`` entries (secret fields are ``type: "password"``)."""
    return [
        {
            "name": f.name,
            "label": f.label,
            "description": f.description,
            "default": None,
            "optional": f.optional or None,
            "type": "password" if f.secret else "string",
        }
        for f in app.fields
    ]


def matches(app: App, query: str | None) -> bool:
    """``GET /v1/apps?q=``: the words of ``query`` in the slug, name or description."""
    if not query:
        return True
    haystack = f"{app.name_slug} {app.name} {app.description or ''}".lower()
    return all(word in haystack for word in query.lower().split())


def check_credentials(app: App, credentials: dict[str, Any]) -> dict[str, Any]:
    """A key app's credentials: every required field given as a string, no unknown field.
    Other apps' credentials pass as they are (pasted tokens of an OAuth app), and so do an
    imported app's (its fields are only what its code was seen to read)."""
    if app.auth_type != "keys" or not app.managed_auth:
        return credentials
    known = {f.name: f for f in app.fields}
    for name in credentials:
        if name not in known:
            raise errors.InvalidRequest(
                f"{app.name_slug} has no field {name!r}; its fields are "
                f"{', '.join(known) or 'none'}",
                field=f"credentials.{name}",
            )
    for f in app.fields:
        value = credentials.get(f.name)
        if value is None or value == "":
            if f.optional:
                continue
            raise errors.InvalidRequest(
                f"{app.name_slug} needs {f.label} ({f.name})", field=f"credentials.{f.name}"
            )
        if not isinstance(value, str):
            raise errors.InvalidRequest(f"{f.name} is a string", field=f"credentials.{f.name}")
    return {k: v for k, v in credentials.items() if v not in (None, "")}


def check_slug(slug: Any) -> str:
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise errors.InvalidRequest(
            "name_slug is lowercase letters, digits and _ (100 at most), e.g. my_crm",
            field="name_slug",
        )
    return slug


def check_fields(raw: Any) -> tuple[Field, ...]:
    """Custom fields from an operator: ``[{name, label?, secret?, optional?, description?}]``."""
    if not isinstance(raw, list):
        raise errors.InvalidRequest("custom_fields is a list", field="custom_fields")
    out: list[Field] = []
    for i, item in enumerate(raw):
        where = f"custom_fields[{i}]"
        if not isinstance(item, dict) or not _FIELD_NAME.match(str(item.get("name", ""))):
            raise errors.InvalidRequest(
                "each field is {name, label?, secret?, optional?, description?}; a name is "
                "letters, digits and _",
                field=where,
            )
        name = str(item["name"])
        if any(f.name == name for f in out):
            raise errors.InvalidRequest(f"field {name!r} is listed twice", field=where)
        out.append(
            Field(
                name=name,
                label=str(item.get("label") or name),
                secret=bool(item.get("secret", item.get("type") == "password")),
                optional=bool(item.get("optional")),
                description=item.get("description"),
            )
        )
    return tuple(out)


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
        raise errors.InvalidRequest(f"{where} is an http(s) URL", field=where)
    return value


def check_oauth(raw: Any, before: OAuthConfig | None) -> OAuthConfig:
    """An operator's OAuth settings over what there was (a built-in's public endpoints)."""
    if not isinstance(raw, dict):
        raise errors.InvalidRequest("oauth is an object", field="oauth")
    base: dict[str, Any] = {} if before is None else dict(before.__dict__)
    merged = {**base, **{k: v for k, v in raw.items() if k != "client_secret"}}
    unknown = set(merged) - set(OAuthConfig.__dataclass_fields__)
    if unknown:
        raise errors.InvalidRequest(f"unknown oauth field {sorted(unknown)[0]!r}", field="oauth")
    scopes = merged.get("scopes") or ()
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not all(isinstance(s, str) for s in scopes):
        raise errors.InvalidRequest("oauth.scopes is a list of strings", field="oauth.scopes")
    if merged.get("client_auth", "post") not in _CLIENT_AUTH:
        raise errors.InvalidRequest("oauth.client_auth is post or basic", field="oauth.client_auth")
    params = merged.get("authorize_params") or {}
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise errors.InvalidRequest(
            "oauth.authorize_params is an object of strings", field="oauth.authorize_params"
        )
    client_id = merged.get("client_id")
    if client_id is not None and not isinstance(client_id, str):
        raise errors.InvalidRequest("oauth.client_id is a string", field="oauth.client_id")
    info = merged.get("user_info_url")
    return OAuthConfig(
        authorize_url=_url(merged.get("authorize_url"), "oauth.authorize_url"),
        token_url=_url(merged.get("token_url"), "oauth.token_url"),
        scopes=tuple(scopes),
        pkce=bool(merged.get("pkce", True)),
        client_id=client_id,
        client_auth=str(merged.get("client_auth", "post")),
        user_info_url=None if info is None else _url(info, "oauth.user_info_url"),
        uid_field=str(merged.get("uid_field") or "id"),
        authorize_params=dict(params),
    )


def registered(body: dict[str, Any], before: App | None, slug: str) -> App:
    """The app an operator's ``POST``/``PUT /v1/apps`` body describes, over ``before`` (a
    built-in or the stored app: fields left out keep their value)."""
    base = before or App(slug, slug, "keys")
    auth_type = body.get("auth_type", base.auth_type)
    if auth_type not in AUTH_TYPES:
        raise errors.InvalidRequest("auth_type is oauth, keys or none", field="auth_type")
    fields = check_fields(body["custom_fields"]) if "custom_fields" in body else base.fields
    oauth = base.oauth
    if "oauth" in body:
        oauth = check_oauth(body["oauth"], base.oauth)
    if auth_type == "oauth" and oauth is None:
        raise errors.InvalidRequest(
            "an oauth app needs oauth: {authorize_url, token_url, client_id, ...}",
            field="oauth",
        )
    categories = body.get("categories", list(base.categories))
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise errors.InvalidRequest("categories is a list of strings", field="categories")
    name = body.get("name", base.name)
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise errors.InvalidRequest("name is a non-empty string", field="name")
    return replace(
        base,
        name_slug=slug,
        name=name.strip(),
        auth_type=auth_type,
        description=body.get("description", base.description),
        categories=tuple(categories),
        img_src=body.get("img_src", base.img_src),
        fields=fields if auth_type == "keys" else (),
        oauth=oauth if auth_type == "oauth" else None,
        builtin=False,
        imported_from=None,  # an operator's now: imports leave it alone
        managed_auth=True,
    )


@dataclass(frozen=True)
class ConnectedAccount:
    id: str
    owner_id: str
    app: str
    name: str | None
    credential_keys: list[str]
    created_at: int
    updated_at: int
    #: OAuth: the provider's id of the user, when the access token expires (epoch ms; None:
    #: never), and why the account must be reconnected (None: it need not be).
    provider_uid: str | None = None
    expires_at_ms: int | None = None
    reconnect_reason: str | None = None
