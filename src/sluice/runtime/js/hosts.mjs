// The worker threads of one runner (docs/runtime.md, "Warm workers"). A worker (`Host`) holds
// many deployments' components at once (slots, by worker_key, in worker.mjs), so a call for a
// deployment not warm yet costs a module import in a running worker, not a new thread.
//
// - A key stays on the worker that imported it (affinity) while that worker takes new calls.
// - A new key goes to the least busy worker of its memory limit that has room; a new worker
//   starts when none has room or all are busy (BUSY calls in flight), up to --max-workers.
// - Room: a worker imports at most --max-keys-per-worker components in its life (an ES module
//   cannot be unloaded: the bound is on what it ever loaded), and its heap stays under
//   RETIRE_HEAP of its limit. A worker past either is *retired*: no new calls; it stops once
//   its calls in flight end. Its keys move to other workers on their next call.
// - At --max-workers, the least recently used idle worker makes way (LRU); idle workers stop
//   after --idle-ms.
// - A time-out: the call ends with TIMEOUT at once; its worker is retired and pinged every
//   PING_MS while it drains. A worker that answers is not blocked (an async hang): its other
//   calls finish normally. One that misses an answer is stuck in a loop and is terminated: its
//   other calls end with WORKER_STOPPED. A key that timed out, ran out of memory or exited runs *solo* afterwards,
//   in a worker of its own, so it can cost other deployments at most once.

import { Worker } from "node:worker_threads";

const WORKER_URL = new URL("./worker.mjs", import.meta.url);
const BUSY = 4;
const RETIRE_HEAP = 0.75;
const PING_MS = 250;
const MAX_SOLO_KEYS = 10_000;

export class Host {
  constructor(pool, { memoryMb, transient = false, solo = null }) {
    this.pool = pool;
    this.memoryMb = memoryMb;
    this.transient = transient; // inspect workers: terminated after their single call
    this.solo = solo; // the one key this worker serves, if any
    this.keys = new Set(); // keys whose slot lives here
    this.imported = 0; // keys ever imported here
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
    this.worker.on("exit", (code) => this.stop("WORKER_STOPPED", `the worker exited with code ${code}`));
    this.worker.stdout.on("data", (chunk) => this.onStream("stdout", chunk));
    this.worker.stderr.on("data", (chunk) => this.onStream("stderr", chunk));
    pool.hosts.add(this);
  }

  get full() {
    return this.imported >= this.pool.options.maxKeysPerWorker;
  }

  dispatch(call, env) {
    clearTimeout(this.idleTimer);
    this.lastUsed = performance.now();
    call.handle = this;
    if (!this.keys.has(call.key)) {
      this.keys.add(call.key);
      this.imported += 1;
    }
    this.inflight.set(call.seq, call);
    const req = call.request;
    this.worker.postMessage({ t: "call", seq: call.seq, key: call.key, entry: req.entry, env, call: req.call });
  }

