import type { Cache } from "@rowbase/kit";
import {
  addToCounter,
  type FreshCounter,
  type MonthlyCounterKind,
  type MonthlyUsageRebuild,
} from "./monthly-usage-rebuild.js";

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
 * The counter of an organization's `kind` in the UTC month of `now`, under the key `keyOf`
 * names, living until the month is over (and COUNTER_GRACE_SECONDS more).
 */
export function monthlyCounter(
  kind: MonthlyCounterKind,
  keyOf: (organizationId: bigint, month: string) => string,
  organizationId: bigint,
  now: Date,
  requestId: string | undefined,
): FreshCounter {
  const month = utcMonthOf(now);
  const key = keyOf(organizationId, month);
  const ttlSeconds = secondsToNextMonth(now) + COUNTER_GRACE_SECONDS;
  return { kind, organizationId, month, key, ttlSeconds, now, requestId };
}

/**
 * The shared-cache key of an organization's record-route calls in a UTC month: every gateway
 * replica counts into the same one.
 */
export function apiCallCounterKey(organizationId: bigint, month: string): string {
  return `api-calls:${organizationId}:${month}`;
}

/**
 * Takes back what a count added. A counter lost since is not made again for it: the one that
 * replaces it is rebuilt from what the month used, which this count is not part of.
 */
export async function takeBack(cache: Cache, key: string, amount: number): Promise<void> {
  await cache.addToExisting(key, -amount);
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
 * month ends. A month's counter is made by its first count (`addToCounter`): with `rebuild`, from
 * what Postgres holds for the month, so a cache that lost its counters does not hand out the
 * allowance again, not even to the calls that arrive while the counter is rebuilt.
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
    // Nothing to count against: no increment that would only be taken back.
    if (allowance <= 0n) return { admitted: false, retryAfterSeconds: untilNextMonth };
    const counter = monthlyCounter("api-calls", apiCallCounterKey, organizationId, now, requestId);
    const count = await addToCounter(this.cache, counter, 1, this.rebuild);
    if (BigInt(count) <= allowance) return { admitted: true, count };
    await takeBack(this.cache, counter.key, 1);
    return { admitted: false, retryAfterSeconds: untilNextMonth };
  }

  /** The calls counted so far in the month of `now` (0 when none). */
  async used(organizationId: bigint): Promise<number> {
    const value = await this.cache.get(apiCallCounterKey(organizationId, utcMonthOf(this.now())));
    return value === null ? 0 : Number(value);
  }
}
