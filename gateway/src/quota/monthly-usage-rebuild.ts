import { setTimeout as sleep } from "node:timers/promises";
import type { Client } from "@connectrpc/connect";
import { type Cache, Code, ConnectError, callAs, errorInfoOf } from "@rowbase/kit";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";

/** The two monthly counters the gateway keeps in the shared cache. */
export type MonthlyCounterKind = "api-calls" | "transfer";

/** This UTC month's totals as the organization service aggregated them from usage events. */
export interface StoredMonthlyUsage {
  apiCalls: bigint;
  transferBytes: bigint;
}

/** Where the stored totals come from: OrganizationService.GetMonthlyUsage in production. */
export type StoredMonthlyUsageSource = (
  organizationId: bigint,
  requestId: string | undefined,
) => Promise<StoredMonthlyUsage>;

/**
 * How long a rebuild claim may outlive a caller that died holding it; longer than the call it
 * waits for (RPC_TIMEOUT_MS), so that a slow rebuild is never run twice.
 */
export const REBUILD_CLAIM_TTL_SECONDS = 30;

/**
 * For this long after a month starts, a fresh counter is not rebuilt: GetMonthlyUsage answers
 * for the organization service's month, and a clock a little behind the gateway's would hand the
 * whole of last month to the new counter. The first call of every month finds its counter fresh,
 * so this matters each month; what a counter lost in these minutes misses is a few minutes' use.
 */
export const MONTH_START_GRACE_MS = 2 * 60_000;

/** The claim that makes one caller per organization, month and counter the rebuilder. */
export function rebuildClaimKey(
  kind: MonthlyCounterKind,
  organizationId: bigint,
  month: string,
): string {
  return `usage-rebuild:${kind}:${organizationId}:${month}`;
}

function monthStartOf(now: Date): number {
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
}

/** A month's counter, as the caller counting into it knows it. */
export interface FreshCounter {
  kind: MonthlyCounterKind;
  organizationId: bigint;
  /** `2026-11`, the UTC month of the key. */
  month: string;
  key: string;
  ttlSeconds: number;
  /** The instant the count was made at (the counter's clock). */
  now: Date;
  requestId?: string | undefined;
}

/** How soon a caller waiting for another's rebuild first looks again whether it is done. */
const REBUILD_POLL_MS = 10;
/** The longest pause between two looks. */
const REBUILD_POLL_MAX_MS = 250;

/** Counters a count makes before it gives up (each one lost again right after it was made). */
const COUNTER_ATTEMPTS = 3;

/**
 * Adds `amount` to a month's counter and answers its new value. A counter the cache does not
 * hold (the month's first count, or the cache lost it) is made first: by `rebuild` from the
 * month's totals stored in Postgres, else at zero. A count never lands in a counter that does
 * not hold what the month used: while one caller rebuilds, the others wait for it.
 */
export async function addToCounter(
  cache: Cache,
  counter: FreshCounter,
  amount: number,
  rebuild: MonthlyUsageRebuild | undefined,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const value = await cache.addToExisting(counter.key, amount);
    if (value !== null) return value;
    if (attempt === COUNTER_ATTEMPTS) {
      throw new ConnectError("a monthly counter could not be kept", Code.Unavailable);
    }
    if (rebuild) await rebuild.restore(counter);
    else await cache.setIfAbsent(counter.key, "0", counter.ttlSeconds);
  }
}

/**
 * Rebuilds the monthly counters (API calls, transfer) when the shared cache does not hold them
 * (Redis restarted without persistence, a key evicted): of the callers that find the month's
 * counter missing, the one that claims the rebuild with `SET NX` makes it with this month's
 * totals stored in Postgres, so that the allowance keeps counting from where the month really
 * is; the others wait until the counter exists (or the claim is gone: then they try themselves).
 * The claim is given back once done, so a counter lost again later is rebuilt again.
 *
 * What it cannot see: calls counted in the lost counter whose usage events were not stored yet
 * (the month is short by them), and calls of other replicas counted in the new counter whose
 * events were stored before the totals were read (counted twice). Both are bounded by the events
 * in flight around the loss.
 */
export class MonthlyUsageRebuild {
  constructor(
    private readonly cache: Cache,
    private readonly stored: StoredMonthlyUsageSource,
    private readonly claimTtlSeconds = REBUILD_CLAIM_TTL_SECONDS,
  ) {}

  /**
   * Makes the month's counter, which the cache does not hold, with the stored total when this
   * caller wins the claim (at zero in the first minutes of a month), else waits for the claim's
   * holder. A failure to read the totals is Unavailable (the claim is given back first).
   */
  async restore(counter: FreshCounter): Promise<void> {
    if (counter.now.getTime() - monthStartOf(counter.now) < MONTH_START_GRACE_MS) {
      await this.cache.setIfAbsent(counter.key, "0", counter.ttlSeconds);
      return;
    }
    const claim = rebuildClaimKey(counter.kind, counter.organizationId, counter.month);
    if (!(await this.cache.setIfAbsent(claim, "1", this.claimTtlSeconds))) {
      await this.waitFor(counter.key, claim);
      return;
    }
    try {
      const usage = await this.totals(counter.organizationId, counter.requestId);
      const total = counter.kind === "api-calls" ? usage.apiCalls : usage.transferBytes;
      await this.cache.setIfAbsent(
        counter.key,
        String(total > 0n ? total : 0n),
        counter.ttlSeconds,
      );
    } finally {
      // Best effort: a claim that cannot be given back expires on its own.
      await this.cache.del(claim).catch(() => {});
    }
  }

  /**
   * Until the counter exists or nobody holds the claim any more (done, failed or expired); the
   * pauses between looks double up to REBUILD_POLL_MAX_MS, so that a burst of callers waiting on
   * a slow rebuild does not turn into a burst of cache reads.
   */
  private async waitFor(key: string, claim: string): Promise<void> {
    let pause = REBUILD_POLL_MS;
    while ((await this.cache.get(key)) === null && (await this.cache.get(claim)) !== null) {
      await sleep(pause);
      pause = Math.min(pause * 2, REBUILD_POLL_MAX_MS);
    }
  }

  private async totals(
    organizationId: bigint,
    requestId: string | undefined,
  ): Promise<StoredMonthlyUsage> {
    try {
      return await this.stored(organizationId, requestId);
    } catch (error) {
      // The organization is being deleted: nothing of it is left to count.
      if (errorInfoOf(error)?.reason === "organization_not_found") {
        return { apiCalls: 0n, transferBytes: 0n };
      }
      throw new ConnectError(
        "monthly usage could not be read to rebuild a counter",
        Code.Unavailable,
        undefined,
        undefined,
        error,
      );
    }
  }
}

/** GetMonthlyUsage asked as the gateway (a service principal; the RPC answers no user). */
export function organizationMonthlyUsage(
  organization: Client<typeof OrganizationService>,
  internalSecret: string,
): StoredMonthlyUsageSource {
  return async (organizationId, requestId) => {
    const options = await callAs(internalSecret, GATEWAY_PRINCIPAL, requestId);
    const usage = await organization.getMonthlyUsage(
      { organizationId },
      { ...options, timeoutMs: RPC_TIMEOUT_MS },
    );
    return { apiCalls: usage.apiCallsThisMonth, transferBytes: usage.transferBytesThisMonth };
  };
}
