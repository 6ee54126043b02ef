import { createReadStream } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Router } from "@koa/router";
import { Code, domainError } from "@rowbase/kit";
import type { GatewayState } from "../../gateway-context.js";
import { TABLE_PAGE, TABLE_PAGE_SCRIPT, TABLE_PAGE_STYLE } from "./table-page.js";

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

/** Files of our own: Swagger UI's initializer and the per-table page's script and style. */
const OWN_FILES = new Map([
  ["initializer.js", { type: "text/javascript; charset=utf-8", body: INITIALIZER }],
  ["table-page.js", { type: "text/javascript; charset=utf-8", body: TABLE_PAGE_SCRIPT }],
  ["table-page.css", { type: "text/css; charset=utf-8", body: TABLE_PAGE_STYLE }],
]);

/** Names the pages load from /docs/{file}. */
const DOCS_FILES = [...ASSETS.keys(), ...OWN_FILES.keys()];

/** A table id in the page's path: what every id is, digits below 2^53. */
const TABLE_ID = /^[1-9][0-9]{0,15}$/;

const schemaRef = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** What every one of these routes may answer besides its success. */
const DOCS_ERRORS = {
  400: {
    description: "A credential in the query string, or a header sent twice",
    content: { "application/json": { schema: schemaRef("ValidationError") } },
  },
  500: {
    description: "Unexpected failure",
    content: { "application/json": { schema: schemaRef("InternalError") } },
  },
};

const NOT_FOUND = {
  description: "No such page: `not_found`",
  content: {
    "application/json": {
      schema: {
        type: "object",
        required: ["message", "data"],
        properties: { message: { const: "not_found" }, data: { type: "object" } },
      },
    },
  },
};

/**
 * The document's entries for these routes, which it lists like every other (the document
 * describes every route): they answer outside the JSON pipeline, so they are written
 * here, beside what they serve.
 */
export function docsPathItems(): Record<string, Record<string, unknown>> {
  const operation = (operationId: string, summary: string, responses: Record<string, unknown>) => ({
    operationId,
    summary,
    tags: ["docs"],
    security: [],
    responses: { ...responses, ...DOCS_ERRORS },
  });
  return {
    "/openapi.json": {
      get: operation("getOpenApi", "This document: OpenAPI 3.1 of every route", {
        200: {
          description: "The document itself, without an envelope",
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["openapi", "info", "paths"],
                properties: {
                  openapi: { type: "string", description: "The OpenAPI version, 3.1.x" },
                  info: { type: "object" },
                  paths: { type: "object" },
                },
              },
            },
          },
        },
      }),
    },
    "/docs": {
      get: operation("getDocs", "Swagger UI over this document", {
        200: { description: "The page", content: { "text/html": { schema: { type: "string" } } } },
      }),
    },
    "/docs/tables/{table_id}": {
      get: {
        ...operation("getTableDocs", "A table's API in the browser, with its own fields", {
          200: {
            description: "The page (the same for any id: the table is read with the token)",
            content: { "text/html": { schema: { type: "string" } } },
          },
          404: NOT_FOUND,
        }),
        description:
          'The page lists the table\'s fields, then each record route with an example request and answer, curl and fetch snippets and a "Try it". It asks for an API token or a session token and keeps it in the page only (never in the address, storage or cookies); it reads the table with `/table/get` and its OpenAPI document (`response_format=names`) with that token.',
        parameters: [
          {
            name: "table_id",
            in: "path",
            required: true,
            schema: { type: "string", pattern: TABLE_ID.source },
          },
        ],
      },
    },
    "/docs/{file}": {
      get: {
        ...operation("getDocsFile", "A file of the docs pages (Swagger UI, the table page)", {
          200: {
            description: "The file, with its own content type",
            content: { "*/*": { schema: { type: "string", format: "binary" } } },
          },
          404: { ...NOT_FOUND, description: "No such file: `not_found`" },
        }),
        parameters: [
          {
            name: "file",
            in: "path",
            required: true,
            schema: { type: "string", enum: DOCS_FILES },
          },
        ],
      },
    },
  };
}

/**
 * GET /openapi.json (the document, built once), GET /docs (Swagger UI over it) and GET
 * /docs/tables/{table_id} (a table's own API, see table-page.ts): plain routes outside the JSON
 * pipeline, listed in the document by `docsPathItems`.
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
  router.get("/docs/tables/:table_id", (ctx) => {
    if (!TABLE_ID.test(ctx.params.table_id ?? "")) throw domainError(Code.NotFound, "not_found");
    ctx.set("Content-Security-Policy", CSP);
    ctx.set("Referrer-Policy", "no-referrer");
    ctx.type = "text/html; charset=utf-8";
    ctx.body = TABLE_PAGE;
  });
  router.get("/docs/:file", (ctx) => {
    const file = ctx.params.file ?? "";
    ctx.set("Cache-Control", "public, max-age=3600");
    const own = OWN_FILES.get(file);
    if (own) {
      ctx.type = own.type;
      ctx.body = own.body;
      return;
    }
    const type = ASSETS.get(file);
    if (!type) throw domainError(Code.NotFound, "not_found");
    ctx.type = type;
    ctx.body = createReadStream(join(SWAGGER_UI_DIR, file));
  });
}
