import { create } from "@bufbuild/protobuf";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { describe, expect, it } from "vitest";
import { type Cache, MemoryCache } from "./cache.js";
import { createLogger } from "./logger.js";
import {
  cachedPlan,
  decodeCachedPlan,
  encodeCachedPlan,
  markPlanChanged,
  PLAN_CHANGED,
  planCacheKey,
} from "./plan-cache.js";

const free = create(PlanLimitsSchema, {
  records: 1_000n,
  apiCallsPerMonth: 3_000n,
  fileStorageBytes: 100_000_000n,
  transferBytesPerMonth: 1_000_000_000n,
  members: 3n,
  maxFileBytes: 10_000_000n,
});

const lowered = create(PlanLimitsSchema, { ...free, fileStorageBytes: 5_000n });

describe("the cached plan entry", () => {
  it("is PlanLimits in protobuf JSON with every key, int64s as strings", () => {
    expect(JSON.parse(encodeCachedPlan(free))).toEqual({
      records: "1000",
      apiCallsPerMonth: "3000",
      fileStorageBytes: "100000000",
      transferBytesPerMonth: "1000000000",
      members: "3",
      maxFileBytes: "10000000",
    });
  });

  it("reads back the limits it wrote, a zero one (an enterprise plan may set it) included", () => {
    expect(decodeCachedPlan(encodeCachedPlan(free))).toEqual(free);
    const none = create(PlanLimitsSchema, { ...free, apiCallsPerMonth: 0n });
    expect(decodeCachedPlan(encodeCachedPlan(none))?.apiCallsPerMonth).toBe(0n);
  });

  it("treats the changed mark, a missing limit or a malformed one as a miss, never as 0", () => {
    const entry = JSON.parse(encodeCachedPlan(free)) as Record<string, unknown>;
    const without = { ...entry };
    delete without.maxFileBytes;
    for (const value of [
      null,
      PLAN_CHANGED,
      JSON.stringify(without),
      JSON.stringify({ ...entry, apiCallsPerMonth: 3000 }),
      JSON.stringify({ ...entry, records: "-1" }),
      '{"records":"1000"}',
      "not json",
      "null",
    ]) {
      expect(decodeCachedPlan(value)).toBeUndefined();
    }
  });
});

describe("cachedPlan", () => {
  const ORG = 42n;
  const key = planCacheKey(ORG);
  const logger = createLogger("plan-cache-test", "silent");

  function source(...answers: PlanLimits[]) {
    const asked: number[] = [];
    return {
      asked,
      fetch: async () => {
        asked.push(asked.length);
        return answers[Math.min(asked.length - 1, answers.length - 1)]!;
      },
    };
  }

  it("asks once, then answers from the shared entry", async () => {
    const cache = new MemoryCache();
    const organization = source(free);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(free);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(free);
    expect(organization.asked).toHaveLength(1);
    expect(decodeCachedPlan(await cache.get(key))).toEqual(free);
  });

  it("asks while the entry is marked changed, and never caches over the mark", async () => {
    const cache = new MemoryCache();
    await cache.set(key, encodeCachedPlan(free), 60);
    await markPlanChanged(cache, key);
    const organization = source(lowered);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(organization.asked).toHaveLength(2);
    expect(await cache.get(key)).toBe(PLAN_CHANGED);
  });

  it("skips the entry when asked for a fresh plan", async () => {
    const cache = new MemoryCache();
    await cache.set(key, encodeCachedPlan(free), 60);
    const organization = source(lowered);
    expect(await cachedPlan(cache, ORG, organization.fetch, { fresh: true })).toEqual(lowered);
    expect(organization.asked).toHaveLength(1);
  });

  it("falls back to asking when the cache fails, if given a logger; else fails", async () => {
    const down: Cache = Object.assign(new MemoryCache(), {
      get: () => Promise.reject(new Error("down")),
      setIfAbsent: () => Promise.reject(new Error("down")),
    });
    const organization = source(free);
    expect(await cachedPlan(down, ORG, organization.fetch, { logger })).toEqual(free);
    await expect(cachedPlan(down, ORG, organization.fetch)).rejects.toThrow("down");
  });
});
