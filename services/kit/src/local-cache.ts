/**
 * A small in-process cache in front of the shared one (Redis): at most `maxEntries` values, each
 * for at most `ttlMs`, the least recently used dropped first. It spares the hot paths a Redis
 * round trip (and a parse) per request; what it holds may be up to `ttlMs` older than the shared
 * cache, so only answers that may be that stale go in it, and a caller that documents how fast a
 * change applies counts `ttlMs` in. Nothing is shared between processes or replicas. With a
 * `weight`, the values together also weigh at most `weight.max` (values whose size varies a
 * lot, such as table schemas, would otherwise let `maxEntries` of the largest fill the heap); a
 * value heavier than that alone is not kept.
 */
export class LocalCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number; weight: number }>();
  private total = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
    private readonly weight?: { max: number; of: (value: V) => number },
  ) {}

  /** The live value, or undefined; a hit becomes the most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt <= this.now()) {
      this.total -= entry.weight;
      return undefined;
    }
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Keeps `value` for `ttlMs` (or less, with `ttlMs` given here). */
  set(key: string, value: V, ttlMs = this.ttlMs): void {
    this.delete(key);
    const weight = this.weight?.of(value) ?? 0;
    if (ttlMs <= 0 || this.maxEntries <= 0 || weight > (this.weight?.max ?? 0)) return;
    this.entries.set(key, { value, expiresAt: this.now() + Math.min(ttlMs, this.ttlMs), weight });
    this.total += weight;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.total <= (this.weight?.max ?? 0)) break;
      this.entries.delete(oldest);
      this.total -= entry.weight;
    }
  }

  delete(...keys: string[]): void {
    for (const key of keys) {
      const entry = this.entries.get(key);
      if (!entry) continue;
      this.entries.delete(key);
      this.total -= entry.weight;
    }
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
  }

  get size(): number {
    return this.entries.size;
  }
}
