"""What ``/openapi.json`` says of each answer: the resource a route answers with (its fields,
as ``api/render.py`` writes them), the envelope around it (``{"data": …}`` or a page), the
group (tag) the route is listed under, and the API key that authorizes it.

FastAPI sees only ``dict[str, Any]`` returned, and documents every answer as
``{"additionalProp1": {}}``. The schemas here name the fields without binding their types
(a field may be null, a value is the user's): they describe, and every real answer still
validates against them (``tests/e2e/test_openapi_conformance.py``).
"""

from __future__ import annotations

import re
from typing import Any

#: The groups of /docs, in order: (tag, description).
TAGS: list[tuple[str, str]] = [
    ("Sources", "Deployed components (dc_): deploy, update, run, their events and logs."),
    ("Components", "Saved components (sc_), the public registry, prop options."),
    ("Workflows", "Workflows (p_), their runs, $errors and emitted events; $.flow URLs."),
    ("Actions", "Run one action with configured props."),
    ("Subscriptions", "Listeners of sources' and workflows' channels ($errors, custom)."),
    ("Webhooks", "URLs that subscriptions deliver events to (wh_), and their deliveries."),
    ("Data stores", "Account key-value stores (ds_) and their records."),
    (
        "Files",
        "Bodies and uploaded files endpoints stored (x-pd-upload-body, multipart file "
        "parts), at the secret URLs their events hold (no API key).",
    ),
    ("Environment variables", "Values a workflow's code steps read in process.env."),
    ("Connected accounts", "Accounts of apps (apn_) whose credentials components use as $auth."),
    ("Apps", "The app catalog, and connecting an OAuth app."),
    ("Account", "The account of the API key, its global error workflow."),
    ("Operations", "Health, readiness and metrics (no API key)."),
]

_TAG_OF = {
    "sources": "Sources",
    "components": "Components",
    "registry": "Components",
    "workflows": "Workflows",
    "runs": "Workflows",
    "flow": "Workflows",
    "error_workflow": "Account",
    "actions": "Actions",
    "subscriptions": "Subscriptions",
    "auto_subscriptions": "Subscriptions",
    "webhooks": "Webhooks",
    "data_stores": "Data stores",
    "files": "Files",
    "env_vars": "Environment variables",
    "accounts": "Connected accounts",
    "apps": "Apps",
    "me": "Account",
    "email": "Account",
    "oauth": "Account",
    "healthz": "Operations",
    "readyz": "Operations",
    "metrics": "Operations",
}

#: Routes anyone may call: the operators' probes, the secret $.flow resume/cancel URLs and file
#: URLs, and the e-mail verification link (its token is the proof).
_PUBLIC = re.compile(
    r"^/(healthz|readyz|metrics|flow/|files/|v1/email/verify$|v1/oauth/(token|revoke)$)"
)

SECURITY_SCHEME: dict[str, Any] = {
    "type": "http",
    "scheme": "bearer",
    "description": "An API key (`slk_…`): Settings → API keys in the web UI, or `sluice "
    "accounts create`. Sent as `Authorization: Bearer <key>`.",
}


def tag(path: str) -> str | None:
    """The group of a route: ``/v1/users/me/sources`` → Sources."""
    parts = [p for p in path.split("/") if p and p != "v1"]
    if parts[:2] == ["users", "me"]:
        parts = parts[2:] or ["me"]
    elif parts[:1] in (["orgs"], ["workspaces"]):  # Pipedream's workspace lists
        parts = parts[2:]
    return _TAG_OF.get(parts[0]) if parts else None


def oauth_errors(path: str) -> bool:
    """Whether a route's 400 and 401 answers are RFC 6749's ``{error, error_description}``."""
    return path in ("/v1/oauth/token", "/v1/oauth/revoke")


def is_public(path: str) -> bool:
    return _PUBLIC.match(path) is not None


_TYPES = ("string", "integer", "number", "boolean", "object", "array")


