"""The wire shapes of the ``/v1`` API: one function per resource, from the values the platform
returns (storage and engine return values, never wire shapes). Field names follow
Pipedream's REST API where it has the resource (``../docs/api.md``)."""

from __future__ import annotations

import json
from typing import Any

from sluice.domain import apps as app_rules
from sluice.domain import components as rules
from sluice.domain import previews
from sluice.platform import (
    Account,
    ActionRun,
    App,
    AutoSubscription,
    ComponentReport,
    ConnectedAccount,
    DataStore,
    Deployment,
    Event,
    InvocationOutcome,
    LogLine,
    OAuthClient,
    OptionsPage,
    PackageReport,
    PropSet,
    Run,
    SavedComponent,
    Subscription,
    Workflow,
)


def oauth_client(c: OAuthClient) -> dict[str, Any]:
    """An OAuth API client (never its secret)."""
    return {"client_id": c.id, "name": c.name, "created_at": c.created_at}


def account(a: Account) -> dict[str, Any]:
    return {
        "id": a.id,
        "username": a.username,
        "email": a.email,
        "email_verified": a.email_verified,
        "is_admin": a.is_admin,
        "created_at": a.created_at,
    }


def component(c: SavedComponent) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": c.id,
        "key": c.key,
        "name": c.name,
        "version": c.version,
        "description": c.description,
        "component_type": c.component_type,
        "code": c.code,
        "code_hash": c.code_hash,
        "entry_path": c.entry_path,
        "configurable_props": c.configurable_props,
        "dependencies": c.dependencies,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    }
    if c.registry:
        data["registry"] = True
    if len(c.files) > 1:
        data["files"] = sorted(p for p in c.files if p != c.entry_path)
    if c.component_url:
        data["component_url"] = c.component_url
    if c.shape.get("warnings"):
        data["warnings"] = c.shape["warnings"]
    return data


def _configured(d: Deployment) -> dict[str, Any]:
    """Configured props as shown: timers in the API's terms, secrets never."""
    configured: dict[str, Any] = {}
    for name, value in d.configured_props.items():
        if isinstance(value, dict) and "intervalSeconds" in value:
            configured[name] = {
                "cron": value.get("cron"),
                "interval_seconds": value.get("intervalSeconds"),
            }
        elif isinstance(value, dict) and "cron" in value:
            configured[name] = {
                "cron": value.get("cron"),
                "interval_seconds": None,
                "timezone": value.get("timezone"),
            }
        else:
            configured[name] = value
    for name in d.secret_props:
        configured[name] = {"secret": True}
    return configured


def deployment(
    d: Deployment, c: SavedComponent | None = None, *, endpoint_url: str | None = None
) -> dict[str, Any]:
    """A deployed source; ``c`` its component (adds ``configurable_props``)."""
    configured = _configured(d)
    if c is not None:
        for prop in c.configurable_props:
            if prop["type"] == rules.HTTP:
                configured[prop["name"]] = {"endpoint_url": endpoint_url}
    data: dict[str, Any] = {
        "id": d.id,
        # Pipedream's REST docs name the owner user_id, its SDK owner_id: scripts read either.
        "user_id": d.owner_id,
        "owner_id": d.owner_id,
        "component_id": d.component_id,
        "configured_props": configured,
        "active": d.active,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "name": d.name,
        "name_slug": d.name_slug,
    }
    if endpoint_url:
        data["endpoint_url"] = endpoint_url
    if c is not None:
        data["configurable_props"] = c.configurable_props
    return data


