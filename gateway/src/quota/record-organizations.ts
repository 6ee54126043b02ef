import type { Client } from "@connectrpc/connect";
import { type Cache, callAs } from "@rowbase/kit";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";

/**
 * A record never moves to another table or organization and its row_id is never reused, so the
 * answer stays true; the bound is short only so that the entries of deleted records go soon.
 */
export const RECORD_ORGANIZATION_TTL_SECONDS = 300;

/** The shared-cache key of the organization that owns a record (decimal id). */
export function recordOrganizationKey(rowId: bigint): string {
  return `record-org:${rowId}`;
}

/**
 * Which organization owns a record, for charging a member's session call on a file route to
 * it: RecordsService.ResolveRecord asked as the gateway, cached. An unknown record fails with
 * the records service's `record_not_found`, which is also what the files service would answer.
 */
export class RecordOrganizations {
  constructor(
    private readonly records: Client<typeof RecordsService>,
    /** Wrapped in `localOnFailure`: a failing shared cache falls back to memory. */
    private readonly cache: Cache,
    private readonly internalSecret: string,
  ) {}

  async organizationOf(rowId: bigint, requestId: string): Promise<bigint> {
    const key = recordOrganizationKey(rowId);
    const cached = await this.cache.get(key);
    if (cached !== null && /^[1-9][0-9]{0,18}$/.test(cached)) return BigInt(cached);
    const options = await callAs(this.internalSecret, GATEWAY_PRINCIPAL, requestId);
    const { organizationId } = await this.records.resolveRecord(
      { rowId },
      { ...options, timeoutMs: RPC_TIMEOUT_MS },
    );
    if (organizationId <= 0n) throw new Error("ResolveRecord answered without an organization");
    await this.cache.set(key, organizationId.toString(), RECORD_ORGANIZATION_TTL_SECONDS);
    return organizationId;
  }
}
