// egress.mjs: http, https and fetch() go through a CONNECT proxy on a Unix socket. Everything
// listens on loopback: a small recording proxy (the real one, sluice/runtime/egress.py, is tested
// by pytest, with Node too, in tests/security/), an HTTP and an HTTPS server whose self-signed
// certificate for egress.test is made here with openssl. The proxy sends every name to
// 127.0.0.1, so a request for egress.test that arrives proves it went through the tunnel.
// Run with `node --test tests/js/`.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

import { installEgress } from "../../src/sluice/runtime/js/egress.mjs";

const EGRESS = fileURLToPath(new URL("../../src/sluice/runtime/js/egress.mjs", import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "egress-test-"));
const socketPath = path.join(dir, "egress.sock");
const tunnels = []; // the CONNECT targets the proxy saw
let proxy, plain, secure, ca, plainPort, securePort, previous;

function listen(server, ...args) {
  return new Promise((resolve) => server.listen(...args, () => resolve(server.address())));
}

function answer(req, res) {
  res.setHeader("content-type", "text/plain");
  res.end(`${req.headers.host} ${req.url}`);
}

before(async () => {
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=egress.test",
     "-addext", "subjectAltName=DNS:egress.test", "-keyout", path.join(dir, "key.pem"),
     "-out", path.join(dir, "cert.pem")],
    { stdio: "ignore" },
  );
  ca = fs.readFileSync(path.join(dir, "cert.pem"));
  plain = http.createServer(answer);
  plainPort = (await listen(plain, 0, "127.0.0.1")).port;
  secure = https.createServer({ key: fs.readFileSync(path.join(dir, "key.pem")), cert: ca }, answer);
  securePort = (await listen(secure, 0, "127.0.0.1")).port;
  proxy = net.createServer((client) => {
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end === -1) return;
      client.removeListener("data", onData);
      const [method, target] = head.subarray(0, end).toString("latin1").split(" ");
      tunnels.push(target);
      if (method !== "CONNECT" || target.startsWith("refused.test:")) {
        const body = "sluice egress: refused: refused.test is not welcome\n";
        client.end(`HTTP/1.1 403 Forbidden\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        return;
      }
      const upstream = net.connect(Number(target.split(":").pop()), "127.0.0.1", () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        const rest = head.subarray(end + 4);
        if (rest.length) upstream.write(rest);
        client.pipe(upstream).pipe(client);
      });
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
    };
    client.on("data", onData);
  });
  await listen(proxy, socketPath);
  previous = installEgress(socketPath, { ca });
});

after(async () => {
  http.globalAgent.destroy();
  https.globalAgent.destroy();
  const dispatcher = globalThis[Symbol.for("undici.globalDispatcher.1")];
  await dispatcher.close();
  globalThis[Symbol.for("undici.globalDispatcher.1")] = previous.dispatcher;
  globalThis.fetch = previous.fetch;
  for (const server of [plain, secure, proxy]) {
    server.closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

function get(module, url, options = {}) {
  return new Promise((resolve, reject) => {
    const req = module.get(url, options, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error("timed out")));
  });
}

test("http.get goes through the tunnel", async () => {
  const res = await get(http, `http://egress.test:${plainPort}/a?x=1`);
  assert.deepEqual(res, { status: 200, body: `egress.test:${plainPort} /a?x=1` });
  assert.ok(tunnels.includes(`egress.test:${plainPort}`));
});

test("https.request runs TLS over the tunnel, checking the certificate for the real name", async () => {
  const res = await get(https, `https://egress.test:${securePort}/b`, { ca });
  assert.deepEqual(res, { status: 200, body: `egress.test:${securePort} /b` });
  assert.ok(tunnels.includes(`egress.test:${securePort}`));
  // The same server under another name: the certificate does not match, so TLS must fail.
  await assert.rejects(get(https, `https://other.test:${securePort}/`, { ca }), {
    code: "ERR_TLS_CERT_ALTNAME_INVALID",
  });
  // And without the CA the certificate is not trusted: the check was not switched off.
  await assert.rejects(get(https, `https://egress.test:${securePort}/`), {
    code: "DEPTH_ZERO_SELF_SIGNED_CERT",
  });
});

test("fetch() goes through the tunnel, http and https", async () => {
  const before = tunnels.length;
  const res = await fetch(`http://egress.test:${plainPort}/c`);
  assert.equal(await res.text(), `egress.test:${plainPort} /c`);
  const tls = await fetch(`https://egress.test:${securePort}/d`);
  assert.equal(await tls.text(), `egress.test:${securePort} /d`);
  assert.deepEqual(tunnels.slice(before), [`egress.test:${plainPort}`, `egress.test:${securePort}`]);
});

test("a refusal is an EGRESS_REFUSED error with the proxy's reason", async () => {
  await assert.rejects(get(http, "http://refused.test:81/"), (err) => {
    assert.equal(err.code, "EGRESS_REFUSED");
    assert.equal(err.status, 403);
    assert.match(err.message, /refused\.test is not welcome/);
    return true;
  });
  await assert.rejects(get(https, "https://refused.test:443/"), { code: "EGRESS_REFUSED" });
  await assert.rejects(fetch("http://refused.test:82/"), (err) => {
    assert.equal(err.cause?.code, "EGRESS_REFUSED");
    return true;
  });
});

test("installEgress works in a worker thread", async () => {
  const code = `
    import { workerData, parentPort } from "node:worker_threads";
    const { installEgress } = await import(workerData.egress);
    installEgress(workerData.socketPath);
    const res = await fetch(workerData.url);
    parentPort.postMessage(await res.text());
    await globalThis[Symbol.for("undici.globalDispatcher.1")].close();
  `;
  const url = `http://egress.test:${plainPort}/w`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`), {
    workerData: { egress: new URL(`file://${EGRESS}`).href, socketPath, url },
  });
  const [message] = await Promise.race([
    new Promise((resolve, reject) => {
      worker.once("message", (m) => resolve([m]));
      worker.once("error", reject);
    }),
    new Promise((_, reject) => setTimeout(() => reject(new Error("worker timed out")), 10_000).unref()),
  ]);
  await worker.terminate();
  assert.equal(message, `egress.test:${plainPort} /w`);
});


