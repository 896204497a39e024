// Sluice Node runner: JSON lines (docs/runner-protocol.md) for one account. Its calls run in
// worker_threads, one per deployment: each deployment is a realm of its own (hosts.mjs,
// worker.mjs). The protocol runs
// on its own descriptor (`--protocol-fd N`, a socket) so that nothing user code writes to fd 1
// or 2 can corrupt or forge a result; without the flag it runs on stdin/stdout (the JS tests).
// Diagnostics go to stderr. Every request gets exactly one `result` line, whatever happens to
// its worker.

import net from "node:net";
import util from "node:util";

import { Batch, Call, io, resultLine, runnerError } from "./call.mjs";
import { HostPool } from "./hosts.mjs";
import { reapIfIdle } from "./reaper.mjs";
import { BAD_MESSAGE, BAD_MESSAGE_ERROR, TIMEOUT, TIMEOUT_ERROR, WORKER_STOPPED, WORKER_STOPPED_ERROR } from "./codes.mjs";

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MEMORY_MB = 256;
const CALL_KINDS = new Set(["inspect", "run", "hook", "action", "options", "props", "workflow"]);

const diag = (...args) => process.stderr.write(`[sluice-runner] ${util.format(...args)}\n`);
// A stray console.log in this thread would corrupt the protocol channel.
console.log = console.info = console.debug = diag;

const options = parseArgs(process.argv.slice(2));
const pool = new HostPool(options, diag);
// Calls in flight by request id: `store_result` answers reach their worker through it.
const callsById = new Map();

