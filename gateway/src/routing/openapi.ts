import { mebibytes, VALIDATION_CODES } from "@rowbase/kit";
import { z } from "zod";
import { ERROR_STATUS, type ErrorCode } from "../errors/error-table.js";
import { VALIDATION_ITEMS_MAX } from "../errors/validation-failed.js";
import { JSON_BODY_LIMIT_BYTES } from "../http/json-body.js";
import { requestSchemas, responseSchemas, schemaIdOf } from "./api-schemas.js";
import type { AuthMode, Route } from "./route.js";

type JsonSchema = Record<string, unknown>;
type OpenApiDocument = Record<string, unknown>;

export interface OpenApiOptions {
  /** `PUBLIC_BASE_URL`: where the documented routes are served. */
  serverUrl: string;
  /** Path items of the routes served outside the route list (the documentation's own). */
  paths?: Record<string, Record<string, unknown>>;
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ "application/json": { schema } });

/** Either scheme satisfies a `session_or_token` route (OpenAPI ORs the entries). */
const SECURITY: Record<AuthMode, Record<string, string[]>[]> = {
  none: [],
  session: [{ bearerAuth: [] }],
  session_or_token: [{ bearerAuth: [] }, { apiToken: [] }],
};

const STATUS_TEXT: Record<number, string> = {
  400: "Bad request",
  401: "Missing or invalid credential",
  403: "Forbidden",
  404: "Not found",
  408: "The request's body stopped arriving, or arrived too slowly",
  413: `A JSON body over ${mebibytes(JSON_BODY_LIMIT_BYTES)}`,
  416: "Range not satisfiable",
  429: "Too many requests",
  503: "A service the gateway depends on cannot be reached",
};

/** The version of the API this gateway serves (the document's, and the MCP server's). */
export const API_VERSION = "1.0.0";

/**
 * The OpenAPI 3.1 document of the given routes, generated from the zod schemas the pipeline
 * validates with (zod's JSON Schema output is draft 2020-12, which OpenAPI 3.1 uses as is).
 */
export function buildOpenApiDocument(
  routes: readonly Route[],
  options: OpenApiOptions,
): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = { ...options.paths };
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operationOf(route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Rowbase API",
      version: API_VERSION,
      description:
        "REST interface of Rowbase. Every response carries `X-Request-Id`. Credentials go in " +
        "`Authorization: Bearer`, never in the query string. `Host`, `Authorization` and " +
        "`Content-Type` are sent at most once: a second one answers 400 naming the header. " +
        "The API reference in the project's `docs/` folder (start at `docs/README.md`) gives " +
        "the rules behind this document: conventions, every error code, the query language of " +
        "`where`, `sort` and `fields`, the plans and limits, and the events.",
    },
    servers: [{ url: options.serverUrl }],
    tags: [
      ...new Set([
        ...routes.flatMap((route) => route.tags),
        ...Object.values(options.paths ?? {}).flatMap((item) =>
          Object.values(item).flatMap((operation) => (operation as { tags?: string[] }).tags ?? []),
        ),
      ]),
    ].map(tagOf),
    paths,
    components: {
      schemas: { ...registrySchemas(), ...envelopeSchemas(routes) },
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "A session access token from login, verify_email or refresh.",
        },
        apiToken: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "rb_ + 40 base62 characters",
          description:
            "An organization's API token from /api_token/create, where a route also takes one.",
        },
      },
    },
  };
}

/**
 * What each group of routes is for, shown above the group in the documentation. A tag missing
 * here fails the document's build, so that no group goes undescribed.
 */