  onMessage(m) {
    if (this.dead) return;
    switch (m.t) {
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
        call?.fail("WorkerStoppedError", "WORKER_STOPPED", `the invocation exited with code ${m.code} (process.exit() in user code): its worker is retired`);
        if (call) this.pool.makeSolo(call.key);
        this.retire();
        return;
      }
      case "done":
        if (m.heap > this.memoryMb * 1024 * 1024 * RETIRE_HEAP && this.keys.size > 1) this.retire();
        break;
      default:
    }
    const call = m.seq === null ? this.onlyCall() : this.inflight.get(m.seq);
    if (call) call.onWorkerMessage(m);
    else if (m.t === "log") this.pool.diag(`${m.level} (no invocation in flight): ${m.msg}`);
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
    const keys = [...this.inflight.values()].map((c) => c.key);
    for (const key of keys) this.pool.makeSolo(key);
    if (err?.code === "ERR_WORKER_OUT_OF_MEMORY") {
      const shared = keys.length > 1 ? ` (shared by ${keys.length} invocations in flight)` : "";
      this.stop("OUT_OF_MEMORY", `the worker ran out of memory${shared}: ${err.message}`, "OutOfMemoryError");
    } else {
      this.stop("WORKER_STOPPED", `the worker crashed: ${err?.stack ?? err}`);
    }
  }

  onCallFinished(call) {
    this.inflight.delete(call.seq);
    if (this.dead || this.inflight.size > 0) return;
    if (this.transient || this.retired) {
      this.stop("WORKER_STOPPED", "done");
    } else {
      this.idleTimer = setTimeout(() => this.stop("WORKER_STOPPED", "idle"), this.pool.options.idleMs);
      this.idleTimer.unref();
    }
  }

  /** A call of this worker timed out (already answered): retire, and stop it if it is stuck. */
  onTimedOut(call) {
    if (this.dead) return;
    this.pool.makeSolo(call.key);
    this.retire();
    this.runaway = call.id;
    this.ping();
  }

  /** While a retired worker drains, it must answer within PING_MS, else it is terminated. */
  ping() {
    if (this.dead) return;
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => this.stop(
      "WORKER_STOPPED", `the worker was terminated because invocation ${this.runaway} timed out and blocked it`,
    ), PING_MS);
    this.worker.postMessage({ t: "ping" });
  }

  /** Take no new calls; stop once the calls in flight end. */
  retire() {
    if (this.retired || this.dead) return;
    this.retired = true;
    this.pool.detach(this);
    if (this.inflight.size === 0) this.stop("WORKER_STOPPED", "retired");
  }

  /** Terminate the worker; its in-flight calls end with `code`. */
  stop(code, message, name = "WorkerStoppedError") {
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
    this.options = options; // {maxWorkers, maxKeysPerWorker, idleMs, egressSocket}
    this.diag = diag;
    this.hosts = new Set(); // every live worker (for shutdown)
    this.byKey = new Map(); // worker_key → Host taking its calls, least recently used first
    this.solo = new Set(); // keys that run in a worker of their own
  }

  /** The worker for `call` (started if need be), with the key moved to the LRU's end. */
  place(call, memoryMb) {
    if (call.request.call.kind === "inspect") return new Host(this, { memoryMb, transient: true });
    const key = call.key;
    let host = this.byKey.get(key);
    this.byKey.delete(key);
    if (!host || host.retired || host.memoryMb !== memoryMb) host = this.choose(key, memoryMb);
    this.byKey.set(key, host);
    return host;
  }

  choose(key, memoryMb) {
    if (this.solo.has(key)) return this.start({ memoryMb, solo: key });
    let best = null;
    for (const h of this.hosts) {
      if (h.retired || h.solo !== null || h.transient || h.memoryMb !== memoryMb || h.full) continue;
      if (!best || h.inflight.size < best.inflight.size) best = h;
    }
    if (best && (best.inflight.size < BUSY || this.shared() >= this.options.maxWorkers)) return best;
    return this.start({ memoryMb });
  }

  shared() {
    let n = 0;
    for (const h of this.hosts) if (!h.retired && !h.transient) n += 1;
    return n;
  }

  /** A new worker; at the cap, the least recently used idle one makes way first (soft cap: when
   * every worker is busy, the new one starts anyway rather than making the call wait). */
  start(opts) {
    if (this.shared() >= this.options.maxWorkers) {
      const idle = [...this.hosts].filter((h) => !h.retired && !h.transient && h.inflight.size === 0);
      idle.sort((a, b) => a.lastUsed - b.lastUsed);
      idle[0]?.retire();
    }
    return new Host(this, opts);
  }

  /** A retired or dead worker's keys go elsewhere on their next call. */
  detach(host) {
    for (const key of host.keys) if (this.byKey.get(key) === host) this.byKey.delete(key);
  }

  forget(key, host) {
    host.keys.delete(key);
    if (this.byKey.get(key) === host) this.byKey.delete(key);
  }

  makeSolo(key) {
    if (this.solo.has(key)) return;
    if (this.solo.size >= MAX_SOLO_KEYS) this.solo.delete(this.solo.values().next().value);
    this.solo.add(key);
  }

  /** Evict keys (exact, or `prefix:*`): their calls in flight end with WORKER_STOPPED and their
   * workers are retired (stopped once their other calls end); idle slots are just dropped. */
  evict(pattern) {
    const match = pattern.endsWith(":*")
      ? (k) => k.startsWith(pattern.slice(0, -1))
      : (k) => k === pattern;
    let found = false;
    for (const host of [...this.hosts]) {
      const running = [...host.inflight.values()].filter((c) => match(c.key));
      const keys = [...host.keys].filter(match);
      if (running.length === 0 && keys.length === 0) continue;
      found = true;
      for (const call of running) call.fail("WorkerStoppedError", "WORKER_STOPPED", "the worker was evicted");
      if (running.length > 0 || host.solo !== null) {
        host.retire();
      } else {
        for (const key of keys) this.forget(key, host);
        host.worker.postMessage({ t: "drop", keys });
      }
    }
    for (const key of [...this.solo]) if (match(key)) this.solo.delete(key);
    return found;
  }

  stopAll(message) {
    return [...this.hosts].map((h) => h.stop("WORKER_STOPPED", message));
  }
}
