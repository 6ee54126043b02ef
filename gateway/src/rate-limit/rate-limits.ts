import { createHash } from "node:crypto";
import {
  type Cache,
  Code,
  ConnectError,
  domainError,
  type MetricsRegistry,
  processMetricsRegistry,
  RedisCache,
} from "@rowbase/kit";
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from "rate-limiter-flexible";
import { RETRY_AFTER_METADATA, retryAfterOf } from "../errors/error-table.js";
import { rateLimitRefusals } from "./rate-limit-metrics.js";
import {
  RATE_LIMIT_KEYS,
  RATE_LIMIT_NAMES,
  type RateLimitKeyKind,
  type RateLimitName,
  type RateLimitSettings,
} from "./rate-limit-settings.js";

/**
 * The configured limiters, one per name. They count in Redis when the cache is Redis, so every
 * gateway replica shares one count, and in memory in the single-process mode.
 */
export class RateLimits {
  private readonly limiters = new Map<RateLimitName, RateLimiterAbstract>();
  private readonly refusals: ReturnType<typeof rateLimitRefusals>;

  constructor(
    settings: RateLimitSettings,
    cache: Cache,
    metrics: MetricsRegistry = processMetricsRegistry(),
  ) {
    this.refusals = rateLimitRefusals(metrics);
    for (const name of RATE_LIMIT_NAMES) {
      const rule = settings[name];
      if (!rule) continue;
      const options = { points: rule.points, duration: rule.seconds };
      this.limiters.set(
        name,
        cache instanceof RedisCache
          ? new RateLimiterRedis({
              ...options,
              storeClient: cache.client,
              keyPrefix: `${cache.keyPrefix}rl:${name}`,
            })
          : new RateLimiterMemory({ ...options, keyPrefix: name }),
      );
    }
  }

  /** What the limit `name` counts per, which decides where in a route's pipeline it runs. */
  static keyKindOf(name: RateLimitName): RateLimitKeyKind {
    return RATE_LIMIT_KEYS[name];
  }

  /**
   * Counts one request for `key` under `name`; past the limit throws 429 `too_many_requests`
   * with the seconds to wait. A store that cannot be reached is 503, never a silent pass.
   */
  async consume(name: RateLimitName, key: string): Promise<void> {
    const limiter = this.limiters.get(name);
    if (!limiter) return;
    try {
      await limiter.consume(keyOf(name, key));
    } catch (error) {
      // rate-limiter-flexible rejects with a RateLimiterRes (not an Error) when over the limit.
      if (error instanceof RateLimiterRes) {
        this.refusals.inc({ limit: name });
        throw domainError(Code.ResourceExhausted, "too_many_requests", {
          [RETRY_AFTER_METADATA]: retryAfterOf(error),
        });
      }
      // Mapped to 503 `service_unavailable` by the error table, logged there with this cause.
      throw new ConnectError(
        `rate limit store failed (${name})`,
        Code.Unavailable,
        undefined,
        undefined,
        error,
      );
    }
  }
}

/** E-mail addresses are hashed so the store holds no personal data in its keys. */
function keyOf(name: RateLimitName, key: string): string {
  if (RATE_LIMIT_KEYS[name] !== "email") return key;
  return createHash("sha256").update(key).digest("base64url").slice(0, 32);
}
