// Worker bootstrap: one worker thread is one deployment's realm (hosts.mjs): the component of
// one worker_key is imported once (its *slot*) and serves every call of that key while the
// runner keeps the worker; calls may run at once (async user code). What one call sees is its
// own: `this`, `this.db`, `$` and `process.env` (env.mjs); what the calls of one deployment
// share is its realm: globals, built-in prototypes, the modules it imports, the heap and the
// event loop. No other deployment's code ever runs here (docs/runtime.md, "Warm workers").
//
// Runner → worker: {type: "call", seq, key, entry, env, call}, {type: "calls", key, entry, env,
//   items: [{seq, call}]} (the batch path: each item handled as a "call"),
//   {type: "store_result", …}, {type: "ping"}.
// Worker → runner messages (all tagged with the runner's invocation `seq`; JSON payloads are
// sent as JSON text so the runner can splice them into its output without re-encoding):
//   {type: "loaded", key, ok, error?}             once a slot's import settles
//   {type: "log", seq, level, msg, ts}            seq null when no invocation is known
//   {type: "emit", seq, json} {type: "export", seq, name, json} {type: "send", seq, json}
//   {type: "db", seq, key, json|null}             null json = delete
//   {type: "respond", seq, json}
//   {type: "step", seq, id, timeout_ms} {type: "step_done", seq, json}   workflow calls (steps.mjs)
//   {type: "done", seq, ok, value, flow_exit, error, logs_dropped, heap}
//   {type: "exit", seq, code}                     process.exit() in user code
//   {type: "pong"}

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
import { CLOSED, installProcessEnv, runIn, withEnv } from "./env.mjs";
import { als, Invocation, post, runnerError, serializeError, writeLog } from "./invocation.mjs";
import { describeComponent, describeProps, isObject } from "./props.mjs";
import { runWorkflow } from "./steps.mjs";
import { BAD_MESSAGE, LOAD_FAILED, NOT_A_COMPONENT, NO_RUN } from "./codes.mjs";

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

// Before any user code: nothing it does can replace `process.env` (env.mjs).
installProcessEnv();

// process.exit() in user code ends its invocation (WORKER_STOPPED), not the worker under every
// deployment it serves: the runner retires this worker (no new calls; it stops once the calls
// in flight end). The throw unwinds the caller as an exit would.
process.exit = (code) => {
  const inv = als.getStore();
  post({ type: "exit", seq: inv && !inv.done ? inv.seq : null, code: code ?? process.exitCode ?? 0 });
  if (inv) inv.done = true;
  const err = new Error(`process.exit(${code ?? ""}) called`);
  err.name = "ProcessExit";
  throw err;
};

// The deployment's slot (one per worker: hosts.mjs): the component's import, its format, and
// (workflows) its steps' modules by file.
let slot = null;

/** Import `file` for the slot (once): the module's default export, or the module. */
function importFor(file) {
  let loading = slot.modules.get(file);
  if (loading) return loading;
  // Evaluated with no environment: a module's top level never reads process.env (env.mjs).
  loading = runIn(CLOSED, () => import(pathToFileURL(file).href)).then((mod) => mod.default ?? mod);
  loading.catch(() => slot.modules.delete(file));
  slot.modules.set(file, loading);
  return loading;
}

function slotFor(key, entry) {
  if (slot) {
    if (slot.key !== key) throw new Error(`this worker holds ${slot.key}, not ${key}`);
    return slot;
  }
  slot = { key, format: "esm", modules: new Map() };
  const mine = slot;
  slot.loading = importFor(entry).then((component) => {
    mine.format = isCommonJs(entry) ? "cjs" : "esm";
    return component;
  });
  slot.loading.then(
    () => post({ type: "loaded", key, ok: true }),
    // The runner retires this worker (hosts.mjs): the next call imports in a new realm.
    (err) => post({ type: "loaded", key, ok: false, error: serializeError(err, LOAD_FAILED) }),
  );
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
  if (msg.type === "call") handleCall(msg);
  else if (msg.type === "calls") {
    for (const { seq, call } of msg.items) handleCall({ seq, key: msg.key, entry: msg.entry, env: msg.env, call });
  }
  else if (msg.type === "store_result") settleStore(msg);
  else if (msg.type === "ping") post({ type: "pong" });
});

function handleCall({ seq, key, entry, env, call }) {
  const inv = new Invocation(seq);
  als.run(inv, () => runIn(CLOSED, async () => {
    let component;
    let mine;
    try {
      if (call.kind === "inspect" && call.shared) {
        // A package's components inspected in one realm (a registry import): each entry is
        // imported beside the others, sharing the modules they import.
        slot ??= { key, format: "esm", modules: new Map() };
        if (slot.key !== key) throw new Error(`this worker holds ${slot.key}, not ${key}`);
        component = await importFor(entry);
        mine = { ...slot, format: isCommonJs(entry) ? "cjs" : "esm" };
      } else {
        mine = slotFor(key, entry);
        component = await mine.loading;
      }
    } catch (err) {
      inv.fail(err, LOAD_FAILED);
      return;
    }
    try {
      // A workflow's code steps open scopes of their own (steps.mjs); a source or an action
      // reads only what its invocation names (never the account's variables), during its call.
      const value = call.kind === "workflow"
        ? await execute(component, call, inv, mine, env ?? {})
        : await withEnv(env ?? {}, () => execute(component, call, inv, mine, null));
      inv.succeed(value);
    } catch (err) {
      inv.fail(err);
    }
  }));
}

async function execute(component, call, inv, slot, workflowEnv) {
  if (!isObject(component) || Array.isArray(component)) {
    throw runnerError(NOT_A_COMPONENT, `the module's export is not an object (got ${typeof component})`);
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
      return await runWorkflow(call, inv, workflowEnv, serializeError, importFor);
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
      throw runnerError(BAD_MESSAGE, `unknown call kind ${JSON.stringify(call.kind)}`);
  }
}

function requireRun(component) {
  if (typeof component.run !== "function") {
    throw runnerError(NO_RUN, `the component's run is ${component.run === undefined ? "missing" : "not a function"}`);
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