const TAG_DESCRIPTIONS: Record<string, string> = {
  Accounts:
    "Registration, e-mail verification, login, token refresh and logout; the signed-in user.",
  Organizations:
    "Organizations, their plan limits and usage, API-call statistics and owner transfer.",
  Invites: "Invitations to join an organization, sent by e-mail and accepted by the invitee.",
  Members: "The members of an organization and their roles.",
  "API tokens":
    "An organization's API tokens (`read` or `read_write`) for integrations; the secret is shown once.",
  Databases: "An organization's databases, which hold its tables.",
  Tables: "A database's tables, with their fields.",
  Fields: "A table's typed fields (columns): create, rename, retype, reorder, delete.",
  Forms: "Public forms that add one record to a table, and their pages.",
  Audit: "Who changed what in an organization, kept 90 days.",
  "Records (v1)":
    "A table's records by REST paths: list with filters, sort and paging; get, create, update, delete, in batches too.",
  "Records (query form)":
    "The same record operations with the table and row named in the query string.",
  "Record changes":
    "A table's changes as a feed to page through and as a live Server-Sent Events stream.",
  Files: "Files in file fields: upload, serve, signed links, storage checks.",
  Webhooks: "Signed HTTP calls to your endpoint for each change of a table, with retries.",
  Health: "Liveness and readiness of the gateway and the services behind it.",
  docs: "This document and the pages that render it.",
  MCP: "The Model Context Protocol endpoint through which AI agents use a table with an API token.",
};

function tagOf(name: string): { name: string; description: string } {
  const description = TAG_DESCRIPTIONS[name];
  if (!description) throw new Error(`the tag "${name}" has no description (TAG_DESCRIPTIONS)`);
  return { name, description };
}

function operationOf(route: Route): Record<string, unknown> {
  const parameters = [
    ...parametersOf(route.query, "query"),
    ...parametersOf(route.params, "path"),
    ...(route.eventStream ? [LAST_EVENT_ID_PARAMETER] : []),
  ];
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: route.tags,
    security: SECURITY[route.auth],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: {
              ...json(schemaOf(route.body, "input")),
              ...(route.urlEncodedAs
                ? {
                    "application/x-www-form-urlencoded": {
                      schema: {
                        type: "object",
                        description: `An HTML form's fields, read as the JSON body's \`${route.urlEncodedAs}\``,
                        additionalProperties: true,
                      },
                    },
                  }
                : {}),
            },
          },
        }
      : route.multipartFile
        ? { requestBody: multipartBody(route.multipartFile) }
        : {}),
    responses: responsesOf(route),
  };
}

function responsesOf(route: Route): Record<string, unknown> {
  const dataId = route.response ? schemaIdOf(route.response) : undefined;
  if (route.response && !dataId) {
    throw new Error(`${route.operationId}: name its response schema with responseData()`);
  }
  const responses: Record<string, unknown> = route.eventStream
    ? EVENT_STREAM_RESPONSES
    : route.htmlPage
      ? HTML_PAGE_RESPONSES
      : route.binary
        ? binaryResponses()
        : route.redirect
          ? {
              302: {
                description: "Redirect; the body is not part of the contract",
                headers: {
                  Location: {
                    description: "Where the client sends the browser next",
                    required: true,
                    schema: { type: "string", format: "uri" },
                  },
                },
              },
            }
          : route.raw && dataId
            ? {
                200: {
                  description: "Success: the document itself, without an envelope",
                  content: json(ref(dataId)),
                },
              }
            : {
                200: {
                  description: "Success",
                  content: json(ref(dataId ? `${dataId}Response` : "EmptyAPIResponse")),
                },
              };
  const own = route.etag ? withEtag(responses) : responses;
  return {
    ...(route.rateLimits.length > 0 ? withRateLimitHeaders(own) : own),
    ...errorResponses(route),
  };
}

/** The 200 with its `ETag` header, and the 304 that `If-None-Match` gets while it holds. */
function withEtag(responses: Record<string, unknown>): Record<string, unknown> {
  const etag = {
    description: "The version of this answer, quoted: it changes when the answer does",
    schema: { type: "string" },
  };
  return {
    200: { ...(responses[200] as object), headers: { ETag: etag } },
    304: {
      description: "`If-None-Match` names the current ETag: the answer has not changed",
      headers: { ETag: etag },
    },
  };
}

