import { type Cache, Code, ConnectError, MemoryCache } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { unavailableOnFailure } from "./unavailable-on-failure.js";

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
  incrBy: async () => {
    throw new Error("connect ECONNREFUSED");
  },
  setIfAbsent: async () => {
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
      () => cache.incrBy("k", 1, 1),
      () => cache.setIfAbsent("k", "v", 1),
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
    expect(await cache.incrBy("n", 2, 60)).toBe(2);
    expect(await cache.setIfAbsent("n", "9", 60)).toBe(false);
    expect(await cache.setIfAbsent("m", "9", 60)).toBe(true);
    await cache.del("k");
    expect(await cache.get("k")).toBeNull();
    expect(cache.kind).toBe("memory");
  });
});
