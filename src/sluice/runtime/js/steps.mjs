// Workflow runs: a `workflow` call executes its steps in order in this worker (see
// docs/runner-protocol.md, "workflow"). Each step is a component module (a code step's
// `defineComponent({...})` or an action) run as `run.call(this, {steps, $})`.
//
// For each step the worker posts `{type: "step", id, timeout_ms}` when it starts (the runner arms
// the step's time-out) and `{type: "step_done", json}` with its record when it ends:
//   {id, name, status: "success" | "error" | "exited", return_value, exports, duration_ms, error}
// A step that throws ends the run (status "error"); `$.flow.exit(reason)` ends it with status
// "exited" and the run succeeds. `$.flow.delay/suspend/rerun` record a pause on the step
// (`record.pause = {kind, ms, …}`): the step ends as "delayed", "suspended" or "rerun" and the
// call ends there (`{status: "paused"}`); Python resumes the run later with `start`/`prior`. Later steps read `steps.<name>.$return_value` and
// `steps.<name>.<export>`; configured prop values may refer to them with `{{ expression }}`.

import { performance } from "node:perf_hooks";

import { withEnv } from "./env.mjs";
import { buildInstance, END_NEEDLE, isFlowExit, makeDollar } from "./instance.mjs";
import { toJsonSafe } from "./jsonsafe.mjs";
import { isObject, resolveProp } from "./props.mjs";
import { LOAD_FAILED, NOT_A_COMPONENT } from "./codes.mjs";

const WHOLE_REF = /^\s*\{\{([\s\S]+?)\}\}\s*$/;
const ANY_REF = /\{\{([\s\S]+?)\}\}/g;

const PAUSED = { delay: "delayed", suspend: "suspended", rerun: "rerun" };

export async function runWorkflow(call, inv, env, serializeError, importStep) {
  // A resumed run (after $.flow.delay/suspend/rerun) starts at `start`, with the records of
  // the steps before it in `prior`, and `run` ($.context.run) for the step it starts with.
  const steps = {
    ...(isObject(call.prior) ? call.prior : {}),
    trigger: { event: call.event ?? null, context: isObject(call.context) ? call.context : {} },
  };
  const list = Array.isArray(call.steps) ? call.steps : [];
  const start = Number.isInteger(call.start) ? call.start : 0;
  let status = "success";
  for (const [index, step] of list.entries()) {
    if (index < start) continue;
    const record = {
      id: step.id, name: step.name, status: "success", return_value: null, exports: {}, duration_ms: 0, error: null,
    };
    inv.beginStep(record, step.timeout_ms ?? null);
    const started = performance.now();
    try {
      const raw = step.props ?? {};
      // The account's environment variables are for code steps: an action's props may name
      // them ({{process.env.X}}, resolved here, in a scope of their own), its code never reads
      // them (the requirement), not even in a callback after its step (env.mjs).
      const props = await withEnv(env, async () => resolveRefs(raw, steps, `step "${step.name}"`));
      const component = await loadStep(step, importStep);
      checkResolved(component, raw, props, step.name);
      const state = await buildInstance(component, { props, db: step.db ?? {}, max_db_bytes: step.max_db_bytes }, inv);
      const self = state.self;
      const before = new Set(Object.keys(self));
      const run = index === start && isObject(call.run) ? call.run : { runs: 1 };
      const context = { ...steps.trigger.context, step_id: step.id, step_name: step.name, run };
      const $ = makeDollar({ context, flow: call.flow }, inv);
      // A code step's writes to process.env last for the run's later code steps.
      const vars = step.kind === "action" ? {} : env;
      try {
        const value = await withEnv(vars, () => component.run.call(self, { steps, $ }));
        record.return_value = value === undefined ? null : toJsonSafe(value);
      } finally {
        // Legacy exports: `this.name = value` inside run().
        for (const key of Object.keys(self)) if (!before.has(key)) inv.exportValue(key, self[key]);
      }
    } catch (err) {
      if (isFlowExit(err)) {
        if (!inv.flowExit) inv.recordFlowExit(err[END_NEEDLE]?.message);
        record.status = "exited";
      } else {
        record.status = "error";
        record.error = serializeError(err);
      }
    }
    if (record.pause && record.status === "success") record.status = PAUSED[record.pause.kind];
    else delete record.pause;
    record.duration_ms = Math.round((performance.now() - started) * 1000) / 1000;
    inv.endStep(record);
    // What later steps see: the exports, and the return value as JSON would carry it.
    steps[step.name] = { ...record.exports, $return_value: record.return_value };
    if (record.status !== "success") {
      status = record.pause ? "paused" : record.status;
      break;
    }
  }
  return { status };
}

