import {
  logLevel,
  observabilityEnv,
  optionalUrl,
  parseConfig,
  port,
  schemaChangeTimeoutSeconds,
  secret,
  wholeNumber,
} from "@rowbase/kit";
import proxyaddr from "proxy-addr";
import { z } from "zod";
import { parseRateLimits } from "./rate-limit/rate-limit-settings.js";

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

const emptyToUndefined = (value: unknown) => (value === "" ? undefined : value);

/** Links handed to clients must be absolute http(s) URLs; a trailing slash is dropped. */
const publicBaseUrl = z.preprocess(
  emptyToUndefined,
  z
    .url({ protocol: /^https?$/, error: "must be an absolute http(s) URL" })
    .transform((url) => url.replace(/\/+$/, ""))
    .optional(),
);

/**
 * Comma-separated IPs, CIDRs or proxy-addr's names (`loopback`, `linklocal`, `uniquelocal`).
 * Only peers in this list may speak for the client through X-Forwarded-For.
 */
const trustedProxies = z
  .string()
  .default("")
  .transform((raw, ctx) => {
    const entries = raw
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry !== "");
    for (const entry of entries) {
      try {
        proxyaddr.compile(entry);
      } catch {
        ctx.addIssue({ code: "custom", message: `'${entry}' is not an IP address or CIDR range` });
      }
    }
    return entries;
  });

/**
 * Comma-separated `Host` values (`name` or `name:port`, lower case) that /mcp answers besides
 * PUBLIC_BASE_URL's host: the names clients inside a cluster reach the gateway by.
 */
const mcpAllowedHosts = z
  .string()
  .default("")
  .transform((raw, ctx) => {
    const hosts = raw
      .split(",")
      .map((entry) => entry.trim().toLowerCase())
      .filter((entry) => entry !== "");
    for (const host of hosts) {
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:[0-9]{1,5})?$/.test(host)) {
        ctx.addIssue({ code: "custom", message: `'${host}' is not a host or host:port` });
      }
    }
    return hosts;
  });

/**
 * Comma-separated origins (`https://app.example.com`, `http://localhost:3000`) whose pages may
 * call the API from a browser; each is kept as the browser sends it in `Origin` (scheme, host,
 * port if not the default).
 */
const corsAllowedOrigins = z
  .string()
  .default("")
  .transform((raw, ctx) => {
    const origins: string[] = [];
    for (const entry of raw.split(",").map((value) => value.trim())) {
      if (entry === "") continue;
      const url = URL.parse(entry);
      const origin = url && /^https?:$/.test(url.protocol) ? url.origin : undefined;
      // The entry must be an origin and nothing more: a path, a query or a wildcard is refused.
      if (!origin || entry.replace(/\/$/, "").toLowerCase() !== origin) {
        ctx.addIssue({
          code: "custom",
          message: `'${entry}' is not an origin (scheme://host[:port])`,
        });
        continue;
      }
      origins.push(origin);
    }
    return origins;
  });

const rateLimits = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    const parsed = parseRateLimits(raw);
    if (parsed.ok) return parsed.settings;
    for (const message of parsed.problems) ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  });

