import type { JsonObject } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  ConnectError,
  callAs,
  errorInfoOf,
  LocalCache,
  type Logger,
  tableSchemaCacheKey,
} from "@rowbase/kit";
import { type FieldTypeName, fieldLikeOf } from "@rowbase/kit/field-types";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { tableNotFound } from "./errors.js";

/** A field of a table as records needs it. */
export interface SchemaField {
  /** The field id as a decimal string: the key of its value in `record.data`. */
  id: string;
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
}

/** A table with its owner and its fields in position order (catalog's GetTableSchema). */
export interface TableSchema {
  tableId: bigint;
  databaseId: bigint;
  organizationId: bigint;
  name: string;
  fields: SchemaField[];
}

/** The cached JSON form: ids as strings, since JSON has no bigint. */
interface CachedSchema {
  tableId: string;
  databaseId: string;
  organizationId: string;
  name: string;
  fields: SchemaField[];
}

/** How long a schema stays cached; catalog deletes the entry on every change anyway. */
export const SCHEMA_TTL_SECONDS = 60;

/** The cached JSON a schema was parsed from, so that an unchanged entry is not parsed again. */
interface ParsedSchema {
  json: string;
  schema: TableSchema;
}

/**
 * Table schemas from CatalogService.GetTableSchema (asked as the records service), cached in the
 * shared cache under `tableSchemaCacheKey`. Catalog deletes the entry after every commit that
 * changes the table or its fields, and records' catalog consumer deletes it again on the event,
 * so a schema is stale at most for the moment between the two. A table that does not exist is
 * not cached. A cache that cannot be reached only costs a call to catalog. The shared entry is
 * read on every call (a change applies at once), but parsed only when it differs from the one
 * this process parsed last: a schema is shared by every caller and must not be changed.
 */
export class TableSchemas {
  /**
   * At most 1000 schemas and 16 million characters of their JSON: catalog lets a table's fields
   * hold up to 1 MiB, and a thousand such schemas (with their parsed copies) would fill the heap.
   */
  private readonly parsed = new LocalCache<ParsedSchema>(
    SCHEMA_TTL_SECONDS * 1000,
    1000,
    Date.now,
    {
      max: 16_000_000,
      of: (entry) => entry.json.length,
    },
  );

  constructor(
    private readonly catalog: Client<typeof CatalogService>,
    private readonly cache: Cache,
    private readonly internalSecret: string,
    private readonly logger: Logger,
  ) {}

  async get(tableId: bigint, requestId = ""): Promise<TableSchema> {
    if (tableId <= 0n) throw tableNotFound();
    const key = tableSchemaCacheKey(tableId);
    const cached = await this.cache.get(key).catch((error: unknown) => {
      this.logger.warn({ err: error }, "schema cache read failed");
      return null;
    });
    if (cached) {
      const known = this.parsed.get(key);
      if (known?.json === cached) return known.schema;
      const schema = fromCached(JSON.parse(cached) as CachedSchema);
      this.parsed.set(key, { json: cached, schema });
      return schema;
    }
    return this.fresh(tableId, requestId);
  }

  /** The schema as catalog has it now (the caches are written with it). */
  async fresh(tableId: bigint, requestId = ""): Promise<TableSchema> {
    if (tableId <= 0n) throw tableNotFound();
    const key = tableSchemaCacheKey(tableId);
    const schema = await this.fetch(tableId, requestId);
    const json = JSON.stringify(toCached(schema));
    this.parsed.set(key, { json, schema });
    await this.cache
      .set(key, json, SCHEMA_TTL_SECONDS)
      .catch((error: unknown) => this.logger.warn({ err: error }, "schema cache write failed"));
    return schema;
  }

  /** Forgets a cached schema (on catalog events). */
  async evict(...tableIds: bigint[]): Promise<void> {
    const keys = tableIds.map(tableSchemaCacheKey);
    this.parsed.delete(...keys);
    if (keys.length > 0) await this.cache.del(...keys);
  }

  private async fetch(tableId: bigint, requestId: string): Promise<TableSchema> {
    try {
      const response = await this.catalog.getTableSchema(
        { tableId },
        await callAs(this.internalSecret, { kind: "service", service: "records" }, requestId),
      );
      if (!response.table) throw new Error("GetTableSchema answered without a table");
      const fields: SchemaField[] = [];
      for (const field of response.fields) {
        const like = fieldLikeOf(field);
        if (!like) {
          this.logger.warn({ field_id: field.fieldId.toString() }, "field of an unknown type");
          continue;
        }
        fields.push({
          id: field.fieldId.toString(),
          name: field.name,
          type: like.type,
          options: field.options ?? {},
          required: field.required,
          description: field.description,
        });
      }
      return {
        tableId: response.table.tableId,
        databaseId: response.table.databaseId,
        organizationId: response.organizationId,
        name: response.table.name,
        fields,
      };
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") throw tableNotFound();
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

function toCached(schema: TableSchema): CachedSchema {
  return {
    tableId: schema.tableId.toString(),
    databaseId: schema.databaseId.toString(),
    organizationId: schema.organizationId.toString(),
    name: schema.name,
    fields: schema.fields,
  };
}

function fromCached(cached: CachedSchema): TableSchema {
  return {
    tableId: BigInt(cached.tableId),
    databaseId: BigInt(cached.databaseId),
    organizationId: BigInt(cached.organizationId),
    name: cached.name,
    fields: cached.fields,
  };
}
