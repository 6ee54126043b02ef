import {
  createLogger,
  decodeCachedTableSchema,
  encodeCachedTableSchema,
  TableSchemaCache,
  tableSchemaCacheKey,
  tableSchemaOf,
  versionedEntry,
} from "@rowbase/kit";
import { holdAnswers } from "@rowbase/kit/testing";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { as, type Harness, SERVICE, startHarness, type Team, team } from "./harness.js";

// Records and files cache table schemas under tableSchemaCacheKey, versioned by the table's
// schema version; catalog raises the version with every commit that changes the table or its
// fields, and marks the entry with it.

let h: Harness;
let t: Team;
const logger = createLogger("catalog-schema-cache-test", "silent");
/** The version a deleted table's entry is marked with. */
const DELETED = (2n ** 63n - 1n).toString();

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

async function createTable(name: string) {
  const call = await as(t.editor);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name, description: "" },
    call,
  );
  const { table, fields } = await h.catalog.createTable(
    {
      databaseId: database!.databaseId,
      name: "T",
      description: "",
      fields: [{ name: "Name", type: FieldType.TEXT, required: false, description: "" }],
    },
    call,
  );
  return { databaseId: database!.databaseId, tableId: table!.tableId, fields };
}

async function schemaOf(tableId: bigint) {
  return h.catalog.getTableSchema({ tableId }, await as(SERVICE));
}

/** What a reader caches from catalog's answer. */
async function cachedFrom(tableId: bigint): Promise<string> {
  const answer = await schemaOf(tableId);
  return versionedEntry(
    answer.schemaVersion,
    encodeCachedTableSchema(tableSchemaOf(answer, logger)),
  );
}

it("marks a table's cached schema with a new version after each change of it or its fields", async () => {
  const call = await as(t.editor);
  const { tableId, fields } = await createTable("Cached");
  const key = tableSchemaCacheKey(tableId);
  const changes: Array<() => Promise<unknown>> = [
    () => h.catalog.updateTable({ tableId, name: "Renamed" }, call),
    () =>
      h.catalog.createField(
        {
          tableId,
          field: { name: "Age", type: FieldType.NUMBER, required: false, description: "" },
        },
        call,
      ),
    () => h.catalog.updateField({ fieldId: fields[0]!.fieldId, name: "Title" }, call),
    () => h.catalog.deleteField({ fieldId: fields[0]!.fieldId }, call),
  ];
  let version = (await schemaOf(tableId)).schemaVersion;
  for (const change of changes) {
    await h.cache.set(key, await cachedFrom(tableId), 60);
    await change();
    expect((await schemaOf(tableId)).schemaVersion).toBe(version + 1n);
    version += 1n;
    expect(await h.cache.get(key)).toBe(version.toString());
  }
  // A change that fails leaves the version and the entry alone.
  const entry = await cachedFrom(tableId);
  await h.cache.set(key, entry, 60);
  await h.catalog.updateTable({ tableId, name: "x".repeat(101) }, call).catch(() => undefined);
  expect(await h.cache.get(key)).toBe(entry);
  expect((await schemaOf(tableId)).schemaVersion).toBe(version);
  // A deleted table's entry is marked above any version.
  await h.catalog.deleteTable({ tableId }, call);
  expect(await h.cache.get(key)).toBe(DELETED);
});

it("marks the schemas of every table of a deleted database", async () => {
  const call = await as(t.editor);
  const { databaseId, tableId } = await createTable("Gone");
  const { table } = await h.catalog.createTable(
    { databaseId, name: "B", description: "", fields: [] },
    call,
  );
  const ids = [tableId, table!.tableId];
  for (const id of ids) await h.cache.set(tableSchemaCacheKey(id), await cachedFrom(id), 60);
  await h.catalog.deleteDatabase({ databaseId }, call);
  for (const id of ids) expect(await h.cache.get(tableSchemaCacheKey(id))).toBe(DELETED);
});

describe("a field change racing a schema lookup", () => {
  it("never lets a lookup that read the old schema cache it after the change", async () => {
    const call = await as(t.editor);
    const { tableId } = await createTable("Racing");
    const key = tableSchemaCacheKey(tableId);
    const service = await as(SERVICE);
    const readerOf = (catalog: typeof h.catalog) => {
      const asked: bigint[] = [];
      const schemas = new TableSchemaCache(
        h.cache,
        (id) => {
          asked.push(id);
          return catalog.getTableSchema({ tableId: id }, service);
        },
        logger,
      );
      return { schemas, asked };
    };
    // A records or files replica asks for the schema, and its answer is delayed past a change.
    const slow = holdAnswers(h.catalog, "getTableSchema");
    const lookup = readerOf(slow.client).schemas.get(tableId, "slow");
    await slow.answered;
    await h.catalog.createField(
      { tableId, field: { name: "Age", type: FieldType.NUMBER, required: false, description: "" } },
      call,
    );
    slow.release();
    expect((await lookup)?.fields.map((f) => f.name)).toEqual(["Name"]);
    // The first lookup after the change asks catalog and caches the new schema, the next ones
    // read it from the entry.
    const fresh = readerOf(h.catalog);
    for (let i = 0; i < 3; i++) {
      expect((await fresh.schemas.get(tableId, "fresh"))?.fields.map((f) => f.name)).toEqual([
        "Name",
        "Age",
      ]);
    }
    expect(fresh.asked).toEqual([tableId]);
    expect(decodeCachedTableSchema(await h.cache.get(key))?.fields).toHaveLength(2);
  });
});
