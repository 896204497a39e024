// Outbound HTTP(S) for user code in a sandbox whose only way out is the egress proxy's Unix
// socket (sluice/runtime/egress.py). No npm dependency: this file is loaded without
// node_modules.
//
//   import { installEgress } from "./egress.mjs";
//   installEgress("/run/sluice/egress.sock"); // once per thread: the runner and every worker
//
// After it, in the calling thread:
//   * http.request / https.request / http.get through the global agents (and so axios,
//     @pipedream/platform's axios, got, node-fetch...) open a CONNECT tunnel through the proxy;
//     https then runs TLS over the tunnel with the real host name (SNI and certificate check);
//   * the global fetch() (Node's built-in undici) does the same, through a new global
//     dispatcher built from the existing one's constructor.
// The proxy resolves each name, vets every address against the egress policy and answers 403
// with a reason when it refuses; such a request fails with an Error whose code is
// "EGRESS_REFUSED" and whose message carries the reason.
//
// Not covered, on purpose: a raw net.connect()/tls.connect() to a host, a request with
// `agent: false` or its own Agent, and UDP. Inside the sandbox (bwrap --unshare-net: no interface
// but its own lo) those fail with ECONNREFUSED or ENETUNREACH; that failure is the policy, not a
// bug. Code that needs another TCP protocol can speak CONNECT to the socket itself.

import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { EGRESS_FAILED, EGRESS_REFUSED } from "./codes.mjs";

const DISPATCHER = Symbol.for("undici.globalDispatcher.1");
/** The proxy must answer a CONNECT within this long, ms (it bounds its own upstream connect). */
const HANDSHAKE_MS = 30_000;
const MAX_HEAD = 16_384;

/**
 * A socket tunnelled to host:port through the proxy at `socketPath`; `callback(err, socket)`.
 * Refusals (403) and upstream failures (502, 503) become errors with `code` EGRESS_REFUSED or
 * EGRESS_FAILED, `status`, and the proxy's one-line reason in the message.
 */
export function connectThrough(socketPath, host, port, callback) {
  const socket = net.connect({ path: socketPath });
  const authority = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
  let head = Buffer.alloc(0);
  let done = false;
  const finish = (err) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    socket.removeListener("data", onData);
    socket.removeListener("error", finish);
    socket.removeListener("end", onEnd);
    if (err) {
      socket.destroy();
      callback(err);
    } else {
      callback(null, socket);
    }
  };
  const timer = setTimeout(
    () => finish(egressError(504, EGRESS_FAILED, `no answer from the egress proxy for ${authority}`)),
    HANDSHAKE_MS,
  );
  const onEnd = () => finish(failedAnswer(head, authority));
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end === -1) {
      if (head.length > MAX_HEAD) finish(egressError(502, EGRESS_FAILED, "egress proxy answer too large"));
      return;
    }
    const status = Number(head.subarray(0, end).toString("latin1").split(" ")[1]);
    if (status !== 200) return; // wait for the body (the reason) and the proxy's close: onEnd
    const rest = head.subarray(end + 4);
    if (rest.length) socket.unshift(rest);
    finish(null);
  };
  socket.on("data", onData);
  socket.on("end", onEnd);
  socket.on("error", finish);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
}

function failedAnswer(head, authority) {
  const text = head.toString("utf8");
  const status = Number(text.split(" ")[1]) || 502;
  const reason = text.split("\r\n\r\n")[1]?.trim() || `the egress proxy closed the connection to ${authority}`;
  return egressError(status, status === 403 ? EGRESS_REFUSED : EGRESS_FAILED, reason);
}

function egressError(status, code, message) {
  const err = new Error(message);
  err.code = code;
  err.status = status;
  return err;
}

/** TLS over a tunnel: SNI and the certificate check use the host name (not for IP literals). */
function startTls(socket, host, options, callback) {
  const servername = options.servername || (net.isIP(host) ? undefined : host);
  const secure = tls.connect({ ...options, host, socket, servername });
  const onError = (err) => callback(err);
  secure.once("error", onError);
  secure.once("secureConnect", () => {
    secure.removeListener("error", onError);
    callback(null, secure);
  });
}

function hostOf(options) {
  const host = options.hostname || options.host || "localhost";
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/**
 * Make http, https and fetch() in this thread go through the egress proxy at `socketPath`.
 * `options.ca`: extra trusted roots for fetch()'s TLS (https.request takes its own `ca`).
 * Returns the previous global agents, dispatcher and fetch, for tests that restore them.
 */
export function installEgress(socketPath, options = {}) {
  const previous = {
    http: http.globalAgent,
    https: https.globalAgent,
    dispatcher: globalThis[DISPATCHER],
    fetch: globalThis.fetch,
  };

  class EgressHttpAgent extends http.Agent {
    createConnection(opts, callback) {
      if (opts.socketPath) return net.createConnection(opts); // a local socket: not egress
      connectThrough(socketPath, hostOf(opts), Number(opts.port) || 80, callback);
      return undefined; // the Agent waits for the callback
    }
  }

  class EgressHttpsAgent extends https.Agent {
    createConnection(opts, callback) {
      if (opts.socketPath) return tls.connect(opts);
      const host = hostOf(opts);
      connectThrough(socketPath, host, Number(opts.port) || 443, (err, socket) => {
        if (err) return callback(err);
        startTls(socket, host, { ...opts, path: undefined }, callback);
      });
      return undefined;
    }
  }

  // Node 20's default agents keep connections alive; ours do too.
  http.globalAgent = new EgressHttpAgent({ keepAlive: true });
  https.globalAgent = new EgressHttpsAgent({ keepAlive: true });

  // fetch() is Node's internal undici, loaded on the first fetch() call (not on reading
  // `fetch`); undici then registers its global dispatcher, whose constructor is undici's Agent,
  // whose `connect` option replaces how sockets are made. Loading it costs a thread ~4 MB and
  // ~35 ms (measured: a worker 8.9 -> 12.9 MB), and most deployments never call fetch(): so the
  // egress dispatcher is made at this thread's first fetch() call, before the request, through
  // the wrapper below (the only reference user code can get to fetch). A data: URL is answered
  // in memory, with no socket. When undici was loaded before (by `Request`, `Response`,
  // `Headers` or `FormData`) or code set a dispatcher of its own, the first call replaces it all
  // the same: every request leaves through the proxy.
  const nativeFetch = globalThis.fetch;
  if (typeof nativeFetch === "function") {
    const connect = (opts, callback) => {
      const secure = opts.protocol === "https:";
      const host = opts.hostname.startsWith("[") ? opts.hostname.slice(1, -1) : opts.hostname;
      const port = Number(opts.port) || (secure ? 443 : 80);
      connectThrough(socketPath, host, port, (err, socket) => {
        if (err) return callback(err);
        if (!secure) return callback(null, socket);
        const tlsOptions = { ALPNProtocols: ["http/1.1"], servername: opts.servername };
        if (options.ca) tlsOptions.ca = options.ca;
        startTls(socket, host, tlsOptions, callback);
      });
    };
    let installed = false;
    const install = () => {
      installed = true;
      if (globalThis[DISPATCHER] === undefined) nativeFetch("data:,").catch(() => {});
      const current = globalThis[DISPATCHER];
      if (current && typeof current.constructor === "function") {
        const Agent = current.constructor;
        globalThis[DISPATCHER] = new Agent({ connect });
      }
    };
    globalThis.fetch = function fetch(input, init) {
      if (!installed) install();
      return nativeFetch(input, init);
    };
  }
  return previous;
}
