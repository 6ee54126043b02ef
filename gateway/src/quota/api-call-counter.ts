import type { Cache } from "@rowbase/kit";
import type { MonthlyUsageRebuild } from "./monthly-usage-rebuild.js";

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

/**
 * Takes back what a count added. When the counter was lost after the count (the decrement
 * created it below zero), it is left at zero instead, so that the next count finds it fresh and
 * rebuilds it rather than starting from a negative number.
 */
export async function takeBack(
  cache: Cache,
  key: string,
  amount: number,
  ttlSeconds: number,
): Promise<void> {
  const left = await cache.incrBy(key, -amount, ttlSeconds);
  if (left === -amount) await cache.incrBy(key, amount, ttlSeconds);
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
 * month ends. With `rebuild`, the call that finds the month's counter missing (its increment
 * created it) first adds what Postgres holds for the month, so a cache that lost its counters
 * does not hand out the allowance again.
 */
export class ApiCallCounter {
  constructor(
    private readonly cache: Cache,
    private readonly now: () => Date = () => new Date(),
    private readonly rebuild?: MonthlyUsageRebuild,
  ) {}

  async count(organizationId: bigint, allowance: bigint, requestId?: string): Promise<CountResult> {
    const now = this.now();
    const untilNextMonth = secondsToNextMonth(now);
    const month = utcMonthOf(now);
    const key = apiCallCounterKey(organizationId, month);
    const ttlSeconds = untilNextMonth + COUNTER_GRACE_SECONDS;
    // Nothing to count against: no increment that would only be taken back (and would find the
    // counter fresh every time).
    if (allowance <= 0n) return { admitted: false, retryAfterSeconds: untilNextMonth };
    let count = await this.cache.incrBy(key, 1, ttlSeconds);
    if (count === 1 && this.rebuild) {
      try {
        const restored = await this.rebuild.restore({
          kind: "api-calls",
          organizationId,
          month,
          key,
          ttlSeconds,
          now,
          requestId,
        });
        count = restored ?? count;
      } catch (error) {
        // Not counted: the next call finds the counter fresh again and retries the rebuild.
        await takeBack(this.cache, key, 1, ttlSeconds);
        throw error;
      }
    }
    if (BigInt(count) <= allowance) return { admitted: true, count };
    await takeBack(this.cache, key, 1, ttlSeconds);
    return { admitted: false, retryAfterSeconds: untilNextMonth };
  }

  /** The calls counted so far in the month of `now` (0 when none). */
  async used(organizationId: bigint): Promise<number> {
    const value = await this.cache.get(apiCallCounterKey(organizationId, utcMonthOf(this.now())));
    return value === null ? 0 : Number(value);
  }
}