def workflow(
    w: Workflow, *, endpoint_url: str | None, error_workflow_id: str | None = None
) -> dict[str, Any]:
    """A workflow: its trigger (with the endpoint's URL for HTTP triggers) and its steps, secret
    props named, never shown."""
    trigger = dict(w.trigger)
    if w.trigger_type == "http":
        trigger["endpoint_url"] = endpoint_url
    steps = []
    for step in w.steps:
        out: dict[str, Any] = {"id": step["id"], "name": step["name"], "type": step["type"]}
        if step["type"] == "code":
            out["code"] = step["code"]
        else:
            out["action"] = step["action"]
            out["component_id"] = step["component_id"]
        out["props"] = step.get("props") or {}
        if step.get("secret_props"):
            out["secret_props"] = sorted(step["secret_props"])
        steps.append(out)
    return {
        "id": w.id,
        "name": w.name,
        "active": w.active,
        "trigger": trigger,
        "steps": steps,
        "deployment_id": w.deployment_id,
        "endpoint_url": endpoint_url,
        "is_error_workflow": w.id == error_workflow_id,
        "global_errors": w.global_errors,
        "created_at": w.created_at,
        "updated_at": w.updated_at,
    }


def invocation(outcome: InvocationOutcome) -> dict[str, Any]:
    """A source run by hand."""
    r = outcome.result
    return {
        "id": outcome.invocation_id,
        "ok": r.ok,
        "emitted": outcome.event_ids,
        "value": r.value,
        "error": r.error,
        "logs": r.logs,
        "duration_ms": r.duration_ms,
    }


def action_run(run: ActionRun) -> dict[str, Any]:
    """An action run by hand (Pipedream's ``actions/run`` answer: ``exports``, ``ret``, ``os``)."""
    r = run.result
    exports = dict(r.exports)
    data: dict[str, Any] = {
        "id": run.id,
        "ok": r.ok,
        "exports": exports,
        "ret": r.value,
        "summary": exports.get("$summary"),
        "flow_exit": r.flow_exit,
        "error": r.error,
        "os": r.logs,
        "sends": r.sends,
        "duration_ms": r.duration_ms,
    }
    if run.responses:
        first = run.responses[0]
        data["respond"] = {
            "status": first.status,
            "headers": first.headers,
            "body": first.body,
            "body_encoding": first.body_encoding,
            "immediate": first.immediate,
        }
    return data


def options_page(page: OptionsPage) -> dict[str, Any]:
    return {"options": page.options, "context": page.context}


def run(r: Run) -> dict[str, Any]:
    return {
        "id": r.id,
        "workflow_id": r.workflow_id,
        "deployment_id": r.deployment_id,
        "status": r.status,
        "event": r.event,
        "context": r.context,
        "steps": r.steps,
        "error": r.error,
        "flow_exit": r.flow_exit,
        "response": r.response,
        "sends": r.sends,
        "started_at_ms": r.started_ms,
        "duration_ms": r.duration_ms,
        "replay_of": r.replay_of,
    }


def flow_signal(run_id: str, status: str) -> dict[str, Any]:
    """A paused run's resume or cancel URL, answered: the run now ``resuming``/``cancelling``."""
    return {"data": {"run_id": run_id, "status": status}}


def subscription(s: Subscription) -> dict[str, Any]:
    return {
        "id": s.id,
        "emitter_id": s.emitter_id,
        "listener_id": s.listener_id,
        "event_name": s.event_name,
        "created_at": s.created_at,
    }


def auto_subscription(a: AutoSubscription) -> dict[str, Any]:
    return {
        "id": a.id,
        "listener_id": a.listener_id,
        "event_name": a.event_name,
        "created_at": a.created_at,
    }


def package_import(p: PackageReport) -> dict[str, Any]:
    data: dict[str, Any] = {"spec": p.spec, "name": p.name, "version": p.version}
    if p.error is not None:
        data["error"] = p.error
    data["counts"] = {
        "found": len(p.components),
        "loaded": p.count("loaded"),
        "skipped": p.count("skipped"),
        "failed": p.count("failed"),
    }
    data["components"] = [_imported(c) for c in p.components]
    data["not_components"] = [{"path": k, "kind": v} for k, v in p.modules.items()]
    if p.app is not None:
        data["app"] = {k: v for k, v in p.app.__dict__.items() if v is not None}
    return data


def _imported(c: ComponentReport) -> dict[str, Any]:
    item: dict[str, Any] = {"path": c.path, "status": c.status}
    for name in ("key", "version", "component_type", "id", "reason"):
        value = getattr(c, name)
        if value is not None:
            item[name] = value
    if c.warnings:
        item["warnings"] = c.warnings
    return item


