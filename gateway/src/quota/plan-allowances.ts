import { toJsonString } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { type Cache, Code, callAs, domainError, errorInfoOf, planCacheKey } from "@rowbase/kit";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";
import type { ErrorCode } from "../errors/error-table.js";

/**
 * How long a plan stays in the shared cache; a plan change evicts it when it commits, and the
 * records service again on `org.plan.changed` (kit `markPlanChanged`).
 */
export const PLAN_CACHE_TTL_SECONDS = 60;

/**
 * What the gateway writes under kit's `planCacheKey`: PlanLimits in protobuf JSON with every key
 * present and int64s as decimal strings (`{"records": "1000", "apiCallsPerMonth": "3000", ...}`),
 * so the records service, which reads `records` from the same entry, understands it too.
 */
export function encodeCachedPlanLimits(limits: PlanLimits): string {
  return toJsonString(PlanLimitsSchema, limits, { alwaysEmitImplicit: true });
}

/**
 * The monthly API-call allowance in a cached plan entry; undefined for no entry, or one that
 * lacks it (another service may cache only the part it enforces), which is then asked for again.
 */
export function cachedApiCallAllowance(value: string | null): bigint | undefined {
  return cachedAllowance(value, "apiCallsPerMonth");
}

/** The monthly allowances the gateway enforces. */
export type AllowanceKey = "apiCallsPerMonth" | "transferBytesPerMonth";

/** One allowance in a cached plan entry, read as `cachedApiCallAllowance` reads its own. */
export function cachedAllowance(value: string | null, key: AllowanceKey): bigint | undefined {
  if (value === null) return undefined;
  try {
    const allowance = (JSON.parse(value) as Partial<Record<AllowanceKey, unknown>> | null)?.[key];
    if (typeof allowance === "string" && /^[0-9]{1,19}$/.test(allowance)) return BigInt(allowance);
  } catch {}
  return undefined;
}

/**
 * Organizations' monthly API-call allowance (`api_calls_per_month` of their plan), from
 * OrganizationService.GetPlan asked as the gateway, cached for a minute in the shared cache.
 */
export class PlanAllowances {
  constructor(
    private readonly organization: Client<typeof OrganizationService>,
    /** Failures must surface as Unavailable: see `unavailableOnFailure`. */
    private readonly cache: Cache,
    private readonly internalSecret: string,
  ) {}

  /** `notFound`: what a call answers when the organization is gone (it is being deleted). */
  apiCallsPerMonth(
    organizationId: bigint,
    requestId: string,
    notFound: ErrorCode = "table_not_found",
  ): Promise<bigint> {
    return this.allowance(organizationId, requestId, "apiCallsPerMonth", notFound);
  }

  /** The plan's `transfer_bytes_per_month`, for the file routes. */
  transferBytesPerMonth(
    organizationId: bigint,
    requestId: string,
    notFound: ErrorCode = "record_not_found",
  ): Promise<bigint> {
    return this.allowance(organizationId, requestId, "transferBytesPerMonth", notFound);
  }

  private async allowance(
    organizationId: bigint,
    requestId: string,
    which: AllowanceKey,
    notFound: ErrorCode,
  ): Promise<bigint> {
    const key = planCacheKey(organizationId);
    const cached = cachedAllowance(await this.cache.get(key), which);
    if (cached !== undefined) return cached;
    const limits = await this.fetch(organizationId, requestId, notFound);
    // Only where no entry is: a plan changed meanwhile has left PLAN_CHANGED (kit) there.
    await this.cache.setIfAbsent(key, encodeCachedPlanLimits(limits), PLAN_CACHE_TTL_SECONDS);
    return limits[which];
  }

  private async fetch(
    organizationId: bigint,
    requestId: string,
    notFound: ErrorCode,
  ): Promise<PlanLimits> {
    const options = await callAs(this.internalSecret, GATEWAY_PRINCIPAL, requestId);
    try {
      const { limits } = await this.organization.getPlan(
        { organizationId },
        { ...options, timeoutMs: RPC_TIMEOUT_MS },
      );
      if (!limits) throw new Error("GetPlan answered without limits");
      return limits;
    } catch (error) {
      // The organization is being deleted, and its tables with it.
      if (errorInfoOf(error)?.reason === "organization_not_found") {
        throw domainError(Code.NotFound, notFound);
      }
      throw error;
    }
  }
}
