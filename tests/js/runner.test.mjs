// End-to-end tests of runner.mjs: spawn it as Python does and speak the protocol over stdio.
// Run with `node --test tests/js/`.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const RUNNER = fileURLToPath(new URL("../../src/sluice/runtime/js/runner.mjs", import.meta.url));
const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** A runner child process with request/response matching by id. */
class Runner {
  constructor(args = []) {
    // A host variable that must never reach user code.
    const env = { ...process.env, SLUICE_HOST_SECRET: "do-not-leak" };
    this.proc = spawn(process.execPath, [RUNNER, ...args], { stdio: ["pipe", "pipe", "pipe"], env });
    this.pending = new Map();
    this.responds = new Map();
    this.badLines = [];
    this.unexpected = [];
    this.nextId = 1;
    this.exited = new Promise((resolve) => this.proc.on("exit", (code) => resolve(code)));
    let partial = "";
    this.proc.stdout.setEncoding("utf8");
    this.chunks = 0; // stdout writes seen: lines of one write share a number (`chunk`)
    this.proc.stdout.on("data", (chunk) => {
      this.chunks += 1;
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      for (const line of lines) this.onLine(line);
    });
    this.proc.stderr.resume();
  }

  onLine(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      this.badLines.push(line);
      return;
    }
    if (msg.type === "respond") {
      this.responds.set(msg.id, [...(this.responds.get(msg.id) ?? []), msg.response]);
      return;
    }
    if (msg.type === "store" && this.onStore) {
      // Python's side of a data_store call: answered as the real one does.
      const answer = { type: "store_result", id: msg.id, req: msg.req, ...this.onStore(msg.request) };
      this.proc.stdin.write(`${JSON.stringify(answer)}\n`);
      return;
    }
    const waiter = msg.type === "result" ? this.pending.get(msg.id) : undefined;
    if (!waiter) {
      this.unexpected.push(msg);
      return;
    }
    this.pending.delete(msg.id);
    waiter({ ...msg, chunk: this.chunks, responds: this.responds.get(msg.id) ?? [] });
  }

  /** Send a request; resolves with its result (plus `responds` and `elapsed` ms). */
  request(body) {
    const id = this.nextId++;
    const started = performance.now();
    return new Promise((resolve) => {
      this.pending.set(id, (result) => resolve({ ...result, elapsed: performance.now() - started }));
      this.proc.stdin.write(`${JSON.stringify({ ...body, id })}\n`);
    });
  }

  invoke(workerKey, entry, call, extra = {}) {
    return this.request({ type: "invoke", worker_key: workerKey, entry, call, ...extra });
  }

  async close() {
    this.proc.stdin.end();
    return await this.exited;
  }

  assertClean() {
    assert.deepEqual(this.badLines, [], "every stdout line is JSON");
    assert.deepEqual(this.unexpected, [], "no result without a request");
  }
}

const ok = (r) => {
  assert.equal(r.ok, true, `expected success, got ${JSON.stringify(r.error)}`);
  return r.value;
};

let runner;
let inspectKey = 0;
before(() => { runner = new Runner(); });
after(async () => {
  const code = await runner.close();
  runner.assertClean();
  assert.equal(code, 0);
});

const inspect = (entry) => runner.invoke(`inspect-${++inspectKey}`, entry, { kind: "inspect" });

describe("loading", () => {
  test("ESM source with an imported app file", async () => {
    const r = await runner.invoke("load-esm", fixture("slackish/sources/new-message/new-message.mjs"), {
      kind: "run", props: { slack: { $auth: { oauth_access_token: "T" } }, conversation: "C1" }, event: {},
    });
    assert.deepEqual(ok(r), { channel: "C1", text: "hi", auth: "T" });
  });

  test("CommonJS .js requiring a sibling .js app file", async () => {
    const entry = fixture("cjs/legacy-source.js");
    const r = await runner.invoke("load-cjs", entry, {
      kind: "run", props: { demo: { $auth: { prefix: "Hi" } } }, event: {},
    });
    assert.equal(ok(r), "function");
    assert.deepEqual(r.emits, [{ event: { said: "Hi hello" }, meta: {} }]);
    const described = ok(await inspect(entry));
    assert.equal(described.format, "cjs");
    assert.deepEqual(described.props[1], {
      name: "greeting",
      definition: { type: "string", label: "Greeting", default: "hello", propDefinition: { app: "demo", name: "greeting" } },
    });
  });

  test("CommonJS .cjs action", async () => {
    const entry = fixture("cjs/plain.cjs");
    const r = await runner.invoke("load-cjs2", entry, { kind: "action", props: {}, steps: {} });
    assert.equal(ok(r), true);
    assert.deepEqual(r.exports, { $summary: "cjs ok" });
    assert.equal(ok(await inspect(entry)).format, "cjs");
  });

  test("workflow code step using the defineComponent global", async () => {
    const r = await runner.invoke("load-step", fixture("code-step.mjs"), {
      kind: "action", props: {}, steps: { trigger: { event: { n: 21 } } },
    });
    assert.deepEqual(ok(r), { trigger: 42 });
  });

  test("a syntax error is LOAD_FAILED with the import's message, every time", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runner.invoke("load-broken", fixture("syntax-error.mjs"), { kind: "run", props: {}, event: {} });
      assert.equal(r.ok, false);
      assert.equal(r.error.code, "LOAD_FAILED");
      assert.equal(r.error.name, "SyntaxError");
      assert.match(r.error.message, /Unexpected token/);
    }
    const missing = await inspect(fixture("does-not-exist.mjs"));
    assert.equal(missing.error.code, "LOAD_FAILED");
    assert.match(missing.error.message, /Cannot find module/);
  });

  test("NOT_A_COMPONENT and NO_RUN", async () => {
    const notComponent = await runner.invoke("load-42", fixture("not-a-component.mjs"), { kind: "run", props: {}, event: {} });
    assert.equal(notComponent.error.code, "NOT_A_COMPONENT");
    const noRun = await runner.invoke("load-norun", fixture("no-run.mjs"), { kind: "action", props: {}, steps: {} });
    assert.equal(noRun.error.code, "NO_RUN");
    const described = ok(await inspect(fixture("no-run.mjs")));
    assert.equal(described.has_run, false);
    assert.equal(described.run_type, "string");
  });
});

