import { fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { type Client, ConnectError } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  cachedPlan,
  callAs,
  createServiceClient,
  errorInfoOf,
  type Logger,
  markPlanChanged,
  planCacheKey,
} from "@rowbase/kit";
import {
  CatalogService,
  type GetTableSchemaResponse,
  GetTableSchemaResponseSchema,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import {
  type GetPlanResponse,
  OrganizationService,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { recordNotFound } from "./access.js";

const SERVICE = { kind: "service", service: "files" } as const;

/** How long a table schema stays in the shared cache (catalog events evict it earlier). */
const CACHE_SECONDS = 60;

/**
 * Files' own cache entry of a table schema, as canonical proto JSON of catalog's answer. Not
 * kit's `table-schema:` name: records keeps its own JSON shape under that, and two services
 * writing different shapes under one key would break each other. Catalog's post-commit
 * eviction therefore does not reach it; files' catalog consumer evicts it (and it lives a
 * minute at most).
 */
export function schemaCacheKey(tableId: bigint): string {
  return `files:table-schema:${tableId}`;
}

/**
 * A failed call to another service, as this service's caller should see it: the other service
 * unreachable is Unavailable (503), anything unexpected an internal error with the cause logged.
 */
function upstreamFailure(what: string, error: unknown): Error {
  if (
    error instanceof ConnectError &&
    (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
  ) {
    return new ConnectError(`${what}: service unavailable`, Code.Unavailable);
  }
  return new Error(`${what} failed`, { cause: error });
}

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

  constructor(
    urls: { records: string; catalog: string; organization: string },
    private readonly internalSecret: string,
    private readonly cache: Cache,
    private readonly logger: Logger,
  ) {
    this.records = createServiceClient(RecordsService, urls.records);
    this.catalog = createServiceClient(CatalogService, urls.catalog);
    this.organizations = createServiceClient(OrganizationService, urls.organization);
  }

  /** A cache that cannot be reached only costs a call to the other service. */
  private cacheGet(key: string): Promise<string | null> {
    return this.cache.get(key).catch((error: unknown) => {
      this.logger.warn({ err: error, key }, "cache read failed");
      return null;
    });
  }

  private async cacheSet(key: string, value: string): Promise<void> {
    await this.cache
      .set(key, value, CACHE_SECONDS)
      .catch((error: unknown) => this.logger.warn({ err: error, key }, "cache write failed"));
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
   * A table's schema; undefined when catalog no longer has the table. `fresh` asks catalog
   * rather than the cache, whose entries outlive a deletion until its event is applied here.
   */
  async tableSchema(
    tableId: bigint,
    requestId: string,
    options: { fresh?: boolean } = {},
  ): Promise<GetTableSchemaResponse | undefined> {
    const key = schemaCacheKey(tableId);
    const cached = options.fresh ? null : await this.cacheGet(key);
    if (cached) {
      try {
        return fromJsonString(GetTableSchemaResponseSchema, cached, { ignoreUnknownFields: true });
      } catch (error) {
        this.logger.warn({ err: error, key }, "unreadable cached table schema");
      }
    }
    let schema: GetTableSchemaResponse;
    try {
      schema = await this.catalog.getTableSchema({ tableId }, await this.options(requestId));
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") return undefined;
      throw upstreamFailure("CatalogService.GetTableSchema", error);
    }
    await this.cacheSet(key, toJsonString(GetTableSchemaResponseSchema, schema));
    return schema;
  }

  /**
   * The limits of an organization's plan; record_not_found when the organization is gone.
   * Read through the entry shared with records and the gateway (kit `cachedPlan`), which a plan
   * change marks when it commits, so an upload meets new limits once the change is answered.
   * `fresh` asks organization rather than the cache, as for `tableSchema`.
   */
  async planLimits(
    organizationId: bigint,
    requestId: string,
    options: { fresh?: boolean } = {},
  ): Promise<PlanLimits> {
    return cachedPlan(this.cache, organizationId, () => this.fetchPlan(organizationId, requestId), {
      fresh: options.fresh,
      logger: this.logger,
    });
  }

  private async fetchPlan(organizationId: bigint, requestId: string): Promise<PlanLimits> {
    let plan: GetPlanResponse;
    try {
      plan = await this.organizations.getPlan({ organizationId }, await this.options(requestId));
    } catch (error) {
      if (errorInfoOf(error)?.reason === "organization_not_found") {
        throw recordNotFound();
      }
      throw upstreamFailure("OrganizationService.GetPlan", error);
    }
    if (!plan.limits) throw new Error("OrganizationService.GetPlan returned no limits");
    return plan.limits;
  }

  async evictTableSchemas(tableIds: bigint[]): Promise<void> {
    if (tableIds.length > 0) await this.cache.del(...tableIds.map(schemaCacheKey));
  }

  async evictPlan(organizationId: bigint): Promise<void> {
    await markPlanChanged(this.cache, planCacheKey(organizationId));
  }
}
