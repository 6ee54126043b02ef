import { create } from "@bufbuild/protobuf";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import {
  type GetTableSchemaResponse,
  GetTableSchemaResponseSchema,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { describe, expect, it } from "vitest";
import { MemoryCache, versionedEntry } from "./cache.js";
import { createLogger } from "./logger.js";
import {
  decodeCachedTableSchema,
  encodeCachedTableSchema,
  type TableSchema,
  TableSchemaCache,
  tableSchemaCacheKey,
} from "./table-schema-cache.js";
import { holdAnswers } from "./testing.js";

const logger = createLogger("test", "silent");

function response(schemaVersion: bigint, fields: { id: bigint; name: string; type: FieldType }[]) {
  return create(GetTableSchemaResponseSchema, {
    table: { tableId: 7n, databaseId: 3n, name: "Docs" },
    organizationId: 1n,
    schemaVersion,
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

const withFile = response(1n, [
  { id: 11n, name: "Name", type: FieldType.TEXT },
  { id: 12n, name: "Doc", type: FieldType.FILE },
]);
const withoutFile = response(2n, [{ id: 11n, name: "Name", type: FieldType.TEXT }]);

const schema: TableSchema = {
  tableId: 7n,
  databaseId: 3n,
  organizationId: 1n,
  name: "Docs",
  fields: [{ id: "11", name: "Name", type: "text", options: {}, required: false, description: "" }],
};

describe("the cached table schema entry", () => {
  it("is the schema as JSON with its ids as decimal strings, and reads back", () => {
    const value = encodeCachedTableSchema(schema);
    expect(JSON.parse(value)).toEqual({
      tableId: "7",
      databaseId: "3",
      organizationId: "1",
      name: "Docs",
      fields: schema.fields,
    });
    expect(decodeCachedTableSchema(versionedEntry(4n, value))).toEqual(schema);
  });

  it("treats a mark, an unversioned entry or one of another shape as a miss", () => {
    const entry = JSON.parse(encodeCachedTableSchema(schema)) as Record<string, unknown>;
    const field = schema.fields[0]!;
    for (const value of [
      null,
      versionedEntry(4n),
      encodeCachedTableSchema(schema),
      ...[
        "not json",
        "null",
        "{}",
        JSON.stringify({ table: { tableId: "7" }, organizationId: "1", fields: [] }),
        JSON.stringify({ ...entry, tableId: 7 }),
        JSON.stringify({ ...entry, organizationId: "-1" }),
        JSON.stringify({ ...entry, fields: [{ ...field, type: "FIELD_TYPE_FILE" }] }),
        JSON.stringify({ ...entry, fields: [{ ...field, id: 11 }] }),
        JSON.stringify({ ...entry, fields: [{ ...field, options: null }] }),
      ].map((value) => versionedEntry(4n, value)),
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

  it("follows the shared entry: another reader's, and a new one once catalog marked it", async () => {
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
    // A change commits: catalog marks the entry with the new version, and both readers see the
    // new schema at once; the first one that asks fills the entry for the other.
    await cache.setVersioned(tableSchemaCacheKey(7n), 2n, undefined, 60);
    expect((await one.schemas.get(7n, "r"))?.fields.map((f) => f.id)).toEqual(["11"]);
    expect((await other.schemas.get(7n, "r"))?.fields.map((f) => f.id)).toEqual(["11"]);
    expect(one.asked).toEqual([7n, 7n]);
    expect(other.asked).toEqual([]);
  });

  it("never caches a schema read before a change over the change's mark", async () => {
    const cache = new MemoryCache();
    const key = tableSchemaCacheKey(7n);
    // A reader asked catalog before a field was deleted; its answer arrives after the commit.
    const catalog = holdAnswers({ getTableSchema: async () => withFile }, "getTableSchema");
    const slow = new TableSchemaCache(cache, () => catalog.client.getTableSchema(), logger);
    const lookup = slow.get(7n, "slow");
    await catalog.answered;
    await cache.setVersioned(key, 2n, undefined, 60);
    catalog.release();
    expect((await lookup)?.fields).toHaveLength(2);
    expect(await cache.get(key)).toBe("2");
    // The next lookup asks and caches the new schema, the one after reads it.
    const next = reader(cache, [withoutFile]);
    expect((await next.schemas.get(7n, "r"))?.fields).toHaveLength(1);
    expect((await next.schemas.get(7n, "r"))?.fields).toHaveLength(1);
    expect(next.asked).toEqual([7n]);
    expect(decodeCachedTableSchema(await cache.get(key))?.fields).toHaveLength(1);
  });

  it("asks catalog for an unreadable entry, and caches no table that is gone", async () => {
    const cache = new MemoryCache();
    const key = tableSchemaCacheKey(7n);
    await cache.set(key, '{"table":{"tableId":"7"}}', 60);
    const { schemas, asked } = reader(cache, [withoutFile, undefined]);
    expect((await schemas.get(7n, "r"))?.name).toBe("Docs");
    expect(decodeCachedTableSchema(await cache.get(key))?.fields).toHaveLength(1);
    // An event's eviction leaves the version it dropped the value of.
    await schemas.evict(7n);
    expect(await cache.get(key)).toBe("2");
    expect(await schemas.get(7n, "r")).toBeUndefined();
    expect(await cache.get(key)).toBe("2");
    expect(asked).toEqual([7n, 7n]);
  });
});
