// Prop definitions: resolving `propDefinition`, and describing a component for `inspect`.
// Shared by inspect and by the instance builder so both see the same resolved definitions.

import { toJsonSafe } from "./jsonsafe.mjs";

export const isObject = (v) => v !== null && typeof v === "object";

// Top-level component fields reported by inspect when they hold JSON values.
const TOP_FIELDS = ["name", "key", "type", "version", "description", "dedupe"];

/**
 * Resolve one entry of a component's `props`.
 *
 * Returns `{def, shorthand?, app?, name?, input?, base?, error?}`: `def` is the effective
 * definition (`{...app.propDefinitions[name], ...localFields}` without `propDefinition`), `app`
 * the app object named by `propDefinition`, `base` the app's own definition (to tell whether
 * `options` came from the app), `input` the third `propDefinition` element.
 */
export function resolveProp(raw) {
  if (typeof raw === "string") return { def: { type: raw }, shorthand: true };
  if (raw === undefined) return { def: {}, undefined: true, error: "the prop is undefined" };
  if (!isObject(raw) || Array.isArray(raw)) {
    return { def: {}, error: "a prop definition must be an object or a type string" };
  }
  if (raw.propDefinition === undefined) {
    // Pipedream takes a prop with no type and an HTTP request as its default for an
    // http_request prop; the component rules decide whether Sluice does (inferred_type).
    if (raw.type === undefined && isHttpRequestValue(raw.default)) {
      return { def: { ...raw, type: "http_request" }, inferred: "http_request" };
    }
    return { def: raw };
  }
  const { propDefinition: pd, ...local } = raw;
  if (!Array.isArray(pd)) {
    return { def: local, error: "propDefinition must be an array [app, name, inputValues]" };
  }
  const [app, name, input] = pd;
  if (!isObject(app) || !isObject(app.propDefinitions)) {
    return { def: local, error: "propDefinition does not name an app object with propDefinitions" };
  }
  const base = Object.hasOwn(app.propDefinitions, name) ? app.propDefinitions[name] : undefined;
  if (!isObject(base)) {
    return { def: local, error: `propDefinition "${String(name)}" not found in app "${String(app.app)}"` };
  }
  return { def: { ...base, ...local }, app, name, input, base };
}

const isHttpRequestValue = (v) =>
  isObject(v) && !Array.isArray(v) && typeof v.url === "string" && (v.method === undefined || typeof v.method === "string");

/** The `inspect` value for a loaded component (see docs/runner-protocol.md). */
export function describeComponent(component, format) {
  const out = {};
  for (const field of TOP_FIELDS) {
    const v = component[field];
    if (v !== undefined && typeof v !== "function" && typeof v !== "symbol") out[field] = toJsonSafe(v);
  }
  out.format = format;
  out.has_run = typeof component.run === "function";
  out.run_type = typeof component.run;
  const hooks = isObject(component.hooks) ? Object.keys(component.hooks) : [];
  out.hooks = hooks;
  out.hook_types = Object.fromEntries(hooks.map((h) => [h, typeof component.hooks[h]]));
  out.methods = isObject(component.methods) ? Object.keys(component.methods) : [];
  out.has_additional_props = typeof component.additionalProps === "function";
  out.has_sample_emit = component.sampleEmit !== undefined;
  out.props = isObject(component.props)
    ? Object.entries(component.props).map(([name, raw]) => describeProp(name, raw))
    : [];
  return out;
}

/** Every prop of a resolved prop map (a component's `props` merged with `additionalProps()`). */
export function describeProps(propMap) {
  return isObject(propMap) ? Object.entries(propMap).map(([name, raw]) => describeProp(name, raw)) : [];
}

function describeProp(name, raw) {
  const resolved = resolveProp(raw);
  const entry = { name, definition: describeDefinition(resolved.def) };
  if (resolved.app) {
    entry.definition.propDefinition = { app: toJsonSafe(resolved.app.app), name: resolved.name };
  }
  if (resolved.shorthand) entry.shorthand = true;
  if (resolved.undefined) entry.undefined = true;
  if (resolved.inferred) entry.inferred_type = resolved.inferred;
  if (resolved.error) entry.error = resolved.error;
  return entry;
}

function describeDefinition(def) {
  if (def.type !== "app") return describeFields(def);
  // App props are the whole app object; only the shape is useful to Python.
  const { propDefinitions, methods, ...rest } = def;
  return {
    ...describeFields(rest),
    propDefinitions: isObject(propDefinitions) ? Object.keys(propDefinitions) : [],
    methods: isObject(methods) ? Object.keys(methods) : [],
  };
}

function describeFields(def) {
  const out = {};
  const functionFields = [];
  for (const [k, v] of Object.entries(def)) {
    if (k === "propDefinition" || v === undefined || typeof v === "symbol") continue;
    if (k === "options" && typeof v === "function") out.remoteOptions = true;
    else if (typeof v === "function") functionFields.push(k);
    else out[k] = toJsonSafe(v);
  }
  if (functionFields.length) out.functionFields = functionFields;
  return out;
}
