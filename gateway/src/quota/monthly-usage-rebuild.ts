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

/** A counter that is being counted into, as its owner knows it. */
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

/**
 * Rebuilds the monthly counters (API calls, transfer) when the shared cache has lost them
 * (Redis restarted without persistence, a key evicted): the caller whose increment created the
 * month's counter afresh (INCRBY answered the increment itself) claims the rebuild with `SET NX`
 * and adds this month's totals stored in Postgres, so that the allowance keeps counting from
 * where the month really is. The claim is given back once done, so a counter lost again later is
 * rebuilt again; a counter that was rebuilt holds the stored totals and never looks fresh again
 * (takebacks only remove what their own increments added).
 *
 * What it cannot see: calls counted in the lost counter whose usage events were not stored yet
 * (the month is short by them), and calls of other replicas counted in the fresh counter whose
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
   * Adds the stored total of `counter` to it when this caller wins the claim; answers the
   * counter's value after that, or undefined when another caller holds the claim or nothing was
   * stored. A failure to read the totals is Unavailable (the claim is given back first), so the
   * caller can take back its increment and let the next call try again.
   */
  async restore(counter: FreshCounter): Promise<number | undefined> {
    if (counter.now.getTime() - monthStartOf(counter.now) < MONTH_START_GRACE_MS) return undefined;
    const claim = rebuildClaimKey(counter.kind, counter.organizationId, counter.month);
    if (!(await this.cache.setIfAbsent(claim, "1", this.claimTtlSeconds))) return undefined;
    try {
      const usage = await this.totals(counter.organizationId, counter.requestId);
      const total = counter.kind === "api-calls" ? usage.apiCalls : usage.transferBytes;
      if (total <= 0n) return undefined;
      return await this.cache.incrBy(counter.key, Number(total), counter.ttlSeconds);
    } finally {
      // Best effort: a claim that cannot be given back expires on its own.
      await this.cache.del(claim).catch(() => {});
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