describe("inspect", () => {
  test("shared: a package's components in one realm; a failing one fails alone; evict ends it", async () => {
    const shared = (entry) => runner.invoke("inspect:realm-test", entry, { kind: "inspect", shared: true });
    const a = ok(await shared(fixture("realm/a.mjs")));
    const b = ok(await shared(fixture("realm/b.mjs")));
    // One realm: b's module saw a's, and their common module was evaluated once.
    assert.deepEqual([a.key, a.description, b.key, b.description], [
      "realm-a", "seen 1, common loaded 1", "realm-b", "seen 2, common loaded 1",
    ]);
    assert.equal((await shared(fixture("not-a-component.mjs"))).error.code, "NOT_A_COMPONENT");
    assert.equal((await shared(fixture("does-not-exist.mjs"))).error.code, "LOAD_FAILED");
    const cjs = ok(await shared(fixture("cjs/legacy-source.js")));
    assert.equal(cjs.format, "cjs");
    assert.equal(ok(await shared(fixture("no-run.mjs"))).format, "esm");
    assert.ok(ok(await runner.request({ type: "stats" })).keys.includes("inspect:realm-test"));
    assert.deepEqual(ok(await runner.request({ type: "evict", worker_key: "inspect:realm-test" })), { evicted: true });
    // Alone (the default), each inspection has a realm of its own.
    const alone = [ok(await inspect(fixture("realm/a.mjs"))), ok(await inspect(fixture("realm/b.mjs")))];
    assert.deepEqual(alone.map((v) => v.description), ["seen 1, common loaded 1", "seen 1, common loaded 1"]);
  });

  test("describes a registry-style source, props in order", async () => {
    const value = ok(await inspect(fixture("slackish/sources/new-message/new-message.mjs")));
    assert.deepEqual(value.props.map((p) => p.name), [
      "slack", "db", "http", "timer", "conversation", "kinds", "icon", "bad", "notAnApp", "mode", "local",
    ]);
    assert.deepEqual(value, {
      name: "New Message", key: "slack-new-message", type: "source", version: "0.0.3",
      description: "Emit new messages", dedupe: "unique", format: "esm", has_run: true, run_type: "function",
      hooks: ["deploy", "activate"], hook_types: { deploy: "function", activate: "string" },
      methods: ["prefix"], has_additional_props: false, has_sample_emit: true,
      props: [
        { name: "slack", definition: { type: "app", app: "slack", propDefinitions: ["conversation", "text", "icon"],
          methods: ["token", "teamName", "sendMessage"] } },
        { name: "db", definition: { type: "$.service.db" }, shorthand: true },
        { name: "http", definition: { type: "$.interface.http", customResponse: true } },
        { name: "timer", definition: { type: "$.interface.timer", default: { intervalSeconds: 900 } } },
        { name: "conversation", definition: { type: "string", label: "Watched channel", description: "Select a channel",
          remoteOptions: true, optional: true, propDefinition: { app: "slack", name: "conversation" } } },
        { name: "kinds", definition: { type: "string[]", default: ["public", "private"] } },
        { name: "icon", definition: { type: "string", label: "Icon", options: ["ghost", "fire"], optional: true,
          propDefinition: { app: "slack", name: "icon" } } },
        { name: "bad", definition: { type: "string" }, error: 'propDefinition "nope" not found in app "slack"' },
        { name: "notAnApp", definition: {}, error: "propDefinition does not name an app object with propDefinitions" },
        { name: "mode", definition: { type: "string", label: "Mode", options: [{ label: "Fast", value: "fast" }, "slow"],
          functionFields: ["validate"] } },
        { name: "local", definition: { type: "string", remoteOptions: true } },
      ],
    });
  });

  test("reports fields as they are and omits missing ones", async () => {
    const value = ok(await inspect(fixture("code-step.mjs")));
    assert.deepEqual(value, {
      format: "esm", has_run: true, run_type: "function", hooks: [], hook_types: {}, methods: [],
      has_additional_props: false, has_sample_emit: false, props: [],
    });
    const action = ok(await inspect(fixture("action.mjs")));
    assert.equal(action.type, "action");
    assert.equal(action.has_additional_props, true);
  });
});

