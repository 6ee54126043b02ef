import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  cachedPlan,
  callAs,
  createServiceClient,
  errorInfoOf,
  type Logger,
  markOrganizationDeleted,
  planCacheKey,
  type TableSchema,
  TableSchemaCache,
  upstreamFailure,
} from "@rowbase/kit";
import {
  CatalogService,
  type GetTableSchemaResponse,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { recordNotFound } from "./access.js";

const SERVICE = { kind: "service", service: "files" } as const;

/** Where a record lives. */
export interface RecordHome {
  tableId: bigint;
  organizationId: bigint;
}

/**
 * The services files asks, called as the files service: records for where a row lives, catalog
 * for table schemas and organization for plans, the last two through the shared cache.
 */
export class Upstream {
  private readonly records: Client<typeof RecordsService>;
  private readonly catalog: Client<typeof CatalogService>;
  private readonly organizations: Client<typeof OrganizationService>;
  private readonly schemas: TableSchemaCache;

  constructor(
    urls: { records: string; catalog: string; organization: string },
    private readonly internalSecret: string,
    private readonly cache: Cache,
    private readonly logger: Logger,
  ) {
    this.records = createServiceClient(RecordsService, urls.records);
    this.catalog = createServiceClient(CatalogService, urls.catalog);
    this.organizations = createServiceClient(OrganizationService, urls.organization);
    this.schemas = new TableSchemaCache(
      cache,
      (tableId, requestId) => this.fetchTableSchema(tableId, requestId),
      logger,
    );
  }

  private options(requestId: string) {
    return callAs(this.internalSecret, SERVICE, requestId);
  }

  /** The table and organization of a row; record_not_found when records knows none. */
  async resolveRecord(rowId: bigint, requestId: string): Promise<RecordHome> {
    try {
      const home = await this.records.resolveRecord({ rowId }, await this.options(requestId));
      return { tableId: home.tableId, organizationId: home.organizationId };
    } catch (error) {
      if (errorInfoOf(error)?.reason === "record_not_found") {
        throw recordNotFound();
      }
      throw upstreamFailure("RecordsService.ResolveRecord", error);
    }
  }

  /**
   * A table's schema; undefined when catalog no longer has the table. Read through the entry
   * shared with records (kit's TableSchemaCache), which catalog marks when a change to the
   * table or its fields commits, so an upload or a signed download meets the field as it is
   * once the change is answered.
   */
  async tableSchema(tableId: bigint, requestId: string): Promise<TableSchema | undefined> {
    return this.schemas.get(tableId, requestId);
  }

  private async fetchTableSchema(
    tableId: bigint,
    requestId: string,
  ): Promise<GetTableSchemaResponse | undefined> {
    try {
      return await this.catalog.getTableSchema({ tableId }, await this.options(requestId));
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") return undefined;
      throw upstreamFailure("CatalogService.GetTableSchema", error);
    }
  }

  /**
   * The limits of an organization's plan; record_not_found when the organization is gone.
   * Read through the entry shared with records and the gateway (kit `cachedPlan`), which a plan
   * change writes when it commits, so an upload meets new limits once the change is answered,
   * and an organization's deletion marks when it commits, so its signed links end at once.
   */
  async planLimits(organizationId: bigint, requestId: string): Promise<PlanLimits> {
    try {
      return await cachedPlan(
        this.cache,
        organizationId,
        async () => this.organizations.getPlan({ organizationId }, await this.options(requestId)),
        { logger: this.logger },
      );
    } catch (error) {
      if (errorInfoOf(error)?.reason === "organization_not_found") throw recordNotFound();
      throw upstreamFailure("OrganizationService.GetPlan", error);
    }
  }

  /** The organization a field belongs to; undefined when catalog knows no such field. */
  async fieldOrganization(fieldId: bigint, requestId: string): Promise<bigint | undefined> {
    try {
      const home = await this.catalog.resolveField({ fieldId }, await this.options(requestId));
      return home.organizationId;
    } catch (error) {
      if (errorInfoOf(error)?.reason === "field_not_found") return undefined;
      throw upstreamFailure("CatalogService.ResolveField", error);
    }
  }

  async evictTableSchemas(tableIds: bigint[]): Promise<void> {
    await this.schemas.evict(...tableIds);
  }

  /**
   * Marks a deleted organization's plan entry (kit `markOrganizationDeleted`), as organization
   * did when the deletion committed, unless it could not reach the cache.
   */
  async markOrganizationDeleted(organizationId: bigint): Promise<void> {
    await markOrganizationDeleted(this.cache, organizationId);
  }

  /** Drops a cached plan, keeping its version (see kit `dropVersionedValues`). */
  async evictPlan(organizationId: bigint): Promise<void> {
    await this.cache.dropVersionedValues(planCacheKey(organizationId));
  }
}
