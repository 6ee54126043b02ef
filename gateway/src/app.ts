import type { Client } from "@connectrpc/connect";
import { Router } from "@koa/router";
import {
  type Cache,
  type EventBus,
  type Logger,
  type MetricsRegistry,
  processMetricsRegistry,
  schemaChangeDeadlines,
} from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import Koa from "koa";
import { ApiTokenAuthenticator } from "./auth/api-token-authenticator.js";
import { SessionAuthenticator } from "./auth/authenticate.js";
import { organizationTokenLookup } from "./auth/organization-token-lookup.js";
import { SessionTokenVerifier } from "./auth/session-token-verifier.js";
import type { GatewayConfig } from "./config.js";
import { errorMiddleware } from "./errors/error-middleware.js";
import type { GatewayState } from "./gateway-context.js";
import { clientIpResolver } from "./http/client-ip.js";
import { JsonBodyBudget } from "./http/json-body.js";
import { mcpPathItems } from "./mcp/mcp-docs.js";
import { mountMcpEndpoint } from "./mcp/mcp-endpoint.js";
import { accessLog } from "./middleware/access-log.js";
import { cors } from "./middleware/cors.js";
import { httpMetrics } from "./middleware/http-metrics.js";
import { normalizePath } from "./middleware/normalize-path.js";
import { refuseQueryCredentials } from "./middleware/query-credentials.js";
import { checkRequestHeaders } from "./middleware/request-headers.js";
import { requestId } from "./middleware/request-id.js";
import { requestTrace } from "./middleware/request-trace.js";
import { responseHeaders } from "./middleware/response-headers.js";
import { routeFallback } from "./middleware/route-fallback.js";
import { type ApiCallQuota, createApiCallQuota } from "./quota/api-call-quota.js";
import { ApiCallTally } from "./quota/api-call-tally.js";
import { RateLimits } from "./rate-limit/rate-limits.js";
import { apiTokenRoutes } from "./routes/api-token/api-token-routes.js";
import { auditRoutes } from "./routes/audit/audit-routes.js";
import { authRoutes } from "./routes/auth/auth-routes.js";
import { changeRoutes } from "./routes/change/change-routes.js";
import { ChangeStreams } from "./routes/change/change-streams.js";
import { databaseRoutes } from "./routes/database/database-routes.js";
import { docsPathItems, mountDocsRoutes } from "./routes/docs/docs-routes.js";
import { fieldRoutes } from "./routes/field/field-routes.js";
import { fileRoutes } from "./routes/file/file-routes.js";
import { formRoutes } from "./routes/form/form-routes.js";
import { publicFormRoutes } from "./routes/form/public-form-routes.js";
import { type HealthTarget, healthRoutes } from "./routes/health/health-routes.js";
import { oauthRoutes } from "./routes/oauth/oauth-routes.js";
import { apiStatsRoutes } from "./routes/organization/api-stats-routes.js";
import { organizationRoutes } from "./routes/organization/organization-routes.js";
import { RecordOperations } from "./routes/record/record-operations.js";
import { recordRoutes } from "./routes/record/record-routes.js";
import { tableRoutes } from "./routes/table/table-routes.js";
import { webhookRoutes } from "./routes/webhook/webhook-routes.js";
import { API_VERSION, buildOpenApiDocument } from "./routing/openapi.js";
import { ROUTER_OPTIONS } from "./routing/path-pattern.js";
import type { Route } from "./routing/route.js";
import { callerOf, mountRoutes } from "./routing/route-pipeline.js";

/** What the gateway is built from; the caller owns these and closes them. */
export interface GatewayDeps {
  config: GatewayConfig;
  logger: Logger;
  /**
   * Shared with the services: revoked-session marks (identity) and resolved API tokens, which
   * the organization service evicts on revocation, are read from it; the monthly API-call
   * counters live in it, with the plans, table owners and roles they are checked against.
   */
  cache: Cache;
  /** Where the gateway publishes usage events (ApiCallsCounted on `usage.api_calls`). */
  bus: EventBus;
  identity: Client<typeof IdentityService>;
  /** Organizations, members, invites, API tokens; also resolves presented API tokens. */
  organization: Client<typeof OrganizationService>;
  /** Databases, tables and fields; also names the organization that owns a table. */
  catalog: Client<typeof CatalogService>;
  /** Records of tables and their query language. */
  records: Client<typeof RecordsService>;
  /** Files of records: uploads, serving, signed URLs (streams through the gateway). */
  files: Client<typeof FilesService>;
  /** Webhooks of tables (WEBHOOKS_GRPC_URL); absent, no /webhook route is served. */
  webhooks?: Client<typeof WebhooksService>;
  /** The services /health/ready checks over grpc.health.v1. */
  healthTargets: HealthTarget[];
  /** Where request counts and rate-limit refusals go; the process's registry when absent. */
  metrics?: MetricsRegistry;
}

