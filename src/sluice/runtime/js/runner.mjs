// Sluice Node runner: JSON lines (docs/runner-protocol.md), one worker_threads Worker per
// worker_key (worker.mjs). The protocol runs on its own descriptor (`--protocol-fd N`, a
// socket) so that nothing user code writes to fd 1 or 2 can corrupt or forge a result; without
// the flag it runs on stdin/stdout (the JS tests). Diagnostics go to stderr. Every request gets
// exactly one `result` line, whatever happens to its worker.

import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import { performance } from "node:perf_hooks";
import util from "node:util";
import { Worker } from "node:worker_threads";

const WORKER_URL = new URL("./worker.mjs", import.meta.url);
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MEMORY_MB = 256;
const MAX_LOGS = 1000;
const MAX_LOG_CHARS = 16 * 1024;
const CALL_KINDS = new Set(["inspect", "run", "hook", "action", "options", "props", "workflow"]);

const diag = (...args) => process.stderr.write(`[sluice-runner] ${util.format(...args)}\n`);
// A stray console.log in this thread would corrupt the protocol channel.
console.log = console.info = console.debug = diag;

const options = parseArgs(process.argv.slice(2));
const workers = new Map(); // worker_key → WorkerHandle, least recently used first
const handles = new Set(); // every live handle, keyed or not (for shutdown)
const activeIds = new Set();
// Calls in flight by request id: `store_result` answers reach their worker through it.
const callsById = new Map();
let nextSeq = 1;

function parseArgs(argv) {
  const opts = { maxWorkers: 32, idleMs: 300_000, protocolFd: null, reapChildren: false, egressSocket: null };
  const names = { "--max-workers": "maxWorkers", "--idle-ms": "idleMs", "--protocol-fd": "protocolFd" };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split("=", 2);
    if (flag === "--reap-children") {
      opts.reapChildren = true;
      continue;
    }
    if (flag === "--egress-socket") {
      // The sandbox's only way out (egress.mjs): every worker sends http(s) and fetch there.
      opts.egressSocket = value ?? argv[++i];
      continue;
    }
    if (!(flag in names)) {
      diag(`unknown option ${argv[i]}`);
      process.exit(2);
    }
    if (value === undefined) value = argv[++i];
    const n = Number(value);
    if (!Number.isInteger(n) || n < (flag === "--protocol-fd" ? 0 : 1)) {
      diag(`${flag} needs a positive integer, got ${value}`);
      process.exit(2);
    }
    opts[names[flag]] = n;
  }
  return opts;
}

// ---- output --------------------------------------------------------------------------------

const channel = options.protocolFd === null
  ? { input: process.stdin, output: process.stdout }
  : (() => {
    const socket = new net.Socket({ fd: options.protocolFd, readable: true, writable: true });
    return { input: socket, output: socket };
  })();

function writeLine(text) {
  channel.output.write(`${text}\n`);
}

// ---- child processes -----------------------------------------------------------------------

/** In the sandbox the runner's PID namespace holds only the jail's init (1), the runner and
 * what user code started. When no invocation is in flight, those leftovers are killed: every
 * child process dies with its invocation (or, for overlapping ones, with the last of them). */
function reapIfIdle() {
  if (!options.reapChildren || activeIds.size > 0) return;
  // A process being created as /proc is read can be missed: pass again until nothing but
  // zombies (already dead, waiting to be collected) is left. Bounded.
  for (let pass = 0; pass < 20; pass++) {
    const others = jailProcesses();
    if (others.length === 0) return;
    for (const pid of others) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

/** Live processes of the jail other than its init and this runner. */
function jailProcesses() {
  let names;
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const out = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === 1 || pid === process.pid) continue;
    let stat = "";
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    } catch {
      continue; // gone
    }
    if (!/\) Z /.test(stat)) out.push(pid);
  }
  return out;
}
if (options.reapChildren) setInterval(reapIfIdle, 1000).unref();

const runnerError = (name, code, message, step = null) => (
  step ? { name, code, message, stack: null, step } : { name, code, message, stack: null }
);

