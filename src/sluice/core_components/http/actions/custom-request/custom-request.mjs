// Sluice core component. Pipedream's `http-custom-request`: one HTTP request with any method;
// it returns the response's body (parsed when it is JSON), as Pipedream's axios does, and an
// answer outside 2xx fails the step. The request goes through Sluice's egress rules.
export default {
  key: "http-custom-request",
  name: "Custom Request",
  description:
    "Make an HTTP request using any method and URL. Optionally configure query string parameters, headers, a body and basic auth.",
  version: "0.1.0",
  type: "action",
  props: {
    url: { type: "string", label: "URL", description: "The URL to send the request to." },
    method: {
      type: "string",
      label: "Method",
      description: "The HTTP method.",
      options: ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
      optional: true,
      default: "GET",
    },
    data: {
      type: "any",
      label: "Body",
      description: "The request body: an object or array is sent as JSON; text as it is.",
      optional: true,
    },
    params: {
      type: "object",
      label: "Query Parameters",
      description: "Added to the URL's query string.",
      optional: true,
    },
    headers: {
      type: "object",
      label: "Headers",
      description: "Request headers, `{name: value}`.",
      optional: true,
    },
    auth: {
      type: "string",
      label: "Basic Auth",
      description: "`username:password`, sent as an `Authorization: Basic` header.",
      optional: true,
      secret: true,
    },
  },
  async run({ $ }) {
    const method = (this.method || "GET").toUpperCase();
    const url = new URL(this.url);
    for (const [name, value] of Object.entries(this.params || {})) {
      url.searchParams.append(name, typeof value === "string" ? value : JSON.stringify(value));
    }
    const headers = {};
    for (const [name, value] of Object.entries(this.headers || {})) headers[name.toLowerCase()] = String(value);
    if (this.auth) headers.authorization = `Basic ${Buffer.from(this.auth).toString("base64")}`;
    let body;
    if (this.data !== undefined && this.data !== null && this.data !== "" && !["GET", "HEAD"].includes(method)) {
      if (typeof this.data === "string") {
        body = this.data;
      } else {
        body = JSON.stringify(this.data);
        headers["content-type"] ??= "application/json";
      }
    }
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let data = text;
    if ((res.headers.get("content-type") || "").includes("json") && text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (!res.ok) {
      const err = new Error(`${method} ${url.origin}${url.pathname} answered HTTP ${res.status}: ${text.slice(0, 500)}`);
      err.name = "HTTPError";
      throw err;
    }
    $.export("$summary", `${method} ${url.host}${url.pathname}: HTTP ${res.status}`);
    return data;
  },
};
