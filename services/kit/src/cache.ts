import { Redis, type RedisOptions } from "ioredis";

/**
 * The JSON object a cache entry holds; undefined for no entry, or one that is not a JSON object
 * (an entry is data from another process, possibly another version: it is never trusted to parse).
 */
export function cachedJsonObject(value: string | null): Record<string, unknown> | undefined {
  if (value === null) return undefined;
  let entry: unknown;
  try {
    entry = JSON.parse(value);
  } catch {
    return undefined;
  }
  return typeof entry === "object" && entry !== null && !Array.isArray(entry)
    ? (entry as Record<string, unknown>)
    : undefined;
}

/**
 * The few key-value operations Rowbase needs from Redis: short-lived caches, revocation marks
 * and counters. `MemoryCache` stands in for Redis in the single-process mode.
 */
export interface Cache {
  readonly kind: "redis" | "memory";
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  del(...keys: string[]): Promise<void>;
  /**
   * Adds `by` to the number a key holds and returns the new value; null, changing nothing, when
   * the key does not exist. A counter is created with `setIfAbsent` (which gives it its life), so
   * that one the store lost is noticed instead of silently starting again from zero.
   */
  addToExisting(key: string, by: number): Promise<number | null>;
  /**
   * Stores `value` only when the key holds nothing (Redis `SET NX`); true when this call stored
   * it. Of callers racing for the same key, exactly one wins: a claim, such as the one caller
   * that rebuilds a lost counter.
   */
  setIfAbsent(key: string, value: string, ttlSeconds: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * How every Rowbase process talks to Redis. While Redis cannot be reached, a command fails fast
 * (one retry at most, a second at most) instead of waiting in the offline queue for a reconnect
 * that may never come, so that callers fall back at once: caches to their source of truth, rate
 * limits and quotas to per-instance counting, or 503. The offline queue stays on for the very
 * first connection, so that a process's first commands wait for it rather than fail.
 */
export const REDIS_CLIENT_OPTIONS = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  commandTimeout: 1_000,
  // Commands issued in the same turn of the event loop (many requests' quota and cache reads)
  // go out in one write instead of a write each.
  enableAutoPipelining: true,
} satisfies RedisOptions;

/**
 * INCRBY on a key that exists, in one command (a script, sent as EVALSHA): on the path of every
 * counted API call. Lua's false is Redis's nil, which ioredis answers as null.
 */
const ADD_TO_EXISTING = "rowbaseAddToExisting";
const ADD_TO_EXISTING_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('INCRBY', KEYS[1], ARGV[1])`;
type AddToExisting = (key: string, by: number) => Promise<number | null>;

export class RedisCache implements Cache {
  readonly kind = "redis";
  private connectedOnce = false;

  /** `prefix` isolates tenants of one Redis (tests, several deployments). */
  constructor(
    readonly client: Redis,
    private readonly prefix = "rb:",
  ) {
    if (client.status === "ready") this.connectedOnce = true;
    else client.once("ready", () => (this.connectedOnce = true));
    // A lost connection fails the commands (which callers handle); without a listener ioredis
    // would also print every failed reconnect attempt as an unhandled error event.
    client.on("error", () => {});
    client.defineCommand(ADD_TO_EXISTING, { numberOfKeys: 1, lua: ADD_TO_EXISTING_LUA });
  }

  static connect(url: string, prefix?: string): RedisCache {
    return new RedisCache(new Redis(url, REDIS_CLIENT_OPTIONS), prefix);
  }

  /**
   * False once a connection that was up is lost, until it is back: commands would only fail
   * (or wait up to `commandTimeout` behind the reconnect). True while the first connection is
   * being made, when commands wait for it.
   */
  get reachable(): boolean {
    return !this.connectedOnce || this.client.status === "ready";
  }

  /** While the connection is lost, a command fails at once instead of queueing. */
  private up(): void {
    if (!this.reachable) throw new Error(`Redis unavailable (${this.client.status})`);
  }

  async get(key: string) {
    this.up();
    return this.client.get(this.prefix + key);
  }

  async set(key: string, value: string, ttlSeconds: number) {
    this.up();
    await this.client.set(this.prefix + key, value, "EX", ttlSeconds);
  }

  async del(...keys: string[]) {
    this.up();
    if (keys.length > 0) await this.client.del(...keys.map((k) => this.prefix + k));
  }

  async addToExisting(key: string, by: number) {
    this.up();
    const command = (this.client as unknown as Record<string, AddToExisting>)[ADD_TO_EXISTING];
    return command!.call(this.client, this.prefix + key, by);
  }

  async setIfAbsent(key: string, value: string, ttlSeconds: number) {
    this.up();
    return (await this.client.set(this.prefix + key, value, "EX", ttlSeconds, "NX")) === "OK";
  }

  get keyPrefix() {
    return this.prefix;
  }

  async close() {
    // quit() would wait for a reconnect while Redis is away.
    if (this.client.status === "ready") await this.client.quit();
    else this.client.disconnect();
  }
}

/** Writes between two sweeps of a MemoryCache's expired entries. */
const SWEEP_EVERY_WRITES = 1000;

export class MemoryCache implements Cache {
  readonly kind = "memory";
  private readonly entries = new Map<string, { value: string; expiresAt: number }>();
  private writes = 0;

  private live(key: string) {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  async get(key: string) {
    return this.live(key)?.value ?? null;
  }

  async set(key: string, value: string, ttlSeconds: number) {
    this.store(key, value, ttlSeconds);
  }

  /**
   * Every SWEEP_EVERY_WRITES writes, the expired entries go: an entry nobody reads again (the
   * "no such token" of every unknown token presented) would otherwise stay for good.
   */
  private store(key: string, value: string, ttlSeconds: number) {
    if (++this.writes % SWEEP_EVERY_WRITES === 0) {
      const now = Date.now();
      for (const [stored, entry] of this.entries) {
        if (entry.expiresAt <= now) this.entries.delete(stored);
      }
    }
    this.entries.set(key, { value, expiresAt: Date.now() + ttlSeconds * 1000 });
  }

  /** How many entries are held, expired ones not yet swept included (for tests). */
  get size(): number {
    return this.entries.size;
  }

  async del(...keys: string[]) {
    for (const key of keys) this.entries.delete(key);
  }

  async addToExisting(key: string, by: number) {
    const entry = this.live(key);
    if (!entry) return null;
    const value = Number(entry.value) + by;
    entry.value = String(value);
    return value;
  }

  async setIfAbsent(key: string, value: string, ttlSeconds: number) {
    if (this.live(key)) return false;
    this.store(key, value, ttlSeconds);
    return true;
  }

  async close() {
    this.entries.clear();
  }
}

/** Redis when a URL is configured, else the in-process stand-in. */
export function createCache(url: string | undefined, prefix?: string): Cache {
  return url ? RedisCache.connect(url, prefix) : new MemoryCache();
}

/**
 * Where the gateway caches a resolved API token, by the hex SHA-256 of its secret. The
 * organization service overwrites the entry when it revokes the token, so both use this one name.
 */
export function apiTokenCacheKey(sha256Hex: string): string {
  return `api-token:${sha256Hex}`;
}

/** The cached answer for a hash that resolves to no live token. */
export const API_TOKEN_NOT_FOUND = "-";

/**
 * How long the entry of a token just revoked says API_TOKEN_NOT_FOUND. Gateways only add
 * entries that do not exist, so a lookup that was under way when the token was revoked (and
 * found it live) cannot put it back; longer than a live entry lives.
 */
export const API_TOKEN_REVOKED_SECONDS = 10;