describe("run", () => {
  const entry = fixture("source.mjs");
  const run = (props, extra = {}, key = "src") => runner.invoke(key, entry, { kind: "run", props, event: {}, ...extra });

  test("props: defaults, coercion, interfaces, shorthand db", async () => {
    const props = {
      mode: "props", ratio: "6", enabled: "true", flags: ["true", "false"], ids: ["1", "2"], channel: "C5",
      http: { endpoint: "https://e.example/abc" }, timer: { intervalSeconds: 30, cron: null, timezone: "UTC" },
    };
    const event = { timestamp: 1700000000, interval_seconds: 30 };
    const first = await run(props, { event }, "src-props");
    assert.ok(first.logs.some((l) => l.msg === "module top-level log"), "import-time logs go to the first call");
    assert.deepEqual(ok(first), {
      event, count: 5, ratio: 6, enabled: true, flags: [true, false], ids: [1, 2], label: "dflt",
      tags: ["a", "mutated"], hasUnset: true, unset: true, channel: "C5", hook: null,
      timer: { type: "$.interface.timer", intervalSeconds: 30, cron: null, timezone: "UTC" },
      endpoint: "https://e.example/abc", sameDb: true,
    });
    const second = await run(props, { event }, "src-props");
    assert.deepEqual(ok(second).tags, ["a", "mutated"], "defaults are copied per invocation");
    assert.ok(!second.logs.some((l) => l.msg === "module top-level log"), "the module is imported once");
  });

  test("$emit with meta from a method passed unbound", async () => {
    const r = await run({ mode: "emit" });
    assert.equal(ok(r), true);
    assert.deepEqual(r.emits, [
      { event: { n: 1 }, meta: { id: "id-1", summary: "event 1", ts: 1700000000001 } },
      { event: { n: 2 }, meta: { id: "id-2", summary: "event 2", ts: 1700000000002 } },
      { event: "bare", meta: {} },
    ]);
  });

  test("db: synchronous, deep copies, writes and deletes", async () => {
    const r = await run({ mode: "db" }, { db: { obj: { a: 1 }, counter: 41, old: "x" } });
    assert.deepEqual(ok(r), { again: { a: 1 }, missing: true, setReturn: true, list: { list: [1] } });
    assert.deepEqual(r.db_writes, { counter: 42, list: { list: [1] }, cleared: null });
    assert.deepEqual([...r.db_deletes].sort(), ["old", "temp"]);
  });

  test("db: non-serializable values throw a TypeError naming the key", async () => {
    const errors = ok(await run({ mode: "db-bad" }));
    assert.equal(errors.length, 3);
    for (const [i, key] of ["fn", "big", "sym"].entries()) {
      assert.match(errors[i], new RegExp(`^TypeError: db.set\\("${key}"\\)`));
    }
    const r = await run({ mode: "db-cycle" });
    assert.equal(r.ok, false);
    assert.equal(r.error.code, "TypeError");
    assert.match(r.error.message, /db\.set\("cycle"\).*circular/i);
    assert.deepEqual(r.db_writes, { ok: 1 }, "writes before the failure are reported");
  });

  test("http respond: string status, once only", async () => {
    const r = await run({ mode: "respond-string" });
    assert.equal(ok(r), true);
    assert.deepEqual(r.responds, [
      { status: 200, headers: { "x-a": "1" }, immediate: false, body: "plain", body_encoding: "utf8" },
    ]);
    assert.ok(r.logs.some((l) => l.level === "warn" && /already called/.test(l.msg)));
  });

  test("http respond: Buffer, object and empty bodies", async () => {
    const buffer = await run({ mode: "respond-buffer" });
    assert.deepEqual(buffer.responds, [{
      status: 202, headers: {}, immediate: false,
      body: Buffer.from("bin\u0000ary").toString("base64"), body_encoding: "base64",
    }]);
    const object = await run({ mode: "respond-object" });
    assert.deepEqual(object.responds, [{
      status: 201, headers: {}, immediate: false, body: { ok: true, n: "1" }, body_encoding: "json",
    }]);
    const empty = await run({ mode: "respond-empty" });
    assert.deepEqual(empty.responds, [{ status: 204, headers: {}, immediate: false }]);
  });

  test("hooks: deploy emits and writes db, activate reads it, a missing hook is a no-op", async () => {
    const hook = (name, extra = {}) => runner.invoke("src", entry, { kind: "hook", hook: name, props: {}, ...extra });
    const deploy = await hook("deploy");
    assert.equal(ok(deploy), null);
    assert.deepEqual(deploy.emits.map((e) => e.event), [{ n: 3 }, { n: 4 }]);
    assert.deepEqual(deploy.db_writes, { hookId: "h-1" });
    const activate = await hook("activate", { props: { http: { endpoint: "https://e.example/x" } }, db: { hookId: "h-1" } });
    assert.deepEqual(ok(activate), { endpoint: "https://e.example/x", hookId: "h-1" });
    assert.equal(ok(await hook("deactivate")), null);
  });

  test("app props: frozen $auth, bound methods calling each other", async () => {
    const value = ok(await run({ mode: "auth", slack: { $auth: { oauth_access_token: "xoxb-1" } } }));
    assert.deepEqual(value, {
      frozen: true, token: "xoxb-1", team: "team-of-xoxb-1",
      detached: { channel: "C9", text: "yo", auth: "xoxb-1" }, errors: ["TypeError"], slug: "slack",
    });
  });

  test("env is exactly what the invocation passed", async () => {
    const call = { kind: "run", props: { mode: "env" }, event: {} };
    const r = await runner.invoke("src-env", entry, call, { env: { PD_COMPONENT: "dc_abc" } });
    assert.deepEqual(ok(r), { env: { PD_COMPONENT: "dc_abc" }, home: true });
    const empty = await run({ mode: "env" }, {}, "src-env-empty");
    assert.deepEqual(ok(empty), { env: {}, home: true });
  });

  test("return values are made JSON-safe", async () => {
    const value = ok(await run({ mode: "weird-return" }));
    assert.deepEqual(value, { n: "1", buf: { type: "Buffer", data: [104, 105] }, self: "[Circular]" });
  });
});

