import { createReadStream } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Router } from "@koa/router";
import { Code, domainError } from "@rowbase/kit";
import type { GatewayState } from "../../gateway-context.js";

/** Swagger UI's files, served from the swagger-ui-dist package: no CDN, works offline. */
const SWAGGER_UI_DIR = dirname(
  createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"),
);

/** The files served, with their types; a Map, so that `constructor` and the like are no file. */
const ASSETS = new Map([
  ["swagger-ui.css", "text/css; charset=utf-8"],
  ["index.css", "text/css; charset=utf-8"],
  ["swagger-ui-bundle.js", "text/javascript; charset=utf-8"],
  ["swagger-ui-standalone-preset.js", "text/javascript; charset=utf-8"],
  ["favicon-32x32.png", "image/png"],
  ["favicon-16x16.png", "image/png"],
]);

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>Rowbase API</title>
    <link rel="stylesheet" href="/docs/swagger-ui.css">
    <link rel="stylesheet" href="/docs/index.css">
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/swagger-ui-bundle.js"></script>
    <script src="/docs/swagger-ui-standalone-preset.js"></script>
    <script src="/docs/initializer.js"></script>
  </body>
</html>
`;

// Kept in its own file rather than inline so the page's CSP can forbid inline scripts.
// validatorUrl null: Swagger UI would otherwise send the document to an outside validator.
const INITIALIZER = `window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: "StandaloneLayout",
  });
});
`;

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

/**
 * GET /openapi.json (the document, built once) and GET /docs (Swagger UI over it). They are
 * plain routes outside the JSON pipeline and not listed in the document itself.
 */
export function mountDocsRoutes(
  router: Router<GatewayState>,
  document: () => Record<string, unknown>,
): void {
  let cached: Record<string, unknown> | undefined;
  router.get("/openapi.json", (ctx) => {
    cached ??= document();
    ctx.body = cached;
  });
  router.get("/docs", (ctx) => {
    ctx.set("Content-Security-Policy", CSP);
    ctx.type = "text/html; charset=utf-8";
    ctx.body = PAGE;
  });
  router.get("/docs/:file", (ctx) => {
    const file = ctx.params.file ?? "";
    ctx.set("Cache-Control", "public, max-age=3600");
    if (file === "initializer.js") {
      ctx.type = "text/javascript; charset=utf-8";
      ctx.body = INITIALIZER;
      return;
    }
    const type = ASSETS.get(file);
    if (!type) throw domainError(Code.NotFound, "not_found");
    ctx.type = type;
    ctx.body = createReadStream(join(SWAGGER_UI_DIR, file));
  });
}
