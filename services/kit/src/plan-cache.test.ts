import { create } from "@bufbuild/protobuf";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { GetPlanResponseSchema } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { type Cache, MemoryCache, versionedEntry } from "./cache.js";
import { Code } from "./errors.js";
import { createLogger } from "./logger.js";
import {
  cachedPlan,
  cachePlan,
  decodeCachedPlan,
  encodeCachedPlan,
  markOrganizationDeleted,
  planCacheKey,
} from "./plan-cache.js";
import { failureOf, holdAnswers, reasonOf } from "./testing.js";

const free = create(PlanLimitsSchema, {
  records: 1_000n,
  apiCallsPerMonth: 3_000n,
  fileStorageBytes: 100_000_000n,
  transferBytesPerMonth: 1_000_000_000n,
  members: 3n,
  maxFileBytes: 10_000_000n,
  changeStreams: 5n,
  webhooks: 5n,
  forms: 3n,
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
      changeStreams: "5",
      webhooks: "5",
      forms: "3",
    });
  });

  it("reads back the limits it wrote, a zero one (an enterprise plan may set it) included", () => {
    expect(decodeCachedPlan(versionedEntry(3n, encodeCachedPlan(free)))).toEqual(free);
    const none = create(PlanLimitsSchema, { ...free, apiCallsPerMonth: 0n });
    expect(decodeCachedPlan(versionedEntry(0n, encodeCachedPlan(none)))?.apiCallsPerMonth).toBe(0n);
  });

  it("treats a mark, an unversioned entry, a missing or malformed limit as a miss, never 0", () => {
    const entry = JSON.parse(encodeCachedPlan(free)) as Record<string, unknown>;
    const without = { ...entry };
    delete without.maxFileBytes;
    for (const value of [
      null,
      versionedEntry(3n),
      encodeCachedPlan(free),
      "?",
      ...[
        JSON.stringify(without),
        JSON.stringify({ ...entry, apiCallsPerMonth: 3000 }),
        JSON.stringify({ ...entry, records: "-1" }),
        '{"records":"1000"}',
        "not json",
        "null",
      ].map((value) => versionedEntry(3n, value)),
    ]) {
      expect(decodeCachedPlan(value), String(value)).toBeUndefined();
    }
  });
});

describe("cachedPlan", () => {
  const ORG = 42n;
  const key = planCacheKey(ORG);
  const logger = createLogger("plan-cache-test", "silent");

  /** Organization's GetPlan, answering each plan in turn (the last one again) at its version. */
  function source(...answers: [version: bigint, limits: PlanLimits][]) {
    const asked: number[] = [];
    return {
      asked,
      fetch: async () => {
        asked.push(asked.length);
        const [planVersion, limits] = answers[Math.min(asked.length - 1, answers.length - 1)]!;
        return create(GetPlanResponseSchema, { limits, planVersion });
      },
    };
  }

  it("asks once, then answers from the shared entry", async () => {
    const cache = new MemoryCache();
    const organization = source([0n, free]);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(free);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(free);
    expect(organization.asked).toHaveLength(1);
    expect(decodeCachedPlan(await cache.get(key))).toEqual(free);
  });

  it("answers a change's plan from the entry its commit wrote", async () => {
    const cache = new MemoryCache();
    await cachePlan(cache, ORG, 0n, free);
    await cachePlan(cache, ORG, 1n, lowered);
    const organization = source([1n, lowered]);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(organization.asked).toHaveLength(0);
  });

  it("asks once after a change's value was dropped, then answers from the entry again", async () => {
    const cache = new MemoryCache();
    await cachePlan(cache, ORG, 1n, lowered);
    await cache.dropVersionedValues(key);
    const organization = source([1n, lowered]);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(organization.asked).toHaveLength(1);
  });

  it("never caches a plan read before a change over the change's entry", async () => {
    const cache = new MemoryCache();
    const slow = holdAnswers(source([0n, free]), "fetch");
    const lookup = cachedPlan(cache, ORG, slow.client.fetch);
    await slow.answered;
    await cachePlan(cache, ORG, 1n, lowered);
    // An event dropped the value meanwhile: the version it leaves still keeps the old plan out.
    await cache.dropVersionedValues(key);
    slow.release();
    expect(await lookup).toEqual(free);
    const organization = source([1n, lowered]);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(await cachedPlan(cache, ORG, organization.fetch)).toEqual(lowered);
    expect(organization.asked).toHaveLength(1);
  });

  it("answers a deleted organization's mark with GetPlan's NotFound, never asking", async () => {
    const cache = new MemoryCache();
    await cachePlan(cache, ORG, 1n, lowered);
    await markOrganizationDeleted(cache, ORG);
    // An event dropping the values leaves the mark.
    await cache.dropVersionedValues(key);
    const organization = source([1n, lowered]);
    const failure = await failureOf(cachedPlan(cache, ORG, organization.fetch));
    expect(failure).toMatchObject({ code: Code.NotFound, reason: "organization_not_found" });
    expect(organization.asked).toHaveLength(0);
  });

  it("never caches a plan read before the organization's deletion over its mark", async () => {
    const cache = new MemoryCache();
    const slow = holdAnswers(source([7n, free]), "fetch");
    const lookup = cachedPlan(cache, ORG, slow.client.fetch);
    await slow.answered;
    await markOrganizationDeleted(cache, ORG);
    slow.release();
    expect(await lookup).toEqual(free);
    expect(await reasonOf(cachedPlan(cache, ORG, source([7n, free]).fetch))).toBe(
      "organization_not_found",
    );
  });

  it("falls back to asking when the cache fails, if given a logger; else fails", async () => {
    const down: Cache = Object.assign(new MemoryCache(), {
      get: () => Promise.reject(new Error("down")),
      setVersioned: () => Promise.reject(new Error("down")),
    });
    const organization = source([0n, free]);
    expect(await cachedPlan(down, ORG, organization.fetch, { logger })).toEqual(free);
    await expect(cachedPlan(down, ORG, organization.fetch)).rejects.toThrow("down");
  });
});
