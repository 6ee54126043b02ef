import { type Cache, Code, ConnectError, MemoryCache, RedisCache } from "@rowbase/kit";
import {
  type RedisServerProcess,
  startRedisServer,
  uniqueName,
  waitFor,
} from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiCallCounter, apiCallCounterKey, utcMonthOf } from "./api-call-counter.js";
import { MonthlyUsageRebuild } from "./monthly-usage-rebuild.js";
import { localOnFailure, unavailableOnFailure } from "./unavailable-on-failure.js";

/** A store that cannot be reached, as ioredis fails once its retries are spent. */
const down: Cache = {
  kind: "redis",
  get: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  set: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  del: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  addToExisting: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  setIfAbsent: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  setVersioned: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  dropVersionedValues: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  close: async () => {},
};

describe("unavailableOnFailure", () => {
  it("turns every failure of the store into Unavailable with the cause kept", async () => {
    const cache = unavailableOnFailure(down);
    for (const operation of [
      () => cache.get("k"),
      () => cache.set("k", "v", 1),
      () => cache.del("k"),
      () => cache.addToExisting("k", 1),
      () => cache.setIfAbsent("k", "v", 1),
      () => cache.setVersioned("k", 1n, "v", 1),
      () => cache.dropVersionedValues("k"),
    ]) {
      const error = await operation().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.Unavailable);
      expect((error as ConnectError).cause).toEqual(new Error("connect ECONNREFUSED"));
    }
  });

  it("passes answers through unchanged", async () => {
    const cache = unavailableOnFailure(new MemoryCache());
    await cache.set("k", "v", 60);
    expect(await cache.get("k")).toBe("v");
    expect(await cache.addToExisting("n", 2)).toBeNull();
    expect(await cache.setIfAbsent("n", "9", 60)).toBe(true);
    expect(await cache.addToExisting("n", 2)).toBe(11);
    expect(await cache.setIfAbsent("n", "9", 60)).toBe(false);
    expect(await cache.setIfAbsent("m", "9", 60)).toBe(true);
    await cache.del("k");
    expect(await cache.get("k")).toBeNull();
    expect(cache.kind).toBe("memory");
  });
});

describe("localOnFailure", () => {
  it("does what the store cannot in this replica's memory", async () => {
    const cache = localOnFailure(down);
    expect(await cache.get("k")).toBeNull();
    await cache.set("k", "v", 60);
    expect(await cache.get("k")).toBe("v");
    expect(await cache.setIfAbsent("n", "2", 60)).toBe(true);
    expect(await cache.addToExisting("n", 1)).toBe(3);
    expect(await cache.setIfAbsent("claim", "1", 60)).toBe(true);
    expect(await cache.setIfAbsent("claim", "2", 60)).toBe(false);
    await cache.del("k");
    expect(await cache.get("k")).toBeNull();
  });

  it("caps API calls per replica at the allowance while the store is down", async () => {
    const counter = new ApiCallCounter(localOnFailure(down));
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push((await counter.count(7n, 3n)).admitted);
    expect(answers).toEqual([true, true, true, false, false]);
  });

  describe("with a Redis that goes away and comes back", () => {
    let redis: RedisServerProcess;
    let shared: RedisCache;

    beforeAll(async () => {
      redis = await startRedisServer();
      shared = RedisCache.connect(redis.url, `${uniqueName("gw_q")}:`);
    });

    afterAll(async () => {
      await shared?.close();
      await redis?.stop();
    });

    it("counts in Redis, then in memory (rebuilt from the source), then in Redis again", async () => {
      const cache = localOnFailure(shared);
      let stored = 10;
      const rebuild = new MonthlyUsageRebuild(cache, async () => ({
        apiCalls: BigInt(stored),
        transferBytes: 0n,
      }));
      // Mid-month, away from the month-start grace in which nothing is rebuilt.
      const now = new Date("2026-11-15T12:00:00Z");
      const counter = new ApiCallCounter(cache, () => now, rebuild);
      // Redis: the counter is rebuilt from the 10 stored calls, then counts on.
      expect(await counter.count(9n, 100n)).toEqual({ admitted: true, count: 11 });
      expect(await counter.count(9n, 100n)).toEqual({ admitted: true, count: 12 });

      await redis.stop();
      // Memory: rebuilt from the source of truth again, not from zero (no free allowance).
      stored = 12;
      expect(await counter.count(9n, 100n)).toEqual({ admitted: true, count: 13 });
      expect(await counter.count(9n, 13n)).toMatchObject({ admitted: false });

      await redis.start();
      await waitFor(() => shared.reachable);
      // Redis again, empty after the restart: rebuilt from the source once more.
      stored = 13;
      expect(await counter.count(9n, 100n)).toEqual({ admitted: true, count: 14 });
      expect(await shared.get(apiCallCounterKey(9n, utcMonthOf(now)))).toBe("14");
    });
  });
});
