// Worker bootstrap: one Worker per worker_key. It imports the component once, then serves
// `call` messages from runner.mjs, possibly several at a time (async user code).
//
// Worker → runner messages (all tagged with the runner's invocation `seq`; JSON payloads are
// sent as JSON text so the runner can splice them into its output without re-encoding):
//   {t: "loaded", ok, error?}                  once, after the entry's import settles
//   {t: "log", seq, level, msg, ts}            seq null when no invocation is known
//   {t: "emit", seq, json} {t: "export", seq, name, json} {t: "send", seq, json}
//   {t: "db", seq, key, json|null}             null json = delete
//   {t: "respond", seq, json}
//   {t: "step", seq, id, timeout_ms} {t: "step_done", seq, json}   workflow calls (steps.mjs)
//   {t: "done", seq, ok, value, flow_exit, error, logs_dropped}

import { AsyncLocalStorage } from "node:async_hooks";
import { Console } from "node:console";
import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import util from "node:util";
import { parentPort, workerData } from "node:worker_threads";

import {
  buildInstance, callOptions, END_NEEDLE, flowExitSignal, isFlowExit, makeDollar, notSupported,
} from "./instance.mjs";
import { askStore, settleStore } from "./datastore.mjs";
import { installEgress } from "./egress.mjs";
import { safeStringify, toJsonSafe } from "./jsonsafe.mjs";
import { describeComponent, describeProps, isObject } from "./props.mjs";
import { runWorkflow } from "./steps.mjs";

const MAX_LOGS = 1000;
const MAX_LOG_CHARS = 16 * 1024;

// Which invocation the running code belongs to, across awaits and timers.
const als = new AsyncLocalStorage();
const post = (msg) => parentPort.postMessage(msg);

class Invocation {
  constructor(seq) {
    this.seq = seq;
    this.done = false;
    this.responded = false;
    this.flowExit = null;
    this.logCount = 0;
    this.logsDropped = 0;
    // The step record of a workflow call while that step runs (steps.mjs).
    this.step = null;
  }

  beginStep(record, timeoutMs) {
    this.step = record;
    this.post({ t: "step", id: record.id, timeout_ms: timeoutMs });
  }

  endStep(record) {
    this.step = null;
    this.post({ t: "step_done", json: safeStringify(record) });
  }

  post(msg) {
    // Output of user code still running after its invocation ended has nowhere to go.
    if (!this.done) post({ ...msg, seq: this.seq });
  }

  emit(event, meta) {
    const metaJson = meta === undefined || meta === null ? "{}" : safeStringify(meta);
    this.post({ t: "emit", json: `{"event":${safeStringify(event)},"meta":${metaJson}}` });
  }

  dbSet(key, json) {
    if (this.step) {
      // Workflow code steps: the step's own store, kept in its record (steps.mjs).
      const db = this.stepDb();
      db.writes[key] = JSON.parse(json);
      db.deletes = db.deletes.filter((k) => k !== key);
      return;
    }
    this.post({ t: "db", key, json });
  }

  dbDelete(key) {
    if (this.step) {
      const db = this.stepDb();
      delete db.writes[key];
      if (!db.deletes.includes(key)) db.deletes.push(key);
      return;
    }
    this.post({ t: "db", key, json: null });
  }

  stepDb() {
    if (!this.step.db) this.step.db = { writes: {}, deletes: [] };
    return this.step.db;
  }

  respond(response) {
    if (this.responded) {
      writeLog("warn", "respond() was already called for this invocation; this call is ignored");
      return;
    }
    const json = encodeResponse(response);
    this.responded = true;
    this.post({ t: "respond", json });
  }

  exportValue(name, value) {
    // Exports are fields of one JSON object: values JSON cannot hold are dropped, as JSON would.
    if (value === undefined || typeof value === "function" || typeof value === "symbol") return;
    if (this.step) {
      // Workflow steps keep their exports in their record: later steps read them.
      this.step.exports[name] = toJsonSafe(value);
      return;
    }
    this.post({ t: "export", name, json: safeStringify(value) });
  }

  /** A data_store prop's call, answered by Python (`store_result`): a Promise of its value. */
  storeCall(request) {
    return askStore(this, request);
  }

  send(type, config) {
    const step = this.step ? `,"step":${JSON.stringify(this.step.id)}` : "";
    this.post({ t: "send", json: `{"type":${JSON.stringify(type)},"config":${safeStringify(config)}${step}}` });
  }

  recordFlowExit(reason) {
    this.flowExit = { reason: reason === undefined ? null : reason };
  }

