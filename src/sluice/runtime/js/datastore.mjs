// Data stores (`data_store` props): each call is one round trip to Python, which answers it
// with one transaction (docs/runner-protocol.md, "store"). The worker posts
// `{type: "store", seq, req, json}`; the runner forwards it to Python and hands the
// `store_result` back as `{type: "store_result", req, ok, value, error}` (settleStore).

import { safeStringify, serializeForDb } from "./jsonsafe.mjs";
import { isObject } from "./props.mjs";

// Calls waiting for Python's answer, by request number (unique in this worker).
const waiters = new Map();
let lastReq = 0;

/** Send one store request of invocation `inv`; a Promise of Python's answer. */
export function askStore(inv, request) {
  if (inv.done) return Promise.reject(new Error("the invocation has ended: await data store calls in run()"));
  const req = ++lastReq;
  return new Promise((resolve, reject) => {
    waiters.set(req, { resolve, reject });
    inv.post({ type: "store", req, json: safeStringify(request) });
  });
}

export function settleStore(msg) {
  const waiter = waiters.get(msg.req);
  if (!waiter) return;
  waiters.delete(msg.req);
  if (msg.ok) {
    waiter.resolve(msg.value);
    return;
  }
  const err = new Error(msg.error?.message ?? "the data store call failed");
  err.name = msg.error?.name ?? "DataStoreError";
  err.code = msg.error?.code ?? "DataStoreError";
  waiter.reject(err);
}

/**
 * A `data_store` prop: an account data store named by the configured value (its id or name).
 * Every method is async and one round trip to Python (`store` messages, runner-protocol.md),
 * which runs it as one transaction: concurrent runs see each other's writes.
 */
export function makeDataStore(ref, inv, name) {
  const storeRef = typeof ref === "string" ? ref : isObject(ref) && typeof ref.id === "string" ? ref.id : null;
  const call = async (op, args = {}) => {
    if (!storeRef) {
      const err = new Error(`data_store prop "${name}" has no data store: configure it with a data store's id or name`);
      err.name = "ConfigurationError";
      throw err;
    }
    return await inv.storeCall({ op, store: storeRef, ...args });
  };
  return {
    async get(key) {
      const r = await call("get", { key });
      return r.found ? r.value : undefined;
    },
    async set(key, value, options) {
      // JSON as JSON.stringify makes it (a Date becomes its ISO string); a function throws.
      const json = serializeForDb(String(key), value);
      await call("set", { key, value: json === undefined ? null : JSON.parse(json), ttl: options?.ttl ?? null });
    },
    async delete(key) {
      await call("delete", { key });
    },
    async has(key) {
      return Boolean(await call("has", { key }));
    },
    keys: () => call("keys"),
    entries: () => call("entries"),
    async clear() {
      await call("clear");
    },
    setTtl: (key, ttl) => call("setTtl", { key, ttl: ttl ?? null }),
    async *[Symbol.asyncIterator]() {
      for (const pair of await call("entries")) yield pair;
    },
  };
}