function parseArgs(argv) {
  const opts = {
    maxWorkers: 4, idleMs: 300_000, protocolFd: null, reapChildren: false, egressSocket: null,
  };
  const names = {
    "--max-workers": "maxWorkers",
    "--idle-ms": "idleMs",
    "--protocol-fd": "protocolFd",
  };
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

// Lines written in one turn of the event loop leave in one write (setImmediate runs once the
// turn's messages from workers and the protocol socket are handled): results finishing
// together cost one system call and one wake-up of the server, not one each.
let queued = null;
function writeLine(text) {
  if (queued === null) {
    queued = [];
    setImmediate(flushLines);
  }
  queued.push(text);
}

function flushLines() {
  if (queued === null) return;
  const lines = queued;
  queued = null;
  channel.output.write(`${lines.join("\n")}\n`);
}

function answer(id, ok, value, error = null) {
  writeLine(resultLine(id, { ok, value: JSON.stringify(value ?? null), error }));
}

const reap = () => {
  if (options.reapChildren) reapIfIdle(() => callsById.size > 0);
};
if (options.reapChildren) setInterval(reap, 1000).unref();

io.writeLine = writeLine;
io.diag = diag;
io.finished = (call) => {
  callsById.delete(call.id);
  call.handle?.onCallFinished(call);
  reap();
};
io.timedOut = (call, timeoutMs, what) => {
  call.fail(TIMEOUT_ERROR, TIMEOUT, `${what} did not finish within ${timeoutMs} ms`);
  call.handle?.onTimedOut(call);
};

// ---- requests ------------------------------------------------------------------------------

function badMessage(id, message) {
  answer(id, false, null, runnerError(BAD_MESSAGE_ERROR, BAD_MESSAGE, message));
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
  callsById.set(req.id, call);
  call.arm(req.limits?.timeout_ms ?? DEFAULT_TIMEOUT_MS);
  try {
    const host = pool.place(call, req.limits?.memory_mb ?? DEFAULT_MEMORY_MB);
    // Only variables the invocation names: no host variable reaches user code.
    const env = req.env ? Object.fromEntries(Object.entries(req.env).map(([k, v]) => [k, String(v)])) : null;
    host.dispatch(call, env);
  } catch (err) {
    call.fail(WORKER_STOPPED_ERROR, WORKER_STOPPED, `could not start a worker: ${err.message}`);
  }
}

/**
 * Many invocations of one worker_key in one request (the batch path, docs/runner-protocol.md):
 * `shared` holds what every call has (props, db, limits of the call), each item its own id and
 * the rest of its call. Each call runs as if invoked alone (its own id for `respond` and
 * `store`, its own time-out); their `result` lines leave together once the last has ended.
 */
function onInvokeBatch(req) {
  if (!Array.isArray(req.calls) || req.calls.length === 0) return badMessage(req.id, "calls must be a non-empty array");
  const shared = req.shared ?? {};
  if (!isPlainObject(shared)) return badMessage(req.id, "shared must be an object");
  const batch = new Batch(req.calls.length);
  const env = req.env && isPlainObject(req.env)
    ? Object.fromEntries(Object.entries(req.env).map(([k, v]) => [k, String(v)]))
    : null;
  const calls = [];
  req.calls.forEach((item, position) => {
    const one = {
      type: "invoke", id: item?.id, worker_key: req.worker_key, entry: req.entry, env: req.env,
      limits: req.limits, call: isPlainObject(item?.call) ? { ...shared, ...item.call } : item?.call,
    };
    let problem = Number.isInteger(one.id) ? validateInvoke(one) : "each call needs an integer id";
    if (!problem && callsById.has(one.id)) problem = `id ${one.id} is already in flight`;
    if (!problem && one.call.kind === "inspect") problem = "an inspect call cannot be batched";
    if (problem) {
      batch.settle(position, resultLine(one.id ?? null, { ok: false, value: "null", error: runnerError(BAD_MESSAGE_ERROR, BAD_MESSAGE, problem) }));
      return;
    }
    const call = new Call(one, batch, position);
    callsById.set(one.id, call);
    call.arm(req.limits?.timeout_ms ?? DEFAULT_TIMEOUT_MS);
    calls.push(call);
  });
  if (calls.length === 0) return;
  let host;
  try {
    host = pool.place(calls[0], req.limits?.memory_mb ?? DEFAULT_MEMORY_MB);
  } catch (err) {
    for (const call of calls) call.fail(WORKER_STOPPED_ERROR, WORKER_STOPPED, `could not start a worker: ${err.message}`);
    return;
  }
  host.dispatchMany(calls, env);
}

/** Python's answer to a `store` message: to the worker of that call (none when it ended). */
function onStoreResult(msg) {
  const call = callsById.get(msg.id);
  if (!call || call.done || !call.handle || call.handle.dead) return;
  call.handle.worker.postMessage({
    type: "store_result", seq: call.seq, req: msg.req, ok: Boolean(msg.ok), value: msg.value ?? null, error: msg.error ?? null,
  });
}

function onEvict(req) {
  if (typeof req.worker_key !== "string") return badMessage(req.id, "worker_key must be a string");
  answer(req.id, true, { evicted: pool.evict(req.worker_key) });
}

function onStats(req) {
  const mem = process.memoryUsage();
  const workers = [...pool.hosts].filter((h) => !h.transient && h !== pool.spare).length;
  answer(req.id, true, { workers, keys: [...pool.byKey.keys()], rss: mem.rss, heap_used: mem.heapUsed });
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
  if (callsById.has(req.id)) return badMessage(req.id, `id ${req.id} is already in flight`);
  switch (req.type) {
    case "invoke":
      return onInvoke(req);
    case "invoke_batch":
      return onInvokeBatch(req);
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
  const stopping = pool.stopAll("the runner is shutting down");
  await Promise.race([Promise.allSettled(stopping), new Promise((r) => setTimeout(r, 2000))]);
  flushLines();
  process.exit(0);
});

channel.output.on("error", (err) => {
  // The reader is gone: nothing can be answered any more.
  diag("stdout closed:", err.code ?? err);
  process.exit(0);
});
process.on("uncaughtException", (err) => diag("uncaught exception in the runner:", err));
process.on("unhandledRejection", (err) => diag("unhandled rejection in the runner:", err));
