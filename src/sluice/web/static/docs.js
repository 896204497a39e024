// The /docs page: Swagger UI on this server's OpenAPI document (no inline script: CSP).
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.dataset.spec,
    domNode: root,
    deepLinking: true,
    // Authorize (an API key) is kept across reloads of this page, in this browser only.
    persistAuthorization: true,
    // The session cookie authenticates "Try it out" from this page, as the UI's own calls.
    requestInterceptor: (req) => req,
  });
});
