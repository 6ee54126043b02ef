import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  type ChangeTypeName,
  cachedPlan,
  callAs,
  changeTypeValue,
  createServiceClient,
  errorInfoOf,
  type Logger,
  upstreamFailure,
  VALIDATION_REASON,
  type ValidationItem,
  validationFailed,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import {
  type ListChangesResponse,
  RecordsService,
} from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { tableNotFound } from "./errors.js";

const SERVICE = { kind: "service", service: "webhooks" } as const;

/** Where a table lives. */
export interface TableHome {
  tableId: bigint;
  databaseId: bigint;
  organizationId: bigint;
}

/** What a webhook reads of its table's changes. */
export interface ChangeFilter {
  events: readonly ChangeTypeName[];
  where: string | null;
}

/**
 * The services webhooks asks, as the webhooks service: catalog for a table's home, records for
 * the tables' change logs, organization for plans.
 */
export class Upstream {
  private readonly records: Client<typeof RecordsService>;
  private readonly catalog: Client<typeof CatalogService>;
  readonly organizations: Client<typeof OrganizationService>;

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

  options(requestId?: string) {
    return callAs(this.internalSecret, SERVICE, requestId);
  }

  /** The table's database and organization; table_not_found when catalog has no such table. */
  async tableHome(tableId: bigint, requestId: string): Promise<TableHome> {
    try {
      const found = await this.catalog.getTableSchema({ tableId }, await this.options(requestId));
      if (!found.table) throw new Error("GetTableSchema answered without a table");
      return { tableId, databaseId: found.table.databaseId, organizationId: found.organizationId };
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") throw tableNotFound();
      throw upstreamFailure("CatalogService.GetTableSchema", error);
    }
  }

  /** The organization's plan limits, through the entry shared with the other services. */
  async planLimits(organizationId: bigint, requestId: string): Promise<PlanLimits> {
    try {
      return await cachedPlan(
        this.cache,
        organizationId,
        async () => this.organizations.getPlan({ organizationId }, await this.options(requestId)),
        { logger: this.logger },
      );
    } catch (error) {
      if (errorInfoOf(error)?.reason === "organization_not_found") throw tableNotFound();
      throw upstreamFailure("OrganizationService.GetPlan", error);
    }
  }

  /**
   * One page of a table's changes after `after` (a cursor, or `now` for the present end),
   * keyed by field id with every field, filtered by the webhook's events and `where`.
   */
  async changes(
    tableId: bigint,
    after: string,
    filter: ChangeFilter,
    limit: number,
    requestId?: string,
  ): Promise<ListChangesResponse> {
    return this.records.listChanges(
      {
        tableId,
        after,
        limit,
        types: filter.events.map(changeTypeValue),
        where: filter.where ?? "",
      },
      await this.options(requestId),
    );
  }

  /**
   * The cursor of the table's present end, after checking that records takes the filter: a
   * `where` it cannot compile is the validation failure on the request body's `where`.
   */
  async presentEnd(tableId: bigint, filter: ChangeFilter, requestId: string): Promise<string> {
    try {
      const { next } = await this.changes(tableId, "now", filter, 1, requestId);
      if (filter.where !== null) await this.changes(tableId, next, filter, 1, requestId);
      return next;
    } catch (error) {
      const info = errorInfoOf(error);
      if (info?.reason === "table_not_found") throw tableNotFound();
      if (info?.reason === VALIDATION_REASON) {
        const items = JSON.parse(info.metadata.extra ?? "[]") as ValidationItem[];
        throw validationFailed(items.map((item) => ({ ...item, source: "body" })));
      }
      throw upstreamFailure("RecordsService.ListChanges", error);
    }
  }
}
