import type { Client } from "@connectrpc/connect";
import { Router } from "@koa/router";
import type { Cache, Logger } from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import Koa from "koa";
import { ApiTokenAuthenticator } from "./auth/api-token-authenticator.js";
import { SessionAuthenticator } from "./auth/authenticate.js";
import { organizationTokenLookup } from "./auth/organization-token-lookup.js";
import { SessionTokenVerifier } from "./auth/session-token-verifier.js";
import type { GatewayConfig } from "./config.js";
import { errorMiddleware } from "./errors/error-middleware.js";
import type { GatewayState } from "./gateway-context.js";
import { clientIpResolver } from "./http/client-ip.js";
import { accessLog } from "./middleware/access-log.js";
import { refuseQueryCredentials } from "./middleware/query-credentials.js";
import { requestId } from "./middleware/request-id.js";
import { routeFallback } from "./middleware/route-fallback.js";
import { RateLimits } from "./rate-limit/rate-limits.js";
import { apiTokenRoutes } from "./routes/api-token/api-token-routes.js";
import { authRoutes } from "./routes/auth/auth-routes.js";
import { databaseRoutes } from "./routes/database/database-routes.js";
import { mountDocsRoutes } from "./routes/docs/docs-routes.js";
import { fieldRoutes } from "./routes/field/field-routes.js";
import { type HealthTarget, healthRoutes } from "./routes/health/health-routes.js";
import { oauthRoutes } from "./routes/oauth/oauth-routes.js";
import { organizationRoutes } from "./routes/organization/organization-routes.js";
import { tableRoutes } from "./routes/table/table-routes.js";
import { buildOpenApiDocument } from "./routing/openapi.js";
import type { Route } from "./routing/route.js";
import { mountRoutes } from "./routing/route-pipeline.js";

/** What the gateway is built from; the caller owns these and closes them. */
export interface GatewayDeps {
  config: GatewayConfig;
  logger: Logger;
  /**
   * Shared with the services: revoked-session marks (identity) and resolved API tokens, which
   * the organization service evicts on revocation, are read from it.
   */
  cache: Cache;
  identity: Client<typeof IdentityService>;
  /** Organizations, members, invites, API tokens; also resolves presented API tokens. */
  organization: Client<typeof OrganizationService>;
  /** Databases, tables and fields. */
  catalog: Client<typeof CatalogService>;
  /** The services /health/ready checks over grpc.health.v1. */
  healthTargets: HealthTarget[];
}

/** Every REST route the gateway serves, in the order the document lists them. */
export function gatewayRoutes(
  deps: Pick<GatewayDeps, "config" | "identity" | "organization" | "catalog" | "healthTargets">,
) {
  return [
    ...authRoutes({
      identity: deps.identity,
      accessTokenTtlSeconds: deps.config.ACCESS_TOKEN_TTL_SECONDS,
    }),
    ...oauthRoutes({
      identity: deps.identity,
      accessTokenTtlSeconds: deps.config.ACCESS_TOKEN_TTL_SECONDS,
    }),
    ...organizationRoutes({ organization: deps.organization }),
    ...apiTokenRoutes({ organization: deps.organization }),
    ...databaseRoutes({ catalog: deps.catalog }),
    ...tableRoutes({ catalog: deps.catalog }),
    ...fieldRoutes({ catalog: deps.catalog }),
    ...healthRoutes(deps.healthTargets),
  ] satisfies Route[];
}

/**
 * The gateway as a Koa app that does not listen, so tests and the one-process launcher can
 * mount it themselves. Order matters: the request id first (every response carries it), the
 * access log around the one error middleware (it sees the final status), the query-credential
 * refusal before any route, the routes, and the 404/405 fallback last.
 */
export function createGateway(deps: GatewayDeps): Koa<GatewayState> {
  const { config, logger, cache, identity } = deps;
  const verifier = new SessionTokenVerifier(
    async () => {
      const { keys } = await identity.getJwks({}, { timeoutMs: 5_000 });
      return keys.map(({ kid, kty, crv, x, alg, use }) => ({ kid, kty, crv, x, alg, use }));
    },
    { logger },
  );
  const routes = gatewayRoutes(deps);
  const router = new Router<GatewayState>();
  mountRoutes(router, routes, {
    rateLimits: new RateLimits(config.RATE_LIMITS, cache),
    authenticator: new SessionAuthenticator(verifier, cache),
    apiTokens: new ApiTokenAuthenticator(
      organizationTokenLookup(deps.organization, config.INTERNAL_JWT_SECRET),
      cache,
    ),
    clientIp: clientIpResolver(config.TRUSTED_PROXIES),
    internalSecret: config.INTERNAL_JWT_SECRET,
  });
  mountDocsRoutes(router, () =>
    buildOpenApiDocument(routes, { serverUrl: config.PUBLIC_BASE_URL }),
  );

  const app = new Koa<GatewayState>();
  app.on("error", (error: unknown) => logger.warn({ err: error }, "response failed"));
  app.use(requestId(logger));
  app.use(accessLog());
  app.use(errorMiddleware());
  app.use(refuseQueryCredentials());
  app.use(router.routes());
  app.use(routeFallback());
  return app;
}
