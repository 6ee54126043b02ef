import type { Client } from "@connectrpc/connect";
import { type Cache, Code, cachedPlan, callAs, domainError, errorInfoOf } from "@rowbase/kit";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";
import type { ErrorCode } from "../errors/error-table.js";

/**
 * Organizations' plan limits as the gateway enforces them: the monthly allowances
 * (`api_calls_per_month`, `transfer_bytes_per_month`) and an upload's ceiling
 * (`max_file_bytes`), from OrganizationService.GetPlan asked as the gateway, through the plan
 * entry it shares with records and files (kit `cachedPlan`).
 */
export class PlanAllowances {
  constructor(
    private readonly organization: Client<typeof OrganizationService>,
    /** Failures must surface as Unavailable: see `unavailableOnFailure`. */
    private readonly cache: Cache,
    private readonly internalSecret: string,
  ) {}

  /** `notFound`: what a call answers when the organization is gone (it is being deleted). */
  async apiCallsPerMonth(
    organizationId: bigint,
    requestId: string,
    notFound: ErrorCode = "table_not_found",
  ): Promise<bigint> {
    return (await this.limits(organizationId, requestId, notFound)).apiCallsPerMonth;
  }

  /** The plan's limits; `notFound` as for `apiCallsPerMonth`. */
  async limits(
    organizationId: bigint,
    requestId: string,
    notFound: ErrorCode,
  ): Promise<PlanLimits> {
    try {
      return await cachedPlan(this.cache, organizationId, async () =>
        this.organization.getPlan(
          { organizationId },
          {
            ...(await callAs(this.internalSecret, GATEWAY_PRINCIPAL, requestId)),
            timeoutMs: RPC_TIMEOUT_MS,
          },
        ),
      );
    } catch (error) {
      // The organization is being deleted, and its tables with it.
      if (errorInfoOf(error)?.reason === "organization_not_found") {
        throw domainError(Code.NotFound, notFound);
      }
      throw error;
    }
  }
}
