import { randomBytes } from "node:crypto";
import {
  API_TOKEN_NOT_FOUND,
  API_TOKEN_REVOKED_SECONDS,
  apiTokenCacheKey,
  type Cache,
  Code,
  ConnectError,
  errorInfoOf,
  MemoryCache,
  RedisCache,
} from "@rowbase/kit";
import { testInfra, uniqueName } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN_CACHE_TTL,
  ApiTokenAuthenticator,
  type ApiTokenLookup,
  apiTokenSha256,
  decodeCachedToken,
  encodeCachedToken,
  isApiTokenFormat,
} from "./api-token-authenticator.js";
import type { ApiTokenCaller } from "./authenticate.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A fresh secret of the form the organization service issues. */
function newToken(): string {
  return `rb_${[...randomBytes(40)].map((byte) => BASE62[byte % 62]).join("")}`;
}

const hexOf = (token: string) => apiTokenSha256(token).toString("hex");

/** A lookup answering from a table of live tokens by hash, counting the calls it gets. */
function tokenTable() {
  const live = new Map<string, ApiTokenCaller>();
  const table = {
    live,
    calls: 0,
    hashes: [] as string[],
    add(token: string, caller: ApiTokenCaller) {
      live.set(hexOf(token), caller);
    },
    lookup: (async (sha256) => {
      table.calls += 1;
      const hex = Buffer.from(sha256).toString("hex");
      table.hashes.push(hex);
      return live.get(hex);
    }) satisfies ApiTokenLookup,
  };
  return table;
}

async function failureOf(promise: Promise<unknown>): Promise<ConnectError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConnectError)) throw new Error(`expected a ConnectError, got ${error}`);
  return error;
}

const caller: ApiTokenCaller = {
  kind: "api_token",
  tokenId: 17n,
  organizationId: 4n,
  access: "read_write",
};