  succeed(value) {
    this.finish({ ok: true, value: safeStringify(value), error: null });
  }

  fail(err, code) {
    if (isFlowExit(err)) {
      // `$.flow.exit()` recorded its reason already; platform's `$end()` only carries it.
      if (!this.flowExit) this.recordFlowExit(err[END_NEEDLE]?.message);
      this.succeed(null);
      return;
    }
    this.finish({ ok: false, value: "null", error: serializeError(err, code) });
  }

  finish(outcome) {
    if (this.done) return;
    post({
      t: "done",
      seq: this.seq,
      ...outcome,
      flow_exit: this.flowExit ? safeStringify(this.flowExit) : "null",
      logs_dropped: this.logsDropped,
    });
    this.done = true;
  }
}

/** `{name, code, message, stack}`; code is err.code when it is a string, else err.name. */
function serializeError(err, code) {
  try {
    if (err instanceof Error || (isObject(err) && typeof err.message === "string")) {
      const name = typeof err.name === "string" && err.name ? err.name : "Error";
      return {
        name,
        code: code ?? (typeof err.code === "string" ? err.code : name),
        message: typeof err.message === "string" ? err.message : String(err.message),
        stack: typeof err.stack === "string" ? err.stack : null,
      };
    }
    return { name: "Error", code: code ?? "Error", message: String(err), stack: null };
  } catch {
    return { name: "Error", code: code ?? "Error", message: "(unprintable error value)", stack: null };
  }
}

function runnerError(code, message) {
  const err = new Error(message);
  err.code = code;
  return err;
}

function encodeResponse(r) {
  if (!isObject(r)) throw new TypeError("respond() expects an object {status, headers, body}");
  const out = {};
  let status = r.status;
  // Registry sources pass statuses read from string props, e.g. "200".
  if (typeof status === "string" && status.trim() !== "" && Number.isFinite(Number(status))) {
    status = Number(status);
  }
  if (status !== undefined) out.status = status;
  out.headers = r.headers ?? {};
  out.immediate = Boolean(r.immediate);
  const body = r.body;
  if (body === undefined || body === null) {
    // no body
  } else if (typeof body === "string") {
    out.body = body;
    out.body_encoding = "utf8";
  } else if (ArrayBuffer.isView(body) || body instanceof ArrayBuffer) {
    const bytes = body instanceof ArrayBuffer
      ? Buffer.from(body)
      : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    out.body = bytes.toString("base64");
    out.body_encoding = "base64";
  } else if (typeof body.pipe === "function" || typeof body.getReader === "function") {
    throw notSupported("A stream as response body", "pass a string, a Buffer or a JSON value");
  } else {
    out.body = body;
    out.body_encoding = "json";
  }
  return safeStringify(out);
}

// ---- console and stdio capture -------------------------------------------------------------

function writeLog(level, msg) {
  const inv = als.getStore();
  // Counted after the invocation ended too: a stray timer must not flood the runner's stderr.
  if (inv) {
    if (inv.logCount >= MAX_LOGS) {
      inv.logsDropped += 1;
      return;
    }
    inv.logCount += 1;
  }
  if (msg.length > MAX_LOG_CHARS) {
    const cut = msg.length - MAX_LOG_CHARS + 40;
    msg = `${msg.slice(0, MAX_LOG_CHARS - 40)}… [${cut} characters truncated]`;
  }
  post({ t: "log", seq: inv ? inv.seq : null, level, msg, ts: Date.now(), step: inv?.step?.id ?? null });
}

function captureConsole() {
  // Console methods without a level of their own (dir, table, trace, time…) keep Node's
  // formatting by writing to a Console whose streams become log entries.
  const sink = (level) => new Writable({
    write(chunk, _encoding, callback) {
      writeLog(level, String(chunk).replace(/\n$/, ""));
      callback();
    },
  });
  const fallback = new Console({ stdout: sink("log"), stderr: sink("error") });
  for (const name of Object.keys(console)) {
    if (name !== "Console" && typeof fallback[name] === "function") console[name] = fallback[name];
  }
  for (const level of ["log", "info", "debug", "warn", "error"]) {
    console[level] = (...args) => writeLog(level, util.format(...args));
  }
  // Direct writes would otherwise reach the runner only as untagged stream data (runner.mjs
  // still reads the Worker's stdout/stderr for anything that bypasses this).
  for (const [stream, level] of [[process.stdout, "stdout"], [process.stderr, "stderr"]]) {
    stream.write = (chunk, encoding, callback) => {
      if (typeof encoding === "function") callback = encoding;
      const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
      writeLog(level, text.replace(/\n$/, ""));
      if (typeof callback === "function") process.nextTick(callback);
      return true;
    };
  }
}

