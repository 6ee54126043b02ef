import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Router } from "@koa/router";
import { type Cache, createLogger, MemoryCache } from "@rowbase/kit";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import Koa from "koa";
import { ApiTokenAuthenticator, type ApiTokenLookup } from "../auth/api-token-authenticator.js";
import { SessionAuthenticator } from "../auth/authenticate.js";
import { SessionTokenVerifier } from "../auth/session-token-verifier.js";
import { errorMiddleware } from "../errors/error-middleware.js";
import type { GatewayState } from "../gateway-context.js";
import { JsonBodyBudget } from "../http/json-body.js";
import { refuseQueryCredentials } from "../middleware/query-credentials.js";
import { requestId } from "../middleware/request-id.js";
import { routeFallback } from "../middleware/route-fallback.js";
import { parseRateLimits, type RateLimitSettings } from "../rate-limit/rate-limit-settings.js";
import { RateLimits } from "../rate-limit/rate-limits.js";
import { ROUTER_OPTIONS } from "../routing/path-pattern.js";
import type { Route } from "../routing/route.js";
import { mountRoutes } from "../routing/route-pipeline.js";

/**
 * For tests: the given routes behind the gateway's own middleware and pipeline, over real HTTP,
 * with session JWTs signed by a key made here (the keys a SessionTokenVerifier reads come from a
 * local function instead of the identity service). Nothing is faked behind the routes: their
 * service clients are whatever the test passes, typically pointed at a closed port.
 */

export const HARNESS_INTERNAL_SECRET = "route-harness-secret-route-harness";

export interface RouteHarnessOptions {
  cache?: Cache;
  /** Defaults to every limit off. */
  rateLimits?: RateLimitSettings;
  /** Defaults to one that fails the test if an API token is ever resolved. */
  apiTokenLookup?: ApiTokenLookup;
}

export interface HarnessResponse {
  status: number;
  headers: Headers;
  body: unknown;
}

export interface RouteHarness {
  /** `http://127.0.0.1:<port>`, for requests `request` cannot make (multipart, own headers). */
  baseUrl: string;
  /** A valid session access token for the user, as identity would issue it. */
  sessionToken(userId: bigint): Promise<string>;
  /** `rawJson` is sent as is, for bodies JSON.stringify cannot write (e.g. `1e999`). */
  request(
    method: string,
    path: string,
    init?: { token?: string; json?: unknown; rawJson?: string },
  ): Promise<HarnessResponse>;
  close(): Promise<void>;
}

const noApiTokenLookup: ApiTokenLookup = async () => {
  throw new Error("this harness resolves no API tokens");
};

export async function startRouteHarness(
  routes: Route[],
  options: RouteHarnessOptions = {},
): Promise<RouteHarness> {
  const cache = options.cache ?? new MemoryCache();
  const { privateKey, publicKey } = await generateKeyPair("EdDSA", {
    crv: "Ed25519",
    extractable: true,
  });
  const kid = randomUUID();
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "EdDSA", use: "sig" };
  const verifier = new SessionTokenVerifier(async () => [publicJwk]);
  const off = parseRateLimits("off");
  if (!off.ok) throw new Error("unreachable");

  const router = new Router<GatewayState>(ROUTER_OPTIONS);
  mountRoutes(router, routes, {
    rateLimits: new RateLimits(options.rateLimits ?? off.settings, cache),
    authenticator: new SessionAuthenticator(verifier, cache),
    apiTokens: new ApiTokenAuthenticator(options.apiTokenLookup ?? noApiTokenLookup, cache),
    clientIp: () => "127.0.0.1",
    internalSecret: HARNESS_INTERNAL_SECRET,
    jsonBodies: new JsonBodyBudget(),
  });
  const app = new Koa<GatewayState>();
  app.use(requestId(createLogger("gateway", "silent")));
  app.use(errorMiddleware());
  app.use(refuseQueryCredentials());
  app.use(router.routes());
  app.use(routeFallback());

  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;

  return {
    baseUrl: base,
    sessionToken: (userId) =>
      new SignJWT({ sid: `session-${userId}` })
        .setProtectedHeader({ alg: "EdDSA", kid })
        .setIssuer("rowbase")
        .setSubject(userId.toString())
        .setIssuedAt()
        .setExpirationTime("15m")
        .sign(privateKey),
    async request(method, path, init = {}) {
      const headers: Record<string, string> = {};
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      const sent =
        init.rawJson ?? (init.json === undefined ? undefined : JSON.stringify(init.json));
      if (sent !== undefined) headers["content-type"] = "application/json";
      const response = await fetch(base + path, { method, headers, body: sent });
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {}
      return { status: response.status, headers: response.headers, body };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