describe("actions", () => {
  const entry = fixture("action.mjs");
  const act = (mode, extra = {}) => runner.invoke("act", entry, { kind: "action", props: { mode }, steps: {}, ...extra });

  test("$.export, $summary, return value, legacy this.x exports, context", async () => {
    const r = await act("exports", { steps: { trigger: { event: { n: 21 } } }, context: { id: "ctx1" } });
    assert.deepEqual(ok(r), { doubled: 42, context: { id: "ctx1" } });
    assert.deepEqual(r.exports, {
      $summary: "Doubled 21", channel: { id: "C1", at: "1970-01-01T00:00:00.000Z" }, legacy: "old style",
    });
    assert.equal(r.flow_exit, null);
  });

  test("$.respond streams the response before the result", async () => {
    const r = await act("respond");
    assert.equal(ok(r), "after respond");
    assert.deepEqual(r.responds, [{
      status: 200, headers: { "content-type": "text/plain" }, immediate: true, body: "hi", body_encoding: "utf8",
    }]);
  });

  test("$.flow.exit returned, bare, $end and platform's __pd_end", async () => {
    const returned = await act("exit-return");
    assert.equal(ok(returned), null);
    assert.deepEqual(returned.flow_exit, { reason: "returned reason" });
    assert.deepEqual(returned.exports, { before: 1 });
    const bare = await act("exit-bare");
    assert.equal(ok(bare), null);
    assert.deepEqual(bare.flow_exit, { reason: "bare reason" });
    assert.deepEqual(bare.exports, {}, "code after a bare exit does not run");
    assert.deepEqual((await act("end-global")).flow_exit, { reason: "legacy end" });
    const needle = await act("end-needle");
    assert.equal(needle.ok, true);
    assert.deepEqual(needle.flow_exit, { reason: "platform end" });
  });

  test("$.send.* records sends and validates config", async () => {
    const r = await act("sends");
    assert.equal(ok(r), "$.send.http: config must be an object");
    assert.deepEqual(r.sends.map((s) => s.type), ["http", "email", "s3", "emit", "sse"]);
    assert.deepEqual(r.sends[0].config, { method: "POST", url: "https://example.com", data: { a: 1 } });
  });

  test("unsupported $.flow members fail clearly", async () => {
    const value = ok(await act("unsupported"));
    assert.equal(value.length, 4);
    for (const line of value.slice(0, 3)) assert.match(line, /^NotSupportedError: \$\.flow\.\w+\(\) is not supported/);
    assert.equal(value[3], "");
  });

  test("additionalProps are applied with defaults and configured values", async () => {
    const r = await runner.invoke("act", entry, { kind: "action", props: { mode: "dynamic", dynamic: "true", more: "y" }, steps: {} });
    assert.deepEqual(ok(r), { extra: 7, more: "y" });
  });

  test("errors: thrown string, ConfigurationError by name, string code", async () => {
    const str = await act("throw-string");
    assert.equal(str.ok, false);
    assert.deepEqual({ ...str.error, stack: undefined }, { name: "Error", code: "Error", message: "plain string", stack: undefined });
    assert.deepEqual(str.exports, { partial: true });
    const config = await act("throw-config");
    assert.equal(config.error.name, "ConfigurationError");
    assert.equal(config.error.code, "ConfigurationError");
    assert.equal(config.error.message, "Bad input");
    assert.match(config.error.stack, /action\.mjs/);
    const code = await act("throw-code");
    assert.deepEqual([code.error.name, code.error.code], ["TypeError", "ECONNRESET"]);
  });

  test("errors escaping to timers or un-awaited promises fail that invocation only", async () => {
    const r = await act("timer-throw");
    assert.deepEqual([r.ok, r.error.name, r.error.message], [false, "RangeError", "from a timer"]);
    const rejected = await act("unawaited-reject");
    assert.deepEqual([rejected.ok, rejected.error.message], [false, "nobody awaits me"]);
    assert.equal(ok(await act("respond")), "after respond");
  });
});

