import type { CallOptions } from "@connectrpc/connect";
import type { z } from "zod";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";
import type { ErrorCode, HttpErrorResponse } from "../errors/error-table.js";
import type { GatewayContext } from "../gateway-context.js";
import type { RateLimitName } from "../rate-limit/rate-limit-settings.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * Who may call a route: anyone; a valid session (management routes: accounts, organizations,
 * catalog, audit; an API token gets 401); or a session or an API token (record and file routes).
 */
export type AuthMode = "none" | "session" | "session_or_token";

/** The authenticated caller a route of each mode receives. */
export type CallerOf<A extends AuthMode> = A extends "session"
  ? SessionCaller
  : A extends "session_or_token"
    ? SessionCaller | ApiTokenCaller
    : undefined;

type Output<S> = S extends z.ZodType ? z.output<S> : undefined;

/**
 * What the handler of a `redirect` route returns: the pipeline answers 302 with this `Location`
 * and no envelope. Errors before it still take the envelope path.
 */
export class Redirect {
  constructor(readonly location: string) {}
}

/**
 * A success `data` already written as JSON text, which the pipeline sends as it is: records
 * arrive from the records service as JSON text, and parsing them only to write them out again
 * was work and garbage on every read and write. `T` is the value the text holds, so that a
 * handler stays typed by its route's `response`.
 */
export class JsonText<T> {
  declare readonly holds?: T;
  constructor(readonly text: string) {}
}

/**
 * What a handler returns when it has answered itself (status, headers, body) for this request
 * only: a form submitted from its HTML page gets a 303 or a thank-you page, the same route's
 * JSON callers the success envelope.
 */
export class Answered {}

/**
 * A redirect route's handler returns a Redirect; any other returns the success `data`, as a
 * value or as its JSON text.
 */
type Success<R, D> = D extends true
  ? Redirect
  : R extends z.ZodType
    ? z.output<R> | JsonText<z.output<R>> | Answered
    : Record<string, never>;

/** What a route's handler receives once rate limits, authentication and validation passed. */
export interface RouteInput<A extends AuthMode, Q, B, P> {
  ctx: GatewayContext;
  query: Q;
  body: B;
  params: P;
  caller: CallerOf<A>;
  /** Options for every gRPC call of this request: request id, signed principal, deadline. */
  call: CallOptions;
}

/**
 * Everything about one REST route, read twice: by the pipeline that serves it and by the
 * OpenAPI generator, so the document cannot drift from what is enforced.
 */
export interface RouteSpec<
  A extends AuthMode,
  Q extends z.ZodType | undefined,
  B extends z.ZodType | undefined,
  P extends z.ZodType | undefined,
  R extends z.ZodType | undefined,
  D extends boolean,
