// The floor of an isolated webhook workflow in Node (bench/isolation_floor.py): an HTTP front
// that runs side_by_side.py's one step (the body merged with {step1, ts1}) and answers with it,
// storing nothing, in one of four modes:
//   inline   the step called in the front's own thread (no isolation: Node-RED's shape)
//   vm       the step run in a node:vm context per request, as Node-RED's function node does
//   worker   the step in a worker thread of the front (a realm of its own: one hop each way)
//   process  the step in a worker thread of another process (a runner, as Sluice's are per
//            account): a pipe hop and a worker hop each way
//   stored   process, and each run stored before its answer: the runs a turn gathered go to a
//            Python writer (bench/_floor_writer.py) in one line, stored in one SQLite
//            transaction, answered after its commit
// Every hop carries what one turn of the event loop gathered in one message (as Sluice's
// runner protocol does), so at high concurrency many runs share a hop.
// usage: node _floor.mjs MODE PORT [SQLITE_FILE]   |   node _floor.mjs runner   (a child)

import { spawn } from "node:child_process";
import http from "node:http";
import { createInterface } from "node:readline";
import vm from "node:vm";
import { Worker, isMainThread, parentPort } from "node:worker_threads";

const STEP = "Object.assign({}, payload, { step1: true, ts1: Date.now() })";
const step = (payload) => Object.assign({}, payload, { step1: true, ts1: Date.now() });

/** Items queued in one turn leave together on the next (setImmediate). */
function batcher(send) {
  let queued = null;
  return (item) => {
    if (queued === null) {
      queued = [];
      setImmediate(() => {
        const items = queued;
        queued = null;
        send(items);
      });
    }
    queued.push(item);
  };
}

if (!isMainThread) {
  // A worker: runs each item's step, answers the batch's results together.
  const reply = batcher((items) => parentPort.postMessage(items));
  parentPort.on("message", (items) => {
    for (const [id, body] of items) reply([id, JSON.stringify(step(JSON.parse(body)))]);
  });
} else if (process.argv[2] === "runner") {
  // The process mode's runner: lines in on stdin, each a batch; lines out on stdout.
  const worker = new Worker(new URL(import.meta.url));
  const out = batcher((items) => process.stdout.write(`${JSON.stringify(items)}\n`));
  worker.on("message", (items) => {
    for (const item of items) out(item);
  });
  const toWorker = batcher((items) => worker.postMessage(items));
  createInterface({ input: process.stdin }).on("line", (line) => {
    for (const item of JSON.parse(line)) toWorker(item);
  });
} else {
  const [mode, port] = [process.argv[2], Number(process.argv[3])];
  const waiting = new Map();
  let nextId = 0;
  const settle = (items) => {
    for (const [id, json] of items) {
      const res = waiting.get(id);
      waiting.delete(id);
      res.writeHead(200, { "content-type": "application/json" }).end(json);
    }
  };
  let dispatch;
  if (mode === "inline") {
    dispatch = (id, body) => settle([[id, JSON.stringify(step(JSON.parse(body)))]]);
  } else if (mode === "vm") {
    const script = new vm.Script(`result = ${STEP}`);
    const context = vm.createContext({ Object, Date, payload: null, result: null });
    dispatch = (id, body) => {
      context.payload = JSON.parse(body);
      script.runInContext(context);
      settle([[id, JSON.stringify(context.result)]]);
    };
  } else if (mode === "worker") {
    const worker = new Worker(new URL(import.meta.url));
    worker.on("message", settle);
    const send = batcher((items) => worker.postMessage(items));
    dispatch = (id, body) => send([id, body]);
  } else if (mode === "process" || mode === "stored") {
    let done = settle;
    if (mode === "stored") {
      const writerScript = new URL("./_floor_writer.py", import.meta.url).pathname;
      const writer = spawn(process.env.FLOOR_PYTHON ?? "python3", [writerScript, process.argv[4]], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      const results = new Map();
      createInterface({ input: writer.stdout }).on("line", (line) => {
        settle(JSON.parse(line).map((id) => {
          const json = results.get(id);
          results.delete(id);
          return [id, json];
        }));
      });
      const store = batcher((items) => writer.stdin.write(`${JSON.stringify(items)}\n`));
      done = (items) => {
        for (const [id, json] of items) {
          results.set(id, json);
          store([id, json]);
        }
      };
    }
    const child = spawn(process.execPath, [new URL(import.meta.url).pathname, "runner"], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    createInterface({ input: child.stdout }).on("line", (line) => done(JSON.parse(line)));
    const send = batcher((items) => child.stdin.write(`${JSON.stringify(items)}\n`));
    dispatch = (id, body) => send([id, body]);
  } else {
    throw new Error(`mode is inline, vm, worker, process or stored, not ${mode}`);
  }
  http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const id = nextId++;
      waiting.set(id, res);
      dispatch(id, Buffer.concat(chunks).toString());
    });
  }).listen(port, "127.0.0.1", () => console.log(`listening ${mode} ${port}`));
}
