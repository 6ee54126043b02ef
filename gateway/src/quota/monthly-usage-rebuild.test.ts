import { type Cache, Code, ConnectError, domainError, MemoryCache, RedisCache } from "@rowbase/kit";
import { testInfra, uniqueName } from "@rowbase/kit/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ApiCallCounter, apiCallCounterKey } from "./api-call-counter.js";
import {
  MonthlyUsageRebuild,
  rebuildClaimKey,
  type StoredMonthlyUsage,
} from "./monthly-usage-rebuild.js";
import { TransferCounter, transferCounterKey } from "./transfer-quota.js";

/**
 * The monthly counters rebuilt from the totals Postgres holds (GetMonthlyUsage, faked here) when
 * the shared cache lost them: on real Redis, where losing a key is what the rebuild is for, and
 * on the in-process stand-in.
 */

const MONTH = "2026-11";
const MIDMONTH = new Date("2026-11-15T12:00:00.000Z");

/** A GetMonthlyUsage that answers what the test says and counts how often it was asked. */
class StoredUsage {
  totals: StoredMonthlyUsage = { apiCalls: 0n, transferBytes: 0n };
  failure: Error | undefined;
  asked: { organizationId: bigint; requestId: string | undefined }[] = [];
  /** Holds every answer until released, to let callers pile up behind a rebuild. */
  gate: Promise<void> | undefined;

  readonly source = async (organizationId: bigint, requestId: string | undefined) => {
    this.asked.push({ organizationId, requestId });
    await this.gate;
    if (this.failure) throw this.failure;
    return this.totals;
  };
}