> {
  method: HttpMethod;
  /** A @koa/router (path-to-regexp v8) path: `/x/:id`. */
  path: string;
  /**
   * Regular-expression sources that path parameters must match for the route to match at all
   * (path-to-regexp v8 has no inline patterns): the record routes' `row_id` pattern keeps
   * `/records/batch` from being read as a record id. A path that fails one is another route's,
   * or 404/405.
   */
  paramPatterns?: Record<string, string>;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: A;
  /**
   * Applied in order of what they count: per IP first, per user or per token after auth (each
   * to its kind of caller), per e-mail last.
   */
  rateLimits?: RateLimitName[];
  /** Strict object schemas; without `query` the route accepts no query parameters. */
  query?: Q;
  /**
   * The route reads no query parameters and refuses none (credentials aside, which every path
   * refuses): for probes, which uptime monitors and load balancers call with cache-busters
   * (`?ts=...`). Every other route refuses an unknown parameter, to catch typos (`limt=`).
   */
  ignoresQuery?: boolean;
  params?: P;
  /** A strict object schema named with `requestBody`; its presence makes the body required. */
  body?: B;
  /**
   * The body may also come as `application/x-www-form-urlencoded` (an HTML form's post): its
   * pairs are read as an object under this key of the body (a repeated name as an array of its
   * values), and validated with the same schema as JSON.
   */
  urlEncodedAs?: string;
  /** The success envelope's `data`, named with `responseData`; without it, empty success. */
  response?: R;
  /** Answers 302 to where the handler says instead of a success envelope (no `response`). */
  redirect?: D;
  /**
   * Answers the handler's JSON as the whole body, without the success envelope: for documents
   * made to be fed to tools (a table's OpenAPI document), as /openapi.json is.
   */
  raw?: boolean;
  /**
   * The handler sends an `ETag` with its answer and answers 304 (returning Answered) when
   * `If-None-Match` names it; the document shows both.
   */
  etag?: boolean;
  /**
   * The body is multipart/form-data with one binary part of this name, which the handler reads
   * as a stream itself (the pipeline reads no JSON body); the document shows it so.
   */
  multipartFile?: string;
  /**
   * The handler answers itself: status, headers and a byte stream (file serving, with Range
   * and conditional answers). No envelope and no `response` schema; the handler returns `{}`.
   */
  binary?: boolean;
  /**
   * The handler answers itself with an HTML page (a public form), as a binary route answers; the
   * document shows `text/html`.
   */
  htmlPage?: boolean;
  /**
   * The handler answers itself with Server-Sent Events (`text/event-stream`) that stay open, as a
   * binary route answers; the document shows the stream and the `Last-Event-ID` header it reads.
   */
  eventStream?: boolean;
  /** Domain errors the route can answer besides the ones every route of its kind has. */
  errors?: ErrorCode[];
  /**
   * Answers a refusal (a 4xx from any step: a rate limit, validation, the handler) itself, say
   * as a page for a person, and returns true; false leaves it to the error middleware's
   * envelope. The refusal's headers (`Retry-After`) are sent either way.
   */
  refusalPage?: (ctx: GatewayContext, refusal: HttpErrorResponse) => boolean;
  handle(input: RouteInput<A, Output<Q>, Output<B>, Output<P>>): Promise<Success<R, D>>;
}

/** A route with its types erased, as the pipeline and the generator see it. */
export interface Route {
  method: HttpMethod;
  path: string;
  paramPatterns?: Record<string, string>;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthMode;
  rateLimits: RateLimitName[];
  query?: z.ZodType;
  ignoresQuery: boolean;
  params?: z.ZodType;
  body?: z.ZodType;
  urlEncodedAs?: string;
  response?: z.ZodType;
  redirect: boolean;
  raw: boolean;
  etag: boolean;
  multipartFile?: string;
  binary: boolean;
  htmlPage: boolean;
  eventStream: boolean;
  errors: ErrorCode[];
  refusalPage?: (ctx: GatewayContext, refusal: HttpErrorResponse) => boolean;
  handle(input: RouteInput<AuthMode, unknown, unknown, unknown>): Promise<unknown>;
}

/** Keeps a route's schemas and handler typed together, then erases them for the route list. */
export function defineRoute<
  A extends AuthMode,
  Q extends z.ZodType | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
  P extends z.ZodType | undefined = undefined,
  R extends z.ZodType | undefined = undefined,
  D extends boolean = false,
>(spec: RouteSpec<A, Q, B, P, R, D>): Route {
  if (spec.redirect && spec.response) {
    throw new Error(`${spec.operationId}: a redirect route has no response schema`);
  }
  if (spec.raw && !spec.response) {
    throw new Error(`${spec.operationId}: a raw route documents its body with a response schema`);
  }
  if ((spec.binary || spec.eventStream) && (spec.response || spec.redirect || spec.raw)) {
    throw new Error(`${spec.operationId}: a binary or event-stream route answers bytes only`);
  }
  if (spec.ignoresQuery && spec.query) {
    throw new Error(
      `${spec.operationId}: a route that ignores its query string has no schema for it`,
    );
  }
  if (spec.multipartFile && spec.body) {
    throw new Error(`${spec.operationId}: a multipart route has no JSON body`);
  }
  return {
    ...spec,
    ignoresQuery: spec.ignoresQuery ?? false,
    redirect: spec.redirect ?? false,
    raw: spec.raw ?? false,
    etag: spec.etag ?? false,
    binary: (spec.binary ?? false) || (spec.eventStream ?? false) || (spec.htmlPage ?? false),
    htmlPage: spec.htmlPage ?? false,
    eventStream: spec.eventStream ?? false,
    rateLimits: spec.rateLimits ?? [],
    errors: spec.errors ?? [],
    handle: spec.handle as Route["handle"],
  };
}
