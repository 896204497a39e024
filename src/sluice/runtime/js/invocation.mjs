// One invocation inside a worker (worker.mjs): what user code's side effects (emits, db writes,
// logs, responses, exports, sends, step records) become, as messages to the runner tagged with
// the invocation's `seq`. `als` tells, across awaits and timers, which invocation the running
// code belongs to: a worker serves several deployments at once, so every side effect is
// attributed through it, never through worker-wide state.

import { AsyncLocalStorage } from "node:async_hooks";
import v8 from "node:v8";
import { parentPort } from "node:worker_threads";

import { END_NEEDLE, isFlowExit, notSupported } from "./instance.mjs";
import { askStore } from "./datastore.mjs";
import { safeStringify, toJsonSafe } from "./jsonsafe.mjs";
import { isObject } from "./props.mjs";

const MAX_LOGS = 1000;
const MAX_LOG_CHARS = 16 * 1024;

// Which invocation the running code belongs to, across awaits and timers.
export const als = new AsyncLocalStorage();
export const post = (msg) => parentPort.postMessage(msg);
let finished = 0;

export class Invocation {
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
    this.post({ type: "step", id: record.id, timeout_ms: timeoutMs });
  }

  endStep(record) {
    this.step = null;
    this.post({ type: "step_done", json: safeStringify(record) });
  }

  post(msg) {
    // Output of user code still running after its invocation ended has nowhere to go.
    if (!this.done) post({ ...msg, seq: this.seq });
  }

  emit(event, meta) {
    const metaJson = meta === undefined || meta === null ? "{}" : safeStringify(meta);
    this.post({ type: "emit", json: `{"event":${safeStringify(event)},"meta":${metaJson}}` });
  }

  dbSet(key, json) {
    if (this.step) {
      // Workflow code steps: the step's own store, kept in its record (steps.mjs).
      const db = this.stepDb();
      db.writes[key] = JSON.parse(json);
      db.deletes = db.deletes.filter((k) => k !== key);
      return;
    }
    this.post({ type: "db", key, json });
  }

  dbDelete(key) {
    if (this.step) {
      const db = this.stepDb();
      delete db.writes[key];
      if (!db.deletes.includes(key)) db.deletes.push(key);
      return;
    }
    this.post({ type: "db", key, json: null });
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
    this.post({ type: "respond", json });
  }

  exportValue(name, value) {
    // Exports are fields of one JSON object: values JSON cannot hold are dropped, as JSON would.
    if (value === undefined || typeof value === "function" || typeof value === "symbol") return;
    if (this.step) {
      // Workflow steps keep their exports in their record: later steps read them.
      this.step.exports[name] = toJsonSafe(value);
      return;
    }
    this.post({ type: "export", name, json: safeStringify(value) });
  }

  /** A data_store prop's call, answered by Python (`store_result`): a Promise of its value. */
  storeCall(request) {
    return askStore(this, request);
  }

  send(type, config) {
    const step = this.step ? `,"step":${JSON.stringify(this.step.id)}` : "";
    this.post({ type: "send", json: `{"type":${JSON.stringify(type)},"config":${safeStringify(config)}${step}}` });
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
      type: "done",
      seq: this.seq,
      ...outcome,
      flow_exit: this.flowExit ? safeStringify(this.flowExit) : "null",
      logs_dropped: this.logsDropped,
      // The worker's heap after every 16th call: the runner retires a worker that grows too
      // full (the figure costs a few microseconds).
      heap: ++finished % 16 === 0 ? v8.getHeapStatistics().used_heap_size : 0,
    });
    this.done = true;
  }
}

/** `{name, code, message, stack}`; code is err.code when it is a string, else err.name. */
export function serializeError(err, code) {
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

export function runnerError(code, message) {
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

// ---- logs ----------------------------------------------------------------------------------

export function writeLog(level, msg) {
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
  post({ type: "log", seq: inv ? inv.seq : null, level, msg, ts: Date.now(), step: inv?.step?.id ?? null });
}
