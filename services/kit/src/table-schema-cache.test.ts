import { create } from "@bufbuild/protobuf";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import {
  type GetTableSchemaResponse,
  GetTableSchemaResponseSchema,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { describe, expect, it } from "vitest";
import { MemoryCache } from "./cache.js";
import { createLogger } from "./logger.js";
import {
  decodeCachedTableSchema,
  encodeCachedTableSchema,
  type TableSchema,
  TableSchemaCache,
  tableSchemaCacheKey,
} from "./table-schema-cache.js";

const logger = createLogger("test", "silent");

function response(fields: { id: bigint; name: string; type: FieldType }[]) {
  return create(GetTableSchemaResponseSchema, {
    table: { tableId: 7n, databaseId: 3n, name: "Docs" },
    organizationId: 1n,
    fields: fields.map((f) => ({
      fieldId: f.id,
      tableId: 7n,
      name: f.name,
      type: f.type,
      options: {},
      required: false,
      description: "",
    })),
  });
}

const withFile = response([
  { id: 11n, name: "Name", type: FieldType.TEXT },
  { id: 12n, name: "Doc", type: FieldType.FILE },
]);
const withoutFile = response([{ id: 11n, name: "Name", type: FieldType.TEXT }]);

const schema: TableSchema = {
  tableId: 7n,
  databaseId: 3n,
  organizationId: 1n,
  name: "Docs",
  fields: [{ id: "11", name: "Name", type: "text", options: {}, required: false, description: "" }],
};

describe("the cached table schema entry", () => {
  it("is the schema as JSON with its ids as decimal strings, and reads back", () => {
    const entry = encodeCachedTableSchema(schema);
    expect(JSON.parse(entry)).toEqual({
      tableId: "7",
      databaseId: "3",
      organizationId: "1",
      name: "Docs",
      fields: schema.fields,
    });
    expect(decodeCachedTableSchema(entry)).toEqual(schema);
  });

  it("treats an entry of another shape as a miss", () => {
    const entry = JSON.parse(encodeCachedTableSchema(schema)) as Record<string, unknown>;
    const field = schema.fields[0]!;
    for (const value of [
      null,
      "not json",
      "null",
      "{}",
      JSON.stringify({ table: { tableId: "7" }, organizationId: "1", fields: [] }),
      JSON.stringify({ ...entry, tableId: 7 }),
      JSON.stringify({ ...entry, organizationId: "-1" }),
      JSON.stringify({ ...entry, fields: [{ ...field, type: "FIELD_TYPE_FILE" }] }),
      JSON.stringify({ ...entry, fields: [{ ...field, id: 11 }] }),
      JSON.stringify({ ...entry, fields: [{ ...field, options: null }] }),
    ]) {
      expect(decodeCachedTableSchema(value), String(value)).toBeUndefined();
    }
  });
});

describe("TableSchemaCache", () => {
  function reader(cache: MemoryCache, answers: (GetTableSchemaResponse | undefined)[]) {
    const asked: bigint[] = [];
    const schemas = new TableSchemaCache(
      cache,
      async (tableId) => {
        asked.push(tableId);
        return answers.shift();
      },
      logger,
    );
    return { schemas, asked };
  }

  it("follows the shared entry: another reader's, and a new one once catalog deleted it", async () => {
    const cache = new MemoryCache();
    const one = reader(cache, [withFile, withoutFile]);
    const other = reader(cache, []);
    const first = await one.schemas.get(7n, "r");
    expect(first?.fields.map((f) => [f.id, f.type])).toEqual([
      ["11", "text"],
      ["12", "file"],
    ]);
    // The other reader takes what the first one cached, without asking catalog.
    expect(await other.schemas.get(7n, "r")).toEqual(first);
    expect(other.asked).toEqual([]);
    // A change commits: catalog deletes the entry, and both readers see the new schema at once.
    await cache.del(tableSchemaCacheKey(7n));
    expect((await one.schemas.get(7n, "r"))?.fields.map((f) => f.id)).toEqual(["11"]);
    expect((await other.schemas.get(7n, "r"))?.fields.map((f) => f.id)).toEqual(["11"]);
    expect(one.asked).toEqual([7n, 7n]);
    expect(other.asked).toEqual([]);
  });

  it("asks catalog for an unreadable entry, and caches no table that is gone", async () => {
    const cache = new MemoryCache();
    const key = tableSchemaCacheKey(7n);
    await cache.set(key, '{"table":{"tableId":"7"}}', 60);
    const { schemas, asked } = reader(cache, [withoutFile, undefined]);
    expect((await schemas.get(7n, "r"))?.name).toBe("Docs");
    expect(decodeCachedTableSchema(await cache.get(key))?.fields).toHaveLength(1);
    await schemas.evict(7n);
    expect(await cache.get(key)).toBeNull();
    expect(await schemas.get(7n, "r")).toBeUndefined();
    expect(await cache.get(key)).toBeNull();
    expect(asked).toEqual([7n, 7n]);
  });
});
