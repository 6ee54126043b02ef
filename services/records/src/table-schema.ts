import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  ConnectError,
  callAs,
  errorInfoOf,
  type Logger,
  type TableSchema,
  TableSchemaCache,
} from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { tableNotFound } from "./errors.js";

export type { SchemaField, TableSchema } from "@rowbase/kit";

/**
 * Table schemas asked of catalog as the records service, through the entry shared with files
 * (kit's TableSchemaCache), which catalog marks after every commit that changes the table or
 * its fields and records' catalog consumer drops again on the event. A table that does not
 * exist is table_not_found.
 */
export class TableSchemas {
  private readonly schemas: TableSchemaCache;

  constructor(
    private readonly catalog: Client<typeof CatalogService>,
    cache: Cache,
    private readonly internalSecret: string,
    logger: Logger,
  ) {
    this.schemas = new TableSchemaCache(
      cache,
      (tableId, requestId) => this.fetch(tableId, requestId),
      logger,
    );
  }

  async get(tableId: bigint, requestId = ""): Promise<TableSchema> {
    if (tableId <= 0n) throw tableNotFound();
    const schema = await this.schemas.get(tableId, requestId);
    if (!schema) throw tableNotFound();
    return schema;
  }

  /** The schema as catalog has it now (the cache is written with it). */
  async fresh(tableId: bigint, requestId = ""): Promise<TableSchema> {
    if (tableId <= 0n) throw tableNotFound();
    const schema = await this.schemas.fresh(tableId, requestId);
    if (!schema) throw tableNotFound();
    return schema;
  }

  /** Forgets a cached schema (on catalog events). */
  evict(...tableIds: bigint[]): Promise<void> {
    return this.schemas.evict(...tableIds);
  }

  private async fetch(tableId: bigint, requestId: string) {
    try {
      return await this.catalog.getTableSchema(
        { tableId },
        await callAs(this.internalSecret, { kind: "service", service: "records" }, requestId),
      );
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") return undefined;
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("catalog service unavailable", Code.Unavailable);
      }
      throw new Error("CatalogService.GetTableSchema failed", { cause: error });
    }
  }
}