/** A result line. JSON-valued parts arrive as JSON text from the worker and are spliced in. */
function resultLine(id, r) {
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

function answer(id, ok, value, error = null) {
  writeLine(resultLine(id, { ok, value: JSON.stringify(value ?? null), error }));
}

// ---- invocations ---------------------------------------------------------------------------

/** One `invoke` request: accumulates what its worker reports until it is answered. */
class Call {
  constructor(req) {
    this.id = req.id;
    this.seq = nextSeq++;
    this.request = req;
    this.started = performance.now();
    this.done = false;
    this.handle = null;
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
      this.stepTimer = setTimeout(() => onTimeout(this, timeoutMs, `step ${id}`), timeoutMs);
    }
  }

  onWorkerMessage(m) {
    switch (m.t) {
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
        // A data_store prop's call: Python answers with `store_result` (onStoreResult).
        writeLine(`{"type":"store","id":${JSON.stringify(this.id)},"req":${Number(m.req)},"request":${m.json}}`);
        break;
      case "respond":
        if (!this.responded) {
          this.responded = true;
          writeLine(`{"type":"respond","id":${JSON.stringify(this.id)},"response":${m.json}}`);
        }
        break;
      case "done":
        this.logsDropped += m.logs_dropped ?? 0;
        this.finish({ ok: m.ok, value: m.value, flowExit: m.flow_exit, error: m.error });
        break;
      default:
        diag(`unknown worker message ${m.t}`);
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
    activeIds.delete(this.id);
    callsById.delete(this.id);
    if (this.logsDropped > 0) {
      let dropped = this.logsDropped;
      while (this.logs.length > MAX_LOGS - 1) {
        this.logs.pop();
        dropped += 1;
      }
      this.logs.push({ ts: Date.now(), level: "warn", msg: `[sluice] ${dropped} log entries dropped (at most ${MAX_LOGS} per invocation)` });
    }
    const durationMs = Math.round((performance.now() - this.started) * 100) / 100;
    writeLine(resultLine(this.id, { ...this, ok, value, flowExit, error, durationMs }));
    this.handle?.onCallFinished(this);
    reapIfIdle();
  }
}

// ---- workers -------------------------------------------------------------------------------

class WorkerHandle {
  constructor(key, entry, env, memoryMb, transient) {
    this.key = key;
    this.transient = transient; // inspect workers: terminated after their single call
    this.inflight = new Map(); // seq → Call, oldest first
    this.dead = false;
    this.loadFailed = false;
    this.idleTimer = null;
    this.worker = new Worker(WORKER_URL, {
      workerData: { entry, egressSocket: options.egressSocket },
      env,
      resourceLimits: {
        maxOldGenerationSizeMb: memoryMb,
        maxYoungGenerationSizeMb: Math.max(2, Math.min(16, Math.floor(memoryMb / 8))),
      },
      // Piped, so that user writes never reach the runner's own stdout.
      stdout: true,
      stderr: true,
    });
    this.worker.on("message", (m) => this.onMessage(m));
    this.worker.on("error", (err) => this.onError(err));
    this.worker.on("exit", (code) => this.onExit(code));
    this.worker.stdout.on("data", (chunk) => this.onStream("stdout", chunk));
    this.worker.stderr.on("data", (chunk) => this.onStream("stderr", chunk));
    handles.add(this);
  }

  dispatch(call) {
    clearTimeout(this.idleTimer);
    call.handle = this;
    this.inflight.set(call.seq, call);
    this.worker.postMessage({ t: "call", seq: call.seq, call: call.request.call });
  }

  /** Output with no known invocation: the only one in flight, else the most recent one. */
  fallbackCall() {
    let last = null;
    for (const call of this.inflight.values()) last = call;
    return last;
  }

  onMessage(m) {
    if (this.dead) return;
    if (m.t === "loaded") {
      if (!m.ok) {
        // Pending calls get LOAD_FAILED from the worker; later ones retry in a new worker.
        this.loadFailed = true;
        this.unregister();
        if (this.inflight.size === 0) this.stop("WORKER_STOPPED", "the component failed to load");
      }
      return;
    }
    const call = m.seq === null ? this.fallbackCall() : this.inflight.get(m.seq);
    if (call) call.onWorkerMessage(m);
    else if (m.t === "log") diag(`[${this.key}] ${m.level} (no invocation in flight): ${m.msg}`);
  }

  onStream(level, chunk) {
    if (this.dead) return;
    const msg = chunk.toString("utf8").replace(/\n$/, "");
    const call = this.fallbackCall();
    if (call) call.addLog(level, msg);
    else diag(`[${this.key}] ${level} (no invocation in flight): ${msg}`);
  }

  onError(err) {
    if (err?.code === "ERR_WORKER_OUT_OF_MEMORY") {
      this.stop("OUT_OF_MEMORY", `the worker ran out of memory: ${err.message}`, "OutOfMemoryError");
    } else {
      this.stop("WORKER_STOPPED", `the worker crashed: ${err?.stack ?? err}`);
    }
  }

  onExit(code) {
    this.stop("WORKER_STOPPED", `the worker exited with code ${code} (process.exit() in user code?)`);
  }

  onCallFinished(call) {
    this.inflight.delete(call.seq);
    if (this.dead || this.inflight.size > 0) return;
    if (this.transient || this.loadFailed) {
      this.stop("WORKER_STOPPED", "done");
    } else {
      this.idleTimer = setTimeout(() => this.stop("WORKER_STOPPED", "idle"), options.idleMs);
      this.idleTimer.unref();
      enforceCap();
    }
  }

  unregister() {
    if (workers.get(this.key) === this) workers.delete(this.key);
  }

  /** Terminate the worker; its in-flight calls end with `code`. */
  stop(code, message, name = "WorkerStoppedError") {
    if (this.dead) return this.terminated;
    this.dead = true;
    clearTimeout(this.idleTimer);
    this.unregister();
    handles.delete(this);
    for (const call of [...this.inflight.values()]) call.fail(name, code, message);
    this.inflight.clear();
    this.terminated = this.worker.terminate().catch((err) => diag(`terminate failed: ${err}`));
    return this.terminated;
  }
}

function enforceCap() {
  for (const handle of workers.values()) {
    if (workers.size <= options.maxWorkers) return;
    if (handle.inflight.size === 0) handle.stop("WORKER_STOPPED", "evicted (least recently used)");
  }
}

// ---- requests ------------------------------------------------------------------------------

function badMessage(id, message) {
  answer(id, false, null, runnerError("BadMessageError", "BAD_MESSAGE", message));
}

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function validateInvoke(req) {
  if (typeof req.worker_key !== "string" || req.worker_key === "") return "worker_key must be a non-empty string";
  if (typeof req.entry !== "string" || req.entry === "") return "entry must be a file path";
  if (req.env !== undefined && req.env !== null && !isPlainObject(req.env)) return "env must be an object";
  if (req.limits !== undefined && req.limits !== null && !isPlainObject(req.limits)) return "limits must be an object";
  for (const name of ["timeout_ms", "memory_mb"]) {
    const v = req.limits?.[name];
    if (v !== undefined && v !== null && !(typeof v === "number" && v > 0)) return `limits.${name} must be a positive number`;
  }
  const call = req.call;
  if (!isPlainObject(call) || !CALL_KINDS.has(call.kind)) {
    return `call.kind must be one of ${[...CALL_KINDS].join(", ")}`;
  }
  if (call.kind === "hook" && typeof call.hook !== "string") return "call.hook must be a string";
  if (call.kind === "options" && typeof call.prop !== "string") return "call.prop must be a string";
  return null;
}

function onInvoke(req) {
  const problem = validateInvoke(req);
  if (problem) return badMessage(req.id, problem);
  const call = new Call(req);
  activeIds.add(req.id);
  callsById.set(req.id, call);
  const timeoutMs = req.limits?.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  call.timer = setTimeout(() => onTimeout(call, timeoutMs), timeoutMs);
  let handle = req.call.kind === "inspect" ? null : workers.get(req.worker_key);
  try {
    if (!handle) {
      // Only variables the invocation names: no host variable reaches user code.
      const env = Object.fromEntries(Object.entries(req.env ?? {}).map(([k, v]) => [k, String(v)]));
      const memoryMb = req.limits?.memory_mb ?? DEFAULT_MEMORY_MB;
      const transient = req.call.kind === "inspect";
      handle = new WorkerHandle(req.worker_key, req.entry, env, memoryMb, transient);
      if (!workers.has(req.worker_key)) workers.set(req.worker_key, handle);
    } else {
      workers.delete(req.worker_key); // re-insert: Map order is the LRU order
      workers.set(req.worker_key, handle);
    }
    handle.dispatch(call);
  } catch (err) {
    call.fail("WorkerStoppedError", "WORKER_STOPPED", `could not start a worker: ${err.message}`);
    return;
  }
  enforceCap();
}

/** Python's answer to a `store` message: to the worker of that call (none when it ended). */
function onStoreResult(msg) {
  const call = callsById.get(msg.id);
  if (!call || call.done || !call.handle || call.handle.dead) return;
  call.handle.worker.postMessage({
    t: "store_result", seq: call.seq, req: msg.req, ok: Boolean(msg.ok), value: msg.value ?? null, error: msg.error ?? null,
  });
}

function onTimeout(call, timeoutMs, what = "the invocation") {
  const handle = call.handle;
  call.fail("TimeoutError", "TIMEOUT", `${what} did not finish within ${timeoutMs} ms`);
  handle?.stop("WORKER_STOPPED", `the worker was terminated because invocation ${call.id} timed out`);
}

function onEvict(req) {
  if (typeof req.worker_key !== "string") return badMessage(req.id, "worker_key must be a string");
  const key = req.worker_key;
  const matches = key.endsWith(":*")
    ? [...handles].filter((h) => h.key.startsWith(key.slice(0, -1)))
    : [...handles].filter((h) => h.key === key);
  for (const h of matches) h.stop("WORKER_STOPPED", "the worker was evicted");
  answer(req.id, true, { evicted: matches.length > 0 });
}

function onStats(req) {
  const mem = process.memoryUsage();
  answer(req.id, true, { workers: workers.size, keys: [...workers.keys()], rss: mem.rss, heap_used: mem.heapUsed });
}

function handleLine(line) {
  if (line.trim() === "") return;
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    // Salvage the id so the sender's request still gets its one result.
    const m = /"id"\s*:\s*(-?\d+)/.exec(line);
    return badMessage(m ? Number(m[1]) : null, `invalid JSON: ${err.message}`);
  }
  if (!isPlainObject(req)) return badMessage(null, "a request must be a JSON object");
  if (!Number.isInteger(req.id)) return badMessage(req.id, "id must be an integer");
  if (req.type === "store_result") return onStoreResult(req);
  if (activeIds.has(req.id)) return badMessage(req.id, `id ${req.id} is already in flight`);
  switch (req.type) {
    case "invoke":
      return onInvoke(req);
    case "evict":
      return onEvict(req);
    case "stats":
      return onStats(req);
    default:
      return badMessage(req.id, `unknown request type ${JSON.stringify(req.type)}`);
  }
}

// ---- stdio ---------------------------------------------------------------------------------

// Chunks are kept in an array until a newline arrives: `buf += chunk` re-flattens big payloads.
let pending = [];
channel.input.on("data", (chunk) => {
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(10, start);
    if (nl === -1) {
      if (start < chunk.length) pending.push(chunk.subarray(start));
      return;
    }
    const piece = chunk.subarray(start, nl);
    const line = pending.length ? Buffer.concat([...pending, piece]) : piece;
    pending = [];
    start = nl + 1;
    try {
      handleLine(line.toString("utf8"));
    } catch (err) {
      diag("request handling failed:", err);
    }
  }
});

channel.input.on("end", async () => {
  const stopping = [...handles].map((h) => h.stop("WORKER_STOPPED", "the runner is shutting down"));
  await Promise.race([Promise.allSettled(stopping), new Promise((r) => setTimeout(r, 2000))]);
  process.exit(0);
});

channel.output.on("error", (err) => {
  // The reader is gone: nothing can be answered any more.
  diag("stdout closed:", err.code ?? err);
  process.exit(0);
});
process.on("uncaughtException", (err) => diag("uncaught exception in the runner:", err));
process.on("unhandledRejection", (err) => diag("unhandled rejection in the runner:", err));
