import { logLevel, optionalUrl, parseConfig, port, secret } from "@rowbase/kit";
import proxyaddr from "proxy-addr";
import { z } from "zod";
import { parseRateLimits } from "./rate-limit/rate-limit-settings.js";

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

const rateLimits = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    const parsed = parseRateLimits(raw);
    if (parsed.ok) return parsed.settings;
    for (const message of parsed.problems) ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  });

/** Every environment variable the gateway reads (SPEC section 13, ARCHITECTURE "Configuration"). */
export const gatewayEnv = z
  .object({
    PORT: port(8080),
    /** Base of absolute links the gateway hands out; defaults to http://localhost:$PORT. */
    PUBLIC_BASE_URL: publicBaseUrl,
    TRUSTED_PROXIES: trustedProxies,
    IDENTITY_GRPC_URL: z.url(),
    ORGANIZATION_GRPC_URL: z.url(),
    CATALOG_GRPC_URL: z.url(),
    /** Unset: in-process stand-ins for the cache and rate limits (single-process mode only). */
    REDIS_URL: optionalUrl,
    INTERNAL_JWT_SECRET: secret,
    LOG_LEVEL: logLevel,
    RATE_LIMITS: rateLimits,
    /** What `expires_in` says when the identity service leaves it out. */
    ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(1).default(900),
  })
  .transform((env) => ({
    ...env,
    PUBLIC_BASE_URL: env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`,
  }));

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
