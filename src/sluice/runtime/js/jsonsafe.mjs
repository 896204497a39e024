// JSON-safe serialization of user values. Everything the worker sends back (return values,
// emits, exports, respond bodies, option lists) goes through here: user code hands us
// anything, and the Python side parses every stdout line as JSON.

const MAX_DEPTH = 500;

/**
 * JSON text for any value, never throwing: `undefined` fields dropped (top-level undefined is
 * `null`), BigInt → string, cycles → "[Circular]", functions and symbols dropped, `toJSON`
 * honoured (Buffers become {type: "Buffer", data: [...]}, Dates ISO strings).
 */
export function safeStringify(value) {
  try {
    // Fast path: plain data is the common case and JSON.stringify already has the semantics
    // we want for everything except BigInt and cycles (which make it throw).
    const text = JSON.stringify(value);
    return text === undefined ? "null" : text;
  } catch {
    try {
      const safe = walk(value, "", new Set(), 0);
      return safe === undefined ? "null" : JSON.stringify(safe);
    } catch (err) {
      // Only exotic objects get here (a Proxy whose traps throw, say).
      return JSON.stringify(`[unserializable: ${err && err.message}]`);
    }
  }
}

/** A plain JSON value equivalent to what safeStringify would print. */
export function toJsonSafe(value) {
  return JSON.parse(safeStringify(value));
}

function walk(value, key, ancestors, depth) {
  if (value !== null && typeof value === "object" && typeof value.toJSON === "function") {
    try {
      value = value.toJSON(key);
    } catch {
      return undefined;
    }
  }
  switch (typeof value) {
    case "bigint":
      return value.toString();
    case "function":
    case "symbol":
    case "undefined":
      return undefined;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "object":
      break;
    default:
      return value;
  }
  if (value === null) return null;
  if (ancestors.has(value)) return "[Circular]";
  if (depth > MAX_DEPTH) return "[Too deep]";
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const out = [];
      for (let i = 0; i < value.length; i++) {
        const item = guardedGet(value, i);
        const v = walk(item, String(i), ancestors, depth + 1);
        out.push(v === undefined ? null : v);
      }
      return out;
    }
    const out = {};
    for (const k of Object.keys(value)) {
      const v = walk(guardedGet(value, k), k, ancestors, depth + 1);
      if (v !== undefined) out[k] = v;
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}

// A throwing getter must not abort serialization of the whole value.
function guardedGet(obj, key) {
  try {
    return obj[key];
  } catch {
    return undefined;
  }
}

/**
 * JSON text of a value bound for `$.service.db`, or a TypeError naming the key when the value
 * cannot round-trip through JSON (functions, symbols, BigInt, cycles).
 */
export function serializeForDb(key, value) {
  let badPath = null;
  let text;
  try {
    text = JSON.stringify(value, function replacer(k, v) {
      if (typeof v === "function" || typeof v === "symbol") {
        badPath = k === "" ? "the value itself" : `field "${k}"`;
        throw new TypeError(`${typeof v} is not JSON-serializable`);
      }
      return v;
    });
  } catch (err) {
    const where = badPath ? ` (${badPath})` : "";
    throw new TypeError(
      `db.set("${key}"): value is not JSON-serializable${where}: ${err && err.message}`,
    );
  }
  return text;
}