/** Every environment variable the gateway reads (the README's "Configuration" table). */
export const gatewayEnv = z.object({
  PORT: port(8080),
  /**
   * Base of absolute links the gateway hands out. Unset: http://localhost:<port>, the port
   * the gateway listens on, known only once it does (PORT 0 picks a free one); see
   * startGateway.
   */
  PUBLIC_BASE_URL: publicBaseUrl,
  TRUSTED_PROXIES: trustedProxies,
  /** Hosts the MCP endpoint answers besides PUBLIC_BASE_URL's (DNS-rebinding check). */
  MCP_ALLOWED_HOSTS: mcpAllowedHosts,
  /** Origins whose browser pages may call the API (CORS); none by default. */
  CORS_ALLOWED_ORIGINS: corsAllowedOrigins,
  IDENTITY_GRPC_URL: z.url(),
  ORGANIZATION_GRPC_URL: z.url(),
  CATALOG_GRPC_URL: z.url(),
  RECORDS_GRPC_URL: z.url(),
  FILES_GRPC_URL: z.url(),
  /** The webhooks service; unset, the gateway serves no /webhook route. */
  WEBHOOKS_GRPC_URL: optionalUrl,
  /**
   * The absolute ceiling of one upload, whatever the plan says (below it the plan's
   * `max_file_bytes` is the ceiling; the files service also enforces the field's `max_size`):
   * business's 1 GB by default. Past it an upload fails mid-stream with 413 `file_too_large`.
   * Raise it for enterprise plans above it.
   */
  FILE_UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .default(1_000_000_000),
  /**
   * How long a request line and headers may take to arrive (Node's `headersTimeout`); past it
   * 408 `request_timeout` and the connection is closed.
   */
  REQUEST_HEADERS_TIMEOUT_MS: wholeNumber(1, MAX_TIMER_MS, 60_000),
  /**
   * The longest wait for the next chunk of a request body being read (a JSON body or an
   * upload); past it 408 `request_timeout`, nothing is stored and the connection is closed. No
   * bound applies to a whole body that keeps arriving (see http/request-body-timeouts.ts).
   */
  REQUEST_BODY_IDLE_TIMEOUT_MS: wholeNumber(1, MAX_TIMER_MS, 60_000),
  /**
   * The average rate a request body must keep once its first REQUEST_BODY_IDLE_TIMEOUT_MS of
   * reading passed, or 408 as above; 0: none.
   */
  REQUEST_BODY_MIN_BYTES_PER_SECOND: wholeNumber(0, Number.MAX_SAFE_INTEGER, 1_000),
  /**
   * How long a field change that converts stored values may take (kit's
   * `schemaChangeDeadlines`): POST /field/update waits that long for catalog, plus a margin,
   * instead of the 10 s of every other call.
   */
  SCHEMA_CHANGE_TIMEOUT_SECONDS: schemaChangeTimeoutSeconds,
  /** Unset: in-process stand-ins for the cache and rate limits (single-process mode only). */
  REDIS_URL: optionalUrl,
  /**
   * Where usage events (API calls counted) are published. Unset: an in-process bus that nobody
   * else reads (single-process mode only; the launcher passes its shared bus instead).
   */
  NATS_URL: optionalUrl,
  /**
   * How often the counted API calls are published, as one sum per organization, token and day
   * (what `api_stats` reports lags by up to this). 0 publishes after every event-loop turn.
   */
  USAGE_FLUSH_MS: wholeNumber(0, 60_000, 1_000),
  /** How often an open change stream asks the records service for new changes (250 ms). */
  CHANGE_STREAM_POLL_MS: wholeNumber(10, 5_000, 250),
  /** How often an open change stream sends a comment line, so proxies keep it open (15 s). */
  CHANGE_STREAM_HEARTBEAT_MS: wholeNumber(100, 60_000, 15_000),
  INTERNAL_JWT_SECRET: secret,
  LOG_LEVEL: logLevel,
  RATE_LIMITS: rateLimits,
  /** METRICS_PORT (`/metrics`, apart from PORT) and OTEL_EXPORTER_OTLP_ENDPOINT. */
  ...observabilityEnv.shape,
  /** What `expires_in` says when the identity service leaves it out. */
  ACCESS_TOKEN_TTL_SECONDS: wholeNumber(1, Number.MAX_SAFE_INTEGER, 900),
});

export type GatewayConfig = z.output<typeof gatewayEnv>;

/**
 * The gateway's configuration from the environment, read once at start. Throws kit's
 * `ConfigError` listing every problem; the entry point prints it and exits 1.
 */
export function loadGatewayConfig(
  env: Record<string, string | undefined> = process.env,
): GatewayConfig {
  return parseConfig(gatewayEnv, env);
}