describe("workflows", () => {
  const entry = fileURLToPath(new URL("../../src/sluice/runtime/js/workflow-entry.mjs", import.meta.url));
  const step = (id, name, file, props = {}, extra = {}) => ({ id, name, entry: fixture(`wf/${file}`), props, ...extra });

  test("steps run in order; return values, exports and {{refs}} reach later steps", async () => {
    const r = await runner.invoke("wf-1", entry, {
      kind: "workflow",
      event: { n: 21 },
      context: { id: "run1", workflow_id: "p_x" },
      steps: [
        step("c_1", "double", "double.mjs", { factor: "2" }),
        step("c_2", "use", "use.mjs", {
          input: "{{steps.double.$return_value.value}}",
          label: "n={{event.n}} v={{ steps.double.$return_value.value + 1 }}",
          whole: { nested: ["{{steps.double.$return_value}}"] },
        }),
        step("c_3", "caught", "caught.mjs"),
      ],
    });
    assert.deepEqual(ok(r), { status: "success" });
    assert.equal(r.steps.length, 3);
    const [a, b, c] = r.steps;
    assert.deepEqual([a.id, a.status, a.error], ["c_1", "success", null]);
    assert.deepEqual(a.return_value, { value: 42, at: "1970-01-01T00:00:00.000Z" });
    assert.deepEqual(a.exports, { note: "x2" });
    assert.deepEqual(b.return_value, {
      input: 42, label: "n=21 v=43", note: "x2",
      whole: { nested: [{ value: 42, at: "1970-01-01T00:00:00.000Z" }] },
    });
    assert.equal(c.return_value, "caught SyntaxError");
    assert.deepEqual(r.logs.map((l) => [l.step, l.msg]), [["c_1", "doubling 21"]]);
    assert.equal(r.sends.length, 1);
    assert.equal(r.sends[0].step, "c_2");
    assert.deepEqual(r.exports, {});
  });

  test("a throwing step ends the run with its error; later steps do not run", async () => {
    const r = await runner.invoke("wf-2", entry, {
      kind: "workflow", event: {}, context: {},
      steps: [step("c_1", "throws", "throws.mjs"), step("c_2", "double", "double.mjs", { factor: 1 })],
    });
    assert.deepEqual(ok(r), { status: "error" });
    assert.equal(r.steps.length, 1);
    const [s] = r.steps;
    assert.equal(s.status, "error");
    assert.equal(s.error.code, "TypeError");
    assert.match(s.error.message, /here/);
    assert.match(s.error.stack, /throws\.mjs/);
    assert.deepEqual(r.logs.map((l) => [l.step, l.level]), [["c_1", "error"]]);
  });

  test("$.flow.exit ends the run successfully; a bad {{ref}} is a ConfigurationError", async () => {
    const r = await runner.invoke("wf-3", entry, {
      kind: "workflow", event: {}, context: {},
      steps: [step("c_1", "exits", "exits.mjs"), step("c_2", "double", "double.mjs", { factor: 1 })],
    });
    assert.deepEqual(ok(r), { status: "exited" });
    assert.deepEqual(r.flow_exit, { reason: "nothing to do" });
    assert.deepEqual(r.steps.map((s) => s.status), ["exited"]);
    const bad = await runner.invoke("wf-3", entry, {
      kind: "workflow", event: {}, context: {},
      steps: [step("c_9", "double", "double.mjs", { factor: "{{steps.missing.$return_value.x}}" })],
    });
    assert.equal(bad.steps[0].error.name, "ConfigurationError");
    assert.match(bad.steps[0].error.message, /step "double": \{\{steps\.missing/);
  });

  test("a step's time-out names the step and keeps the finished steps", async () => {
    const r = await runner.invoke("wf-4", entry, {
      kind: "workflow", event: { n: 1 }, context: {},
      steps: [
        step("c_1", "double", "double.mjs", { factor: 3 }),
        step("c_2", "loop", "loop.mjs", {}, { timeout_ms: 300 }),
      ],
    }, { limits: { timeout_ms: 20_000 } });
    assert.equal(r.ok, false);
    assert.equal(r.error.code, "TIMEOUT");
    assert.equal(r.error.step, "c_2");
    assert.match(r.error.message, /step c_2 did not finish within 300 ms/);
    assert.deepEqual(r.steps.map((s) => s.id), ["c_1"]);
  });

  test("$.flow.delay/suspend/rerun end the call at their step with the run's URLs", async () => {
    const flow = { resume_url: "https://s.example/flow/r1/resume/a", cancel_url: "https://s.example/flow/r1/cancel/b" };
    const call = (how, extra = {}) => runner.invoke("wf-6", entry, {
      kind: "workflow", event: {}, context: {}, flow,
      steps: [step("c_1", "p", "pauses.mjs", { how }), step("c_2", "never", "throws.mjs")],
      ...extra,
    });
    const delayed = await call("delay");
    assert.deepEqual(ok(delayed), { status: "paused" });
    assert.equal(delayed.steps.length, 1);
    const [d] = delayed.steps;
    assert.deepEqual([d.status, d.pause, d.return_value], ["delayed", { kind: "delay", ms: 1500 }, flow]);
    assert.deepEqual(d.exports.run, { runs: 1 });
    const suspended = (await call("suspend")).steps[0];
    assert.deepEqual([suspended.status, suspended.pause], ["suspended", { kind: "suspend", ms: 86_400_000 }]);
    const rerun = (await call("rerun")).steps[0];
    assert.deepEqual([rerun.status, rerun.pause], ["rerun", { kind: "rerun", ms: 10, context: { page: 2 }, max_reruns: 3 }]);
    assert.equal((await call("bad")).steps[0].error.name, "TypeError");
    const thrown = (await call("then-throw")).steps[0];
    assert.deepEqual([thrown.status, thrown.pause], ["error", undefined]);
  });

  test("a resumed call starts at `start` with the earlier steps and $.context.run", async () => {
    const r = await runner.invoke("wf-7", entry, {
      kind: "workflow", event: {}, context: {}, flow: { resume_url: "r", cancel_url: "c" },
      start: 1, prior: { earlier: { note: "kept", $return_value: 1 } },
      run: { runs: 2, context: { page: 2 } },
      steps: [step("c_0", "earlier", "throws.mjs"), step("c_1", "p", "pauses.mjs", { how: "none" })],
    });
    assert.deepEqual(ok(r), { status: "success" });
    assert.deepEqual(r.steps.map((s) => s.id), ["c_1"]);
    assert.deepEqual(r.steps[0].exports, { run: { runs: 2, context: { page: 2 } }, before: "kept" });
  });

  test("data_store calls are round trips to Python (`store` / `store_result`)", async () => {
    const stored = new Map();
    const requests = [];
    runner.onStore = (request) => {
      requests.push(request);
      const { op, key, value } = request;
      if (op === "set" && key === "big") {
        return { ok: false, error: { name: "DataStoreError", code: "data_store_full", message: "full" } };
      }
      if (op === "set") stored.set(key, value);
      if (op === "get") return { ok: true, value: { found: stored.has(key), value: stored.get(key) ?? null } };
      if (op === "has") return { ok: true, value: stored.has(key) };
      if (op === "keys") return { ok: true, value: [...stored.keys()] };
      if (op === "entries") return { ok: true, value: [...stored.entries()] };
      return { ok: true, value: null };
    };
    try {
      const r = await runner.invoke("wf-store", entry, {
        kind: "workflow", event: {}, context: {},
        steps: [step("c_1", "s", "store.mjs", { store: "cache" })],
      });
      assert.deepEqual(ok(r), { status: "success" });
      assert.deepEqual(r.steps[0].return_value, {
        a: { n: 1 }, missing: true, has: true, keys: ["a"], seen: ['a={"n":1}'],
        refused: "DataStoreError data_store_full: full", bad: "TypeError",
      });
      assert.deepEqual(requests[0], { op: "set", store: "cache", key: "a", value: { n: 1 }, ttl: 60 });
      assert.ok(requests.every((q) => q.store === "cache"));
    } finally {
      runner.onStore = null;
    }
  });

  test("$.respond with immediate streams before the result", async () => {
    const r = await runner.invoke("wf-5", entry, {
      kind: "workflow", event: { n: 7 }, context: {},
      steps: [step("c_1", "respond", "respond.mjs")],
    });
    assert.equal(r.steps[0].return_value, "responded");
    assert.equal(r.responds.length, 1);
    assert.deepEqual(r.responds[0].body, { got: 7 });
    assert.equal(r.responds[0].immediate, true);
  });
});

describe("options", () => {
  const entry = fixture("slackish/sources/new-message/new-message.mjs");
  const options = (prop, extra = {}) => runner.invoke("opts", entry, {
    kind: "options", prop, page: 0, prevContext: null, query: null,
    props: { slack: { $auth: { oauth_access_token: "T" } }, kinds: ["im"] }, ...extra,
  });

  test("app propDefinition options: this is the app, inputValues from a function", async () => {
    const value = ok(await options("conversation", { page: 2, query: "gen" }));
    assert.deepEqual(value, {
      options: [
        { label: "team-of-T #general", value: "C1" },
        { label: "page 2 types im cursor undefined query gen", value: "C2" },
      ],
      context: { cursor: "after-2" },
    });
    const next = ok(await options("conversation", { page: 3, prevContext: { cursor: "after-2" } }));
    assert.equal(next.options[1].label, "page 3 types im cursor after-2 query null");
  });

  test("component-level options, static options and errors", async () => {
    assert.deepEqual(ok(await options("local", { page: 4 })), ["local-4"]);
    assert.deepEqual(ok(await options("icon")), ["ghost", "fire"]);
    const unknown = await options("nope");
    assert.equal(unknown.ok, false);
    assert.match(unknown.error.message, /prop "nope" not found/);
    assert.match((await options("kinds")).error.message, /has no options/);
  });
});

describe("logs and stdout", () => {
  const entry = fixture("misc.mjs");

  test("console and raw writes become log entries, never protocol output", async () => {
    const r = await runner.invoke("misc-noisy", entry, { kind: "action", props: { mode: "noisy" }, steps: {} });
    assert.equal(ok(r), "noisy");
    const byLevel = (level) => r.logs.filter((l) => l.level === level).map((l) => l.msg);
    assert.deepEqual(byLevel("stdout"), ["partial line without newline", '{"type":"result","id":999}']);
    assert.deepEqual(byLevel("stderr"), ["to stderr"]);
    assert.deepEqual(byLevel("warn"), ["warned 42"]);
    assert.deepEqual(byLevel("error"), ["logged error"]);
    assert.deepEqual(byLevel("debug"), ["debug { deep: { a: [ 1, 2 ] } }"]);
    assert.ok(byLevel("log").some((m) => m.includes("┌")), "console.table output is captured");
    const long = byLevel("log").find((m) => m.startsWith("xxxx"));
    assert.ok(long.length <= 16 * 1024, "entries are capped at 16 KB");
    assert.ok(r.logs.every((l) => typeof l.ts === "number"));
  });

  test("at most 1,000 entries, the last one counting the dropped", async () => {
    const r = await runner.invoke("misc-flood", entry, { kind: "action", props: { mode: "flood" }, steps: {} });
    assert.equal(ok(r), "flooded");
    assert.equal(r.logs.length, 1000);
    assert.equal(r.logs[998].msg, "line 998");
    assert.match(r.logs[999].msg, /501 log entries dropped/);
  });

  test("concurrent invocations on one worker keep their logs, emits and exports apart", async () => {
    const call = (tag, ms) => runner.invoke("misc-conc", entry, { kind: "action", props: { mode: "interleave", tag, ms: String(ms) }, steps: {} });
    const [a, b] = await Promise.all([call("A", 15), call("B", 10)]);
    for (const [r, tag] of [[a, "A"], [b, "B"]]) {
      assert.equal(ok(r), tag);
      assert.deepEqual(r.logs.map((l) => l.msg), [`${tag} step 0`, `${tag} step 1`, `${tag} step 2`, `${tag} in timer`]);
      assert.deepEqual(r.emits.map((e) => e.event), [0, 1, 2].map((i) => ({ tag, i })));
      assert.deepEqual(Object.keys(r.exports), [0, 1, 2].map((i) => `${tag}-${i}`));
    }
  });
});

describe("limits and crashes", () => {
  const entry = fixture("misc.mjs");
  const misc = (key, mode, limits = {}, props = {}) =>
    runner.invoke(key, entry, { kind: "action", props: { mode, ...props }, steps: {} }, { limits });

  for (const mode of ["sync-loop", "async-loop"]) {
    test(`${mode}: TIMEOUT on time, then the worker is replaced`, async () => {
      const key = `misc-${mode}`;
      assert.equal(ok(await misc(key, "ok")), "ok");
      const r = await misc(key, mode, { timeout_ms: 300 });
      assert.equal(r.ok, false);
      assert.equal(r.error.code, "TIMEOUT");
      assert.ok(r.elapsed >= 295 && r.elapsed < 300 + 150, `answered after ${r.elapsed.toFixed(1)} ms`);
      assert.ok(r.logs.some((l) => l.msg.startsWith("before the")), "logs that reached the runner are kept");
      assert.equal(ok(await misc(key, "ok")), "ok");
    });
  }

  test("a time-out stops the other invocations of that worker", async () => {
    const sleeping = misc("misc-shared", "sleep", { timeout_ms: 10_000 }, { ms: "5000" });
    await new Promise((r) => setTimeout(r, 50));
    const looping = await misc("misc-shared", "sync-loop", { timeout_ms: 200 });
    assert.equal(looping.error.code, "TIMEOUT");
    const slept = await sleeping;
    assert.equal(slept.error.code, "WORKER_STOPPED");
    assert.ok(slept.elapsed < 1000);
  });

  test("OUT_OF_MEMORY with a 32 MB heap, then the worker is replaced", async () => {
    const r = await misc("misc-oom", "oom", { timeout_ms: 20_000, memory_mb: 32 });
    assert.equal(r.ok, false);
    assert.equal(r.error.code, "OUT_OF_MEMORY");
    assert.equal(ok(await misc("misc-oom", "ok")), "ok");
  });

  test("process.exit() in user code: WORKER_STOPPED, the runner survives", async () => {
    const r = await misc("misc-exit", "exit");
    assert.equal(r.ok, false);
    assert.equal(r.error.code, "WORKER_STOPPED");
    assert.match(r.error.message, /exited with code 3/);
    assert.ok(r.logs.some((l) => l.msg === "exiting"));
    assert.equal(ok(await misc("misc-exit", "ok")), "ok");
  });
});

describe("requests", () => {
  test("bad messages get a BAD_MESSAGE result", async () => {
    const bad = await runner.request({ type: "invoke", worker_key: "k", entry: fixture("misc.mjs"), call: { kind: "dance" } });
    assert.equal(bad.error.code, "BAD_MESSAGE");
    const unknown = await runner.request({ type: "launch" });
    assert.equal(unknown.error.code, "BAD_MESSAGE");
    const id = runner.nextId++;
    const salvaged = new Promise((resolve) => runner.pending.set(id, resolve));
    runner.proc.stdin.write(`{"type": "invoke", "id": ${id}, oops}\n`);
    const r = await salvaged;
    assert.equal(r.error.code, "BAD_MESSAGE");
    assert.match(r.error.message, /invalid JSON/);
  });

  test("evict: by key and by prefix; in-flight calls end WORKER_STOPPED", async () => {
    const entry = fixture("misc.mjs");
    const call = (key, mode = "ok", props = {}) => runner.invoke(key, entry, { kind: "action", props: { mode, ...props }, steps: {} });
    await Promise.all([call("dc_ev:v1"), call("dc_ev:v2"), call("dc_other:v1")]);
    const sleeping = call("dc_ev:v1", "sleep", { ms: "5000" });
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(ok(await runner.request({ type: "evict", worker_key: "dc_ev:*" })), { evicted: true });
    assert.equal((await sleeping).error.code, "WORKER_STOPPED");
    // The worker that ran the evicted call is retired: every key it held is cold again.
    let keys = ok(await runner.request({ type: "stats" })).keys;
    assert.ok(!keys.some((k) => k.startsWith("dc_ev:")));
    assert.equal(ok(await call("dc_other:v1")), "ok");
    keys = ok(await runner.request({ type: "stats" })).keys;
    assert.ok(keys.includes("dc_other:v1"));
    assert.deepEqual(ok(await runner.request({ type: "evict", worker_key: "dc_other:v1" })), { evicted: true });
    assert.deepEqual(ok(await runner.request({ type: "evict", worker_key: "dc_other:v1" })), { evicted: false });
  });
});

describe("invoke_batch", () => {
  const entry = fixture("batch-source.mjs");
  /** Send one invoke_batch of `events`; resolves with each call's result, in order. */
  const batch = (key, events, extra = {}) => {
    const ids = events.map(() => runner.nextId++);
    const results = ids.map((id) => new Promise((resolve) => runner.pending.set(id, resolve)));
    const message = {
      type: "invoke_batch", id: runner.nextId++, worker_key: key, entry,
      shared: { kind: "run", props: { label: "L", http: { endpoint: "e" } }, db: {} },
      calls: events.map((event, i) => ({ id: ids[i], call: { event } })),
      ...extra,
    };
    runner.proc.stdin.write(`${JSON.stringify(message)}\n`);
    return Promise.all(results);
  };

  test("many runs in one message; their results leave together, a throw fails its run alone", async () => {
    const [a, b, c] = await batch("dc_batch:v1", [{ n: 1 }, { n: 2, throws: true }, { n: 3, sleep: 30 }]);
    assert.equal(ok(a), 1);
    assert.deepEqual(a.emits, [{ event: { n: 1, label: "L", db: null }, meta: {} }]);
    assert.equal(b.ok, false);
    assert.equal(b.error.name, "TypeError");
    assert.equal(b.error.message, "run 2 threw");
    assert.deepEqual(b.emits, []);
    assert.equal(ok(c), 3);
    // One write for the three (the fast ones waited for the slow one).
    assert.equal(a.chunk, c.chunk);
    assert.equal(b.chunk, c.chunk);
  });

  test("respond() of a batched call goes out at once, under its own id", async () => {
    const [first, second] = await batch("dc_batch:v1", [{ n: 1, respond: true, sleep: 20 }, { n: 2 }]);
    assert.deepEqual(first.responds.map((r) => r.status), [201]);
    assert.deepEqual(second.responds, []);
    assert.equal(ok(first), 1);
  });

  test("each call keeps its own time-out; an inspect call is not batched", async () => {
    const [quick, slow, fine] = await batch("dc_batch:v1", [{ n: 1 }, { n: 2, sleep: 5000 }, { n: 3 }], {
      limits: { timeout_ms: 300 },
    });
    assert.equal(ok(quick), 1);
    assert.equal(slow.error.code, "TIMEOUT");
    assert.equal(ok(fine), 3);
    const id = runner.nextId++;
    const refused = new Promise((resolve) => runner.pending.set(id, resolve));
    runner.proc.stdin.write(`${JSON.stringify({
      type: "invoke_batch", id: runner.nextId++, worker_key: "dc_batch:v1", entry,
      calls: [{ id, call: { kind: "inspect" } }],
    })}\n`);
    assert.equal((await refused).error.code, "BAD_MESSAGE");
  });
});

describe("worker pool", () => {
  const entry = fixture("misc.mjs");
  const call = (r, key) => r.invoke(key, entry, { kind: "action", props: { mode: "ok" }, steps: {} });

  test("a worker per key, never handed to another; --max-workers (LRU), and stats", async () => {
    const pool = new Runner(["--max-workers", "2"]);
    try {
      for (const key of ["a", "b"]) ok(await call(pool, key));
      let stats = ok(await pool.request({ type: "stats" }));
      assert.equal(stats.workers, 2, "a and b each in a worker of its own");
      assert.deepEqual(stats.keys, ["a", "b"]);
      assert.ok(stats.rss > 0 && stats.heap_used > 0);
      ok(await call(pool, "a"));
      // At the cap: the least recently used idle worker (b's) makes way for c.
      ok(await call(pool, "c"));
      stats = ok(await pool.request({ type: "stats" }));
      assert.equal(stats.workers, 2);
      assert.deepEqual(stats.keys, ["a", "c"]);
    } finally {
      assert.equal(await pool.close(), 0);
      pool.assertClean();
    }
  });

  test("idle workers are terminated after --idle-ms", async () => {
    const pool = new Runner(["--idle-ms", "150"]);
    try {
      ok(await call(pool, "idle"));
      assert.equal(ok(await pool.request({ type: "stats" })).workers, 1);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(ok(await pool.request({ type: "stats" })).workers, 0);
    } finally {
      assert.equal(await pool.close(), 0);
      pool.assertClean();
    }
  });

  test("closing stdin stops in-flight invocations and exits 0", async () => {
    const pool = new Runner();
    const sleeping = pool.invoke("s", entry, { kind: "action", props: { mode: "sleep", ms: "5000" }, steps: {} });
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    assert.equal(await pool.close(), 0);
    assert.ok(performance.now() - started < 1000);
    assert.equal((await sleeping).error.code, "WORKER_STOPPED");
    pool.assertClean();
  });

  test("timings: cold worker start and warm round trip", async (t) => {
    const pool = new Runner();
    try {
      const cold = await call(pool, "timing");
      ok(cold);
      const samples = [];
      for (let i = 0; i < 200; i++) samples.push((await call(pool, "timing")).elapsed);
      samples.sort((x, y) => x - y);
      const median = samples[100];
      t.diagnostic(`cold start + first invoke ${cold.elapsed.toFixed(1)} ms (worker side ${cold.duration_ms} ms); `
        + `warm round trip median ${median.toFixed(3)} ms, p90 ${samples[180].toFixed(3)} ms`);
      assert.ok(median < 10, `warm round trip median ${median} ms`);
    } finally {
      await pool.close();
      pool.assertClean();
    }
  });
});

describe("deployments of one account", () => {
  const entry = fixture("shared.mjs");
  let pool;
  before(() => { pool = new Runner(["--max-workers", "32"]); });
  after(async () => {
    assert.equal(await pool.close(), 0);
    pool.assertClean();
  });
  const call = (key, mode, props = {}, extra = {}) => pool.invoke(key, entry, {
    kind: "action", props: { mode, ...props }, steps: {},
  }, { env: { PD_COMPONENT: key }, ...extra });

  test("each deployment its own worker: module state, env (during its call only) and this", async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `dc_s${i}:v1`);
    for (const key of keys) ok(await call(key, "ok"));
    assert.equal(ok(await pool.request({ type: "stats" })).workers, 20);
    // Interleaved: each call sleeps while the others run in the same worker.
    const results = await Promise.all(keys.map((key, i) => call(key, "state", { ms: String(20 - i) })));
    for (const [i, r] of results.entries()) {
      // `load`: a module's top level reads no environment.
      assert.deepEqual(ok(r), { calls: 2, env: keys[i], before: keys[i], mine: keys[i] });
    }
  });

  test("an async hang times out alone: the worker answers, other calls finish", async () => {
    const sleeping = call("dc_a:v1", "sleep", { ms: "400" }, { limits: { timeout_ms: 5000 } });
    await new Promise((r) => setTimeout(r, 30));
    const hung = await call("dc_hang:v1", "hang", {}, { limits: { timeout_ms: 150 } });
    assert.equal(hung.error.code, "TIMEOUT");
    assert.equal(ok(await sleeping), "slept");
    assert.equal(ok(await call("dc_hang:v1", "ok")), "ok", "the key that timed out runs again (solo)");
  });

  test("a blocking loop stops only its own deployment's worker", async () => {
    const sleeping = call("dc_b:v1", "sleep", { ms: "400" }, { limits: { timeout_ms: 5000 } });
    await new Promise((r) => setTimeout(r, 30));
    const spun = await call("dc_spin:v1", "spin", {}, { limits: { timeout_ms: 150 } });
    assert.equal(spun.error.code, "TIMEOUT");
    assert.equal(ok(await sleeping), "slept");
    assert.equal(ok(await call("dc_spin:v1", "ok")), "ok", "the key that looped runs again, in a new worker");
  });

  test("a CommonJS entry is evaluated once per deployment", async () => {
    const entry = fixture("cjs/counter.cjs");
    const run = (key) => pool.invoke(key, entry, { kind: "action", props: {}, steps: {} });
    assert.deepEqual([ok(await run("dc_cjs1:v1")), ok(await run("dc_cjs1:v1")), ok(await run("dc_cjs2:v1"))], [1, 2, 1]);
    assert.equal(ok(await pool.request({ type: "evict", worker_key: "dc_cjs1:v1" })).evicted, true);
    assert.equal(ok(await run("dc_cjs1:v1")), 1, "an evicted key imports afresh");
  });

  test("process.exit() ends only its own invocation", async () => {
    const sleeping = call("dc_c:v1", "sleep", { ms: "200" });
    await new Promise((r) => setTimeout(r, 30));
    const exited = await call("dc_exit:v1", "exit");
    assert.equal(exited.error.code, "WORKER_STOPPED");
    assert.match(exited.error.message, /exited with code 4/);
    assert.equal(ok(await sleeping), "slept");
    assert.equal(ok(await call("dc_exit:v1", "ok")), "ok");
  });
});
