import type { CallOptions } from "@connectrpc/connect";
import type { z } from "zod";
import type { SessionCaller } from "../auth/authenticate.js";
import type { ErrorCode } from "../errors/error-table.js";
import type { GatewayContext } from "../gateway-context.js";
import type { RateLimitName } from "../rate-limit/rate-limit-settings.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** Who may call a route: anyone, or a valid session (API tokens come with the record routes). */
export type AuthMode = "none" | "session";

type Output<S> = S extends z.ZodType ? z.output<S> : undefined;

/** What a route's handler receives once rate limits, authentication and validation passed. */
export interface RouteInput<A extends AuthMode, Q, B, P> {
  ctx: GatewayContext;
  query: Q;
  body: B;
  params: P;
  caller: A extends "session" ? SessionCaller : undefined;
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
> {
  method: HttpMethod;
  /** A @koa/router (path-to-regexp v8) path: `/x/:id`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: A;
  /** Applied in order of what they count: per IP first, per user after auth, per e-mail last. */
  rateLimits?: RateLimitName[];
  /** Strict object schemas; without `query` the route accepts no query parameters. */
  query?: Q;
  params?: P;
  /** A strict object schema named with `requestBody`; its presence makes the body required. */
  body?: B;
  /** The success envelope's `data`, named with `responseData`; without it, empty success. */
  response?: R;
  /** Domain errors the route can answer besides the ones every route of its kind has. */
  errors?: ErrorCode[];
  handle(
    input: RouteInput<A, Output<Q>, Output<B>, Output<P>>,
  ): Promise<R extends z.ZodType ? z.output<R> : Record<string, never>>;
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
>(spec: RouteSpec<A, Q, B, P, R>): Route {
  return {
    ...spec,
    rateLimits: spec.rateLimits ?? [],
    errors: spec.errors ?? [],
    handle: spec.handle as Route["handle"],
  };
}