/**
 * The error answers of a route, by status: its own codes and those its pipeline adds, the
 * validation shape on 400, and 500. Their schemas refer to `ValidationError` and
 * `InternalError`, which a document that uses them carries (errorSchemas).
 */
export function errorResponses(route: Route): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  // Every route can refuse its query string (unknown parameters, credentials) or a header sent
  // twice with 400.
  byStatus.set(400, byStatus.get(400) ?? []);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const domain = codes.length > 0 ? domainErrorSchema(codes) : undefined;
    const schema =
      status !== 400
        ? domain
        : domain
          ? { oneOf: [ref("ValidationError"), domain] }
          : ref("ValidationError");
    responses[status] = {
      description: status === 429 ? describeTooMany(codes) : describeStatus(status, codes),
      ...(status === 429
        ? { headers: { "Retry-After": retryAfterHeader(codes) } }
        : status === 503
          ? { headers: { "Retry-After": UNAVAILABLE_RETRY_AFTER } }
          : status === 416
            ? {
                headers: {
                  "Content-Range": {
                    description: "`bytes */size`: the size of the file",
                    schema: { type: "string" },
                  },
                },
              }
            : {}),
      content: json(schema ?? {}),
    };
  }
  responses[500] = {
    description: "Unexpected failure, with the request's id",
    content: json(ref("InternalError")),
  };
  return route.rateLimits.length > 0 ? withRateLimitHeaders(responses) : responses;
}

/**
 * What each 429 means, side by side, so that retry middleware can tell them apart: throttling
 * passes in seconds, the monthly allowance only when the month ends.
 */
const TOO_MANY: Partial<Record<ErrorCode, { description: string; retryAfter: string }>> = {
  too_many_requests: {
    description:
      "`too_many_requests`: throttled by a rate limit (the `RateLimit` header shows `r=0` for " +
      "it); retry after `Retry-After` seconds",
    retryAfter: "`too_many_requests`: seconds until the rate limit's window starts again",
  },
  api_call_limit_exceeded: {
    description:
      "`api_call_limit_exceeded`: the organization used its plan's monthly API calls; do not " +
      "retry before `Retry-After`, the start of next month (UTC)",
    retryAfter: "`api_call_limit_exceeded`: seconds until 00:00 UTC on the first day of next month",
  },
};

function describeTooMany(codes: ErrorCode[]): string {
  const meanings = codes.map((code) => TOO_MANY[code]?.description ?? `\`${code}\``);
  return `${STATUS_TEXT[429]}. ${meanings.join(". ")}`;
}

function retryAfterHeader(codes: ErrorCode[]) {
  const meanings = codes.flatMap((code) => TOO_MANY[code]?.retryAfter ?? []);
  return {
    description: `Seconds to wait. ${meanings.join(". ")}`,
    required: true,
    schema: { type: "integer", minimum: 1 },
  };
}

/**
 * A 503's `Retry-After`, when the service said when (error-table.ts): a write of a table whose
 * stored values are being converted by a type change, refused after a bounded wait.
 */
const UNAVAILABLE_RETRY_AFTER = {
  description:
    "Seconds to wait, when known: a write of a table whose field is being converted (a type " +
    "change holds the table's writes; nothing was written)",
  required: false,
  schema: { type: "integer", minimum: 1 },
};

/**
 * The IETF RateLimit fields every answer of a rate-limited route carries (docs/limits.md),
 * written out in each response so that a document holding only some routes needs no shared
 * component.
 */
export const RATE_LIMIT_HEADERS = {
  "RateLimit-Policy": {
    description:
      'The limits the request was counted under: `"<name>";q=<requests>;w=<seconds>` each, ' +
      "comma separated (draft-ietf-httpapi-ratelimit-headers)",
    schema: { type: "string", examples: ['"records_token";q=40;w=2'] },
  },
  RateLimit: {
    description:
      'Where each of those limits stands: `"<name>";r=<requests left>;t=<seconds until the ' +
      "window starts again>`, comma separated",
    schema: { type: "string", examples: ['"records_token";r=37;t=1'] },
  },
};

