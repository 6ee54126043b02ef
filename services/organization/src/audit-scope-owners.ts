import { Code, ConnectError, callAs, createServiceClient } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";

/** The organization that owns a database or table, or undefined when there is none. */
export interface ScopeOwners {
  databaseOrganization(databaseId: bigint, requestId: string): Promise<bigint | undefined>;
  tableOrganization(tableId: bigint, requestId: string): Promise<bigint | undefined>;
}

/**
 * Owners from the catalog (GetDatabase, GetTableSchema), asked as the organization service.
 * Catalog being unreachable fails the call with Unavailable (503) rather than a wrong 404.
 */
export function catalogScopeOwners(baseUrl: string, internalSecret: string): ScopeOwners {
  const catalog = createServiceClient(CatalogService, baseUrl);
  const asService = (requestId: string) =>
    callAs(internalSecret, { kind: "service", service: "organization" }, requestId);

  async function owner(lookup: () => Promise<bigint | undefined>, what: string) {
    try {
      return await lookup();
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.NotFound) return undefined;
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("catalog service unavailable", Code.Unavailable);
      }
      throw new Error(`CatalogService.${what} failed`, { cause: error });
    }
  }

  return {
    databaseOrganization: (databaseId, requestId) =>
      owner(async () => {
        const { database } = await catalog.getDatabase({ databaseId }, await asService(requestId));
        return database?.organizationId;
      }, "GetDatabase"),
    tableOrganization: (tableId, requestId) =>
      owner(async () => {
        const schema = await catalog.getTableSchema({ tableId }, await asService(requestId));
        return schema.organizationId;
      }, "GetTableSchema"),
  };
}
