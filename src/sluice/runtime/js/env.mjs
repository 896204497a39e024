// `process.env` in a worker (docs/runtime.md, "Environment"): code reads the environment of the
// *scope* it runs in, and a scope is open only while its code runs:
//   - a workflow code step: the account's variables, from the step's start to its end;
//   - a source's or an action's call: only what the invocation names for it (`PD_COMPONENT`),
//     never the account's variables;
//   - an action step of a workflow: nothing (its props may name variables; steps.mjs resolves
//     them before the step's scope opens);
//   - a module's top level, and anything that runs after its scope closed (a timer, a promise
//     an action or a step left behind): nothing.
// A callback keeps the scope it was scheduled in (AsyncLocalStorage), so a timer an action sets
// reads an empty `process.env` even while a later code step runs.

import { AsyncLocalStorage } from "node:async_hooks";

// Taken before any user code runs: code of the same deployment (an action step of a workflow)
// patching AsyncLocalStorage.prototype or Function.prototype.call must not reach a scope.
const { apply } = Reflect;
const { getStore, run } = AsyncLocalStorage.prototype;
const { defineProperty, freeze, hasOwn } = Object;

const scopes = new AsyncLocalStorage();
const NO_ENV = freeze(Object.create(null));

export class EnvScope {
  /** `vars`: the variables readable (and writable) while the scope is open. */
  constructor(vars) {
    this.vars = vars;
    this.open = true;
  }

  close() {
    this.open = false;
  }
}

/** The scope of module evaluation and of the runtime's own work: nothing readable. */
export const CLOSED = new EnvScope(NO_ENV);
CLOSED.close();

/** Run `fn` in `scope` (what it schedules keeps that scope). */
export function runIn(scope, fn) {
  return apply(run, scopes, [scope, fn]);
}

/** Run async `fn` with `vars` readable; closed once it settles, whatever it left behind. */
export async function withEnv(vars, fn) {
  const scope = new EnvScope(vars);
  try {
    return await runIn(scope, fn);
  } finally {
    scope.close();
  }
}

function current() {
  const scope = apply(getStore, scopes, []);
  return scope !== undefined && scope.open ? scope.vars : NO_ENV;
}

/** Make `process.env` read the current scope; it cannot be replaced or redefined afterwards. */
export function installProcessEnv() {
  const env = new Proxy({}, {
    get: (_t, k) => {
      const vars = current();
      return typeof k === "string" && hasOwn(vars, k) ? vars[k] : undefined;
    },
    has: (_t, k) => hasOwn(current(), k),
    ownKeys: () => Reflect.ownKeys(current()),
    getOwnPropertyDescriptor: (_t, k) => {
      const vars = current();
      return hasOwn(vars, k) ? { value: vars[k], enumerable: true, configurable: true, writable: true } : undefined;
    },
    // Outside an open scope writes go nowhere; inside, they last as long as its variables.
    set: (_t, k, v) => {
      const vars = current();
      if (vars !== NO_ENV && typeof k === "string") vars[k] = String(v);
      return true;
    },
    deleteProperty: (_t, k) => {
      const vars = current();
      if (vars !== NO_ENV) delete vars[k];
      return true;
    },
    defineProperty: () => false,
    setPrototypeOf: () => false,
  });
  defineProperty(process, "env", { value: env, writable: false, enumerable: true, configurable: false });
}
