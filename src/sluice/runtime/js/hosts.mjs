// The worker threads of one runner (docs/runtime.md, "Warm workers"). A worker (`Host`) holds
// one deployment's component (a worker_key) for its whole life: each deployment has a realm of
// its own (its globals, built-in prototypes, module cache and `process.env`), so one
// deployment cannot observe or change another's values through anything the JS engine shares
// (issue 25). A worker is never handed to a second key: a key that goes away stops its worker.
//
// - A key stays on its worker while that worker takes new calls; concurrent calls of one key
//   run in it together (async user code).
// - A new key takes the *spare*: a worker started in the background once the runner has placed
//   its second key, so a new deployment's first call waits for its import, not for a thread
//   start. Not after the first: an account with one deployment holds one worker, not two.
// - At --max-workers, the least recently used idle worker makes way (LRU; soft cap: when every
//   worker is busy, the new one starts anyway rather than making the call wait); idle workers
//   stop after --idle-ms. A worker whose heap passes RETIRE_HEAP of its limit is *retired*: no
//   new calls; it stops once its calls in flight end, and the key starts afresh.
// - A time-out: the call ends with TIMEOUT at once; its worker is retired and pinged every
//   PING_MS while it drains. A worker that answers is not blocked (an async hang): its other
//   calls finish normally. One that misses an answer is stuck in a loop and is terminated: its
//   other calls (of the same deployment) end with WORKER_STOPPED.

import { Worker } from "node:worker_threads";
import { OUT_OF_MEMORY, OUT_OF_MEMORY_ERROR, WORKER_STOPPED, WORKER_STOPPED_ERROR } from "./codes.mjs";

const WORKER_URL = new URL("./worker.mjs", import.meta.url);
const RETIRE_HEAP = 0.75;
const PING_MS = 250;

