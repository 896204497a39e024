"""Request bodies. Unknown fields are refused, so a typo is an error, not a silent no-op."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool


# Booleans are JSON's true and false: pydantic's lax mode took 0, 1, "yes" and "off" too,
# which the OpenAPI document (type boolean) says are refused.
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Pipedream's common parameters, which its docs let a POST carry in its body: an account is
    # its own workspace here, so they are accepted and ignored (never part of the value).
    org_id: str | None = Field(None, exclude=True, description="Accepted and ignored.")
    workspace_id: str | None = Field(None, exclude=True, description="Accepted and ignored.")


class ComponentFiles(_Body):
    component_code: str | None = Field(None, description="The entry file's source code.")
    component_url: str | None = Field(
        None, description="Where to fetch the entry file (http/https)."
    )
    component_path: str | None = Field(
        None,
        description="The entry file's path inside the component, e.g. actions/send/send.mjs; "
        "relative imports resolve from it. Default component.mjs (ESM) or component.cjs.",
    )
    files: dict[str, str] | None = Field(
        None,
        description="Other files of the component: {relative path: text}, e.g. "
        '{"slack.app.mjs": "...", "package.json": "..."}.',
    )


class ComponentCreate(ComponentFiles):
    pass


class SourceCreate(ComponentFiles):
    component_id: str | None = None
    component_key: str | None = Field(None, description="Key of a component saved in the account.")
    name: str | None = None
    configured_props: dict[str, Any] | None = None
    active: StrictBool = True


class SourceRun(_Body):
    event: Any = Field(
        None,
        description="The event passed to run(event). Default: {} (a timer "
        "source gets {timestamp, interval_seconds}).",
    )


class ActionRun(ComponentFiles):
    component_id: str | None = None
    component_key: str | None = None
    configured_props: dict[str, Any] | None = None
    steps: dict[str, Any] | None = None


class ConnectedAccountCreate(_Body):
    app: str = Field(
        ..., min_length=1, max_length=200, description="The app's name slug, e.g. slack."
    )
    name: str | None = Field(None, max_length=200)
    credentials: dict[str, Any] = Field(..., description="What the component reads as $auth.")


class SourceUpdate(ComponentFiles):
    component_id: str | None = None
    component_key: str | None = None
    name: str | None = None
    configured_props: dict[str, Any] | None = Field(
        None, description="The full new set; secret props left out keep their values."
    )
    active: StrictBool | None = None


class WorkflowCreate(_Body):
    name: str | None = Field(None, description="Shown in lists and error e-mails.")
    trigger: dict[str, Any] | None = Field(
        None,
        description='{"type": "http"} (optional "custom_response"), {"type": "timer", '
        '"intervalSeconds": 60} or {"type": "timer", "cron": "0 * * * *", "timezone": "…"}, '
        '{"type": "source", "source_id": "dc_…", "event_name": ""}, or {"type": "manual"}.',
    )
    steps: list[Any] | None = Field(
        None,
        description='In order: {"name": "…", "code": "<module source>", "props": {…}} or '
        '{"name": "…", "action": "<sc_ id or key>", "props": {…}}.',
    )
    active: StrictBool | None = None
    global_errors: StrictBool | None = Field(
        None,
        description="false: this workflow's errors do not go to the global error workflow "
        "(its $errors subscribers still get them). Default true.",
    )


class WorkflowRun(_Body):
    event: Any = Field(None, description="The trigger event: steps.trigger.event.")


class ErrorWorkflow(_Body):
    workflow_id: str | None = Field(
        ..., description="The workflow that gets every error of the account (null: none)."
    )


class UserUpdate(_Body):
    email: str | None = Field(
        ..., description="Where $.send.email and error e-mails go; null removes it."
    )


class RegistryImport(_Body):
    packages: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="npm package specs: @pipedream/slack@0.10.3, @pipedream/notion, slack@^0.10.",
    )
    directories: list[dict[str, str]] = Field(
        default_factory=list,
        max_length=50,
        description="App directories of Pipedream's monorepo (components/<app>/), each as "
        "{relative path: text} of its .mjs/.js/.cjs/.json files, package.json included.",
    )


class AppWrite(_Body):
    """An operator's app (``POST /v1/apps``, ``PUT /v1/apps/{slug}``): fields left out of a
    PUT keep their value."""

    name_slug: str | None = Field(None, description="Lowercase letters, digits and _.")
    name: str | None = None
    auth_type: str | None = Field(None, description="oauth, keys or none.")
    description: str | None = None
    categories: list[str] | None = None
    img_src: str | None = None
    custom_fields: list[dict[str, Any]] | None = Field(
        None,
        description='Key apps\' fields: [{"name": "api_key", "label": "API Key", '
        '"secret": true, "optional": false, "description": "..."}].',
    )
    oauth: dict[str, Any] | None = Field(
        None,
        description="OAuth 2: {authorize_url, token_url, scopes, pkce, client_id, "
        "client_secret (write-only), client_auth (post|basic), user_info_url, uid_field, "
        "authorize_params}.",
    )


class AppConnect(_Body):
    name: str | None = Field(None, max_length=200, description="The new account's name.")
    return_to: str | None = Field(
        None,
        max_length=1000,
        description="A path on this server the browser is sent to after the callback, with "
        "?account_id=apn_… (default: a page saying the account is connected).",
    )


class EnvVarValue(_Body):
    value: str


class OAuthClientCreate(_Body):
    name: str | None = Field(None, description="What to call it (default: OAuth client).")


class DataStoreCreate(_Body):
    name: str


class DataStoreRecord(_Body):
    value: Any = None
    #: Seconds until the record expires; null: never.
    ttl: float | None = None
