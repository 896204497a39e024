// `http_request` props: the configured request, and its `execute()` (Pipedream's; registry
// actions such as helper_functions-send-http-request call it). The request goes out through the
// global fetch(), so the account's egress rules apply to it as to any request of user code
// (egress.mjs). See docs/runtime.md, "http_request props".
//
// The configured value, as Pipedream's form builds it:
//   {url, method, headers: [{name, value}], params: [{name, value}],
//    body: {type: "fields" | "raw", contentType, fields: [{name, value}], raw},
//    auth: {type: "basic" | "bearer" | "none", username, password, token}}
// (headers, params and fields may also be plain objects). `execute()` answers like axios:
// `{status, statusText, headers, data}`, `data` parsed when the answer is JSON; a status of
// 400 or more throws an Error carrying that `response`, as axios does; a request that could
// not be made (refused by the egress rules, say) throws one saying why, with its `code`.

const isObject = (v) => v !== null && typeof v === "object";

/** The prop's value in `this`: the configuration (the prop's `default` under it), and `execute()`. */
export function makeHttpRequest(configured, def) {
  const config = { ...(isObject(def) ? def : {}), ...(isObject(configured) ? configured : {}) };
  const value = structuredClone(config);
  Object.defineProperty(value, "execute", { value: () => execute(config), enumerable: false });
  return value;
}

/** `[{name, value}]` or `{name: value}` as [name, value] pairs, entries without a name dropped. */
function pairs(list) {
  if (Array.isArray(list)) {
    return list
      .filter((p) => isObject(p) && typeof p.name === "string" && p.name !== "" && !p.disabled)
      .map((p) => [p.name, p.value]);
  }
  return isObject(list) ? Object.entries(list) : [];
}

const text = (v) => (typeof v === "string" ? v : JSON.stringify(v));

function requestBody(body, headers) {
  if (!isObject(body)) return undefined;
  const contentType = body.contentType || headers.get("content-type") || "";
  if (body.type === "raw") {
    if (body.raw === undefined || body.raw === null || body.raw === "") return undefined;
    if (!headers.has("content-type")) headers.set("content-type", contentType || "application/json");
    return text(body.raw);
  }
  const fields = pairs(body.fields);
  if (!fields.length) return undefined;
  if (contentType.startsWith("application/x-www-form-urlencoded")) {
    headers.set("content-type", "application/x-www-form-urlencoded");
    return new URLSearchParams(fields.map(([k, v]) => [k, text(v)])).toString();
  }
  if (contentType.startsWith("multipart/form-data")) {
    headers.delete("content-type"); // fetch sets it with the boundary
    const form = new FormData();
    for (const [k, v] of fields) form.append(k, text(v));
    return form;
  }
  headers.set("content-type", "application/json");
  return JSON.stringify(Object.fromEntries(fields));
}

function authorize(auth, headers) {
  if (!isObject(auth)) return;
  if (auth.type === "basic") {
    const pair = `${auth.username ?? ""}:${auth.password ?? ""}`;
    headers.set("authorization", `Basic ${Buffer.from(pair).toString("base64")}`);
  } else if (auth.type === "bearer" && auth.token) {
    headers.set("authorization", `Bearer ${auth.token}`);
  }
}

/** fetch(), its failure told by its cause (an egress refusal, a refused connection), as axios does. */
async function send(url, init) {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = err?.cause;
    if (!isObject(cause) || !cause.message) throw err;
    const failure = new Error(`${init.method} ${url.origin}${url.pathname}: ${cause.message}`);
    failure.name = "HttpRequestError";
    failure.code = cause.code;
    throw failure;
  }
}

async function execute(config) {
  if (typeof config.url !== "string" || config.url.trim() === "") {
    throw new TypeError("http_request: no url is configured");
  }
  const url = new URL(config.url.trim());
  for (const [k, v] of pairs(config.params)) url.searchParams.append(k, text(v));
  const headers = new Headers();
  for (const [k, v] of pairs(config.headers)) if (v !== undefined && v !== null) headers.append(k, text(v));
  authorize(config.auth, headers);
  const method = String(config.method || "GET").toUpperCase();
  const body = method === "GET" || method === "HEAD" ? undefined : requestBody(config.body, headers);
  const answer = await send(url, { method, headers, body });
  const raw = await answer.text();
  let data = raw;
  if ((answer.headers.get("content-type") || "").includes("json") && raw !== "") {
    try {
      data = JSON.parse(raw);
    } catch {
      data = raw;
    }
  }
  const response = {
    status: answer.status,
    statusText: answer.statusText,
    headers: Object.fromEntries(answer.headers),
    data,
  };
  if (answer.status >= 400) {
    const err = new Error(`Request failed with status code ${answer.status}`);
    err.name = "HttpRequestError";
    err.status = answer.status;
    err.response = response;
    throw err;
  }
  return response;
}
