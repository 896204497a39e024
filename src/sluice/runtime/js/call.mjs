// One `invoke` request in the runner (runner.mjs): it accumulates what its worker reports and
// writes exactly one `result` line, whatever happens to that worker.

import { performance } from "node:perf_hooks";

export const MAX_LOGS = 1000;
const MAX_LOG_CHARS = 16 * 1024;

/** Where calls write their lines and report their end; set once by runner.mjs. */
export const io = {
  writeLine: (_text) => {},
  diag: (..._args) => {},
  /** (call) after its result was written. */
  finished: (_call) => {},
  /** (call, timeoutMs, what) when a time-out passes. */
  timedOut: (_call, _ms, _what) => {},
};

let nextSeq = 1;

export const runnerError = (name, code, message, step = null) => (
  step ? { name, code, message, stack: null, step } : { name, code, message, stack: null }
);

/** A result line. JSON-valued parts arrive as JSON text from the worker and are spliced in. */
export function resultLine(id, r) {
  const obj = (entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`;
  return `{"type":"result","id":${JSON.stringify(id ?? null)},"ok":${r.ok}`
    + `,"value":${r.value ?? "null"}`
    + `,"emits":[${(r.emits ?? []).join(",")}]`
    + `,"db_writes":${obj([...(r.dbWrites ?? [])])}`
    + `,"db_deletes":${JSON.stringify([...(r.dbDeletes ?? [])])}`
    + `,"exports":${obj([...(r.exports ?? [])])}`
    + `,"flow_exit":${r.flowExit ?? "null"}`
    + `,"sends":[${(r.sends ?? []).join(",")}]`
    + `,"steps":[${(r.steps ?? []).join(",")}]`
    + `,"logs":${JSON.stringify(r.logs ?? [])}`
    + `,"error":${JSON.stringify(r.error ?? null)}`
    + `,"duration_ms":${r.durationMs ?? 0}}`;
}

/**
 * The calls of one `invoke_batch` request (runner.mjs): their `result` lines leave together, in
 * one write, once the last of them has ended (docs/runner-protocol.md).
 */
export class Batch {
  constructor(size) {
    this.lines = new Array(size).fill(null);
    this.left = size;
  }

  settle(position, line) {
    if (this.lines[position] !== null) return;
    this.lines[position] = line;
    this.left -= 1;
    if (this.left === 0) io.writeLine(this.lines.join("\n"));
  }
}

export class Call {
  constructor(req, batch = null, position = 0) {
    // The batch this call is part of (its result waits for the others'), and its place there.
    this.batch = batch;
    this.position = position;
    this.id = req.id;
    this.key = req.worker_key;
    this.seq = nextSeq++;
    this.request = req;
    this.started = performance.now();
    this.done = false;
    this.handle = null; // the Host running it (hosts.mjs)
    this.timer = null;
    this.responded = false;
    this.logs = [];
    this.logsDropped = 0;
    this.emits = [];
    this.exports = new Map();
    this.dbWrites = new Map();
    this.dbDeletes = new Set();
    this.sends = [];
    // Workflow calls: finished step records (JSON text), and the step running now.
    this.steps = [];
    this.stepId = null;
    this.stepTimer = null;
  }

  arm(timeoutMs) {
    this.timer = setTimeout(() => io.timedOut(this, timeoutMs, "the invocation"), timeoutMs);
  }

  addLog(level, msg, ts = Date.now(), step = this.stepId) {
    if (this.logs.length >= MAX_LOGS) {
      this.logsDropped += 1;
      return;
    }
    if (msg.length > MAX_LOG_CHARS) msg = `${msg.slice(0, MAX_LOG_CHARS - 40)}… [truncated]`;
    this.logs.push(step ? { ts, level, msg, step } : { ts, level, msg });
  }

  startStep(id, timeoutMs) {
    this.stepId = id;
    clearTimeout(this.stepTimer);
    if (typeof timeoutMs === "number" && timeoutMs > 0) {
      this.stepTimer = setTimeout(() => io.timedOut(this, timeoutMs, `step ${id}`), timeoutMs);
    }
  }

  onWorkerMessage(m) {
    switch (m.type) {
      case "log":
        this.addLog(m.level, m.msg, m.ts, m.step ?? this.stepId);
        break;
      case "step":
        this.startStep(m.id, m.timeout_ms);
        break;
      case "step_done":
        clearTimeout(this.stepTimer);
        this.steps.push(m.json);
        this.stepId = null;
        break;
      case "emit":
        // At most call.max_emits + 1 kept: one past the cap tells Python the cap was passed
        // (it fails the invocation with EMIT_LIMIT); the rest are never sent to it.
        if (!(this.emits.length > this.request.call.max_emits)) this.emits.push(m.json);
        break;
      case "export":
        this.exports.set(m.name, m.json);
        break;
      case "send":
        this.sends.push(m.json);
        break;
      case "db":
        if (m.json === null) {
          this.dbWrites.delete(m.key);
          this.dbDeletes.add(m.key);
        } else {
          this.dbDeletes.delete(m.key);
          this.dbWrites.set(m.key, m.json);
        }
        break;
      case "store":
        // A data_store prop's call: Python answers with `store_result` (runner.mjs).
        io.writeLine(`{"type":"store","id":${JSON.stringify(this.id)},"req":${Number(m.req)},"request":${m.json}}`);
        break;
      case "respond":
        if (!this.responded) {
          this.responded = true;
          io.writeLine(`{"type":"respond","id":${JSON.stringify(this.id)},"response":${m.json}}`);
        }
        break;
      case "done":
        this.logsDropped += m.logs_dropped ?? 0;
        this.finish({ ok: m.ok, value: m.value, flowExit: m.flow_exit, error: m.error });
        break;
      default:
        io.diag(`unknown worker message ${m.type}`);
    }
  }

  fail(name, code, message) {
    this.finish({ ok: false, error: runnerError(name, code, message, this.stepId) });
  }

  finish({ ok, value = "null", flowExit = "null", error = null }) {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    clearTimeout(this.stepTimer);
    if (this.logsDropped > 0) {
      let dropped = this.logsDropped;
      while (this.logs.length > MAX_LOGS - 1) {
        this.logs.pop();
        dropped += 1;
      }
      this.logs.push({ ts: Date.now(), level: "warn", msg: `[sluice] ${dropped} log entries dropped (at most ${MAX_LOGS} per invocation)` });
    }
    const durationMs = Math.round((performance.now() - this.started) * 100) / 100;
    const line = resultLine(this.id, { ...this, ok, value, flowExit, error, durationMs });
    if (this.batch) this.batch.settle(this.position, line);
    else io.writeLine(line);
    io.finished(this);
  }
}