describe.each([
  [
    "redis",
    async (): Promise<Cache> =>
      RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("gw_rebuild")}:`),
  ],
  ["memory", async (): Promise<Cache> => new MemoryCache()],
])("rebuilding monthly counters on the %s store", (_kind, makeCache) => {
  let cache: Cache;
  let stored: StoredUsage;
  let now: Date;
  let calls: ApiCallCounter;
  let transfer: TransferCounter;
  let organization = 100n;

  beforeAll(async () => {
    cache = await makeCache();
  });

  afterAll(async () => {
    if (cache instanceof RedisCache) {
      const keys = await cache.client.keys(`${cache.keyPrefix}*`);
      if (keys.length > 0) await cache.client.del(...keys);
    }
    await cache.close();
  });

  beforeEach(() => {
    organization += 1n;
    now = MIDMONTH;
    stored = new StoredUsage();
    const rebuild = new MonthlyUsageRebuild(cache, stored.source);
    calls = new ApiCallCounter(cache, () => now, rebuild);
    transfer = new TransferCounter(cache, () => now, rebuild);
  });

  it("adds the stored calls to a counter the cache lost, once, and counts on from there", async () => {
    stored.totals = { apiCalls: 41n, transferBytes: 9_000n };
    expect(await calls.count(organization, 1000n, "req-1")).toEqual({ admitted: true, count: 42 });
    expect(stored.asked).toEqual([{ organizationId: organization, requestId: "req-1" }]);
    expect(await calls.count(organization, 1000n)).toEqual({ admitted: true, count: 43 });
    expect(stored.asked).toHaveLength(1);
    // The claim was given back: nothing stays behind but the counter.
    expect(await cache.get(rebuildClaimKey("api-calls", organization, MONTH))).toBeNull();

    // Lost again (the events of the 43 calls have been stored meanwhile): stored + 1.
    await cache.del(apiCallCounterKey(organization, MONTH));
    stored.totals = { apiCalls: 43n, transferBytes: 9_000n };
    expect(await calls.count(organization, 1000n)).toEqual({ admitted: true, count: 44 });
    expect(await calls.used(organization)).toBe(44);
    expect(stored.asked).toHaveLength(2);
    // The transfer counter is rebuilt by its own first reservation, with the stored bytes.
    expect(await cache.get(transferCounterKey(organization, MONTH))).toBeNull();
  });

  it("checks the allowance against the rebuilt count: a spent month stays spent", async () => {
    stored.totals = { apiCalls: 20n, transferBytes: 0n };
    const retryAfterSeconds = 15 * 24 * 3600 + 12 * 3600;
    expect(await calls.count(organization, 20n)).toEqual({ admitted: false, retryAfterSeconds });
    expect(await calls.count(organization, 20n)).toEqual({ admitted: false, retryAfterSeconds });
    expect(await calls.used(organization)).toBe(20);
    expect(stored.asked).toHaveLength(1);
    expect(await calls.count(organization, 21n)).toEqual({ admitted: true, count: 21 });
  });

  it("lets one caller rebuild while parallel calls count on, and loses none of them", async () => {
    stored.totals = { apiCalls: 100n, transferBytes: 0n };
    let release = () => {};
    stored.gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const pending = Array.from({ length: 16 }, () => calls.count(organization, 10_000n));
    await expect.poll(() => stored.asked.length).toBe(1);
    release();
    const results = await Promise.all(pending);
    expect(results.every((result) => result.admitted)).toBe(true);
    expect(stored.asked).toHaveLength(1);
    expect(await calls.used(organization)).toBe(116);
    expect(Math.max(...results.map((r) => (r.admitted ? r.count : 0)))).toBe(116);
  });

  it("answers Unavailable when the totals cannot be read, counts nothing, and retries", async () => {
    stored.totals = { apiCalls: 7n, transferBytes: 0n };
    stored.failure = new ConnectError("connect ECONNREFUSED", Code.Unavailable);
    const error = await calls.count(organization, 100n).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    expect((error as ConnectError).cause).toBe(stored.failure);
    expect(await calls.used(organization)).toBe(0);
    expect(await cache.get(rebuildClaimKey("api-calls", organization, MONTH))).toBeNull();

    stored.failure = undefined;
    expect(await calls.count(organization, 100n)).toEqual({ admitted: true, count: 8 });
    expect(stored.asked).toHaveLength(2);
  });

  it("treats an organization that is gone as having nothing stored", async () => {
    stored.failure = domainError(Code.NotFound, "organization_not_found");
    expect(await calls.count(organization, 100n)).toEqual({ admitted: true, count: 1 });
  });

  it("leaves a claimed rebuild to its holder", async () => {
    stored.totals = { apiCalls: 5n, transferBytes: 0n };
    await cache.setIfAbsent(rebuildClaimKey("api-calls", organization, MONTH), "1", 30);
    expect(await calls.count(organization, 100n)).toEqual({ admitted: true, count: 1 });
    expect(stored.asked).toEqual([]);
  });

  it("does not rebuild in the first minutes of a month, when clocks may disagree on it", async () => {
    stored.totals = { apiCalls: 3_000n, transferBytes: 0n };
    now = new Date("2026-12-01T00:01:00.000Z");
    expect(await calls.count(organization, 3_000n)).toEqual({ admitted: true, count: 1 });
    expect(stored.asked).toEqual([]);
    now = new Date("2026-12-01T00:02:00.000Z");
    await cache.del(apiCallCounterKey(organization, "2026-12"));
    expect(await calls.count(organization, 3_000n)).toEqual({
      admitted: false,
      retryAfterSeconds: expect.any(Number),
    });
    expect(stored.asked).toHaveLength(1);
  });

  it("rebuilds the transfer counter with the stored bytes before admitting a reservation", async () => {
    stored.totals = { apiCalls: 2n, transferBytes: 5_000n };
    const key = transferCounterKey(organization, MONTH);
    expect(await transfer.reserve(organization, 100, 6_000n, "req-t")).toBe(key);
    expect(await transfer.used(organization)).toBe(5_100);
    expect(stored.asked).toEqual([{ organizationId: organization, requestId: "req-t" }]);
    // The API-call counter is not touched by the transfer's rebuild.
    expect(await calls.used(organization)).toBe(0);

    // Lost again: a reservation that no longer fits the rebuilt month is refused.
    await cache.del(key);
    stored.totals = { apiCalls: 2n, transferBytes: 5_950n };
    expect(await transfer.reserve(organization, 100, 6_000n)).toBeUndefined();
    expect(await transfer.used(organization)).toBe(5_950);
    expect(await transfer.reserve(organization, 50, 6_000n)).toBe(key);
    expect(stored.asked).toHaveLength(2);
  });

  it("does not let a give-back after a loss push the counter below zero", async () => {
    stored.totals = { apiCalls: 0n, transferBytes: 700n };
    const key = await transfer.reserve(organization, 300, 10_000n);
    expect(await transfer.used(organization)).toBe(1_000);
    await cache.del(key!);
    await transfer.release(key!, 300);
    expect(await transfer.used(organization)).toBe(0);
    // The next reservation finds the counter fresh and rebuilds it.
    stored.totals = { apiCalls: 0n, transferBytes: 900n };
    await transfer.reserve(organization, 10, 10_000n);
    expect(await transfer.used(organization)).toBe(910);
  });
});
