"""The global error workflow every account starts with, as plain values (no I/O).

Shared by the engine (new accounts) and migration 0003 (accounts created before workflows), so
a migration never imports the engine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sluice import ids

NAME = "Global error workflow"

#: The default global error workflow's step: an e-mail per error, at most one per workflow and
#: error code per throttle window (``dedupe_key``; see engine/runs/executor.py, sends).
STEP_CODE = """\
// The default global error workflow of a Sluice account: every error a workflow of the
// account throws arrives here as steps.trigger.event = {error, original_event,
// original_context}. Replace this step (or the whole workflow) to send errors elsewhere.
export default defineComponent({
  props: {
    base_url: { type: "string", label: "Sluice URL", description: "For links to the errors" },
  },
  async run({ steps, $ }) {
    const { error = {}, original_context: ctx = {} } = steps.trigger.event ?? {};
    const name = ctx.workflow_name;
    const workflow = name ? `${name} (${ctx.workflow_id})` : ctx.workflow_id;
    // An error's code is its name (TypeError); its message may start with it already.
    const message = error.msg ?? "";
    const named = !error.code || message.startsWith(`${error.code}:`);
    const what = named ? message : `${error.code}: ${message}`;
    const text = [
      `Workflow: ${workflow}`,
      `Step: ${error.step_name ?? "?"} (${error.cellId})`,
      `What: ${what}`,
      `When: ${error.ts}`,
      `The run: ${this.base_url}/runs/${ctx.id}`,
      `The workflow's errors: ${this.base_url}/workflows/${ctx.workflow_id}`,
      "",
      error.stack ?? "",
    ].join("\\n");
    $.send.email({
      subject: `[Sluice] ${error.code} in ${ctx.workflow_name || ctx.workflow_id}`,
      text,
      dedupe_key: `${ctx.workflow_id}:${error.code}`,
    });
    return { workflow_id: ctx.workflow_id, code: error.code };
  },
});
"""

#: The default step's code as earlier versions of Sluice wrote it (their e-mails linked to
#: the API's JSON), by hash: migration 0017 replaces it with ``STEP_CODE``.
PREVIOUS_CODE_HASHES = frozenset(
    {"2a6ab6553cf339f75fcd29ce0fd45db443040a72d7ce2aca0f3fac5a5e7184fd"}
)


def code_hash(entry_path: str, code: str) -> str:
    """As ``Components.prepare`` names a tree with no other files."""
    files = {entry_path: code}
    return hashlib.sha256(
        json.dumps({"entry": entry_path, "files": files}, sort_keys=True).encode()
    ).hexdigest()


#: The unchanged default step's code, by hash: its ``base_url`` follows Sluice's public URL.
DEFAULT_CODE_HASH = code_hash("error-email.mjs", STEP_CODE)


def run_props(step: dict[str, Any], values: dict[str, Any], public_url: str) -> dict[str, Any]:
    """The default step's props as it runs: ``base_url`` is Sluice's public URL *now*, not the
    one of the day the account was made (``--public-url`` may have changed since). A step whose
    code was edited keeps the values it was given.

    >>> step = {"code_hash": DEFAULT_CODE_HASH}
    >>> run_props(step, {"base_url": "http://127.0.0.1:8000"}, "https://s.example")
    {'base_url': 'https://s.example'}
    >>> run_props({"code_hash": "x"}, {"base_url": "http://a"}, "https://s.example")
    {'base_url': 'http://a'}
    """
    if step.get("code_hash") not in (DEFAULT_CODE_HASH, *PREVIOUS_CODE_HASHES):
        return values
    return {**values, "base_url": public_url.rstrip("/")}


def upgraded_step(step: dict[str, Any]) -> dict[str, Any] | None:
    """The default step of an earlier Sluice with this version's code; None for any other
    step (an edited one is the account's own and stays as it is)."""
    if step.get("code_hash") not in PREVIOUS_CODE_HASHES:
        return None
    entry = str(step.get("entry_path") or "error-email.mjs")
    return {
        **step,
        "code": STEP_CODE,
        "entry_path": entry,
        "code_hash": code_hash(entry, STEP_CODE),
    }


def fields(owner_id: str, *, base_url: str, now_s: int) -> dict[str, Any]:
    """The workflow's stored fields (``domain.workflows.Workflow``'s)."""
    entry = "error-email.mjs"
    step = {
        "id": ids.new_id("c"),
        "name": "email",
        "type": "code",
        "code": STEP_CODE,
        "entry_path": entry,
        "code_hash": code_hash(entry, STEP_CODE),
        "props": {"base_url": base_url},
    }
    return {
        "id": ids.new_id("p"),
        "owner_id": owner_id,
        "name": NAME,
        "active": True,
        "trigger": {"type": "manual"},
        "steps": [step],
        "deployment_id": ids.new_id("d"),
        "endpoint_id": None,
        "created_at": now_s,
        "updated_at": now_s,
    }
