// Builds the `this` of one invocation (props, apps, interfaces, db, methods, $emit) and the `$`
// of actions, as docs/runner-protocol.md describes. Nothing here talks to the main thread
// directly: every side effect goes through the invocation object `inv` (see worker.mjs).

import { makeDataStore } from "./datastore.mjs";
import { makeHttpRequest } from "./httprequest.mjs";
import { serializeForDb, toJsonSafe } from "./jsonsafe.mjs";
import { isObject, resolveProp } from "./props.mjs";
import { DB_LIMIT } from "./codes.mjs";

// Platform's END_NEEDLE: `$end()` of @pipedream/platform throws an Error carrying it.
export const END_NEEDLE = "__pd_end";

/** An Error named NotSupportedError, for platform features Sluice does not provide. */
export function notSupported(what, hint = "") {
  const err = new Error(`${what} is not supported by Sluice${hint ? `: ${hint}` : ""}`);
  err.name = "NotSupportedError";
  return err;
}

/** The Error thrown by `$.flow.exit()` and `$end()`: the worker ends the run successfully. */
export function flowExitSignal(reason) {
  const err = new Error(`flow exit${reason === undefined ? "" : `: ${String(reason)}`}`);
  err[END_NEEDLE] = { message: reason, ts: new Date().toISOString() };
  return err;
}

export function isFlowExit(err) {
  return isObject(err) && err[END_NEEDLE] !== undefined;
}

/**
 * Build the instance for one call.
 *
 * Returns `{self, defs, values, apps}`: `defs` maps every prop name (component and
 * additionalProps) to its `resolveProp` record, `values` holds the user prop values, and `apps`
 * pairs each app object with the instance made for it.
 */
export async function buildInstance(component, call, inv) {
  const configured = isObject(call.props) ? call.props : {};
  const state = { self: {}, defs: {}, values: {}, apps: [], db: makeDb(call.db, inv, call.max_db_bytes), configured, inv };
  const self = state.self;
  const props = isObject(component.props) ? component.props : {};
  assignProps(state, props);
  if (isObject(component.methods)) {
    // Bound so that methods survive being passed as callbacks (`arr.forEach(this.emitEvent)`).
    for (const [name, fn] of Object.entries(component.methods)) {
      self[name] = typeof fn === "function" ? fn.bind(self) : fn;
    }
  }
  self.$emit = (event, meta) => {
    inv.emit(event, meta);
    return Promise.resolve();
  };
  if (typeof component.additionalProps === "function") {
    // Shallow copies: components toggle `hidden`/`disabled` on these, and the originals are
    // shared by every invocation of this warm worker.
    const previous = Object.fromEntries(
      Object.entries(props).map(([k, v]) => [k, isObject(v) ? { ...v } : v]),
    );
    const extra = await component.additionalProps.call(self, previous);
    if (isObject(extra)) assignProps(state, extra);
    // The full prop set, as Pipedream merges it (reload props reports it).
    state.propMap = { ...previous, ...(isObject(extra) ? extra : {}) };
  } else {
    state.propMap = props;
  }
  return state;
}

function assignProps(state, props) {
  const { self, configured } = state;
  for (const [name, raw] of Object.entries(props)) {
    const resolved = resolveProp(raw);
    state.defs[name] = resolved;
    const def = resolved.def;
    const has = Object.hasOwn(configured, name);
    switch (def.type) {
      case "app": {
        const app = makeAppInstance(def, configured[name]);
        state.apps.push({ app: def, instance: app });
        self[name] = app;
        break;
      }
      case "$.interface.http":
        self[name] = makeHttp(configured[name], state.inv);
        break;
      case "$.interface.timer":
        self[name] = makeTimer(has ? configured[name] : def.default);
        break;
      case "$.service.db":
        self[name] = state.db;
        break;
      case "data_store":
        self[name] = makeDataStore(has ? configured[name] : null, state.inv, name);
        // Props after it read it too: data_stores' `key` options take `({ dataStore })`.
        state.values[name] = self[name];
        break;
      case "http_request":
        self[name] = makeHttpRequest(has ? configured[name] : undefined, def.default);
        state.values[name] = self[name];
        break;
      default: {
        const value = has ? coerce(def.type, configured[name]) : cloneDefault(def.default);
        state.values[name] = value;
        self[name] = value;
      }
    }
  }
}

function coerce(type, value) {
  switch (type) {
    case "integer":
      return coerceInteger(value);
    case "boolean":
      return coerceBoolean(value);
    case "integer[]":
      return Array.isArray(value) ? value.map(coerceInteger) : value;
    case "boolean[]":
      return Array.isArray(value) ? value.map(coerceBoolean) : value;
    default:
      return value;
  }
}