/** Runs `code` (an ES module) in a worker with `workerData`; resolves its first message. */
async function inWorker(code, workerData) {
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`), {
    workerData: { egress: new URL(`file://${EGRESS}`).href, socketPath, ...workerData },
  });
  try {
    return await Promise.race([
      new Promise((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      }),
      new Promise((_, reject) => setTimeout(() => reject(new Error("worker timed out")), 10_000).unref()),
    ]);
  } finally {
    await worker.terminate();
  }
}

test("installEgress leaves fetch's undici unloaded until the thread's first fetch()", async () => {
  // Undici costs a worker ~4 MB and ~35 ms: most deployments never fetch.
  const message = await inWorker(`
    import { workerData, parentPort } from "node:worker_threads";
    const { installEgress } = await import(workerData.egress);
    const key = Symbol.for("undici.globalDispatcher.1");
    installEgress(workerData.socketPath);
    const before = typeof globalThis[key];
    const res = await fetch(workerData.url);
    parentPort.postMessage({ before, after: typeof globalThis[key], text: await res.text() });
    await globalThis[key].close();
  `, { url: `http://egress.test:${plainPort}/lazy` });
  assert.deepEqual(message, { before: "undefined", after: "object", text: `egress.test:${plainPort} /lazy` });
});

test("fetch() goes through the tunnel when undici was loaded first, or its dispatcher replaced", async () => {
  // Reading Response (or Request, Headers, FormData) loads undici and its direct dispatcher
  // before any fetch(); code may set a dispatcher of its own before it too: the thread's first
  // fetch() still leaves through the proxy (egress.test resolves nowhere else).
  const code = (setOwn) => `
    import { workerData, parentPort } from "node:worker_threads";
    const { installEgress } = await import(workerData.egress);
    const key = Symbol.for("undici.globalDispatcher.1");
    installEgress(workerData.socketPath);
    new Response("touched");
    const direct = globalThis[key];
    ${setOwn ? "globalThis[key] = new direct.constructor();" : ""}
    const before = globalThis[key];
    const text = await (await fetch(workerData.url)).text();
    parentPort.postMessage({ text, replaced: globalThis[key] !== before });
    await Promise.all([globalThis[key].close(), direct.close(), before.close()]);
  `;
  const url = `http://egress.test:${plainPort}/touched`;
  for (const setOwn of [false, true]) {
    const message = await inWorker(code(setOwn), { url });
    assert.deepEqual(message, { text: `egress.test:${plainPort} /touched`, replaced: true }, `setOwn=${setOwn}`);
  }
});
