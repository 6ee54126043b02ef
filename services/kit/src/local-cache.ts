/**
 * A small in-process cache in front of the shared one (Redis): at most `maxEntries` values, each
 * for at most `ttlMs`, the least recently used dropped first. It spares the hot paths a Redis
 * round trip (and a parse) per request; what it holds may be up to `ttlMs` older than the shared
 * cache, so only answers that may be that stale go in it, and a caller that documents how fast a
 * change applies counts `ttlMs` in. Nothing is shared between processes or replicas.
 */
export class LocalCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The live value, or undefined; a hit becomes the most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt <= this.now()) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Keeps `value` for `ttlMs` (or less, with `ttlMs` given here). */
  set(key: string, value: V, ttlMs = this.ttlMs): void {
    if (ttlMs <= 0 || this.maxEntries <= 0) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.now() + Math.min(ttlMs, this.ttlMs) });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  delete(...keys: string[]): void {
    for (const key of keys) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
