import type { Cache } from "@rowbase/kit";

/**
 * How long a month's counter outlives the month: a replica whose clock runs a little behind
 * may still count into it after midnight, and nothing else reads it later.
 */
export const COUNTER_GRACE_SECONDS = 3600;

/** `2026-11` for any instant of November 2026, UTC. */
export function utcMonthOf(now: Date): string {
  return now.toISOString().slice(0, 7);
}

/** Seconds from `now` to the first instant of the next UTC month, at least 1. */
export function secondsToNextMonth(now: Date): number {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

/**
 * The shared-cache key of an organization's record-route calls in a UTC month: every gateway
 * replica counts into the same one.
 */
export function apiCallCounterKey(organizationId: bigint, month: string): string {
  return `api-calls:${organizationId}:${month}`;
}

export type CountResult =
  /** Counted; `count` is the month's calls with this one. */
  | { admitted: true; count: number }
  /** Over the allowance and not counted; the month ends in `retryAfterSeconds`. */
  | { admitted: false; retryAfterSeconds: number };

/**
 * Counts API calls per organization and calendar month (UTC) in the shared cache, against a
 * monthly allowance. Counting is one atomic increment: the call whose increment passes the
 * allowance takes it back and is refused, so parallel calls on every replica never admit more
 * than the allowance, and refused calls are not counted. The key lives until shortly after its
 * month ends.
 */
export class ApiCallCounter {
  constructor(
    private readonly cache: Cache,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async count(organizationId: bigint, allowance: bigint): Promise<CountResult> {
    const now = this.now();
    const untilNextMonth = secondsToNextMonth(now);
    const key = apiCallCounterKey(organizationId, utcMonthOf(now));
    const ttlSeconds = untilNextMonth + COUNTER_GRACE_SECONDS;
    const count = await this.cache.incrBy(key, 1, ttlSeconds);
    if (BigInt(count) <= allowance) return { admitted: true, count };
    await this.cache.incrBy(key, -1, ttlSeconds);
    return { admitted: false, retryAfterSeconds: untilNextMonth };
  }

  /** The calls counted so far in the month of `now` (0 when none). */
  async used(organizationId: bigint): Promise<number> {
    const value = await this.cache.get(apiCallCounterKey(organizationId, utcMonthOf(this.now())));
    return value === null ? 0 : Number(value);
  }
}