def _field(text: str) -> dict[str, Any]:
    """``"integer: Epoch seconds."`` → an integer or null, described; untyped text: any."""
    kind, colon, rest = text.partition(":")
    if colon and kind in _TYPES:
        field: dict[str, Any] = {"type": [kind, "null"]}
        if rest.strip():
            field["description"] = rest.strip()
        return field
    return {"description": text} if text else {}


def _fields(**described: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: _field(text) for name, text in described.items()},
    }


_CREATED = "integer: Epoch seconds."
RESOURCES: dict[str, dict[str, Any]] = {
    "User": _fields(
        id="string: u_…",
        username="string:",
        email="string:",
        is_admin="boolean: May publish to the registry.",
        created_at=_CREATED,
    ),
    "Component": _fields(
        id="string: sc_…",
        key="string: Registry key, e.g. http-new-requests.",
        name="string:",
        version="string: Semantic version.",
        description="string: Markdown.",
        component_type="string: source or action.",
        code="string: The entry file's code.",
        code_hash="string: sha256 of its files.",
        entry_path="string:",
        configurable_props="array: Its props, in order, each with its name.",
        dependencies="object: {package: range} it imports.",
        created_at=_CREATED,
        updated_at=_CREATED,
    ),
    "Source": _fields(
        id="string: dc_…",
        owner_id="string: u_…",
        user_id="string: u_… (as Pipedream's REST docs name it).",
        component_id="string: sc_… it runs.",
        configured_props="object: Values by prop: an HTTP prop as {endpoint_url}, a timer as "
        "{interval_seconds, cron, timezone}, a secret as {secret: true}.",
        active="boolean:",
        name="string:",
        name_slug="string:",
        created_at=_CREATED,
        updated_at=_CREATED,
    ),
    "Invocation": _fields(
        id="string:",
        ok="boolean: False when run() threw.",
        emitted="array: Ids of the events it emitted.",
        value="What run() returned.",
        error="{name, message, stack} when it threw.",
        logs="array: Its console lines.",
        duration_ms="number:",
    ),
    "EventSummary": _fields(
        id="string: <epoch ms>-<seq>",
        indexed_at_ms="integer:",
        event="The payload (whole with expand=event; else cut to 1 KB).",
        metadata="{emitter_id, emit_id, name (the channel), id, summary, ts}",
    ),
    "LogLine": _fields(id="string:", ts="", level="string:", msg="string:"),
    "ConnectedAccount": _fields(
        id="string: apn_…",
        app="string: The app's name_slug.",
        name="string:",
        credential_fields="array: Names of its credentials (never the values).",
        status="string: ok or reconnect_needed.",
        reconnect_reason="",
        oauth_uid="Who the provider says the user is.",
        expires_at="integer: When the access token expires (epoch seconds).",
        created_at=_CREATED,
        updated_at=_CREATED,
    ),
    "App": _fields(
        id="string: app_…",
        name_slug="string:",
        name="string:",
        auth_type="string: oauth, keys or none.",
        description="string:",
        img_src="string:",
        categories="array:",
        connectable="boolean:",
        managed_auth="",
    ),
    "ActionRun": _fields(
        id="string:",
        ok="boolean:",
        exports="object: $.export values by name.",
        ret="The return value.",
        summary="string: Its $summary export.",
        flow_exit="{reason} after $.flow.exit.",
        error="",
        os="Its console lines.",
        sends="Its $.send calls.",
        duration_ms="number:",
    ),
    "Subscription": _fields(
        id="string: sub_…",
        emitter_id="string: p_…, dc_… or a glob.",
        listener_id="string: p_…, dc_… or wh_….",
        event_name="string: The channel ('' for the default).",
        created_at=_CREATED,
    ),
    "AutoSubscription": _fields(
        id="string:", listener_id="string:", event_name="string:", created_at=_CREATED
    ),
    "Workflow": _fields(
        id="string: p_…",
        name="string:",
        active="boolean:",
        trigger="object: {type: http | timer | source | manual, …}",
        steps="array: Code and action steps, in order.",
        deployment_id="string: d_…: changes with the trigger or the steps.",
        endpoint_url="Its HTTP trigger's URL.",
        is_error_workflow="boolean: The account's global error workflow.",
        global_errors="boolean: Its errors go to the global error workflow.",
        created_at=_CREATED,
        updated_at=_CREATED,
    ),
    "Run": _fields(
        id="string:",
        workflow_id="string:",
        deployment_id="string:",
        status="string: success, error, exited, delayed, suspended, cancelled…",
        event="The trigger event.",
        context="steps.trigger.context.",
        steps="array: Each step: status, exports, return value, logs, error.",
        error="{code, msg, cellId, ts, stack} of the failing step.",
        flow_exit="",
        response="The $.respond answer.",
        sends="Its $.send calls and their outcomes.",
        started_at_ms="integer:",
        duration_ms="number:",
        replay_of="string: The run it replays.",
    ),
    "DataStore": _fields(
        id="string: ds_…",
        name="string:",
        record_count="integer:",
        size_bytes="integer:",
        created_at=_CREATED,
    ),
    "Record": _fields(key="string:", value="Any JSON value."),
    "EnvVar": _fields(name="string:", updated_at=_CREATED),
    "Webhook": _fields(
        id="string: wh_…",
        url="string:",
        name="string:",
        description="string:",
        active="boolean:",
        created_at=_CREATED,
    ),
    "Delivery": _fields(id="string: dlv_…", status="string:", attempts="", last_error=""),
    "ErrorWorkflow": _fields(workflow_id="string: p_… of the global error workflow, or null."),
    "FlowSignal": _fields(
        run_id="string:", status="string: What the run does now (resumed, cancelled…)."
    ),
    "Retried": _fields(retried="array: The deliveries queued again.", count="integer:"),
    "Imports": _fields(
        packages="array: Each package's report: its components loaded, skipped, failed."
    ),
    "Options": _fields(options="[{label, value}…] or values.", context="For the next page."),
    "PropSet": _fields(
        observations="", errors="", dynamicProps="{id, configurableProps}: the full prop list."
    ),
    "Connect": _fields(
        authorize_url="string: Open it in the browser that connects.",
        redirect_uri="string:",
        expires_at="integer: When the link ends (epoch seconds).",
    ),
    "Health": _fields(status="string: ok, or ready.", role="string: all, api or worker."),
}

