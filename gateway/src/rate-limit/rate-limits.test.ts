import { Code, ConnectError, errorInfoOf, MemoryCache, RedisCache } from "@rowbase/kit";
import {
  type RedisServerProcess,
  startRedisServer,
  testInfra,
  uniqueName,
  waitFor,
} from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rateLimitHeaders } from "./rate-limit-headers.js";
import { DEFAULT_RATE_LIMITS, type RateLimitSettings } from "./rate-limit-settings.js";
import { FAIL_CLOSED_LIMITS, type RateLimitState, RateLimits } from "./rate-limits.js";

const settings: RateLimitSettings = {
  ...DEFAULT_RATE_LIMITS,
  auth_login_ip: { points: 2, seconds: 60 },
  auth_login_email: null,
};

async function refusal(promise: Promise<unknown>): Promise<ConnectError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConnectError)) throw new Error(`expected a ConnectError, got ${error}`);
  return error;
}

describe.each([
  ["memory", async () => new MemoryCache()],
  [
    "redis",
    async () => RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("gw_rl")}:`),
  ],
])("RateLimits on the %s store", (kind, makeCache) => {
  let cache: MemoryCache | RedisCache;
  let limits: RateLimits;

  beforeAll(async () => {
    cache = await makeCache();
    limits = new RateLimits(settings, cache);
  });

  afterAll(async () => {
    if (cache instanceof RedisCache) {
      const keys = await cache.client.keys(`${cache.keyPrefix}*`);
      if (keys.length > 0) await cache.client.del(...keys);
    }
    await cache.close();
  });

  it("lets the configured number through, then answers too_many_requests with retry_after", async () => {
    await limits.consume("auth_login_ip", "10.0.0.1");
    await limits.consume("auth_login_ip", "10.0.0.1");
    const error = await refusal(limits.consume("auth_login_ip", "10.0.0.1"));
    expect(error.code).toBe(Code.ResourceExhausted);
    const info = errorInfoOf(error);
    expect(info?.reason).toBe("too_many_requests");
    const retryAfter = Number(info?.metadata.retry_after);
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });

  it("reports where each count stands, admitted and refused", async () => {
    const heard: RateLimitState[] = [];
    const report = (state: RateLimitState) => heard.push(state);
    await limits.consume("auth_login_ip", "10.0.0.9", report);
    await limits.consume("auth_login_ip", "10.0.0.9", report);
    await refusal(limits.consume("auth_login_ip", "10.0.0.9", report));
    expect(
      heard.map(({ name, quota, windowSeconds, remaining }) => [
        name,
        quota,
        windowSeconds,
        remaining,
      ]),
    ).toEqual([
      ["auth_login_ip", 2, 60, 1],
      ["auth_login_ip", 2, 60, 0],
      ["auth_login_ip", 2, 60, 0],
    ]);
    for (const state of heard) {
      expect(state.resetSeconds).toBeGreaterThanOrEqual(59);
      expect(state.resetSeconds).toBeLessThanOrEqual(60);
    }
    expect(rateLimitHeaders(heard.slice(0, 1))).toEqual({
      "RateLimit-Policy": '"auth_login_ip";q=2;w=60',
      RateLimit: `"auth_login_ip";r=1;t=${heard[0]?.resetSeconds}`,
    });
  });

  it("counts each key on its own", async () => {
    await limits.consume("auth_login_ip", "10.0.0.2");
    await limits.consume("auth_login_ip", "10.0.0.2");
    await limits.consume("auth_login_ip", "10.0.0.3");
  });

  it("never refuses under a limit that is off", async () => {
    for (let i = 0; i < 20; i++) await limits.consume("auth_login_email", "a@example.com");
  });

  if (kind === "redis") {
    it("keeps its keys under the cache's prefix", async () => {
      const redis = cache as RedisCache;
      const keys = await redis.client.keys(`${redis.keyPrefix}rl:auth_login_ip:*`);
      expect(keys.length).toBeGreaterThan(0);
    });
  }
});

describe("RateLimits when Redis cannot be reached", () => {
  it("names the credential limits as failing closed, and only those", () => {
    expect([...FAIL_CLOSED_LIMITS].sort()).toEqual([
      "auth_login_email",
      "auth_login_ip",
      "auth_refresh_ip",
      "auth_register_ip",
      "auth_resend_ip",
      "auth_verify_email",
      "auth_verify_ip",
      "oauth_exchange_ip",
      "oauth_idp_ip",
    ]);
  });

  it("answers Unavailable (503) on a login limit instead of letting requests through", async () => {
    const cache = RedisCache.connect("redis://127.0.0.1:1", `${uniqueName("gw_rl")}:`);
    // Expected connection errors; without a listener ioredis prints each one.
    cache.client.on("error", () => {});
    try {
      const error = await refusal(
        new RateLimits(settings, cache).consume("auth_login_ip", "10.0.0.4"),
      );
      expect(error.code).toBe(Code.Unavailable);
    } finally {
      cache.client.disconnect();
    }
  });
});

describe("RateLimits when Redis goes away after connecting", () => {
  const limited: RateLimitSettings = {
    ...settings,
    records_token: { points: 3, seconds: 60 },
  };
  let redis: RedisServerProcess;
  let cache: RedisCache;
  let limits: RateLimits;

  beforeAll(async () => {
    redis = await startRedisServer();
    cache = RedisCache.connect(redis.url, `${uniqueName("gw_rl")}:`);
    limits = new RateLimits(limited, cache);
    await limits.consume("records_token", "token-a");
    await redis.stop();
  });

  afterAll(async () => {
    await cache?.close();
    await redis?.stop();
  });

  it("counts record calls per replica with the same rule, and refuses past it", async () => {
    await limits.consume("records_token", "token-b");
    await limits.consume("records_token", "token-b");
    await limits.consume("records_token", "token-b");
    const error = await refusal(limits.consume("records_token", "token-b"));
    expect(errorInfoOf(error)?.reason).toBe("too_many_requests");
  });

  it("refuses logins with Unavailable (503)", async () => {
    const error = await refusal(limits.consume("auth_login_ip", "10.0.0.9"));
    expect(error.code).toBe(Code.Unavailable);
  });

  it("counts in Redis again once it is back", async () => {
    await redis.start();
    await waitFor(() => cache.client.status === "ready");
    await limits.consume("auth_login_ip", "10.0.0.10");
    const keys = await cache.client.keys(`${cache.keyPrefix}rl:auth_login_ip:*`);
    expect(keys.length).toBe(1);
  });
});
