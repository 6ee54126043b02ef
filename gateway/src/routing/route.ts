import type { CallOptions } from "@connectrpc/connect";
import type { z } from "zod";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";
import type { ErrorCode } from "../errors/error-table.js";
import type { GatewayContext } from "../gateway-context.js";
import type { RateLimitName } from "../rate-limit/rate-limit-settings.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * Who may call a route: anyone; a valid session (management routes, SPEC sections 4-6 and 11:
 * an API token gets 401); or a session or an API token (record and file routes, sections 7-8).
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

/** A redirect route's handler returns a Redirect; any other returns the success `data`. */
type Success<R, D> = D extends true
  ? Redirect
  : R extends z.ZodType
    ? z.output<R>
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
  params?: P;
  /** A strict object schema named with `requestBody`; its presence makes the body required. */
  body?: B;
  /** The success envelope's `data`, named with `responseData`; without it, empty success. */
  response?: R;
  /** Answers 302 to where the handler says instead of a success envelope (no `response`). */
  redirect?: D;
  /** Domain errors the route can answer besides the ones every route of its kind has. */
  errors?: ErrorCode[];
  handle(input: RouteInput<A, Output<Q>, Output<B>, Output<P>>): Promise<Success<R, D>>;
}

/** A route with its types erased, as the pipeline and the generator see it. */
export interface Route {
  method: HttpMethod;
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthMode;
  rateLimits: RateLimitName[];
  query?: z.ZodType;
  params?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  redirect: boolean;
  errors: ErrorCode[];
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
  return {
    ...spec,
    redirect: spec.redirect ?? false,
    rateLimits: spec.rateLimits ?? [],
    errors: spec.errors ?? [],
    handle: spec.handle as Route["handle"],
  };
}
