import type { Client } from "@connectrpc/connect";
import { type Cache, Code, cachedPlan, callAs, domainError, errorInfoOf } from "@rowbase/kit";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";
import type { ErrorCode } from "../errors/error-table.js";

/** The monthly allowances the gateway enforces. */
export type AllowanceKey = "apiCallsPerMonth" | "transferBytesPerMonth";

/**
 * Organizations' monthly allowances (`api_calls_per_month`, `transfer_bytes_per_month` of their
 * plan), from OrganizationService.GetPlan asked as the gateway, through the plan entry it shares
 * with records and files (kit `cachedPlan`).
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
    try {
      const limits = await cachedPlan(this.cache, organizationId, async () =>
        this.organization.getPlan(
          { organizationId },
          {
            ...(await callAs(this.internalSecret, GATEWAY_PRINCIPAL, requestId)),
            timeoutMs: RPC_TIMEOUT_MS,
          },
        ),
      );
      return limits[which];
    } catch (error) {
      // The organization is being deleted, and its tables with it.
      if (errorInfoOf(error)?.reason === "organization_not_found") {
        throw domainError(Code.NotFound, notFound);
      }
      throw error;
    }
  }
}
