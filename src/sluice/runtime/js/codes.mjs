// The runner's error codes and the names of the errors it makes itself, from codes.json: the
// one table Python (runtime/protocol.py) reads too. A code missing from the table fails this
// module's import, so a misspelt constant cannot reach an answer as `undefined`.
import { createRequire } from "node:module";

const TABLE = createRequire(import.meta.url)("./codes.json").codes;

function code(name) {
  if (!Object.hasOwn(TABLE, name)) throw new Error(`codes.json has no code ${name}`);
  return name;
}

function errorName(c) {
  const name = TABLE[c].name;
  if (typeof name !== "string") throw new Error(`codes.json gives ${c} no error name`);
  return name;
}

export const TIMEOUT = code("TIMEOUT");
export const OUT_OF_MEMORY = code("OUT_OF_MEMORY");
export const WORKER_STOPPED = code("WORKER_STOPPED");
export const LOAD_FAILED = code("LOAD_FAILED");
export const NOT_A_COMPONENT = code("NOT_A_COMPONENT");
export const NO_RUN = code("NO_RUN");
export const BAD_MESSAGE = code("BAD_MESSAGE");
export const DB_LIMIT = code("DB_LIMIT");
export const EGRESS_REFUSED = code("EGRESS_REFUSED");
export const EGRESS_FAILED = code("EGRESS_FAILED");

export const TIMEOUT_ERROR = errorName(TIMEOUT);
export const OUT_OF_MEMORY_ERROR = errorName(OUT_OF_MEMORY);
export const WORKER_STOPPED_ERROR = errorName(WORKER_STOPPED);
export const BAD_MESSAGE_ERROR = errorName(BAD_MESSAGE);