/** The step's component, imported by `importStep` (the worker's, once per deployment). */
async function loadStep(step, importStep) {
  let component;
  try {
    component = await importStep(step.entry);
  } catch (err) {
    if (err && typeof err === "object" && !err.code) err.code = LOAD_FAILED;
    throw err;
  }
  if (!isObject(component) || typeof component.run !== "function") {
    const err = new TypeError(
      `step "${step.name}" must export a component with a run method, e.g. export default defineComponent({ async run({ steps, $ }) { ... } })`,
    );
    err.code = NOT_A_COMPONENT;
    throw err;
  }
  return component;
}

/**
 * Prop values with `{{ expression }}`: a value that is one expression becomes the expression's
 * value (an object stays an object); text around expressions is interpolated. Expressions are
 * JavaScript evaluated with `steps` (and `event`, the trigger's event) in scope, as Pipedream's
 * builder does; this is user code, in the user's own worker.
 */
export function resolveRefs(value, steps, where) {
  if (typeof value === "string") {
    if (!value.includes("{{")) return value;
    const whole = WHOLE_REF.exec(value);
    if (whole) return evaluate(whole[1], steps, where);
    return value.replace(ANY_REF, (_m, expr) => {
      const v = evaluate(expr, steps, where);
      if (v === undefined || v === null) return "";
      return typeof v === "object" ? JSON.stringify(v) : String(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolveRefs(v, steps, where));
  if (isObject(value)) {
    // App props ({$auth}) and other platform values are passed through untouched.
    if (Object.hasOwn(value, "$auth")) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveRefs(v, steps, where)]));
  }
  return value;
}

function evaluate(expr, steps, where) {
  try {
    // eslint-disable-next-line no-new-func
    const fn = new Function("steps", "event", `"use strict"; return (${expr});`);
    return fn(steps, steps.trigger?.event);
  } catch (err) {
    const e = new Error(`${where}: {{${expr.trim()}}} could not be evaluated: ${err && err.message}`);
    e.name = "ConfigurationError";
    throw e;
  }
}

/**
 * Values that came from `{{ }}` reach `run()` with the type the expression gives, as
 * Pipedream passes them (docs/api.md, "Configured values"): an object for a `string` prop stays
 * an object, a number above an integer prop's `max` stays that number. The one refusal left is
 * Pipedream's own: a required prop whose expression gives nothing (`undefined` or `null`) is
 * missing, a `ConfigurationError` naming the step and the prop. (The runtime's one reading,
 * text spelling an integer or boolean read as one, happens in `buildInstance` for every value.)
 */
function checkResolved(component, raw, props, stepName) {
  const defs = isObject(component.props) ? component.props : {};
  for (const [name, value] of Object.entries(props)) {
    if (typeof raw[name] !== "string" || !raw[name].includes("{{") || !Object.hasOwn(defs, name)) continue;
    if (value !== undefined && value !== null) continue;
    const def = resolveProp(defs[name]).def;
    if (def.optional || def.default !== undefined) continue;
    const err = new Error(`step "${stepName}": prop "${name}" is required, got ${value} from ${raw[name]}`);
    err.name = "ConfigurationError";
    throw err;
  }
}