function withRateLimitHeaders(responses: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(responses).map(([status, response]) => {
      const { headers, ...rest } = response as { headers?: Record<string, unknown> };
      return [status, { ...rest, headers: { ...headers, ...RATE_LIMIT_HEADERS } }];
    }),
  );
}

/** One binary part, and nothing else, in a multipart/form-data body. */
function multipartBody(part: string): Record<string, unknown> {
  return {
    required: true,
    description:
      `Exactly one part, named \`${part}\`, holding the file; its filename, reduced to its ` +
      "last path segment, names the file",
    content: {
      "multipart/form-data": {
        schema: {
          type: "object",
          required: [part],
          additionalProperties: false,
          properties: { [part]: { type: "string", contentMediaType: "application/octet-stream" } },
        },
      },
    },
  };
}

/** What a route that answers bytes documents: the whole, a range, or "not modified". */
/** The header an event stream resumes from, which an EventSource sends when it reconnects. */
const LAST_EVENT_ID_PARAMETER = {
  name: "Last-Event-ID",
  in: "header",
  required: false,
  description:
    "The `id` of the last event received: the stream resumes after it (it takes the place of " +
    "`after`). One that does not parse or names another table answers 400 on this header",
  schema: { type: "string", maxLength: 100 },
};

/** An HTML page's answers: the page, or a page that says it does not exist. */
const HTML_PAGE_RESPONSES: Record<string, unknown> = {
  200: {
    description: "The page (HTML, no script, its style inline)",
    content: { "text/html": { schema: { type: "string" } } },
  },
  404: {
    description: "A page that says the form does not exist or no longer takes answers",
    content: { "text/html": { schema: { type: "string" } } },
  },
};

/** An event stream's answer: the events, described in the route's own description. */
const EVENT_STREAM_RESPONSES: Record<string, unknown> = {
  200: {
    description:
      "Server-Sent Events, open until the client leaves or the server stops: `id`, `event` " +
      "and `data` (JSON) per event, and comment lines between them",
    content: { "text/event-stream": { schema: { type: "string" } } },
  },
};

function binaryResponses(): Record<string, unknown> {
  const bytes = { "*/*": { schema: { type: "string", format: "binary" } } };
  const header = (description: string, schema: JsonSchema = { type: "string" }) => ({
    description,
    schema,
  });
  const common = {
    "Content-Length": header("Bytes of this response", { type: "integer" }),
    ETag: header("The SHA-256 of the file's bytes, quoted"),
    "Accept-Ranges": header("`bytes`"),
    "Content-Disposition": header("`inline` or `attachment` (active content), with the file name"),
    "X-Content-Type-Options": header("`nosniff`"),
    "Content-Security-Policy": header("`default-src 'none'; sandbox`"),
  };
  return {
    200: {
      description: "The file's bytes, with the content type sniffed when it was stored",
      headers: common,
      content: bytes,
    },
    206: {
      description: "One range of the bytes (a `Range: bytes=...` request)",
      headers: { ...common, "Content-Range": header("`bytes first-last/size`") },
      content: bytes,
    },
    304: {
      description: "`If-None-Match` names the file's ETag",
      headers: { ETag: common.ETag },
    },
  };
}

