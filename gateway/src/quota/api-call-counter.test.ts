import { type Cache, MemoryCache, RedisCache } from "@rowbase/kit";
import { testInfra, uniqueName } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ApiCallCounter,
  apiCallCounterKey,
  COUNTER_GRACE_SECONDS,
  secondsToNextMonth,
  utcMonthOf,
} from "./api-call-counter.js";

describe("the calendar month of a counter", () => {
  it("is the UTC month, whatever the local time zone says", () => {
    expect(utcMonthOf(new Date("2026-11-30T23:59:59.999Z"))).toBe("2026-11");
    expect(utcMonthOf(new Date("2026-12-01T00:00:00.000Z"))).toBe("2026-12");
    expect(utcMonthOf(new Date("2026-12-01T00:30:00.000+01:00"))).toBe("2026-11");
  });

  it("ends at the first instant of the next month, across years and short months", () => {
    expect(secondsToNextMonth(new Date("2026-11-30T23:59:00.000Z"))).toBe(60);
    expect(secondsToNextMonth(new Date("2026-12-31T23:59:59.000Z"))).toBe(1);
    expect(secondsToNextMonth(new Date("2026-12-31T23:59:59.900Z"))).toBe(1);
    expect(secondsToNextMonth(new Date("2027-02-01T00:00:00.000Z"))).toBe(28 * 24 * 3600);
    expect(secondsToNextMonth(new Date("2028-02-01T00:00:00.000Z"))).toBe(29 * 24 * 3600);
  });

  it("names its key by organization and month", () => {
    expect(apiCallCounterKey(42n, "2026-11")).toBe("api-calls:42:2026-11");
  });
});

describe.each([
  ["memory", async (): Promise<Cache> => new MemoryCache()],
  [
    "redis",
    async (): Promise<Cache> =>
      RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("gw_quota")}:`),
  ],
])("ApiCallCounter on the %s store", (kind, makeCache) => {
  let cache: Cache;
  let now = new Date("2026-11-30T23:59:00.000Z");
  let counter: ApiCallCounter;

  beforeAll(async () => {
    cache = await makeCache();
    counter = new ApiCallCounter(cache, () => now);
  });

  afterAll(async () => {
    if (cache instanceof RedisCache) {
      const keys = await cache.client.keys(`${cache.keyPrefix}*`);
      if (keys.length > 0) await cache.client.del(...keys);
    }
    await cache.close();
  });

  it("admits up to the allowance, then refuses with the seconds to the next month", async () => {
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await counter.count(1n, 3n));
    expect(results).toEqual([
      { admitted: true, count: 1 },
      { admitted: true, count: 2 },
      { admitted: true, count: 3 },
      { admitted: false, retryAfterSeconds: 60 },
    ]);
    // The refused call took its increment back: the month holds exactly the allowance.
    expect(await counter.used(1n)).toBe(3);
    expect(await cache.get("api-calls:1:2026-11")).toBe("3");
  });

  it("never admits more than the allowance under parallel calls, nor counts the refused", async () => {
    const results = await Promise.all(Array.from({ length: 64 }, () => counter.count(2n, 10n)));
    expect(results.filter((result) => result.admitted)).toHaveLength(10);
    expect(await counter.used(2n)).toBe(10);
  });

  it("counts each organization on its own and admits nothing on a zero allowance", async () => {
    expect(await counter.count(3n, 5n)).toEqual({ admitted: true, count: 1 });
    expect(await counter.count(4n, 0n)).toEqual({ admitted: false, retryAfterSeconds: 60 });
    expect(await counter.used(4n)).toBe(0);
    expect(await counter.used(3n)).toBe(1);
  });

  it("starts over in a new month, in a key that outlives the month by the grace only", async () => {
    now = new Date("2026-11-30T23:59:30.000Z");
    expect((await counter.count(1n, 3n)).admitted).toBe(false);
    now = new Date("2026-12-01T00:00:00.500Z");
    expect(await counter.count(1n, 3n)).toEqual({ admitted: true, count: 1 });
    expect(await cache.get("api-calls:1:2026-12")).toBe("1");
    expect(await cache.get("api-calls:1:2026-11")).toBe("3");
    if (cache instanceof RedisCache) {
      const ttl = await cache.client.ttl(`${cache.keyPrefix}api-calls:1:2026-12`);
      const expected = 31 * 24 * 3600 + COUNTER_GRACE_SECONDS;
      expect(ttl).toBeGreaterThan(expected - 5);
      expect(ttl).toBeLessThanOrEqual(expected);
    }
    expect(kind).toMatch(/memory|redis/);
  });
});