const coerceInteger = (v) => (typeof v === "string" && /^\s*[-+]?\d+\s*$/.test(v) ? Number(v) : v);
const coerceBoolean = (v) => (v === "true" ? true : v === "false" ? false : v);

// Defaults live on the component shared by every invocation; a run mutating one must not
// change the next run's default.
function cloneDefault(value) {
  if (!isObject(value)) return value;
  try {
    return structuredClone(value);
  } catch {
    return value;
  }
}

/** An app prop at run time: its methods bound to it, its propDefinitions, slug and `$auth`. */
export function makeAppInstance(app, configured) {
  const auth = isObject(configured) && isObject(configured.$auth) ? configured.$auth : {};
  const instance = {
    type: "app",
    app: app.app,
    propDefinitions: app.propDefinitions,
    $auth: deepFreeze(structuredClone(auth)),
  };
  if (isObject(app.methods)) {
    for (const [name, fn] of Object.entries(app.methods)) {
      // Bound to the instance so app methods reach `this.$auth` and each other.
      instance[name] = typeof fn === "function" ? fn.bind(instance) : fn;
    }
  }
  return instance;
}

function deepFreeze(value) {
  if (isObject(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

// A workflow's `$.respond` with a status no HTTP answer can have throws in its step, so the run
// fails and its error reaches `$errors` (the client gets the workflow's 500). A source's
// `respond()` keeps Sluice's own 500 `invalid_response_status` for its client.
function checkStatus(response) {
  if (!isObject(response) || response.status === undefined) return;
  const s = response.status;
  const n = typeof s === "string" && /^\s*\d+\s*$/.test(s) ? Number(s) : s;
  if (!Number.isInteger(n) || n < 200 || n > 599) {
    throw new RangeError(`$.respond(): status must be an integer from 200 to 599, not ${JSON.stringify(s)}`);
  }
}

// `{endpoint}` for an interface of the component's props; `{endpoint_url}` (Pipedream's stored
// form) for one additionalProps() added, whose value is stored with the deployment.
function makeHttp(configured, inv) {
  return {
    endpoint: isObject(configured) ? (configured.endpoint ?? configured.endpoint_url) : undefined,
    respond(response) {
      inv.respond(response);
      return Promise.resolve();
    },
  };
}

function makeTimer(configured) {
  const c = isObject(configured) ? configured : {};
  return {
    type: "$.interface.timer",
    intervalSeconds: c.intervalSeconds ?? c.interval_seconds ?? null,
    cron: c.cron ?? null,
    timezone: c.timezone ?? null,
  };
}

// Synchronous on purpose: registry components call `this.db.get()` without await.
// `maxBytes` (the store's size limit) refuses a set() early, in the user's code, so a huge
// value never travels to Python; Python checks the limit itself (domain/limits.py). The
// measure here (characters of the values' JSON) is never more than Python's, so nothing Python
// would accept is refused here.
function makeDb(snapshot, inv, maxBytes = 0) {
  const store = new Map();
  if (isObject(snapshot)) {
    for (const [k, v] of Object.entries(snapshot)) if (v !== undefined) store.set(k, JSON.stringify(v));
  }
  const size = () => {
    let n = 0;
    for (const text of store.values()) n += text.length;
    return n;
  };
  const initial = size();
  let total = initial;
  return {
    get(key) {
      const text = store.get(String(key));
      return text === undefined ? undefined : JSON.parse(text);
    },
    set(key, value) {
      key = String(key);
      if (value === undefined) {
        total -= store.get(key)?.length ?? 0;
        store.delete(key);
        inv.dbDelete(key);
        return undefined;
      }
      const text = serializeForDb(key, value);
      const after = total - (store.get(key)?.length ?? 0) + text.length;
      if (maxBytes > 0 && after > maxBytes && after > initial) {
        const err = new Error(`DB_LIMIT: this.db would hold more than its limit of ${maxBytes} bytes (set ${JSON.stringify(key)})`);
        err.name = "DbLimitError";
        err.code = DB_LIMIT;
        throw err;
      }
      total = after;
      store.set(key, text);
      inv.dbSet(key, text);
      return undefined;
    },
  };
}

const SEND_TYPES = ["http", "email", "s3", "emit", "sse"];
// The size of a stored event's channel (Python's domain/text.py MAX_CHANNEL_CHARS).
const MAX_CHANNEL_CHARS = 300;

/** The `$` argument of an action's `run({$, steps})`. */
export function makeDollar(call, inv) {
  const flowUnsupported = (name) => () => {
    throw notSupported(`$.flow.${name}()`, "only workflow steps can pause, delay or re-run");
  };
  // Workflow steps get the run's resume and cancel URLs with the call (`call.flow`): a pause
  // recorded here takes effect when the step ends (steps.mjs), as on Pipedream.
  const urls = isObject(call.flow) ? call.flow : null;
  const pause = (kind, ms, extra = {}) => {
    if (!urls || !inv.step) throw notSupported(`$.flow.${kind}()`, "only workflow steps can pause, delay or re-run");
    if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`$.flow.${kind}: give the time in milliseconds as a number, got ${String(ms)}`);
    }
    inv.step.pause = { kind, ms: Math.round(ms), ...extra };
    return { resume_url: urls.resume_url, cancel_url: urls.cancel_url };
  };
  const send = {};
  for (const type of SEND_TYPES) {
    send[type] = (config) => {
      if (!isObject(config) || Array.isArray(config)) {
        throw new TypeError(`$.send.${type}: config must be an object`);
      }
      inv.send(type, config);
    };
  }
  // `$.send.emit(event, channel?)` (current docs) or `$.send.emit({raw_event, channel?})`
  // (the legacy type checker's shape): recorded as {raw_event, channel}.
  send.emit = (event, channel) => {
    if (event === undefined) throw new TypeError("$.send.emit: give the event to emit");
    const legacy = isObject(event) && !Array.isArray(event) && Object.hasOwn(event, "raw_event");
    let name = typeof channel === "string" ? channel : "";
    if (!name && legacy && typeof event.channel === "string") name = event.channel;
    // Counted in characters (code points), as the events' channel column counts them.
    const length = [...name].length;
    if (length > MAX_CHANNEL_CHARS) {
      throw new RangeError(
        `$.send.emit: the channel name is ${length} characters long; at most ${MAX_CHANNEL_CHARS} are allowed`,
      );
    }
    inv.send("emit", { raw_event: legacy ? event.raw_event : event, channel: name });
  };
  return {
    export(name, value) {
      inv.exportValue(String(name), value);
    },
    respond(response) {
      checkStatus(response);
      inv.respond(response);
      return Promise.resolve();
    },
    flow: {
      // Throws even without `return`: registry code calls it bare and expects the step to end.
      exit(reason) {
        inv.recordFlowExit(reason);
        throw flowExitSignal(reason);
      },
      delay: (ms) => pause("delay", ms),
      // Pipedream's default time-out: 24 hours, then the run is cancelled.
      suspend: (timeoutMs = 24 * 3600 * 1000) => pause("suspend", timeoutMs),
      rerun: (delayMs, context = null, maxReruns = 10) =>
        pause("rerun", delayMs, { context: toJsonSafe(context ?? null), max_reruns: Number(maxReruns) }),
      trigger: flowUnsupported("trigger"),
      refreshTimeout: () => "",
    },
    send,
    context: isObject(call.context) ? call.context : {},
    files: {
      open() {
        throw notSupported("$.files (File Stores)");
      },
      dir() {
        throw notSupported("$.files (File Stores)");
      },
    },
  };
}

/**
 * The options of prop `name`: `this` is the component instance, or the app instance when the
 * options function comes from the app's propDefinitions (then `inputValues` apply).
 */
export async function callOptions(state, call) {
  const name = call.prop;
  const resolved = Object.hasOwn(state.defs, name) ? state.defs[name] : undefined;
  if (!resolved) throw new Error(`prop "${String(name)}" not found in the component's props`);
  const options = resolved.def.options;
  if (Array.isArray(options)) return options;
  if (typeof options !== "function") throw new TypeError(`prop "${name}" has no options`);
  let thisArg = state.self;
  let inputValues = {};
  if (resolved.app && resolved.base && options === resolved.base.options) {
    thisArg = appInstanceFor(state, resolved.app);
    const input = resolved.input;
    inputValues = typeof input === "function" ? await input({ ...state.values }) : input;
    if (!isObject(inputValues)) inputValues = {};
  }
  return await options.call(thisArg, {
    page: call.page ?? 0,
    // Registry code destructures it (`const { cursor } = prevContext`), so never null.
    prevContext: isObject(call.prevContext) ? call.prevContext : {},
    query: call.query ?? null,
    ...inputValues,
  });
}

function appInstanceFor(state, app) {
  const same = state.apps.find((a) => a.app === app) ?? state.apps.find((a) => a.app.app === app.app);
  return same ? same.instance : makeAppInstance(app, undefined);
}