_PAGE_INFO: dict[str, Any] = _fields(
    total_count="integer:",
    count="integer:",
    start_cursor="string:",
    end_cursor="string: Pass as after= for the next page.",
)

#: (methods, path) → (envelope, resource). ``one``: ``{"data": resource}``; ``page``:
#: ``{"page_info", "data": [resource…]}``; ``bare``: the resource itself; ``empty``: ``{}``.
_ANSWERS: list[tuple[str, str, str, str | None]] = [
    ("get|put", r"/v1/users/me", "one", "User"),
    ("post", r"/v1/components(/registry)?", "one", "Component"),
    ("get", r"/v1/components/registry/[^/]+", "one", "Component"),
    ("get", r"/v1/components/registry", "page", "Component"),
    ("get", r"/v1/components/\{key_or_id\}", "one", "Component"),
    ("get", r"/v1/users/me/components", "page", "Component"),
    ("post", r"/v1/sources", "one", "Source"),
    ("get|put", r"/v1/sources/\{source_id\}", "one", "Source"),
    ("get", r"/v1/users/me/sources", "page", "Source"),
    ("post", r"/v1/sources/[^/]+/run", "one", "Invocation"),
    ("get", r"/v1/(sources|workflows)/[^/]+/(\$errors/)?event_summaries", "page", "EventSummary"),
    ("get", r"/v1/sources/[^/]+/logs", "page", "LogLine"),
    ("post", r"/v1/accounts", "one", "ConnectedAccount"),
    ("get", r"/v1/accounts/[^/]+", "one", "ConnectedAccount"),
    ("get", r"/v1/accounts", "page", "ConnectedAccount"),
    ("get", r"/v1/apps", "page", "App"),
    ("post", r"/v1/apps", "one", "App"),
    ("get|put", r"/v1/apps/\{slug\}", "one", "App"),
    ("post", r"/v1/actions/run", "one", "ActionRun"),
    ("post", r"/v1/subscriptions", "one", "Subscription"),
    ("get", r"/v1/users/me/subscriptions", "page", "Subscription"),
    ("post", r"/v1/auto_subscriptions", "one", "AutoSubscription"),
    ("get", r"/v1/users/me/auto_subscriptions", "page", "AutoSubscription"),
    ("post", r"/v1/workflows", "one", "Workflow"),
    ("get|put", r"/v1/workflows/\{workflow_id\}", "one", "Workflow"),
    ("get", r"/v1/users/me/workflows", "page", "Workflow"),
    ("post", r"/v1/workflows/[^/]+/runs", "one", "Run"),
    ("get", r"/v1/workflows/[^/]+/runs", "page", "Run"),
    ("get", r"/v1/runs/[^/]+", "one", "Run"),
    ("post", r"/v1/runs/[^/]+/replay", "one", "Run"),
    ("get", r"/v1/users/me/data_stores", "page", "DataStore"),
    ("post", r"/v1/data_stores", "one", "DataStore"),
    ("get", r"/v1/data_stores/\{ref\}", "one", "DataStore"),
    ("get", r"/v1/data_stores/[^/]+/records", "page", "Record"),
    ("get|put", r"/v1/data_stores/[^/]+/records/[^/]+", "one", "Record"),
    ("get", r"/v1/users/me/env_vars", "page", "EnvVar"),
    ("post", r"/v1/webhooks", "one", "Webhook"),
    ("get", r"/v1/users/me/webhooks", "page", "Webhook"),
    ("get", r"/v1/webhooks/[^/]+/deliveries", "page", "Delivery"),
    ("put", r"/v1/env_vars/[^/]+", "one", "EnvVar"),
    ("get|put", r"/v1/users/me/error_workflow", "one", "ErrorWorkflow"),
    ("get|post|put|patch|delete", r"/flow/.*", "one", "FlowSignal"),
    ("post", r"/v1/webhooks/[^/]+/deliveries(/[^/]+)?/retry", "one", "Retried"),
    ("post", r"/v1/registry/imports", "one", "Imports"),
    ("post", r"/v1/components/[^/]+/props/[^/]+/options", "one", "Options"),
    ("post", r"/v1/components/[^/]+/props", "one", "PropSet"),
    ("post", r"/v1/apps/[^/]+/connect", "one", "Connect"),
    ("get", r"/(healthz|readyz)", "bare", "Health"),
    ("delete", r"/v1/.*", "empty", None),
]


def answer(method: str, path: str) -> dict[str, Any] | None:
    """The schema of a route's successful answer; None when none is known."""
    for methods, pattern, envelope, resource in _ANSWERS:
        if method in methods.split("|") and re.fullmatch(pattern, path):
            ref = {"$ref": f"#/components/schemas/{resource}"} if resource else None
            if envelope == "bare":
                return ref
            if envelope == "one":
                return {"type": "object", "properties": {"data": ref}}
            if envelope == "page":
                return {
                    "type": "object",
                    "properties": {
                        "page_info": {"$ref": "#/components/schemas/PageInfo"},
                        "data": {"type": "array", "items": ref},
                    },
                }
            return {"type": "object", "description": "An empty object, `{}`, when done."}
    return None


def schemas() -> dict[str, dict[str, Any]]:
    """The components the answers refer to."""
    return {**RESOURCES, "PageInfo": _PAGE_INFO}