/** Every REST route the gateway serves, in the order the document lists them. */
export function gatewayRoutes(
  deps: Pick<
    GatewayDeps,
    | "config"
    | "logger"
    | "cache"
    | "bus"
    | "identity"
    | "organization"
    | "catalog"
    | "records"
    | "files"
    | "webhooks"
    | "healthTargets"
  >,
  /** One API-call quota for the record and file routes: both count as public API calls. */
  quota: ApiCallQuota,
  /** Where the gateway is reached: the base of the links it hands out. */
  publicBaseUrl: string,
  /** The open change streams, which the gateway ends when it stops. */
  streams: ChangeStreams,
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
    ...apiStatsRoutes({ organization: deps.organization }),
    ...apiTokenRoutes({ organization: deps.organization }),
    ...databaseRoutes({ catalog: deps.catalog }),
    ...tableRoutes({ catalog: deps.catalog }),
    ...fieldRoutes({
      catalog: deps.catalog,
      schemaChangeMs: schemaChangeDeadlines(deps.config.SCHEMA_CHANGE_TIMEOUT_SECONDS).requestMs,
    }),
    ...formRoutes({ catalog: deps.catalog }),
    ...publicFormRoutes({
      catalog: deps.catalog,
      records: deps.records,
      internalSecret: deps.config.INTERNAL_JWT_SECRET,
      logger: deps.logger,
    }),
    ...auditRoutes({ organization: deps.organization }),
    ...recordRoutes({
      records: deps.records,
      quota,
      publicBaseUrl,
    }),
    ...changeRoutes({
      records: deps.records,
      quota,
      streams,
      internalSecret: deps.config.INTERNAL_JWT_SECRET,
    }),
    ...fileRoutes({
      files: deps.files,
      filesUrl: deps.config.FILES_GRPC_URL,
      records: deps.records,
      organization: deps.organization,
      cache: deps.cache,
      bus: deps.bus,
      quota,
      internalSecret: deps.config.INTERNAL_JWT_SECRET,
      publicBaseUrl,
      uploadMaxBytes: deps.config.FILE_UPLOAD_MAX_BYTES,
    }),
    ...(deps.webhooks ? webhookRoutes({ webhooks: deps.webhooks }) : []),
    ...healthRoutes(deps.healthTargets),
  ] satisfies Route[];
}

/** The gateway's Koa app and what must be done when it stops. */
export interface Gateway {
  app: Koa<GatewayState>;
  /** Publishes the API calls counted since the last flush; call once no request runs. */
  close(): Promise<void>;
  /** Ends the open change streams cleanly, first thing when the gateway stops. */
  endStreams(): void;
}

/**
 * The gateway as a Koa app that does not listen, so tests and the one-process launcher can
 * mount it themselves. Order matters: the path's one spelling first (everything below reads
 * it), the request's trace span next (every log line below carries its trace id), the request
 * id next (every response carries it), the metrics and the access log around the one error
 * middleware (they see the final status), CORS around it (errors carry its headers too), the header checks and the query-credential refusal
 * before any route, the routes, and the 404/405 fallback last. `publicBaseUrl` is
 * PUBLIC_BASE_URL, or the address the caller listens on when it is unset.
 */
export function createGateway(deps: GatewayDeps, publicBaseUrl: string): Gateway {
  const { config, logger, cache, identity } = deps;
  const metrics = deps.metrics ?? processMetricsRegistry();
  const verifier = new SessionTokenVerifier(
    async () => {
      const { keys } = await identity.getJwks({}, { timeoutMs: 5_000 });
      return keys.map(({ kid, kty, crv, x, alg, use }) => ({ kid, kty, crv, x, alg, use }));
    },
    { logger },
  );
  const apiCalls = new ApiCallTally(deps.bus, logger, config.USAGE_FLUSH_MS);
  const authenticator = new SessionAuthenticator(verifier, cache);
  const apiTokens = new ApiTokenAuthenticator(
    organizationTokenLookup(deps.organization, config.INTERNAL_JWT_SECRET),
    cache,
  );
  const streams = new ChangeStreams(
    cache,
    { pollMs: config.CHANGE_STREAM_POLL_MS, heartbeatMs: config.CHANGE_STREAM_HEARTBEAT_MS },
    logger,
    // An open stream checks its credential again with every heartbeat, as a new request would.
    (ctx) => callerOf({ auth: "session_or_token" }, ctx, { authenticator, apiTokens }),
  );
  // One API-call quota for the record and file routes and the MCP tools: all count as public
  // API calls.
  const quota = createApiCallQuota({
    cache,
    tally: apiCalls,
    organization: deps.organization,
    catalog: deps.catalog,
    internalSecret: config.INTERNAL_JWT_SECRET,
  });
  const routes = gatewayRoutes(deps, quota, publicBaseUrl, streams);
  const router = new Router<GatewayState>(ROUTER_OPTIONS);
  const rateLimits = new RateLimits(config.RATE_LIMITS, cache, metrics);
  const jsonBodies = new JsonBodyBudget();
  mountRoutes(router, routes, {
    rateLimits,
    authenticator,
    apiTokens,
    clientIp: clientIpResolver(config.TRUSTED_PROXIES),
    internalSecret: config.INTERNAL_JWT_SECRET,
    jsonBodies,
  });
  mountMcpEndpoint(router, {
    catalog: deps.catalog,
    records: deps.records,
    operations: new RecordOperations({ records: deps.records, quota }),
    quota,
    version: API_VERSION,
    apiTokens,
    rateLimits,
    jsonBodies,
    internalSecret: config.INTERNAL_JWT_SECRET,
    publicBaseUrl,
    extraHosts: config.MCP_ALLOWED_HOSTS,
    extraOrigins: config.CORS_ALLOWED_ORIGINS,
  });
  mountDocsRoutes(router, () =>
    buildOpenApiDocument(routes, {
      serverUrl: publicBaseUrl,
      paths: { ...docsPathItems(), ...mcpPathItems() },
    }),
  );

  const app = new Koa<GatewayState>();
  app.on("error", (error: unknown) => logger.warn({ err: error }, "response failed"));
  app.use(normalizePath());
  app.use(requestTrace());
  app.use(requestId(logger));
  app.use(responseHeaders());
  app.use(httpMetrics(metrics));
  app.use(accessLog());
  app.use(cors(config.CORS_ALLOWED_ORIGINS));
  app.use(errorMiddleware());
  app.use(checkRequestHeaders());
  app.use(refuseQueryCredentials());
  app.use(router.routes());
  app.use(routeFallback());
  return { app, close: () => apiCalls.close(), endStreams: () => streams.endAll() };
}
