#!/usr/bin/env python3
"""The README's tour against a running compose stack (docs/deploy.md, "Checking a stack").

    docker compose up -d --build        # the stack of compose.yaml, started first
    python3 deploy/smoke.py             # each step printed; exits 1 at the first failure

Standard library only. It talks to both api processes (http://127.0.0.1:8000 and :8001) so
every cross-process path is used: an account made in the api-1 container, a source deployed on
one api process and run or read on the other, webhook requests stored by an api process and run
by a worker, a workflow's error listed and e-mailed by the global error workflow (a worker) into
a worker's outbox. With ``--cli`` (default: ``.venv/bin/sluice`` when present) the tour's
``sluice login``, ``sluice deploy`` and ``sluice events`` commands run too, with a throw-away
config file.

Options: ``--api1 URL``, ``--api2 URL``, ``--compose "docker compose"`` (default: ``docker
compose`` when that works, else ``docker-compose``), ``--cli PATH`` or ``--no-cli``,
``--timeout S`` (per wait, default 60).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

COUNTER = """export default {
  name: "Counter",
  version: "0.0.1",
  props: {
    db: "$.service.db",
    step: { type: "integer", min: 1, optional: true, default: 1 },
    greeting: { type: "string", secret: true },
  },
  async run(event) {
    const n = (this.db.get("n") || 0) + this.step;
    this.db.set("n", n);
    this.$emit({ n, event }, { id: n, summary: `count is ${n}` });
  },
};
"""

WEBHOOK = """export default {
  name: "Webhook",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit({ body: event.body, path: event.path }, { summary: `got ${event.method}` });
  },
};
"""

FAILING_STEP = (
    "export default defineComponent({ async run({ steps, $ }) {"
    " if (steps.trigger.event.body && steps.trigger.event.body.fail) {"
    " throw new TypeError('smoke test failure: ' + steps.trigger.event.body.fail) }"
    " return { ok: true } } })"
)

_step_no = 0


class Failed(Exception):
    pass


def step(text: str) -> None:
    global _step_no
    _step_no += 1
    print(f"\n[{_step_no:2}] {text}", flush=True)


def ok(text: str) -> None:
    print(f"     ok: {text}", flush=True)


def check(cond: object, what: str) -> None:
    if not cond:
        raise Failed(what)


def http(
    method: str, url: str, key: str | None = None, body: Any = None, *, raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, exc.read()
    except OSError as exc:
        raise Failed(f"{method} {url}: {exc}") from None
    try:
        return status, json.loads(payload) if payload else None
    except ValueError:
        return status, payload.decode(errors="replace")


def want(status_body: tuple[int, Any], status: int, what: str) -> Any:
    got, body = status_body
    check(got == status, f"{what}: HTTP {got}, expected {status}: {str(body)[:500]}")
    return body


def wait_for(what: str, probe, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Failed as exc:
            last = exc
        if last and not isinstance(last, Failed):
            return last
        time.sleep(0.5)
    raise Failed(f"{what}: not within {timeout:.0f} s (last: {str(last)[:300]})")


def compose_command(given: str | None) -> list[str]:
    if given:
        return shlex.split(given)
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
    return ["docker", "compose"] if probe.returncode == 0 else ["docker-compose"]


def run(cmd: list[str], *, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    print("     $ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin, cwd=ROOT)
    if proc.returncode != 0:
        raise Failed(f"exit {proc.returncode}: {proc.stderr.strip()[-800:] or proc.stdout[-800:]}")
    return proc.stdout


def tour(args: argparse.Namespace) -> None:
    a1, a2 = args.api1.rstrip("/"), args.api2.rstrip("/")
    compose = compose_command(args.compose)
    tag = uuid.uuid4().hex[:8]

    step(f"both api processes ready ({a1}, {a2})")
    for base in (a1, a2):
        ready = wait_for(
            f"{base}/readyz", lambda b=base: http("GET", f"{b}/readyz")[1], args.timeout
        )
        check(isinstance(ready, dict) and ready.get("status") == "ready", f"{base}/readyz: {ready}")
        ok(f"{base}/readyz -> {ready}")

    step("create an account in the api-1 container (sluice accounts create)")
    out = run(compose + ["exec", "-T", "api-1", "sluice", "accounts", "create",
                         "--name", f"ada{tag}", "--email", f"ada{tag}@example.com"])
    account = json.loads(out.strip().splitlines()[-1])
    key = account["api_key"]
    check(key.startswith("slk_"), f"no API key in {out!r}")
    ok(f"account {account['id']}, key slk_…")

    step("the key works on both api processes (GET /v1/users/me)")
    for base in (a1, a2):
        me = want(http("GET", f"{base}/v1/users/me", key), 200, "users/me")["data"]
        check(me["username"] == f"ada{tag}", f"users/me on {base}: {me}")
    ok(f"users/me -> {me['username']} <{me['email']}> on both")

    cli = None if args.no_cli else (args.cli or (str(ROOT / ".venv/bin/sluice")
                                                  if (ROOT / ".venv/bin/sluice").exists() else None))
    counter_id = None
    if cli:
        env = dict(os.environ)
        for name in ("SLUICE_API_KEY", "SLUICE_BASE_URL", "SLUICE_PROFILE"):
            env.pop(name, None)
        tmp = tempfile.mkdtemp(prefix="sluice-smoke-")
        env["SLUICE_CONFIG"] = str(Path(tmp) / "config")
        step(f"sluice login against api-1 ({cli})")
        out = run([cli, "login", "--base-url", a1, "--api-key", "-"], env=env, stdin=key + "\n")
        check("Logged in as" in out, f"login said {out!r}")
        ok(out.strip())
        step("sluice deploy counter.mjs --prop step=2 --prop greeting=…")
        path = Path(tmp) / "counter.mjs"
        path.write_text(COUNTER)
        out = run([cli, "deploy", str(path), "--prop", "step=2", "--prop", "greeting=hello"],
                  env=env)
        check("Deployed dc_" in out, f"deploy said {out!r}")
        counter_id = next(w for w in out.split() if w.startswith("dc_"))
        ok(f"deployed {counter_id}")
    else:
        step("deploy counter.mjs as a source (POST /v1/sources; no CLI)")
        src = want(http("POST", f"{a1}/v1/sources", key, {
            "component_code": COUNTER, "name": "counter",
            "configured_props": {"step": 2, "greeting": "hello"}}), 200, "deploy")["data"]
        counter_id = src["id"]
        ok(f"deployed {counter_id}")

    step("run it by hand on api-2 (POST /v1/sources/counter/run)")
    res = want(http("POST", f"{a2}/v1/sources/counter/run", key,
                    {"event": {"hello": "world"}}), 200, "run")["data"]
    check(res.get("ok") is True and len(res.get("emitted") or []) == 1, f"run answered {res}")
    ok(f"emitted {res['emitted']}")

    step("read what it emitted on api-1 (GET /v1/sources/counter/event_summaries)")
    events = want(http("GET", f"{a1}/v1/sources/{counter_id}/event_summaries?expand=event", key),
                  200, "events")["data"]
    check(len(events) == 1 and events[0]["event"] == {"n": 2, "event": {"hello": "world"}},
          f"events: {events}")
    ok(f"event {events[0]['event']}")
    if cli:
        out = run([cli, "events", "counter"], env=env)
        check('"n": 2' in out, f"sluice events printed {out!r}")
        ok("sluice events counter -> " + " ".join(out.split()))
        out = run([cli, "list", "--json"], env=env)
        check(counter_id in out, f"sluice list: {out!r}")
        ok("sluice list --json lists it")

    step("a source with an HTTP endpoint; webhooks to api-2, run by a worker")
    hook = want(http("POST", f"{a1}/v1/sources", key, {
        "component_code": WEBHOOK, "name": f"webhook-{tag}"}), 200, "deploy webhook")["data"]
    url = hook["endpoint_url"]
    ok(f"{hook['id']} endpoint_url {url}")
    endpoint_id = url.rstrip("/").rsplit("/", 1)[-1]
    for i in range(3):
        got = want(http("POST", f"{a2}/e/{endpoint_id}/orders?i={i}", body={"order": i}), 200,
                   f"webhook {i}")
        ok(f"POST /e/{endpoint_id}/orders -> 200 {got}")

    def three() -> Any:
        data = want(http("GET", f"{a1}/v1/sources/{hook['id']}/event_summaries?expand=event",
                         key), 200, "webhook events")["data"]
        return data if len(data) >= 3 else None

    data = wait_for("the three webhook events", three, args.timeout)
    check(sorted(e["event"]["body"]["order"] for e in data) == [0, 1, 2], f"events: {data}")
    ok(f"3 events stored by the workers: {[e['event'] for e in data]}")

    step("an HTTP workflow whose step throws: the run, $errors, the error e-mail")
    wf = want(http("POST", f"{a2}/v1/workflows", key, {
        "name": f"orders-{tag}", "trigger": {"type": "http"},
        "steps": [{"name": "check", "code": FAILING_STEP}]}), 200, "workflow")["data"]
    ok(f"workflow {wf['id']} endpoint_url {wf['endpoint_url']}")
    wf_endpoint = wf["endpoint_url"].rstrip("/").rsplit("/", 1)[-1]
    want(http("POST", f"{a1}/e/{wf_endpoint}", body={"fine": 1}), 200, "workflow webhook ok")
    want(http("POST", f"{a1}/e/{wf_endpoint}", body={"fail": "boom"}), 200, "workflow webhook")

    def two_runs() -> Any:
        runs = want(http("GET", f"{a2}/v1/workflows/{wf['id']}/runs", key), 200, "runs")["data"]
        return runs if len(runs) >= 2 else None

    runs = wait_for("the workflow's two runs", two_runs, args.timeout)
    statuses = sorted(r["status"] for r in runs)
    check(statuses == ["error", "success"], f"run statuses {statuses}")
    bad = next(r for r in runs if r["status"] == "error")
    ok(f"runs: {statuses}; error {bad['error']['code']}: {bad['error']['msg']}")
    errs = want(http("GET", f"{a1}/v1/workflows/{wf['id']}/$errors/event_summaries?expand=event",
                     key), 200, "$errors")["data"]
    check(len(errs) == 1 and errs[0]["event"]["error"]["code"] == "TypeError", f"$errors {errs}")
    ok(f"$errors lists it: {errs[0]['event']['error']['msg']}")

    ew = want(http("GET", f"{a1}/v1/users/me/error_workflow", key), 200, "error wf")["data"]

    def error_run() -> Any:
        runs = want(http("GET", f"{a1}/v1/workflows/{ew['workflow_id']}/runs", key), 200,
                    "error workflow runs")["data"]
        return runs or None

    eruns = wait_for("the global error workflow's run", error_run, args.timeout)
    check(eruns[0]["status"] == "success", f"error workflow run: {eruns[0]}")
    sends = [s for r in eruns for s in r.get("sends", [])]
    ok(f"global error workflow ran: status {eruns[0]['status']}, "
       f"sends {[(s['type'], s['status']) for s in sends]}")

    def outbox() -> Any:
        for svc in ("worker-1", "worker-2", "api-1", "api-2"):
            proc = subprocess.run(
                compose + ["exec", "-T", svc, "sh", "-c",
                           "grep -l -r -F " + shlex.quote(wf["id"]) + " /data/outbox 2>/dev/null"
                           " | head -1 | xargs -r cat"],
                capture_output=True, text=True, cwd=ROOT)
            if proc.stdout.strip():
                return svc, proc.stdout
        return None

    svc, raw_mail = wait_for("the error e-mail in a worker's outbox", outbox, args.timeout)
    mail = email.message_from_string(raw_mail, policy=email.policy.default)
    text = "\n".join(part.get_content() for part in mail.walk()
                     if part.get_content_type() in ("text/plain", "text/html"))
    links = sorted({w.strip("<>()\"'") for w in text.split() if "/$errors/" in w})
    ok(f"e-mail in {svc}:/data/outbox: Subject: {mail['subject']}")
    ok(f"its link(s): {links}")
    check(any(ln.startswith(args.public_url.rstrip("/") + "/") for ln in links),
          f"no link under the public URL {args.public_url} in the e-mail: {links}")

    step("metrics count what happened (GET /metrics on api-1; a worker's :9100)")
    status, text = http("GET", f"{a1}/metrics")
    check(status == 200 and "sluice_http_requests_total" in str(text), f"/metrics: {status}")
    ok("api-1 /metrics: " + next(ln for ln in str(text).splitlines()
                                  if ln.startswith("sluice_http_requests_total")))
    out = run(compose + ["exec", "-T", "worker-1", "python", "-c",
                         "import urllib.request as u;"
                         "print(u.urlopen('http://127.0.0.1:9100/metrics').read().decode())"])
    runs_lines = [ln for ln in out.splitlines() if ln.startswith("sluice_runs_total")]
    ok(f"worker-1 :9100/metrics: {runs_lines or 'no runs yet on this worker'}")

    print(f"\nSMOKE PASSED: {_step_no} steps against {a1} and {a2}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api1", default="http://127.0.0.1:8000")
    parser.add_argument("--api2", default="http://127.0.0.1:8001")
    parser.add_argument("--public-url", default=os.environ.get("SLUICE_PUBLIC_URL")
                        or "http://127.0.0.1:8000",
                        help="the stack's SLUICE_PUBLIC_URL: links in e-mails must start with it")
    parser.add_argument("--compose", default=None)
    parser.add_argument("--cli", default=None)
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    try:
        tour(args)
    except (Failed, KeyError, ValueError, StopIteration) as exc:
        print(f"\nSMOKE FAILED at step {_step_no}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
