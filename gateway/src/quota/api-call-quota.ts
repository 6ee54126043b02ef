import type { Client } from "@connectrpc/connect";
import {
  Authorizer,
  type Cache,
  Code,
  domainError,
  organizationMembershipLookup,
} from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";
import { type ErrorCode, RETRY_AFTER_METADATA } from "../errors/error-table.js";
import { ApiCallCounter } from "./api-call-counter.js";
import type { ApiCallTally } from "./api-call-tally.js";
import { MonthlyUsageRebuild, organizationMonthlyUsage } from "./monthly-usage-rebuild.js";
import { PlanAllowances } from "./plan-allowances.js";
import { TableOrganizations } from "./table-organizations.js";
import { localOnFailure } from "./unavailable-on-failure.js";

/** Whether a member's session may act in an organization: its role there, if any. */
export type MemberRoles = Pick<Authorizer, "roleOf">;

export interface ApiCallQuotaParts {
  counter: ApiCallCounter;
  allowances: PlanAllowances;
  tables: TableOrganizations;
  members: MemberRoles;
  /** Adds the counted calls up for ApiCallsCounted (`usage.api_calls`). */
  tally: ApiCallTally;
}

/**
 * Every record-route call counts as one public API call of an organization per
 * UTC month, and past the plan's `api_calls_per_month` the route answers 429
 * `api_call_limit_exceeded` (Retry-After: the seconds to the next month) without counting it.
 * An API token's calls are its organization's; a member's session call is charged to the
 * organization that owns the table, and only if the user is a member there: anyone else gets
 * the 404 `table_not_found` the records service would give, so nobody can spend, or probe, the
 * allowance of an organization they do not belong to. Each counted call is added to the
 * replica's tally, which publishes ApiCallsCounted sums every second.
 */
export class ApiCallQuota {
  constructor(private readonly parts: ApiCallQuotaParts) {}

  /** Charges a call on a table; answers the organization charged, the table's. */
  async charge(
    caller: SessionCaller | ApiTokenCaller,
    tableId: bigint,
    requestId: string,
  ): Promise<bigint> {
    const organizationId = await this.organizationOf(caller, tableId, requestId);
    await this.count(caller, organizationId, "table_not_found", requestId);
    return organizationId;
  }

  /** The organization's plan limits (`change_streams`, say), as the quota reads them. */
  limits(organizationId: bigint, requestId: string) {
    return this.parts.allowances.limits(organizationId, requestId, "table_not_found");
  }

  /**
   * Charges a call to an organization named some other way (the file routes: the organization
   * of a record). A member's session must belong to it, else the route's 404 `notFound`.
   */
  async chargeOrganization(
    caller: SessionCaller | ApiTokenCaller,
    organizationId: bigint,
    notFound: ErrorCode,
    requestId: string,
  ): Promise<void> {
    if (caller.kind === "user" && !(await this.parts.members.roleOf(caller, organizationId))) {
      throw domainError(Code.NotFound, notFound);
    }
    await this.count(caller, organizationId, notFound, requestId);
  }

  private async count(
    caller: SessionCaller | ApiTokenCaller,
    organizationId: bigint,
    notFound: ErrorCode,
    requestId: string,
  ): Promise<void> {
    const allowance = await this.parts.allowances.apiCallsPerMonth(
      organizationId,
      requestId,
      notFound,
    );
    const result = await this.parts.counter.count(organizationId, allowance, requestId);
    if (!result.admitted) {
      throw domainError(Code.ResourceExhausted, "api_call_limit_exceeded", {
        [RETRY_AFTER_METADATA]: String(result.retryAfterSeconds),
      });
    }
    this.parts.tally.add(caller, organizationId);
  }

  private async organizationOf(
    caller: SessionCaller | ApiTokenCaller,
    tableId: bigint,
    requestId: string,
  ): Promise<bigint> {
    if (caller.kind === "api_token") return caller.organizationId;
    const organizationId = await this.parts.tables.organizationOf(tableId, requestId);
    const role = await this.parts.members.roleOf(caller, organizationId);
    if (!role) throw domainError(Code.NotFound, "table_not_found");
    return organizationId;
  }
}

export interface ApiCallQuotaDeps {
  /** The shared cache (Redis): counters, plans, table owners and roles. */
  cache: Cache;
  tally: ApiCallTally;
  organization: Client<typeof OrganizationService>;
  catalog: Client<typeof CatalogService>;
  internalSecret: string;
}

/**
 * The quota as the gateway runs it. While the shared cache fails, it counts in this replica's
 * memory (rebuilt from Postgres, see `localOnFailure`): a per-replica cap, never a pass.
 */
export function createApiCallQuota(deps: ApiCallQuotaDeps): ApiCallQuota {
  const cache = localOnFailure(deps.cache);
  return new ApiCallQuota({
    counter: new ApiCallCounter(
      cache,
      () => new Date(),
      new MonthlyUsageRebuild(
        cache,
        organizationMonthlyUsage(deps.organization, deps.internalSecret),
      ),
    ),
    allowances: new PlanAllowances(deps.organization, cache, deps.internalSecret),
    tables: new TableOrganizations(deps.catalog, cache, deps.internalSecret),
    members: new Authorizer(
      organizationMembershipLookup(
        deps.organization,
        deps.internalSecret,
        GATEWAY_PRINCIPAL.service,
      ),
      cache,
    ),
    tally: deps.tally,
  });
}