// Errors escaping user callbacks (timers, un-awaited promises) fail the invocation they came
// from, instead of killing a worker other invocations share.
function onStrayError(kind) {
  return (err) => {
    const inv = als.getStore();
    if (inv && !inv.done) inv.fail(err);
    else writeLog("error", `${kind}: ${util.inspect(err)}`);
  };
}

// ---- loading and dispatch ------------------------------------------------------------------

captureConsole();
process.on("uncaughtException", onStrayError("Uncaught exception"));
process.on("unhandledRejection", onStrayError("Unhandled promise rejection"));
// Workflow code steps use defineComponent without importing it; `$end` is the legacy exit.
globalThis.defineComponent = (component) => component;
globalThis.$end = (reason) => {
  throw flowExitSignal(reason);
};

// In the sandbox, http(s) and fetch() leave through the account's egress proxy, before any
// user code can capture an agent (docs/runtime.md, "Network egress").
if (workerData.egressSocket) installEgress(workerData.egressSocket);

const entry = workerData.entry;
let format = "esm";
const loading = import(pathToFileURL(entry).href).then((mod) => {
  format = isCommonJs(entry) ? "cjs" : "esm";
  return mod.default ?? mod;
});
loading.then(
  () => post({ t: "loaded", ok: true }),
  (err) => post({ t: "loaded", ok: false, error: serializeError(err, "LOAD_FAILED") }),
);

// import() of a CommonJS file goes through the CJS loader, which caches it by real path.
function isCommonJs(file) {
  const cache = createRequire(file).cache;
  try {
    return Boolean(cache[file] || cache[realpathSync(file)]);
  } catch {
    return Boolean(cache[file]);
  }
}

parentPort.on("message", (msg) => {
  if (msg && msg.t === "call") handleCall(msg.seq, msg.call);
  else if (msg && msg.t === "store_result") settleStore(msg);
});


function handleCall(seq, call) {
  const inv = new Invocation(seq);
  als.run(inv, async () => {
    let component;
    try {
      component = await loading;
    } catch (err) {
      inv.fail(err, "LOAD_FAILED");
      return;
    }
    try {
      inv.succeed(await execute(component, call, inv));
    } catch (err) {
      inv.fail(err);
    }
  });
}

async function execute(component, call, inv) {
  if (!isObject(component) || Array.isArray(component)) {
    throw runnerError("NOT_A_COMPONENT", `the module's export is not an object (got ${typeof component})`);
  }
  switch (call.kind) {
    case "inspect":
      return describeComponent(component, format);
    case "run": {
      requireRun(component);
      const state = await buildInstance(component, call, inv);
      return await component.run.call(state.self, call.event);
    }
    case "hook": {
      const hooks = component.hooks;
      const hook = isObject(hooks) && Object.hasOwn(hooks, call.hook) ? hooks[call.hook] : undefined;
      if (hook === undefined) return null;
      if (typeof hook !== "function") throw new TypeError(`hooks.${call.hook} must be a function`);
      const state = await buildInstance(component, call, inv);
      return await hook.call(state.self);
    }
    case "action":
      return await runAction(component, call, inv);
    case "workflow":
      return await runWorkflow(call, inv, serializeError);
    case "options": {
      const state = await buildInstance(component, call, inv);
      return await callOptions(state, call);
    }
    case "props": {
      // Reload props: additionalProps() with the values configured so far.
      const state = await buildInstance(component, call, inv);
      return { props: describeProps(state.propMap) };
    }
    default:
      throw runnerError("BAD_MESSAGE", `unknown call kind ${JSON.stringify(call.kind)}`);
  }
}

function requireRun(component) {
  if (typeof component.run !== "function") {
    throw runnerError("NO_RUN", `the component's run is ${component.run === undefined ? "missing" : "not a function"}`);
  }
}

async function runAction(component, call, inv) {
  requireRun(component);
  const state = await buildInstance(component, call, inv);
  const $ = makeDollar(call, inv);
  const self = state.self;
  const before = new Set(Object.keys(self));
  try {
    return await component.run.call(self, { $, steps: isObject(call.steps) ? call.steps : {} });
  } finally {
    // Legacy exports: `this.name = value` inside run().
    for (const key of Object.keys(self)) if (!before.has(key)) inv.exportValue(key, self[key]);
  }
}
