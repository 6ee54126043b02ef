import type { IncomingMessage } from "node:http";
import type { Layer, Router, RouterMiddleware } from "@koa/router";
import { z } from "zod";
import type { ApiTokenAuthenticator } from "../auth/api-token-authenticator.js";
import {
  API_TOKEN_PREFIX,
  type ApiTokenCaller,
  bearerOf,
  type SessionAuthenticator,
  type SessionCaller,
} from "../auth/authenticate.js";
import { downstreamCallOptions } from "../auth/downstream-call.js";
import { httpErrorOf } from "../errors/error-table.js";
import {
  itemsFromIssues,
  ValidationFailed,
  type ValidationItem,
  type ValidationSource,
} from "../errors/validation-failed.js";
import type { GatewayContext, GatewayState } from "../gateway-context.js";
import {
  type JsonBodyBudget,
  parseJsonBody,
  type ReceivedBody,
  receiveJsonBody,
  receiveUrlEncodedBody,
  URL_ENCODED,
} from "../http/json-body.js";
import { reportRateLimits } from "../rate-limit/rate-limit-headers.js";
import type { RateLimitKeyKind, RateLimitName } from "../rate-limit/rate-limit-settings.js";
import { RateLimits } from "../rate-limit/rate-limits.js";
import { restrictParams } from "./path-pattern.js";
import { Answered, JsonText, Redirect, type Route } from "./route.js";

export interface PipelineDeps {
  rateLimits: RateLimits;
  authenticator: SessionAuthenticator;
  /** Resolves API tokens for `session_or_token` routes. */
  apiTokens: ApiTokenAuthenticator;
  clientIp: (req: IncomingMessage) => string;
  internalSecret: string;
  /** Bounds the JSON bodies the replica works on at a time (memory). */
  jsonBodies: JsonBodyBudget;
}

/** A route without a query schema takes no query parameters at all. */
const NO_QUERY = z.strictObject({});
/**
 * A route without a body schema (and no multipart upload) takes no body but an empty one: none,
 * or `{}`. Parameters sent in a body it ignores would be silently dropped.
 */
const NO_BODY = z.strictObject({});

/** Registers each route on the router as its pipeline. */
export function mountRoutes(
  router: Router<GatewayState>,
  routes: readonly Route[],
  deps: PipelineDeps,
): void {
  for (const route of routes) {
    // One string path registers one Layer (the union return type covers arrays of paths).
    const layer = router.register(route.path, [route.method], routePipeline(route, deps)) as Layer;
    if (route.paramPatterns) restrictParams(layer, route.paramPatterns);
  }
}

/**
 * rate limit (per IP) -> authenticate -> rate limit (per user or token) -> read the JSON body
 * and wait for its share of the budget (routes with a body) -> validate -> rate limit (per e-mail) -> call -> present. A
 * limit runs as soon as its key is known, so floods are counted before any work, yet a per-e-mail
 * limit can read the validated address. Errors travel to the one error middleware, but for
 * the refusals a route answers itself (`refusalPage`).
 */
export function routePipeline(route: Route, deps: PipelineDeps): RouterMiddleware<GatewayState> {
  const limits = (kind: RateLimitKeyKind) =>
    route.rateLimits.filter((name) => RateLimits.keyKindOf(name) === kind);
  const ipLimits = limits("ip");
  const userLimits = limits("user");
  const emailLimits = limits("email");
  const tokenLimits = limits("token");
  const formLimits = limits("form");
  if (tokenLimits.length > 0 && route.auth !== "session_or_token") {
    throw new Error(`${route.operationId}: per-token limits need API-token authentication`);
  }
  if (userLimits.length > 0 && route.auth === "none") {
    throw new Error(`${route.operationId}: a per-user limit needs an authenticated route`);
  }

  const run: RouterMiddleware<GatewayState> = async (ctx) => {
    // Every limit the request is counted under shows in its RateLimit headers, a 429 included.
    const report = reportRateLimits(ctx);
    const consumeAll = async (names: RateLimitName[], key: string) => {
      for (const name of names) await deps.rateLimits.consume(name, key, report);
    };
    await consumeAll(ipLimits, deps.clientIp(ctx.req));
    // Per form, by the key in the path (the public form routes).
    if (formLimits.length > 0) {
      const { form_key: formKey } = (ctx as { params?: { form_key?: string } }).params ?? {};
      await consumeAll(formLimits, formKey ?? "");
    }
    const caller = await callerOf(route, ctx, deps);
    if (caller?.kind === "user") await consumeAll(userLimits, caller.userId.toString());
    if (caller?.kind === "api_token") {
      await consumeAll(tokenLimits, caller.tokenId.toString());
    }
    // The body is read before it takes a share of the budget (see JsonBodyBudget). An upload
    // reads its own.
    const body =
      route.multipartFile !== undefined
        ? undefined
        : route.urlEncodedAs !== undefined && ctx.request.is(URL_ENCODED)
          ? await receiveUrlEncodedBody(ctx, route.urlEncodedAs)
          : await receiveJsonBody(ctx);
    const answer = () =>
      answerCall(route, deps, ctx, caller, body, async (validated) => {
        if (emailLimits.length > 0) await consumeAll(emailLimits, emailOf(validated));
      });
    await deps.jsonBodies.run(body, answer);
  };
  const { refusalPage } = route;
  if (!refusalPage) return run;
  return async (ctx, next) => {
    try {
      await run(ctx, next);
    } catch (error) {
      if (ctx.headerSent) throw error;
      const refusal = httpErrorOf(error, {
        method: ctx.method,
        path: ctx.path,
        requestId: ctx.state.requestId,
      });
      if (refusal.status >= 500 || !refusalPage(ctx, refusal)) throw error;
      ctx.set(refusal.headers);
    }
  };
}

