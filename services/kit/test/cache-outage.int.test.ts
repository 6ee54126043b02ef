import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Authorizer, RedisCache } from "../src/index.js";
import { type RedisServerProcess, startRedisServer, uniqueName, waitFor } from "../src/testing.js";

let redis: RedisServerProcess;
let cache: RedisCache;

beforeAll(async () => {
  redis = await startRedisServer();
  cache = RedisCache.connect(redis.url, `${uniqueName("kit_out")}:`);
  await cache.set("warm", "1", 60);
});

afterAll(async () => {
  await cache?.close();
  await redis?.stop();
});

async function failureOf(promise: Promise<unknown>): Promise<Error | undefined> {
  return promise.then(
    () => undefined,
    (error: unknown) => error as Error,
  );
}

describe("RedisCache while Redis is away", () => {
  it("fails every command at once instead of queueing it, then works again", async () => {
    await redis.stop();
    await waitFor(() => !cache.reachable);
    for (const operation of [
      () => cache.get("k"),
      () => cache.set("k", "v", 60),
      () => cache.del("k"),
      () => cache.addToExisting("n", 1),
      () => cache.setIfAbsent("c", "1", 60),
    ]) {
      expect((await failureOf(operation()))?.message).toMatch(/Redis unavailable/);
    }
    // A command sent on the raw client is bounded too (commandTimeout, one retry).
    expect(await failureOf(cache.client.get("k"))).toBeInstanceOf(Error);

    await redis.start();
    await waitFor(() => cache.reachable);
    await cache.set("k", "v", 60);
    expect(await cache.get("k")).toBe("v");
  });

  it("lets the membership cache fall back to the organization service", async () => {
    let lookups = 0;
    const authorizer = new Authorizer(async () => {
      lookups++;
      return "editor";
    }, cache);
    const user = { kind: "user", userId: 5n, sessionId: "s" } as const;
    expect(await authorizer.roleOf(user, 1n)).toBe("editor");
    expect(lookups).toBe(1);
    await redis.stop();
    await waitFor(() => !cache.reachable);
    expect(await authorizer.roleOf(user, 1n)).toBe("editor");
    expect(lookups).toBe(2);
    await redis.start();
    await waitFor(() => cache.reachable);
  });
});
