import type { JsonObject } from "@bufbuild/protobuf";
import type { GetTableSchemaResponse } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { type Cache, cachedJsonObject, versionedEntry, versionedEntryOf } from "./cache.js";
import { type FieldTypeName, fieldLikeOf, isFieldTypeName } from "./field-types/index.js";
import { LocalCache } from "./local-cache.js";
import type { Logger } from "./logger.js";

/**
 * Where records and files cache a table's schema (catalog's GetTableSchema), one entry for
 * both, versioned (kit `setVersioned`) by the table's schema version: catalog marks it with the
 * new version after every commit that changes the table or its fields, so every reader follows
 * the change as soon as it is answered, and a lookup that read the schema before the change can
 * never put it back. The readers' catalog consumers drop its value again on the change's event.
 */
export function tableSchemaCacheKey(tableId: bigint): string {
  return `table-schema:${tableId}`;
}

/** How long a schema stays in the shared cache; catalog marks the entry on every change. */
export const TABLE_SCHEMA_CACHE_TTL_SECONDS = 60;

/**
 * Marks a table's schema entry with the version a change gave it (catalog, once the change has
 * committed): the next lookup asks catalog, and caches what it answers only from that version.
 */
export async function markTableSchemaChanged(
  cache: Cache,
  tableId: bigint,
  version: bigint,
): Promise<void> {
  await cache.setVersioned(
    tableSchemaCacheKey(tableId),
    version,
    undefined,
    TABLE_SCHEMA_CACHE_TTL_SECONDS,
  );
}

/** A field of a table, as records and files read it. */
export interface SchemaField {
  /** The field id as a decimal string: the key of its value in a record's data. */
  id: string;
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
}

/** A table with its owner and its fields in position order. */
export interface TableSchema {
  tableId: bigint;
  databaseId: bigint;
  organizationId: bigint;
  name: string;
  fields: SchemaField[];
}

/**
 * A schema as catalog's GetTableSchema answers it. A field of a type this build does not know
 * is left out (and logged): no reader could handle its values.
 */
