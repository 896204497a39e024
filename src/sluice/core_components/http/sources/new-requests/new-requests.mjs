// Sluice core component (shipped with Sluice, seeded into the public registry at start).
// The key, props and event are Pipedream's `http-new-requests`: the full request as the
// event, or its body only; the endpoint answers with the configured response.
export default {
  key: "http-new-requests",
  name: "New Requests",
  description:
    "Get a URL and emit the full HTTP event on every request (method, path, query, headers, body). You can also configure the HTTP response's status, content type and body.",
  version: "0.1.0",
  type: "source",
  props: {
    httpInterface: {
      type: "$.interface.http",
      customResponse: true,
    },
    emitBodyOnly: {
      type: "boolean",
      label: "Body Only",
      description: "Emit the request's body only, instead of the full request.",
      optional: true,
      default: false,
    },
    resStatusCode: {
      type: "string",
      label: "Response Status Code",
      description: "The HTTP status code of the answer to each request.",
      optional: true,
      default: "200",
    },
    resContentType: {
      type: "string",
      label: "Response Content-Type",
      description: "The `Content-Type` of the answer's body.",
      optional: true,
      default: "application/json",
    },
    resBody: {
      type: "string",
      label: "Response Body",
      description: "The body of the answer to each request.",
      optional: true,
      default: '{ "success": true }',
    },
  },
  async run(event) {
    this.httpInterface.respond({
      status: this.resStatusCode || "200",
      headers: { "content-type": this.resContentType || "application/json" },
      body: this.resBody ?? "",
    });
    const summary = `${event.method} ${event.path}`;
    this.$emit(this.emitBodyOnly ? event.body : event, { summary });
  },
};