export class Host {
  constructor(pool, { memoryMb, transient = false }) {
    this.pool = pool;
    this.memoryMb = memoryMb;
    this.transient = transient; // inspect workers: terminated after their single call
    this.key = null; // the one deployment this worker serves (null: the spare, not yet given)
    this.inflight = new Map(); // seq → Call, oldest first
    this.dead = false;
    this.retired = false;
    this.idleTimer = null;
    this.pingTimer = null;
    this.runaway = null; // the id of the call whose time-out retired this worker
    this.lastUsed = performance.now();
    this.worker = new Worker(WORKER_URL, {
      workerData: { egressSocket: pool.options.egressSocket },
      env: {}, // each call brings its own (worker.mjs)
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
    this.worker.on("exit", (code) => this.stop(WORKER_STOPPED, `the worker exited with code ${code}`));
    this.worker.stdout.on("data", (chunk) => this.onStream("stdout", chunk));
    this.worker.stderr.on("data", (chunk) => this.onStream("stderr", chunk));
    pool.hosts.add(this);
  }

  get keys() {
    return this.key === null ? [] : [this.key];
  }

  dispatch(call, env) {
    clearTimeout(this.idleTimer);
    this.lastUsed = performance.now();
    call.handle = this;
    if (this.key === null) this.key = call.key;
    else if (this.key !== call.key) throw new Error(`worker of ${this.key} was handed ${call.key}`);
    this.inflight.set(call.seq, call);
    const req = call.request;
    this.worker.postMessage({ type: "call", seq: call.seq, key: call.key, entry: req.entry, env, call: req.call });
  }

  /** Calls of this worker's key in one message (the batch path): one post, one clone. */
  dispatchMany(calls, env) {
    clearTimeout(this.idleTimer);
    this.lastUsed = performance.now();
    const first = calls[0];
    if (this.key === null) this.key = first.key;
    else if (this.key !== first.key) throw new Error(`worker of ${this.key} was handed ${first.key}`);
    for (const call of calls) {
      call.handle = this;
      this.inflight.set(call.seq, call);
    }
    const items = calls.map((call) => ({ seq: call.seq, call: call.request.call }));
    this.worker.postMessage({ type: "calls", key: first.key, entry: first.request.entry, env, items });
  }

  onMessage(m) {
    if (this.dead) return;
    switch (m.type) {
      case "loaded":
        // Calls waiting on it got LOAD_FAILED from the worker; the next one imports again.
        if (!m.ok) this.pool.forget(m.key, this);
        return;
      case "pong":
        // Not blocked now; the runaway code may block later (e.g. once its import is done):
        // ask again while the worker drains.
        clearTimeout(this.pingTimer);
        this.pingTimer = setTimeout(() => this.ping(), PING_MS);
        return;
      case "exit": {
        const call = this.inflight.get(m.seq);
        call?.fail(WORKER_STOPPED_ERROR, WORKER_STOPPED, `the invocation exited with code ${m.code} (process.exit() in user code): its worker is retired`);
        this.retire();
        return;
      }
      case "done":
        if (m.heap > this.memoryMb * 1024 * 1024 * RETIRE_HEAP) this.retire();
        break;
      default:
    }
    const call = m.seq === null ? this.onlyCall() : this.inflight.get(m.seq);
    if (call) call.onWorkerMessage(m);
    else if (m.type === "log") this.pool.diag(`${m.level} (no invocation in flight): ${m.msg}`);
  }

  /** Output with no known invocation: the one in flight, if only one is. */
  onlyCall() {
    return this.inflight.size === 1 ? this.inflight.values().next().value : null;
  }

  onStream(level, chunk) {
    if (this.dead) return;
    const msg = chunk.toString("utf8").replace(/\n$/, "");
    const call = this.onlyCall();
    if (call) call.addLog(level, msg);
    else this.pool.diag(`${level} (no single invocation in flight): ${msg}`);
  }

  onError(err) {
    if (err?.code === "ERR_WORKER_OUT_OF_MEMORY") {
      const n = this.inflight.size;
      const shared = n > 1 ? ` (shared by ${n} invocations in flight)` : "";
      this.stop(OUT_OF_MEMORY, `the worker ran out of memory${shared}: ${err.message}`, OUT_OF_MEMORY_ERROR);
    } else {
      this.stop(WORKER_STOPPED, `the worker crashed: ${err?.stack ?? err}`);
    }
  }

  onCallFinished(call) {
    this.inflight.delete(call.seq);
    if (this.dead || this.inflight.size > 0) return;
    if (this.transient || this.retired) {
      this.stop(WORKER_STOPPED, "done");
    } else {
      this.idleTimer = setTimeout(() => this.stop(WORKER_STOPPED, "idle"), this.pool.options.idleMs);
      this.idleTimer.unref();
    }
  }

  /** A call of this worker timed out (already answered): retire, and stop it if it is stuck. */
  onTimedOut(call) {
    if (this.dead) return;
    this.retire();
    this.runaway = call.id;
    this.ping();
  }

  /** While a retired worker drains, it must answer within PING_MS, else it is terminated. */
  ping() {
    if (this.dead) return;
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => this.stop(
      WORKER_STOPPED, `the worker was terminated because invocation ${this.runaway} timed out and blocked it`,
    ), PING_MS);
    this.worker.postMessage({ type: "ping" });
  }

  /** Take no new calls; stop once the calls in flight end. */
  retire() {
    if (this.retired || this.dead) return;
    this.retired = true;
    this.pool.detach(this);
    if (this.inflight.size === 0) this.stop(WORKER_STOPPED, "retired");
  }

  /** Terminate the worker; its in-flight calls end with `code`. */
  stop(code, message, name = WORKER_STOPPED_ERROR) {
    if (this.dead) return this.terminated;
    this.dead = true;
    this.retired = true;
    clearTimeout(this.idleTimer);
    clearTimeout(this.pingTimer);
    this.pool.detach(this);
    this.pool.hosts.delete(this);
    for (const call of [...this.inflight.values()]) call.fail(name, code, message);
    this.inflight.clear();
    this.terminated = this.worker.terminate().catch((err) => this.pool.diag(`terminate failed: ${err}`));
    return this.terminated;
  }
}

export class HostPool {
  constructor(options, diag) {
    this.options = options; // {maxWorkers, idleMs, egressSocket}
    this.diag = diag;
    this.hosts = new Set(); // every live worker (for shutdown), the spare included
    this.byKey = new Map(); // worker_key → Host taking its calls, least recently used first
    this.spare = null; // a started worker no key has yet
    this.placed = 0; // keys given a worker so far: a spare is kept from the second on
  }