/** validate -> rate limit (per e-mail) -> call -> present, for an admitted caller. */
async function answerCall(
  route: Route,
  deps: PipelineDeps,
  ctx: GatewayContext,
  caller: SessionCaller | ApiTokenCaller | undefined,
  received: ReceivedBody,
  consumeEmailLimits: (body: unknown) => Promise<void>,
): Promise<void> {
  const input = validate(ctx, route, received);
  await consumeEmailLimits(input.body);
  const call = await downstreamCallOptions(deps.internalSecret, ctx.state.requestId, caller);
  const data = await route.handle({ ctx, ...input, caller, call });
  // The handler has set the status, the headers and the body (bytes) itself.
  if (route.binary || data instanceof Answered) return;
  if (route.redirect) {
    if (!(data instanceof Redirect)) throw new Error(`${route.operationId}: no redirect target`);
    // A redirect can carry one-time values (an OAuth state): no cache may keep it.
    ctx.set("cache-control", "no-store");
    ctx.redirect(data.location);
    ctx.status = 302;
    return;
  }
  ctx.status = 200;
  if (data instanceof JsonText) {
    ctx.type = "application/json";
    ctx.body = route.raw ? data.text : `{"message":"success","data":${data.text}}`;
    return;
  }
  ctx.body = route.raw ? data : { message: "success", data: data ?? {} };
}

/**
 * The caller by the route's auth mode, or 401 `unauthorized`. On a `session_or_token` route a
 * bearer starting `rb_` is resolved as an API token; anything else must be a session JWT. A
 * `session` route never resolves API tokens: it refuses them, saying so in `WWW-Authenticate`.
 */
export async function callerOf(
  route: Pick<Route, "auth">,
  ctx: GatewayContext,
  deps: Pick<PipelineDeps, "authenticator" | "apiTokens">,
): Promise<SessionCaller | ApiTokenCaller | undefined> {
  const authorization = ctx.get("authorization") || undefined;
  switch (route.auth) {
    case "none":
      return undefined;
    case "session":
      return deps.authenticator.authenticate(authorization);
    case "session_or_token": {
      const credential = bearerOf(authorization);
      if (credential?.startsWith(API_TOKEN_PREFIX)) {
        return deps.apiTokens.authenticate(credential, ctx.state.requestId);
      }
      return deps.authenticator.authenticate(authorization);
    }
  }
}

/** A per-e-mail limit keys on the body's validated (lower-cased) `email`. */
function emailOf(body: unknown): string {
  const email = (body as { email?: unknown } | undefined)?.email;
  if (typeof email !== "string") throw new Error("a per-e-mail limit needs an email in the body");
  return email;
}

/** Parses query, path and body against the route's schemas, reporting every problem at once. */
function validate(ctx: GatewayContext, route: Route, received: ReceivedBody) {
  const items: ValidationItem[] = [];
  const query = route.ignoresQuery
    ? undefined
    : parse(route.query ?? NO_QUERY, { ...ctx.query }, "query", items);
  const params = route.params
    ? parse(route.params, { ...(ctx as { params?: object }).params }, "path", items)
    : undefined;
  let body: unknown;
  if (route.body || received !== undefined) {
    try {
      body = parse(route.body ?? NO_BODY, parseJsonBody(received), "body", items);
    } catch (error) {
      if (!(error instanceof ValidationFailed)) throw error;
      items.push(...error.items);
    }
    if (!route.body) body = undefined;
  }
  if (items.length > 0) throw new ValidationFailed(items);
  return { query, params, body };
}

function parse(
  schema: z.ZodType,
  value: unknown,
  source: ValidationSource,
  items: ValidationItem[],
): unknown {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  items.push(...itemsFromIssues(result.error.issues, source));
  return undefined;
}
