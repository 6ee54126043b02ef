import { createHash } from "node:crypto";
import { API_TOKEN_NOT_FOUND, apiTokenCacheKey, type Cache, LocalCache } from "@rowbase/kit";
import { type ApiTokenCaller, unauthorized } from "./authenticate.js";

/** An API token: `rb_` and 40 base62 characters, which no session JWT can look like. */
const API_TOKEN_FORMAT = /^rb_[0-9A-Za-z]{40}$/;

/** Whether a bearer credential has the form of an API token (and so is not a session JWT). */
export function isApiTokenFormat(credential: string): boolean {
  return API_TOKEN_FORMAT.test(credential);
}

/** The SHA-256 of a token's secret: what the organization service stores and resolves. */
export function apiTokenSha256(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/**
 * Asks the organization service which live token has this hash: its caller, or undefined when
 * none has (unknown or revoked). Other failures (service down) throw.
 */
export type ApiTokenLookup = (
  sha256: Uint8Array,
  requestId: string,
) => Promise<ApiTokenCaller | undefined>;

export interface ApiTokenCacheTtl {
  /**
   * A live token in the shared cache. Revocation must bite within 5 s on every replica (the
   * documented bound): the service overwrites the entry with "no such token" for longer than this
   * (API_TOKEN_REVOKED_SECONDS), which a lookup already under way cannot replace, since entries
   * are only added where none exists; a replica may hold what it read for `localMs` more.
   */
  foundSeconds: number;
  /** An unknown token: shorter, it only spares the service repeated misses. */
  notFoundSeconds: number;
  /**
   * How long a gateway process keeps an answer it got (from the shared cache or the service)
   * in its own memory, sparing the shared cache a round trip per request; never longer than the
   * shared entry's own lifetime.
   */
  localMs: number;
}

export const API_TOKEN_CACHE_TTL: ApiTokenCacheTtl = {
  foundSeconds: 3,
  notFoundSeconds: 2,
  localMs: 1000,
};

/** How many presented tokens a gateway process remembers. */
const LOCAL_TOKEN_ENTRIES = 10_000;

/** What is cached for a live token: its ids and access, nothing secret. */
export function encodeCachedToken(caller: ApiTokenCaller): string {
  return `${caller.tokenId}:${caller.organizationId}:${caller.access}`;
}

const CACHED_TOKEN = /^([1-9][0-9]{0,18}):([1-9][0-9]{0,18}):(read|read_write)$/;

/**
 * A cached entry read back: the caller, `null` for a cached "no such token", or undefined for a
 * miss (no entry, or one this gateway cannot read, which is then asked for again).
 */
export function decodeCachedToken(value: string | null): ApiTokenCaller | null | undefined {
  if (value === null) return undefined;
  if (value === API_TOKEN_NOT_FOUND) return null;
  const match = CACHED_TOKEN.exec(value);
  if (!match) return undefined;
  const [, tokenId = "", organizationId = "", access] = match;
  return {
    kind: "api_token",
    tokenId: BigInt(tokenId),
    organizationId: BigInt(organizationId),
    access: access === "read_write" ? "read_write" : "read",
  };
}

/**
 * Turns a presented API token into its caller or 401 `unauthorized`. The answer, found or not,
 * is kept in the shared cache under `api-token:<sha256 hex>` for a few seconds, so a busy token
 * costs the organization service one call per 3 s across all replicas, and in this process's
 * memory for a second, so it costs the shared cache one read per second; revocation replaces the
 * shared entry with "no such token", so a revoked token passes at most a second longer on a
 * replica that had it in memory (or whose lookup was under way).
 * Concurrent requests with the same token in this process share one lookup. A shared cache
 * that fails (Redis down) is skipped: the organization service decides, as on a miss.
 */
export class ApiTokenAuthenticator {
  private readonly inFlight = new Map<string, Promise<ApiTokenCaller | undefined>>();
  /** Callers by the token's cache key; null for "no such token". */
  private readonly local: LocalCache<ApiTokenCaller | null>;

  constructor(
    private readonly lookup: ApiTokenLookup,
    private readonly cache: Cache,
    private readonly ttl: ApiTokenCacheTtl = API_TOKEN_CACHE_TTL,
  ) {
    this.local = new LocalCache(ttl.localMs, LOCAL_TOKEN_ENTRIES);
  }

  async authenticate(credential: string, requestId: string): Promise<ApiTokenCaller> {
    if (!isApiTokenFormat(credential)) throw unauthorized("api_token_unknown");
    const caller = await this.resolve(credential, requestId);
    if (!caller) throw unauthorized("api_token_unknown");
    return caller;
  }

  /** The token's caller, from the cache or the service; undefined when no live token has it. */
  async resolve(token: string, requestId: string): Promise<ApiTokenCaller | undefined> {
    const sha256 = apiTokenSha256(token);
    const key = apiTokenCacheKey(sha256.toString("hex"));
    const known = this.local.get(key);
    if (known !== undefined) return known ?? undefined;
    const cached = decodeCachedToken((await this.cacheCall(() => this.cache.get(key))) ?? null);
    if (cached !== undefined) {
      this.remember(key, cached);
      return cached ?? undefined;
    }
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.lookUpAndCache(sha256, key, requestId).finally(() =>
        this.inFlight.delete(key),
      );
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private async lookUpAndCache(
    sha256: Uint8Array,
    key: string,
    requestId: string,
  ): Promise<ApiTokenCaller | undefined> {
    const caller = await this.lookup(sha256, requestId);
    // Only where there is no entry: a revocation that committed meanwhile left one saying "no
    // such token", which the live answer read before it must not replace.
    await this.cacheCall(() =>
      caller
        ? this.cache.setIfAbsent(key, encodeCachedToken(caller), this.ttl.foundSeconds)
        : this.cache.setIfAbsent(key, API_TOKEN_NOT_FOUND, this.ttl.notFoundSeconds),
    );
    this.remember(key, caller ?? null);
    return caller;
  }

  private remember(key: string, caller: ApiTokenCaller | null): void {
    const sharedSeconds = caller ? this.ttl.foundSeconds : this.ttl.notFoundSeconds;
    this.local.set(key, caller, Math.min(this.ttl.localMs, sharedSeconds * 1000));
  }

  /** The shared cache's answer, or undefined when it failed (a miss: the service decides). */
  private async cacheCall<T>(operation: () => Promise<T>): Promise<T | undefined> {
    try {
      return await operation();
    } catch {
      return undefined;
    }
  }
}