  /** The worker for `call` (started if need be), with the key moved to the LRU's end. */
  place(call, memoryMb) {
    const { kind, shared } = call.request.call;
    // An inspection gets a realm of its own, ended after it; a shared one (a package's
    // components, `shared: true`) goes to its key's worker as other calls do.
    if (kind === "inspect" && !shared) return new Host(this, { memoryMb, transient: true });
    const key = call.key;
    let host = this.byKey.get(key);
    this.byKey.delete(key);
    if (host && (host.retired || host.memoryMb !== memoryMb)) {
      // Its calls in flight finish there; its realm is not reused for the new ones.
      host.retire();
      host = null;
    }
    if (!host) host = this.start(memoryMb);
    this.byKey.set(key, host);
    return host;
  }

  shared() {
    let n = 0;
    for (const h of this.hosts) if (!h.retired && !h.transient && h !== this.spare) n += 1;
    return n;
  }

  /** A worker for a new key: the spare when it has the memory limit, else a new one; at the
   * cap, the least recently used idle one makes way first. A new spare starts afterwards
   * (from the runner's second key on). */
  start(memoryMb) {
    if (this.shared() >= this.options.maxWorkers) {
      const idle = [...this.hosts].filter(
        (h) => !h.retired && !h.transient && h !== this.spare && h.inflight.size === 0,
      );
      idle.sort((a, b) => a.lastUsed - b.lastUsed);
      idle[0]?.retire();
    }
    let host = this.spare;
    this.spare = null;
    if (!host || host.dead || host.memoryMb !== memoryMb) {
      host?.stop(WORKER_STOPPED, "spare of another memory limit");
      host = new Host(this, { memoryMb });
    }
    // After this call is posted: the spare's thread start does not delay it.
    this.placed += 1;
    if (this.placed >= 2) setImmediate(() => this.refillSpare(memoryMb));
    return host;
  }

  refillSpare(memoryMb) {
    if (this.spare !== null || this.stopping) return;
    this.spare = new Host(this, { memoryMb });
    this.spare.onCallFinished({ seq: null }); // arms its idle timer
  }

  /** A retired or dead worker's key goes to a new worker on its next call. */
  detach(host) {
    if (this.spare === host) this.spare = null;
    if (host.key !== null && this.byKey.get(host.key) === host) this.byKey.delete(host.key);
  }

  forget(key, host) {
    if (this.byKey.get(key) === host) this.byKey.delete(key);
    // A failed import leaves nothing worth keeping in that realm.
    host.retire();
  }

  /** Evict keys (exact, or `prefix:*`): their calls in flight end with WORKER_STOPPED and their
   * workers stop. */
  evict(pattern) {
    const match = pattern.endsWith(":*")
      ? (k) => k.startsWith(pattern.slice(0, -1))
      : (k) => k === pattern;
    let found = false;
    for (const host of [...this.hosts]) {
      if (host.key === null || !match(host.key)) continue;
      found = true;
      for (const call of [...host.inflight.values()]) call.fail(WORKER_STOPPED_ERROR, WORKER_STOPPED, "the worker was evicted");
      host.stop(WORKER_STOPPED, "the worker was evicted");
    }
    return found;
  }

  stopAll(message) {
    this.stopping = true;
    return [...this.hosts].map((h) => h.stop(WORKER_STOPPED, message));
  }
}