function describeStatus(status: number, codes: ErrorCode[]): string {
  const text = STATUS_TEXT[status] ?? "Error";
  return codes.length > 0 ? `${text}: ${codes.map((code) => `\`${code}\``).join(", ")}` : text;
}

/** The route's own codes plus the ones its pipeline adds. */
function errorCodesOf(route: Route): ErrorCode[] {
  const codes = new Set<ErrorCode>(route.errors);
  if (route.auth !== "none") codes.add("unauthorized");
  if (route.rateLimits.length > 0) codes.add("too_many_requests");
  // Every route but an upload reads a JSON body (one without a body schema takes only `{}`).
  if (route.multipartFile === undefined) codes.add("payload_too_large");
  // Any body, JSON or an upload, that stalls (REQUEST_BODY_IDLE_TIMEOUT_MS).
  codes.add("request_timeout");
  codes.add("service_unavailable");
  return [...codes];
}

function domainErrorSchema(codes: ErrorCode[]): JsonSchema {
  return {
    type: "object",
    required: ["message", "data"],
    properties: {
      message: codes.length === 1 ? { const: codes[0] } : { type: "string", enum: codes },
      data: { type: "object" },
    },
  };
}

function parametersOf(schema: z.ZodType | undefined, where: "query" | "path") {
  if (!schema) return [];
  const object = schemaOf(schema, "input");
  const properties = (object.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((object.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: where,
      required: where === "path" || required.has(name),
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

/** A reference when the schema is named, else its JSON Schema inline. */
function schemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const id = schemaIdOf(schema);
  if (id) return ref(id);
  return withoutDialect(z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema);
}

function registrySchemas(): Record<string, JsonSchema> {
  const uri = (id: string) => `#/components/schemas/${id}`;
  const request = z.toJSONSchema(requestSchemas, { io: "input", uri, unrepresentable: "any" });
  const response = z.toJSONSchema(responseSchemas, { io: "output", uri, unrepresentable: "any" });
  const all = { ...request.schemas, ...response.schemas } as Record<string, JsonSchema>;
  return Object.fromEntries(Object.entries(all).map(([id, s]) => [id, withoutDialect(s)]));
}

/** The shared envelopes, and `<id>Response` for each named success `data`. */
function envelopeSchemas(routes: readonly Route[]): Record<string, JsonSchema> {
  const success = (data: JsonSchema): JsonSchema => ({
    type: "object",
    required: ["message", "data"],
    properties: { message: { const: "success" }, data },
  });
  const envelopes: Record<string, JsonSchema> = {
    EmptyAPIResponse: success({ type: "object", maxProperties: 0 }),
    ...errorSchemas(),
  };
  for (const route of routes) {
    const id = route.response ? schemaIdOf(route.response) : undefined;
    if (id && !route.raw) envelopes[`${id}Response`] = success(ref(id));
  }
  return envelopes;
}

/** The components errorResponses refers to: the 400 validation shape and the 500 answer. */
export function errorSchemas(): Record<string, JsonSchema> {
  return {
    ValidationError: {
      type: "object",
      required: ["status_code", "detail", "extra"],
      properties: {
        status_code: { const: 400 },
        detail: {
          type: "string",
          description:
            `\`Validation failed for METHOD /path\`; past ${VALIDATION_ITEMS_MAX} problems it ` +
            `goes on \`: the first ${VALIDATION_ITEMS_MAX} of N problems are listed\``,
          examples: ["Validation failed for POST /auth/login"],
        },
        extra: {
          type: "array",
          description: `Every problem found, in the order found, the first ${VALIDATION_ITEMS_MAX} of them`,
          maxItems: VALIDATION_ITEMS_MAX,
          items: {
            type: "object",
            required: ["key", "message", "source", "code"],
            properties: {
              key: { type: "string" },
              message: { type: "string", description: "What is wrong, for people" },
              source: { enum: ["body", "query", "path", "header"] },
              code: {
                enum: [...VALIDATION_CODES],
                description:
                  "What kind of problem, for programs: `required`, `unknown_key`, " +
                  "`invalid_type` (wrong JSON type), `invalid_value` (right type, value not " +
                  "allowed), `too_short`/`too_long` (a text or list), `out_of_range` (a number " +
                  "or date), `invalid_syntax` (`where`, `sort`, `fields` or a body that does " +
                  "not parse), `not_found` (a field named that the table does not have), " +
                  "`read_only` (a value the system writes)",
              },
            },
          },
        },
      },
    },
    InternalError: {
      type: "object",
      required: ["message", "data"],
      properties: {
        message: { const: "internal_error" },
        data: {
          type: "object",
          required: ["request_id"],
          properties: { request_id: { type: "string" } },
        },
      },
    },
  };
}

function withoutDialect(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, $id: _id, ...rest } = schema;
  return rest;
}
