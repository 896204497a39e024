// Worker bootstrap: one worker thread serves many deployments of one account (its runner).
// Each deployment's component (a worker_key) is imported once into a *slot* of its own and kept
// while the runner keeps the key here (runner.mjs, hosts.mjs); calls of any slot may run at
// once (async user code). What one call sees is its own: `this`, `this.db`, `$`, `process.env`
// and the module's own top-level state (each slot imports the entry under its own URL); what
// the slots of a worker share is the thread: globals, the npm packages they import, the heap
// and the event loop (docs/runtime.md, "Warm workers").
//
// Runner → worker: {t: "call", seq, key, entry, env, call}, {t: "store_result", …},
//   {t: "drop", keys} (forget these slots: the next call imports again), {t: "ping"}.
// Worker → runner messages (all tagged with the runner's invocation `seq`; JSON payloads are
// sent as JSON text so the runner can splice them into its output without re-encoding):
//   {t: "loaded", key, ok, error?}             once a slot's import settles
//   {t: "log", seq, level, msg, ts}            seq null when no invocation is known
//   {t: "emit", seq, json} {t: "export", seq, name, json} {t: "send", seq, json}
//   {t: "db", seq, key, json|null}             null json = delete
//   {t: "respond", seq, json}
//   {t: "step", seq, id, timeout_ms} {t: "step_done", seq, json}   workflow calls (steps.mjs)
//   {t: "done", seq, ok, value, flow_exit, error, logs_dropped, heap}
//   {t: "exit", seq, code}                     process.exit() in user code
//   {t: "pong"}

import { Console } from "node:console";
import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import util from "node:util";
import { parentPort, workerData } from "node:worker_threads";

import { buildInstance, callOptions, flowExitSignal, makeDollar } from "./instance.mjs";
import { settleStore } from "./datastore.mjs";
import { installEgress } from "./egress.mjs";
import { als, Invocation, post, runnerError, serializeError, writeLog } from "./invocation.mjs";
import { describeComponent, describeProps, isObject } from "./props.mjs";
import { runWorkflow } from "./steps.mjs";

// ---- console and stdio capture -------------------------------------------------------------

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

// `process.env` is the running invocation's own environment (`PD_COMPONENT` for sources):
// deployments sharing this worker never see each other's. Outside any invocation it is empty.
const NO_ENV = Object.freeze({});
const envOf = () => als.getStore()?.env ?? NO_ENV;
process.env = new Proxy({}, {
  get: (_t, k) => (typeof k === "string" && Object.hasOwn(envOf(), k) ? envOf()[k] : undefined),
  has: (_t, k) => Object.hasOwn(envOf(), k),
  ownKeys: () => Reflect.ownKeys(envOf()),
  getOwnPropertyDescriptor: (_t, k) => (Object.hasOwn(envOf(), k)
    ? { value: envOf()[k], enumerable: true, configurable: true, writable: true }
    : undefined),
  // Outside an invocation writes go nowhere.
  set: (_t, k, v) => {
    const env = envOf();
    if (env !== NO_ENV) env[k] = String(v);
    return true;
  },
  deleteProperty: (_t, k) => {
    const env = envOf();
    if (env !== NO_ENV) delete env[k];
    return true;
  },
});

// process.exit() in user code ends its invocation (WORKER_STOPPED), not the worker under every
// deployment it serves: the runner retires this worker (no new calls; it stops once the calls
// in flight end). The throw unwinds the caller as an exit would.
process.exit = (code) => {
  const inv = als.getStore();
  post({ t: "exit", seq: inv && !inv.done ? inv.seq : null, code: code ?? process.exitCode ?? 0 });
  if (inv) inv.done = true;
  const err = new Error(`process.exit(${code ?? ""}) called`);
  err.name = "ProcessExit";
  throw err;
};

// Slots by worker_key: the component's import, its format, and (workflows) its steps' modules.
// A module file imported by a second slot gets a URL of its own (`?sluice=N`), so each
// deployment has its own module instance (its top-level state); the packages it imports are
// resolved by their own URLs and shared by the worker.
const slots = new Map();
const imports = new Map(); // file → how many slots imported it

/** Import `file` for `slot` (once per slot): the module's default export, or the module. */
function importFor(slot, file) {
  let loading = slot.modules.get(file);
  if (loading) return loading;
  const seen = imports.get(file) ?? 0;
  imports.set(file, seen + 1);
  if (seen > 0) {
    // A CommonJS file is cached by path: forget it so this slot evaluates it anew.
    const cache = createRequire(file).cache;
    delete cache[file];
    try {
      delete cache[realpathSync(file)];
    } catch {
      // the import reports a missing file
    }
  }
  const base = pathToFileURL(file).href;
  loading = import(seen === 0 ? base : `${base}?sluice=${seen}`).then((mod) => mod.default ?? mod);
  // A failed import is cached by its URL: the next call imports again under a new one.
  loading.catch(() => slot.modules.delete(file));
  slot.modules.set(file, loading);
  return loading;
}

function slotFor(key, entry) {
  let slot = slots.get(key);
  if (slot) return slot;
  slot = { format: "esm", modules: new Map() };
  slot.loading = importFor(slot, entry).then((component) => {
    slot.format = isCommonJs(entry) ? "cjs" : "esm";
    return component;
  });
  slot.loading.then(
    () => post({ t: "loaded", key, ok: true }),
    (err) => {
      if (slots.get(key) === slot) slots.delete(key);
      post({ t: "loaded", key, ok: false, error: serializeError(err, "LOAD_FAILED") });
    },
  );
  slots.set(key, slot);
  return slot;
}

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
  if (!msg) return;
  if (msg.t === "call") handleCall(msg);
  else if (msg.t === "store_result") settleStore(msg);
  else if (msg.t === "drop") for (const key of msg.keys) slots.delete(key);
  else if (msg.t === "ping") post({ t: "pong" });
});

function handleCall({ seq, key, entry, env, call }) {
  const inv = new Invocation(seq, env ?? {});
  als.run(inv, async () => {
    let component;
    let slot;
    try {
      // Imported inside the call: top-level code of the module sees this invocation's env.
      slot = slotFor(key, entry);
      component = await slot.loading;
    } catch (err) {
      inv.fail(err, "LOAD_FAILED");
      return;
    }
    try {
      inv.succeed(await execute(component, call, inv, slot));
    } catch (err) {
      inv.fail(err);
    }
  });
}

async function execute(component, call, inv, slot) {
  if (!isObject(component) || Array.isArray(component)) {
    throw runnerError("NOT_A_COMPONENT", `the module's export is not an object (got ${typeof component})`);
  }
  switch (call.kind) {
    case "inspect":
      return describeComponent(component, slot.format);
    case "run": {
      if (component.run === undefined) {
        // A schedule source with no run(): Pipedream's platform emits each tick's event (the
        // component rules decide whether such a source deploys; docs/api.md).
        const state = await buildInstance(component, call, inv);
        if (Object.values(state.defs).some((d) => d.def.type === "$.interface.timer")) {
          await state.self.$emit(call.event);
          return null;
        }
      }
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
      return await runWorkflow(call, inv, serializeError, (file) => importFor(slot, file));
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
