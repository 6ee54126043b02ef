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
 * The limits that guard credentials (login, sign-up, e-mail codes, token refresh, the OpenID
 * exchange): while Redis cannot be reached they refuse with 503 `service_unavailable` rather
 * than count per replica, since N replicas would multiply what a guesser gets.
 */
export const FAIL_CLOSED_LIMITS: ReadonlySet<RateLimitName> = new Set(
  RATE_LIMIT_NAMES.filter((name) => name.startsWith("auth_") || name.startsWith("oauth_")),
);

/**
 * The configured limiters, one per name. They count in Redis when the cache is Redis, so every
 * gateway replica shares one count, and in memory in the single-process mode. While Redis
 * cannot be reached (a command fails, or the connection is not ready: no waiting for it), the
 * FAIL_CLOSED_LIMITS answer 503 and every other limit (records, organization writes) counts in
 * this replica's memory with the same rule: a per-replica cap instead of an outage.
 */
export class RateLimits {
  private readonly limiters = new Map<RateLimitName, RateLimiterAbstract>();
  /** This replica's own count of each limit that does not fail closed, for Redis outages. */
  private readonly fallbacks = new Map<RateLimitName, RateLimiterMemory>();
  private readonly redis: RedisCache | undefined;
  private readonly refusals: ReturnType<typeof rateLimitRefusals>;

  constructor(
    settings: RateLimitSettings,
    cache: Cache,
    metrics: MetricsRegistry = processMetricsRegistry(),
  ) {
    this.refusals = rateLimitRefusals(metrics);
    this.redis = cache instanceof RedisCache ? cache : undefined;
    for (const name of RATE_LIMIT_NAMES) {
      const rule = settings[name];
      if (!rule) continue;
      const options = { points: rule.points, duration: rule.seconds };
      const memory = () => new RateLimiterMemory({ ...options, keyPrefix: name });
      this.limiters.set(
        name,
        cache instanceof RedisCache
          ? new RateLimiterRedis({
              ...options,
              storeClient: cache.client,
              keyPrefix: `${cache.keyPrefix}rl:${name}`,
            })
          : memory(),
      );
      if (cache instanceof RedisCache && !FAIL_CLOSED_LIMITS.has(name)) {
        this.fallbacks.set(name, memory());
      }
    }
  }

  /** What the limit `name` counts per, which decides where in a route's pipeline it runs. */
  static keyKindOf(name: RateLimitName): RateLimitKeyKind {
    return RATE_LIMIT_KEYS[name];
  }

  /**
   * Counts one request for `key` under `name`; past the limit throws 429 `too_many_requests`
   * with the seconds to wait. A store that cannot be reached is 503 for the FAIL_CLOSED_LIMITS,
   * and this replica's own count for the others; never a silent pass. `report`, if given,
   * hears where the count stands (for the RateLimit headers), admitted or refused.
   */
  async consume(name: RateLimitName, key: string, report?: RateLimitReport): Promise<void> {
    const limiter = this.limiters.get(name);
    if (!limiter) return;
    const counted = keyOf(name, key);
    const heard = (res: RateLimiterRes) => report?.(stateOf(name, limiter, res));
    let failure: unknown = new Error("Redis connection lost");
    if (this.redis?.reachable !== false) {
      try {
        heard(await limiter.consume(counted));
        return;
      } catch (error) {
        // rate-limiter-flexible rejects with a RateLimiterRes (not an Error) when over the limit.
        if (error instanceof RateLimiterRes) {
          heard(error);
          throw this.refused(name, error);
        }
        failure = error;
      }
    }
    const fallback = this.fallbacks.get(name);
    if (!fallback) {
      // Mapped to 503 `service_unavailable` by the error table, logged there with this cause.
      throw new ConnectError(
        `rate limit store failed (${name})`,
        Code.Unavailable,
        undefined,
        undefined,
        failure,
      );
    }
    try {
      heard(await fallback.consume(counted));
    } catch (error) {
      if (error instanceof RateLimiterRes) {
        heard(error);
        throw this.refused(name, error);
      }
      throw error;
    }
  }

  private refused(name: RateLimitName, over: RateLimiterRes) {
    this.refusals.inc({ limit: name });
    return domainError(Code.ResourceExhausted, "too_many_requests", {
      [RETRY_AFTER_METADATA]: retryAfterOf(over),
    });
  }
}

/** Where one limit's count stands for one key after a request: what the RateLimit headers say. */
export interface RateLimitState {
  name: RateLimitName;
  /** The requests the window allows. */
  quota: number;
  /** The window, in seconds. */
  windowSeconds: number;
  /** The requests left in this window (0 once refused). */
  remaining: number;
  /** Seconds until the window ends and the count starts again (at least 1). */
  resetSeconds: number;
}

export type RateLimitReport = (state: RateLimitState) => void;

function stateOf(name: RateLimitName, limiter: RateLimiterAbstract, res: RateLimiterRes) {
  return {
    name,
    quota: limiter.points,
    windowSeconds: limiter.duration,
    remaining: Math.max(0, res.remainingPoints),
    resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
  };
}

/** E-mail addresses are hashed so the store holds no personal data in its keys. */
function keyOf(name: RateLimitName, key: string): string {
  if (RATE_LIMIT_KEYS[name] !== "email") return key;
  return createHash("sha256").update(key).digest("base64url").slice(0, 32);
}
