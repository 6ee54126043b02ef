import { afterAll, describe, expect, it } from "vitest";
import { type Cache, MemoryCache, RedisCache } from "../src/index.js";
import { testInfra, uniqueName } from "../src/testing.js";

const caches: Cache[] = [];
afterAll(async () => {
  for (const cache of caches) await cache.close();
});

// The in-process stand-in must behave like Redis for everything Rowbase relies on.
describe.each([
  ["redis", async () => RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("kit")}:`)],
  ["memory", async () => new MemoryCache()],
])("%s cache", (_kind, make) => {
  it("stores, expires and deletes values", async () => {
    const cache = await make();
    caches.push(cache);
    expect(await cache.get("missing")).toBeNull();
    await cache.set("a", "1", 1);
    await cache.set("b", "2", 60);
    expect(await cache.get("a")).toBe("1");
    await cache.del("b");
    expect(await cache.get("b")).toBeNull();
    await new Promise((r) => setTimeout(r, 1100));
    expect(await cache.get("a")).toBeNull();
  });

  it("adds to a counter that exists only, keeping the expiry it was made with", async () => {
    const cache = await make();
    caches.push(cache);
    expect(await cache.addToExisting("n", 2)).toBeNull();
    expect(await cache.get("n")).toBeNull();
    expect(await cache.setIfAbsent("n", "0", 1)).toBe(true);
    expect(await cache.addToExisting("n", 2)).toBe(2);
    expect(await cache.addToExisting("n", -3)).toBe(-1);
    await new Promise((r) => setTimeout(r, 1100));
    expect(await cache.addToExisting("n", 1)).toBeNull();
    expect(await cache.get("n")).toBeNull();
  });

  it("sets a value only when the key holds none, and says which call did", async () => {
    const cache = await make();
    caches.push(cache);
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => cache.setIfAbsent("claim", String(i), 1)),
    );
    expect(claims.filter(Boolean)).toHaveLength(1);
    expect(await cache.get("claim")).toBe(String(claims.indexOf(true)));
    expect(await cache.setIfAbsent("claim", "again", 60)).toBe(false);
    await new Promise((r) => setTimeout(r, 1100));
    // Expired, the key is free again; a deleted one too.
    expect(await cache.setIfAbsent("claim", "later", 60)).toBe(true);
    expect(await cache.get("claim")).toBe("later");
    await cache.del("claim");
    expect(await cache.setIfAbsent("claim", "after delete", 60)).toBe(true);
  });

  it("keeps the newest version of a versioned entry; a mark is filled by its own version", async () => {
    const cache = await make();
    caches.push(cache);
    expect(await cache.setVersioned("v", 9n, "nine", 60)).toBe(true);
    // Older copies never replace it, a same one has nothing to add, newer ones do.
    expect(await cache.setVersioned("v", 8n, "eight", 60)).toBe(false);
    expect(await cache.setVersioned("v", 9n, "nine again", 60)).toBe(false);
    expect(await cache.setVersioned("v", 9n, undefined, 60)).toBe(false);
    expect(await cache.get("v")).toBe("9 nine");
    // 10 after 9: versions compare as numbers, not as text.
    expect(await cache.setVersioned("v", 10n, undefined, 60)).toBe(true);
    expect(await cache.get("v")).toBe("10");
    expect(await cache.setVersioned("v", 9n, "nine", 60)).toBe(false);
    expect(await cache.setVersioned("v", 10n, undefined, 60)).toBe(false);
    expect(await cache.setVersioned("v", 10n, "ten", 60)).toBe(true);
    expect(await cache.get("v")).toBe("10 ten");
    const highest = 2n ** 63n - 1n;
    expect(await cache.setVersioned("v", highest, undefined, 60)).toBe(true);
    expect(await cache.setVersioned("v", highest - 1n, "lower", 60)).toBe(false);
    // Entries not in the versioned form are replaced.
    await cache.set("old", '{"records":"1000"}', 60);
    expect(await cache.setVersioned("old", 0n, "zero", 60)).toBe(true);
    expect(await cache.get("old")).toBe("0 zero");
    const lines = "one\ntwo";
    expect(await cache.setVersioned("lines", 1n, lines, 60)).toBe(true);
    expect(await cache.setVersioned("lines", 1n, undefined, 60)).toBe(false);
    expect(await cache.get("lines")).toBe(`1 ${lines}`);
  });

  it("drops a versioned value, keeping its version and its expiry", async () => {
    const cache = await make();
    caches.push(cache);
    await cache.setVersioned("v", 4n, "four", 60);
    await cache.setVersioned("v", 5n, "five", 1);
    await cache.setVersioned("mark", 6n, undefined, 60);
    await cache.set("old", "{}", 60);
    await cache.dropVersionedValues("v", "mark", "old", "missing");
    expect(await cache.get("v")).toBe("5");
    expect(await cache.get("mark")).toBe("6");
    expect(await cache.get("old")).toBeNull();
    expect(await cache.get("missing")).toBeNull();
    // The dropped value's version still keeps older copies out.
    expect(await cache.setVersioned("v", 4n, "four", 60)).toBe(false);
    await new Promise((r) => setTimeout(r, 1100));
    expect(await cache.get("v")).toBeNull();
  });
});

describe("memory cache", () => {
  it("lets go of expired entries nobody reads again", async () => {
    const cache = new MemoryCache();
    for (let i = 0; i < 5000; i++) await cache.setIfAbsent(`api-token:${i}`, "-", 0.05);
    await new Promise((r) => setTimeout(r, 100));
    for (let i = 0; i < 1000; i++) await cache.set(`live:${i}`, "x", 60);
    expect(cache.size).toBeLessThanOrEqual(1000);
    expect(await cache.get("live:999")).toBe("x");
  });
});

describe("redis cache prefixes", () => {
  it("keeps prefixes apart", async () => {
    const url = (await testInfra()).redisUrl;
    const one = RedisCache.connect(url, `${uniqueName("kit")}:`);
    const two = RedisCache.connect(url, `${uniqueName("kit")}:`);
    caches.push(one, two);
    await one.set("k", "one", 60);
    expect(await two.get("k")).toBeNull();
  });
});
