export { createGateway, type GatewayDeps, gatewayRoutes } from "./app.js";
export { ApiTokenAuthenticator } from "./auth/api-token-authenticator.js";
export { organizationTokenLookup } from "./auth/organization-token-lookup.js";
export { type GatewayConfig, gatewayEnv, loadGatewayConfig } from "./config.js";
export { ERROR_STATUS, type ErrorCode, httpErrorOf } from "./errors/error-table.js";
export {
  ApiCallCounter,
  apiCallCounterKey,
  type CountResult,
} from "./quota/api-call-counter.js";
export {
  MonthlyUsageRebuild,
  organizationMonthlyUsage,
  rebuildClaimKey,
  type StoredMonthlyUsage,
  type StoredMonthlyUsageSource,
} from "./quota/monthly-usage-rebuild.js";
export { PlanAllowances } from "./quota/plan-allowances.js";
export { TransferCounter, transferCounterKey } from "./quota/transfer-quota.js";
export {
  DEFAULT_RATE_LIMITS,
  parseRateLimits,
  RATE_LIMIT_NAMES,
  type RateLimitName,
  type RateLimitSettings,
} from "./rate-limit/rate-limit-settings.js";
export type { HealthTarget } from "./routes/health/health-routes.js";
export { buildOpenApiDocument } from "./routing/openapi.js";
export { type RunningGateway, type StartGatewayOptions, startGateway } from "./start-gateway.js";