def prop_set(p: PropSet) -> dict[str, Any]:
    """Pipedream Connect's reload-props answer."""
    return {
        "observations": [],
        "errors": p.errors,
        "dynamicProps": {"id": p.id, "configurableProps": p.props},
    }


def connected_account(a: ConnectedAccount) -> dict[str, Any]:
    """A connected account: the names of its credential fields, never their values."""
    return {
        "id": a.id,
        "app": a.app,
        "name": a.name,
        "credential_fields": a.credential_keys,
        "created_at": a.created_at,
        "updated_at": a.updated_at,
        "status": "reconnect_needed" if a.reconnect_reason else "ok",
        "reconnect_reason": a.reconnect_reason,
        "oauth_uid": a.provider_uid,
        "expires_at": None if a.expires_at_ms is None else a.expires_at_ms // 1000,
    }


def app(a: App) -> dict[str, Any]:
    """Pipedream's app (``custom_fields_json`` is a JSON string, as there), and Sluice's
    ``oauth`` settings without the client secret, and whether accounts can be connected."""
    out: dict[str, Any] = {
        "id": a.id,
        "name_slug": a.name_slug,
        "name": a.name,
        "auth_type": a.auth_type,
        "description": a.description,
        "img_src": a.img_src,
        "custom_fields_json": json.dumps(app_rules.custom_fields_json(a)),
        "categories": list(a.categories),
        "builtin": a.builtin,
        "connectable": a.connectable,
        "managed_auth": a.managed_auth,
        "imported_from": a.imported_from,
    }
    if a.oauth is not None:
        out["oauth"] = {
            **a.oauth.__dict__,
            "scopes": list(a.oauth.scopes),
            "client_secret_set": a.has_client_secret,
        }
    return out


def data_store(d: DataStore) -> dict[str, Any]:
    """A data store: counts and size leave out expired records."""
    return {
        "id": d.id,
        "name": d.name,
        "created_at": d.created_at,
        "record_count": d.record_count,
        "size_bytes": d.size,
    }


def data_store_record(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


# ---- events and log lines -------------------------------------------------------------------


def event_summary(e: Event, *, expand: bool) -> dict[str, Any]:
    """An item of ``…/event_summaries``: Pipedream's ``{id, indexed_at_ms, event, metadata}``;
    ``event`` whole when expanded, else cut past 1 KB (then ``truncated: true``)."""
    meta = {"emitter_id": e.emitter_id, "emit_id": e.emit_id, "name": e.channel}
    # delivery_ts: when a scheduled emit waiting in $in is due.
    meta.update({k: v for k, v in e.meta.items() if k in ("id", "summary", "ts", "delivery_ts")})
    event, cut = (e.payload, False) if expand else previews.preview(e.payload)
    item: dict[str, Any] = {"id": e.id, "indexed_at_ms": e.ts_ms, "event": event, "metadata": meta}
    if cut:
        item["truncated"] = True
    return item


def emitted(e: Event) -> dict[str, Any]:
    """The live form of a stored event (SSE ``data:``): Pipedream's ``V1EmittedEvent``
    ``{k, e, ts, id}``, plus the channel ``name`` and the ``$emit`` options ``metadata``."""
    return {
        "k": "emit",
        "e": e.payload,
        "ts": e.position[0],
        "id": e.id,
        "name": e.channel,
        "metadata": {k: v for k, v in e.meta.items() if k in ("id", "summary", "ts")},
    }


def log_line(line: LogLine) -> dict[str, Any]:
    """A log line of ``…/logs``."""
    return {
        "ts": line.ts_ms,
        "level": line.level,
        "msg": line.msg,
        "invocation_id": line.invocation_id,
    }


def log_stream_line(line: LogLine) -> dict[str, Any]:
    """The live form of a log line (SSE ``data:``); the SSE ``id:`` is its ``pk``."""
    return {"k": "log", **log_line(line), "id": line.pk}