export function tableSchemaOf(response: GetTableSchemaResponse, logger: Logger): TableSchema {
  if (!response.table) throw new Error("GetTableSchema answered without a table");
  const fields: SchemaField[] = [];
  for (const field of response.fields) {
    const like = fieldLikeOf(field);
    if (!like) {
      logger.warn({ field_id: field.fieldId.toString() }, "field of an unknown type");
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
}

/**
 * The value of a schema's cache entry (after its version): the schema as JSON with its ids as decimal strings (JSON has no
 * bigint), `{"tableId": "7", "databaseId": "3", "organizationId": "1", "name": ..., "fields":
 * [{"id": "12", "name": ..., "type": "file", "options": {}, "required": false, ...}]}`.
 */
export function encodeCachedTableSchema(schema: TableSchema): string {
  return JSON.stringify({
    tableId: schema.tableId.toString(),
    databaseId: schema.databaseId.toString(),
    organizationId: schema.organizationId.toString(),
    name: schema.name,
    fields: schema.fields,
  });
}

const DECIMAL = /^[0-9]{1,19}$/;

function isSchemaField(value: unknown): value is SchemaField {
  if (typeof value !== "object" || value === null) return false;
  const field = value as Record<string, unknown>;
  return (
    typeof field.id === "string" &&
    DECIMAL.test(field.id) &&
    typeof field.name === "string" &&
    isFieldTypeName(field.type) &&
    typeof field.options === "object" &&
    field.options !== null &&
    !Array.isArray(field.options) &&
    typeof field.required === "boolean" &&
    typeof field.description === "string"
  );
}

/** The schema in a cache entry; undefined for no entry, a mark, or one not in the entry's shape. */
export function decodeCachedTableSchema(held: string | null): TableSchema | undefined {
  const entry = cachedJsonObject(versionedEntryOf(held)?.value ?? null);
  if (entry === undefined) return undefined;
  const { tableId, databaseId, organizationId, name, fields } = entry;
  if (
    typeof tableId !== "string" ||
    !DECIMAL.test(tableId) ||
    typeof databaseId !== "string" ||
    !DECIMAL.test(databaseId) ||
    typeof organizationId !== "string" ||
    !DECIMAL.test(organizationId) ||
    typeof name !== "string" ||
    !Array.isArray(fields) ||
    !fields.every(isSchemaField)
  ) {
    return undefined;
  }
  return {
    tableId: BigInt(tableId),
    databaseId: BigInt(databaseId),
    organizationId: BigInt(organizationId),
    name,
    fields,
  };
}

/** The cache entry a schema was decoded from, so that an unchanged entry is not decoded again. */
interface DecodedSchema {
  entry: string;
  schema: TableSchema;
}

/**
 * Table schemas through the shared entry (tableSchemaCacheKey): what the entry holds, else
 * `fetch` (GetTableSchema asked as the reading service; undefined when catalog has no such
 * table, which is not cached), then cached at its version. A cache that cannot be reached is
 * logged and costs only the fetch. The entry is read on every call, so a change applies as soon
 * as catalog has marked it, but decoded only when it differs from the one this process decoded
 * last: a schema is shared by every caller and must not be changed.
 */
export class TableSchemaCache {
  /**
   * At most 1000 schemas and 16 million characters of their JSON: catalog lets a table's fields
   * hold up to 1 MiB, and a thousand such schemas (with their decoded copies) would fill the heap.
   */
  private readonly decoded = new LocalCache<DecodedSchema>(
    TABLE_SCHEMA_CACHE_TTL_SECONDS * 1000,
    1000,
    Date.now,
    { max: 16_000_000, of: (decoded) => decoded.entry.length },
  );

  constructor(
    private readonly cache: Cache,
    private readonly fetch: (
      tableId: bigint,
      requestId: string,
    ) => Promise<GetTableSchemaResponse | undefined>,
    private readonly logger: Logger,
  ) {}

  async get(tableId: bigint, requestId: string): Promise<TableSchema | undefined> {
    const key = tableSchemaCacheKey(tableId);
    const cached = await this.cache.get(key).catch((error: unknown) => {
      this.logger.warn({ err: error, key }, "schema cache read failed");
      return null;
    });
    if (cached !== null) {
      const known = this.decoded.get(key);
      if (known?.entry === cached) return known.schema;
      const schema = decodeCachedTableSchema(cached);
      if (schema) {
        this.decoded.set(key, { entry: cached, schema });
        return schema;
      }
      // A mark (a change since) is expected; anything else is worth a word.
      if (versionedEntryOf(cached)?.value !== undefined) {
        this.logger.warn({ key }, "unreadable cached table schema");
      }
    }
    return this.fresh(tableId, requestId);
  }

  /** The schema as catalog has it now (the entry is written with it, unless it holds newer). */
  async fresh(tableId: bigint, requestId: string): Promise<TableSchema | undefined> {
    const response = await this.fetch(tableId, requestId);
    if (!response) return undefined;
    const key = tableSchemaCacheKey(tableId);
    const schema = tableSchemaOf(response, this.logger);
    const json = encodeCachedTableSchema(schema);
    this.decoded.set(key, { entry: versionedEntry(response.schemaVersion, json), schema });
    await this.cache
      .setVersioned(key, response.schemaVersion, json, TABLE_SCHEMA_CACHE_TTL_SECONDS)
      .catch((error: unknown) =>
        this.logger.warn({ err: error, key }, "schema cache write failed"),
      );
    return schema;
  }

  /**
   * Forgets cached schemas (on catalog events), leaving their versions: a lookup that read a
   * schema before the event's change still cannot cache it. A cache that cannot be reached
   * fails it.
   */
  async evict(...tableIds: bigint[]): Promise<void> {
    const keys = tableIds.map(tableSchemaCacheKey);
    this.decoded.delete(...keys);
    if (keys.length > 0) await this.cache.dropVersionedValues(...keys);
  }
}
