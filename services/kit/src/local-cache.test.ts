import { describe, expect, it } from "vitest";
import { LocalCache } from "./local-cache.js";

describe("LocalCache", () => {
  it("answers a value until its time is up, then forgets it", () => {
    let now = 1_000;
    const cache = new LocalCache<string>(500, 10, () => now);
    cache.set("a", "1");
    now += 499;
    expect(cache.get("a")).toBe("1");
    now += 1;
    expect(cache.get("a")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("never keeps a value longer than its own bound, nor at all for 0", () => {
    let now = 0;
    const cache = new LocalCache<string>(500, 10, () => now);
    cache.set("long", "x", 10_000);
    cache.set("short", "y", 100);
    cache.set("none", "z", 0);
    now = 100;
    expect([cache.get("long"), cache.get("short"), cache.get("none")]).toEqual([
      "x",
      undefined,
      undefined,
    ]);
    now = 500;
    expect(cache.get("long")).toBeUndefined();
  });

  it("drops the least recently used entry past its size", () => {
    const cache = new LocalCache<number>(60_000, 2);
    cache.set("a", 1);
    cache.set("b", 2);
    expect(cache.get("a")).toBe(1);
    cache.set("c", 3);
    expect([cache.get("a"), cache.get("b"), cache.get("c")]).toEqual([1, undefined, 3]);
  });

  it("forgets deleted keys and everything on clear", () => {
    const cache = new LocalCache<number>(60_000);
    cache.set("a", 1);
    cache.set("b", 2);
    cache.delete("a");
    expect(cache.get("a")).toBeUndefined();
    cache.clear();
    expect(cache.get("b")).toBeUndefined();
  });

  it("keeps the values' weight within its bound, least recently used out first", () => {
    const cache = new LocalCache<string>(60_000, 100, Date.now, { max: 10, of: (v) => v.length });
    cache.set("a", "aaaa");
    cache.set("b", "bbbb");
    expect(cache.get("a")).toBe("aaaa");
    cache.set("c", "cccc");
    expect([cache.get("a"), cache.get("b"), cache.get("c")]).toEqual(["aaaa", undefined, "cccc"]);
    // Replacing and deleting give their weight back.
    cache.set("a", "a");
    cache.delete("c");
    cache.set("d", "ddddddddd");
    expect([cache.get("a"), cache.get("d")]).toEqual(["a", "ddddddddd"]);
    // A value heavier than the bound alone is not kept, and pushes nothing out.
    cache.set("huge", "x".repeat(11));
    expect([cache.get("huge"), cache.get("a"), cache.get("d")]).toEqual([
      undefined,
      "a",
      "ddddddddd",
    ]);
  });
});
