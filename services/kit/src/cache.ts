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
 * A versioned entry: a cached copy of something its source of truth numbers the changes of (an
 * organization's plan, a table's schema), stored as `<version> <value>`; `<version>` alone is a
 * mark, "the source has this version, ask it". Versions are decimal without leading zeros, so
 * that the Redis script compares them as strings (by length, then character by character).
 */
export interface VersionedEntry {
  version: bigint;
  /** Absent for a mark. */
  value: string | undefined;
}

/** How a versioned entry is stored; `value` absent for a mark. */
export function versionedEntry(version: bigint, value?: string): string {
  if (version < 0n) throw new Error(`negative version ${version}`);
  return value === undefined ? version.toString() : `${version} ${value}`;
}

/** The versioned entry a cache holds; undefined for none, or one not in the versioned form. */
export function versionedEntryOf(held: string | null): VersionedEntry | undefined {
  if (held === null) return undefined;
  const space = held.indexOf(" ");
  const version = space < 0 ? held : held.slice(0, space);
  if (!/^(0|[1-9][0-9]*)$/.test(version)) return undefined;
  return { version: BigInt(version), value: space < 0 ? undefined : held.slice(space + 1) };
}

/**
 * Whether a versioned entry `next` may replace the `held` one: when nothing readable is held,
 * or an older version, or a mark of the same version that `next` fills.
 */
function replaces(held: VersionedEntry | undefined, next: VersionedEntry): boolean {
  if (!held || held.version < next.version) return true;
  return held.version === next.version && held.value === undefined && next.value !== undefined;
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
  /**
   * Stores a versioned entry (`value` absent for a mark) unless the key holds a newer version,
   * or this one already (a mark is filled by its value, nothing else of its version replaces):
   * a copy fetched before a change can never replace what the change's writer left, while the
   * first copy fetched after it fills the mark. An entry not in the versioned form is replaced.
   * True when this call stored it.
   */
  setVersioned(
    key: string,
    version: bigint,
    value: string | undefined,
    ttlSeconds: number,
  ): Promise<boolean>;
  /**
   * Drops the values of versioned entries, leaving marks of their versions for the rest of
   * their lives: the next lookup fetches again, and a copy older than the dropped one still
   * cannot come back, as it could after a delete. An entry not in the versioned form goes.
   */
  dropVersionedValues(...keys: string[]): Promise<void>;
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

/**
 * `Cache.setVersioned` in one step, so that nothing changes the entry between the comparison and
 * the write. ARGV: the version, the entry to store, its TTL in seconds.
 */
const SET_VERSIONED = "rowbaseSetVersioned";
const SET_VERSIONED_LUA = `
local held = redis.call('GET', KEYS[1])
if held then
  local version = string.match(held, '^(%d+) ') or string.match(held, '^(%d+)$')
  if version then
    local wanted = ARGV[1]
    if #version > #wanted or (#version == #wanted and version > wanted) then return 0 end
    if version == wanted and (#held > #version or ARGV[2] == wanted) then return 0 end
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1`;
type SetVersioned = (key: string, version: string, entry: string, ttl: number) => Promise<number>;

/** `Cache.dropVersionedValues` for one key, in one step; the mark keeps the entry's expiry. */
const DROP_VERSIONED_VALUE = "rowbaseDropVersionedValue";
const DROP_VERSIONED_VALUE_LUA = `
local held = redis.call('GET', KEYS[1])
if not held then return 0 end
local version = string.match(held, '^(%d+) ')
if version then
  redis.call('SET', KEYS[1], version, 'KEEPTTL')
elseif not string.match(held, '^%d+$') then
  redis.call('DEL', KEYS[1])
end
return 0`;
type DropVersionedValue = (key: string) => Promise<number>;

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
    client.defineCommand(SET_VERSIONED, { numberOfKeys: 1, lua: SET_VERSIONED_LUA });
    client.defineCommand(DROP_VERSIONED_VALUE, { numberOfKeys: 1, lua: DROP_VERSIONED_VALUE_LUA });
  }

  /** A command defined by a script (`defineCommand`). */
  private script<F>(name: string): F {
    return (this.client as unknown as Record<string, F>)[name]!;
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
    return this.script<AddToExisting>(ADD_TO_EXISTING).call(this.client, this.prefix + key, by);
  }

  async setIfAbsent(key: string, value: string, ttlSeconds: number) {
    this.up();
    return (await this.client.set(this.prefix + key, value, "EX", ttlSeconds, "NX")) === "OK";
  }

  async setVersioned(key: string, version: bigint, value: string | undefined, ttlSeconds: number) {
    this.up();
    const entry = versionedEntry(version, value);
    const stored = await this.script<SetVersioned>(SET_VERSIONED).call(
      this.client,
      this.prefix + key,
      version.toString(),
      entry,
      ttlSeconds,
    );
    return stored === 1;
  }

  async dropVersionedValues(...keys: string[]) {
    this.up();
    const drop = this.script<DropVersionedValue>(DROP_VERSIONED_VALUE);
    await Promise.all(keys.map((key) => drop.call(this.client, this.prefix + key)));
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

  async setVersioned(key: string, version: bigint, value: string | undefined, ttlSeconds: number) {
    const held = this.live(key);
    if (held && !replaces(versionedEntryOf(held.value), { version, value })) return false;
    this.store(key, versionedEntry(version, value), ttlSeconds);
    return true;
  }

  async dropVersionedValues(...keys: string[]) {
    for (const key of keys) {
      const held = this.live(key);
      if (!held) continue;
      const entry = versionedEntryOf(held.value);
      if (!entry) this.entries.delete(key);
      else held.value = versionedEntry(entry.version);
    }
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