describe("the API-token form and hash", () => {
  it("accepts exactly rb_ and 40 base62 characters", () => {
    expect(isApiTokenFormat(newToken())).toBe(true);
    expect(isApiTokenFormat(`rb_${"a".repeat(40)}`)).toBe(true);
    for (const credential of [
      `rb_${"a".repeat(39)}`,
      `rb_${"a".repeat(41)}`,
      `RB_${"a".repeat(40)}`,
      `rbr_${"a".repeat(40)}`,
      `rb_${"a".repeat(39)}-`,
      `rb_${"a".repeat(39)}_`,
      ` rb_${"a".repeat(40)}`,
      `rb_${"a".repeat(40)}\n`,
      "eyJhbGciOiJFZERTQSJ9.e30.c2ln",
      "",
    ]) {
      expect({ credential, ok: isApiTokenFormat(credential) }).toEqual({ credential, ok: false });
    }
  });

  it("hashes the secret with SHA-256 (32 bytes, the FIPS 180 test vector)", () => {
    expect(apiTokenSha256("abc").toString("hex")).toBe(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    expect(apiTokenSha256(newToken())).toHaveLength(32);
  });

  it("is cached under api-token:<sha256 hex>, the key the organization service evicts", () => {
    expect(apiTokenCacheKey(hexOf("abc"))).toBe(
      "api-token:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  });

  it("caches ids and access only, and reads back nothing it does not understand", () => {
    expect(encodeCachedToken(caller)).toBe("17:4:read_write");
    expect(decodeCachedToken("17:4:read_write")).toEqual(caller);
    expect(decodeCachedToken("1:2:read")).toEqual({
      kind: "api_token",
      tokenId: 1n,
      organizationId: 2n,
      access: "read",
    });
    expect(decodeCachedToken("-")).toBeNull();
    for (const value of [null, "", "17:4", "17:4:admin", "0:4:read", "x:4:read", '{"t":1}']) {
      expect({ value, decoded: decodeCachedToken(value) }).toEqual({ value, decoded: undefined });
    }
  });
});

describe.each([
  ["memory", async (): Promise<Cache> => new MemoryCache()],
  [
    "redis",
    async (): Promise<Cache> =>
      RedisCache.connect((await testInfra()).redisUrl, `${uniqueName("gw_tok")}:`),
  ],
])("ApiTokenAuthenticator on the %s cache", (kind, makeCache) => {
  let cache: Cache;

  /** What the organization service leaves in the shared cache when it revokes a token. */
  const revokeInCache = (token: string) =>
    cache.set(apiTokenCacheKey(hexOf(token)), API_TOKEN_NOT_FOUND, API_TOKEN_REVOKED_SECONDS);

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

  it("resolves a live token once, then answers from the cache", async () => {
    const table = tokenTable();
    const token = newToken();
    table.add(token, caller);
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache);

    expect(await authenticator.authenticate(token, "req-1")).toEqual(caller);
    expect(table.hashes).toEqual([hexOf(token)]);
    expect(await cache.get(apiTokenCacheKey(hexOf(token)))).toBe("17:4:read_write");

    // A second authenticator stands for another gateway replica sharing the cache.
    const replica = new ApiTokenAuthenticator(table.lookup, cache);
    expect(await replica.authenticate(token, "req-2")).toEqual(caller);
    expect(await authenticator.authenticate(token, "req-3")).toEqual(caller);
    expect(table.calls).toBe(1);
  });

  it("answers 401 unauthorized for an unknown token and caches that, shorter", async () => {
    const table = tokenTable();
    const token = newToken();
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
    for (let i = 0; i < 3; i++) {
      const error = await failureOf(authenticator.authenticate(token, "req"));
      expect(error.code).toBe(Code.Unauthenticated);
      expect(errorInfoOf(error)?.reason).toBe("unauthorized");
    }
    expect(table.calls).toBe(1);
    expect(await cache.get(apiTokenCacheKey(hexOf(token)))).toBe("-");
  });

  it("refuses a credential not of the token form without asking anyone", async () => {
    const table = tokenTable();
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
    const error = await failureOf(authenticator.authenticate(`rb_${"a".repeat(39)}`, "req"));
    expect(errorInfoOf(error)?.reason).toBe("unauthorized");
    expect(table.calls).toBe(0);
  });

  it("refuses a revoked token from the entry revocation leaves, on every replica", async () => {
    const table = tokenTable();
    const token = newToken();
    table.add(token, caller);
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
    // A replica that had not seen the token yet; the first one keeps its answer in memory.
    const replica = new ApiTokenAuthenticator(table.lookup, cache);
    await authenticator.authenticate(token, "req");

    // What the organization service does on RevokeApiToken.
    table.live.clear();
    await revokeInCache(token);

    const error = await failureOf(replica.authenticate(token, "req"));
    expect(errorInfoOf(error)?.reason).toBe("unauthorized");
    expect(table.calls).toBe(1);
  });

  it("does not put back a token that was revoked while its lookup was under way", async () => {
    const token = newToken();
    let answer: (caller: ApiTokenCaller) => void = () => {};
    const slow: ApiTokenLookup = () => new Promise((resolve) => (answer = resolve));
    const authenticator = new ApiTokenAuthenticator(slow, cache);
    const pending = authenticator.authenticate(token, "req");
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Read live by the service, revoked before its answer arrives.
    await revokeInCache(token);
    answer(caller);
    expect(await pending).toEqual(caller);

    const replica = new ApiTokenAuthenticator(tokenTable().lookup, cache);
    expect(errorInfoOf(await failureOf(replica.authenticate(token, "req")))?.reason).toBe(
      "unauthorized",
    );
    expect(await cache.get(apiTokenCacheKey(hexOf(token)))).toBe(API_TOKEN_NOT_FOUND);
  });

  it("keeps an answer in the process's memory for localMs at most", async () => {
    const table = tokenTable();
    const token = newToken();
    table.add(token, caller);
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache, {
      ...API_TOKEN_CACHE_TTL,
      localMs: 300,
    });
    await authenticator.authenticate(token, "req");
    table.live.clear();
    await cache.del(apiTokenCacheKey(hexOf(token)));
    // Still in this process's memory: neither the shared cache nor the service is asked.
    expect(await authenticator.authenticate(token, "req")).toEqual(caller);
    expect(table.calls).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 350));
    const error = await failureOf(authenticator.authenticate(token, "req"));
    expect(errorInfoOf(error)?.reason).toBe("unauthorized");
    expect(table.calls).toBe(2);
  });

  it("forgets both answers when their time is up", async () => {
    const table = tokenTable();
    const live = newToken();
    const unknown = newToken();
    table.add(live, caller);
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache, {
      foundSeconds: 1,
      notFoundSeconds: 1,
      localMs: 1000,
    });
    await authenticator.resolve(live, "req");
    await authenticator.resolve(unknown, "req");
    expect(table.calls).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await authenticator.resolve(live, "req");
    await authenticator.resolve(unknown, "req");
    expect(table.calls).toBe(4);
  });

  if (kind === "redis") {
    it("lets an entry live at most 3 s, 4 s with the memory of a replica (under the documented 5 s), and a miss at most 2 s", async () => {
      const redis = cache as RedisCache;
      const table = tokenTable();
      const live = newToken();
      const unknown = newToken();
      table.add(live, caller);
      const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
      await authenticator.resolve(live, "req");
      await authenticator.resolve(unknown, "req");
      const ttl = (token: string) =>
        redis.client.pttl(`${redis.keyPrefix}${apiTokenCacheKey(hexOf(token))}`);
      const [liveTtl, unknownTtl] = await Promise.all([ttl(live), ttl(unknown)]);
      expect(liveTtl).toBeGreaterThan(2_000);
      expect(liveTtl).toBeLessThanOrEqual(3_000);
      expect(liveTtl + API_TOKEN_CACHE_TTL.localMs).toBeLessThanOrEqual(4_000);
      expect(unknownTtl).toBeGreaterThan(1_000);
      expect(unknownTtl).toBeLessThanOrEqual(2_000);
    });
  }

  it("asks again when the cached entry is unreadable", async () => {
    const table = tokenTable();
    const token = newToken();
    table.add(token, caller);
    await cache.set(apiTokenCacheKey(hexOf(token)), "garbage", 5);
    const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
    expect(await authenticator.resolve(token, "req")).toEqual(caller);
    expect(table.calls).toBe(1);
  });

  it("shares one lookup among concurrent requests with the same token", async () => {
    const token = newToken();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    const authenticator = new ApiTokenAuthenticator(async () => {
      calls += 1;
      await gate;
      return caller;
    }, cache);
    const pending = [1, 2, 3].map(() => authenticator.resolve(token, "req"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    release();
    expect(await Promise.all(pending)).toEqual([caller, caller, caller]);
    expect(calls).toBe(1);
  });

  it("passes a failed lookup on (503 when the service is down) and caches nothing", async () => {
    const token = newToken();
    const authenticator = new ApiTokenAuthenticator(async () => {
      throw new ConnectError("down", Code.Unavailable);
    }, cache);
    const error = await failureOf(authenticator.authenticate(token, "req"));
    expect(error.code).toBe(Code.Unavailable);
    expect(await cache.get(apiTokenCacheKey(hexOf(token)))).toBeNull();
  });
});

describe("ApiTokenAuthenticator when Redis cannot be reached", () => {
  it("asks the organization service instead (the source of truth), for known and unknown tokens", async () => {
    const cache = RedisCache.connect("redis://127.0.0.1:1", `${uniqueName("gw_tok")}:`);
    // Expected connection errors; without a listener ioredis prints each one.
    cache.client.on("error", () => {});
    const table = tokenTable();
    const token = newToken();
    table.add(token, caller);
    try {
      const authenticator = new ApiTokenAuthenticator(table.lookup, cache);
      expect(await authenticator.authenticate(token, "req")).toEqual(caller);
      expect(table.calls).toBe(1);
      const error = await failureOf(authenticator.authenticate(newToken(), "req"));
      expect(error.code).toBe(Code.Unauthenticated);
    } finally {
      cache.client.disconnect();
    }
  });
});
