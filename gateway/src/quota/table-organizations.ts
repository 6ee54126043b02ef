import type { Client } from "@connectrpc/connect";
import { type Cache, callAs, LocalCache } from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { RPC_TIMEOUT_MS } from "../auth/downstream-call.js";
import { GATEWAY_PRINCIPAL } from "../auth/organization-token-lookup.js";

/**
 * A table never moves to another organization and its id is never reused, so the answer can be
 * kept long; the bound only clears entries of deleted tables.
 */
export const TABLE_ORGANIZATION_TTL_SECONDS = 24 * 3600;

/** How long a gateway process keeps a table's owner in its own memory (it never changes). */
export const TABLE_ORGANIZATION_LOCAL_TTL_MS = 60_000;

/** The shared-cache key of the organization that owns a table (decimal id). */
export function tableOrganizationKey(tableId: bigint): string {
  return `table-org:${tableId}`;
}

/**
 * Which organization owns a table, for charging a member's session call to it: catalog's
 * GetTableSchema asked as the gateway, cached. An unknown table fails with catalog's
 * `table_not_found`, which is also what the records service would answer.
 */
export class TableOrganizations {
  private readonly local = new LocalCache<bigint>(TABLE_ORGANIZATION_LOCAL_TTL_MS);

  constructor(
    private readonly catalog: Client<typeof CatalogService>,
    /** Wrapped in `localOnFailure`: a failing shared cache falls back to memory. */
    private readonly cache: Cache,
    private readonly internalSecret: string,
  ) {}

  async organizationOf(tableId: bigint, requestId: string): Promise<bigint> {
    const key = tableOrganizationKey(tableId);
    const known = this.local.get(key);
    if (known !== undefined) return known;
    const cached = await this.cache.get(key);
    if (cached !== null && /^[1-9][0-9]{0,18}$/.test(cached)) {
      this.local.set(key, BigInt(cached));
      return BigInt(cached);
    }
    const options = await callAs(this.internalSecret, GATEWAY_PRINCIPAL, requestId);
    const { organizationId } = await this.catalog.getTableSchema(
      { tableId },
      { ...options, timeoutMs: RPC_TIMEOUT_MS },
    );
    if (organizationId <= 0n) throw new Error("GetTableSchema answered without an organization");
    await this.cache.set(key, organizationId.toString(), TABLE_ORGANIZATION_TTL_SECONDS);
    this.local.set(key, organizationId);
    return organizationId;
  }
}
