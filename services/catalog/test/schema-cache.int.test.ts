import { tableSchemaCacheKey } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { afterAll, beforeAll, expect, it } from "vitest";
import { as, type Harness, startHarness, type Team, team } from "./harness.js";

// Records and files cache table schemas under tableSchemaCacheKey; catalog deletes the entry
// with every commit that changes the table or its fields.

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

it("evicts a table's cached schema after each change of the table or its fields", async () => {
  const call = await as(t.editor);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name: "Cached", description: "" },
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
  const key = tableSchemaCacheKey(table!.tableId);
  const cached = async () => h.cache.get(key);
  const changes: Array<() => Promise<unknown>> = [
    () => h.catalog.updateTable({ tableId: table!.tableId, name: "Renamed" }, call),
    () =>
      h.catalog.createField(
        {
          tableId: table!.tableId,
          field: { name: "Age", type: FieldType.NUMBER, required: false, description: "" },
        },
        call,
      ),
    () => h.catalog.updateField({ fieldId: fields[0]!.fieldId, name: "Title" }, call),
    () => h.catalog.deleteField({ fieldId: fields[0]!.fieldId }, call),
    () => h.catalog.deleteTable({ tableId: table!.tableId }, call),
  ];
  for (const change of changes) {
    await h.cache.set(key, "{}", 60);
    await change();
    expect(await cached()).toBeNull();
  }
  // A change that fails leaves the entry alone.
  await h.cache.set(key, "{}", 60);
  await h.catalog.updateTable({ tableId: table!.tableId, name: "x" }, call).catch(() => undefined);
  expect(await cached()).toBe("{}");
});

it("evicts the schemas of every table of a deleted database", async () => {
  const call = await as(t.editor);
  const { database } = await h.catalog.createDatabase(
    { organizationId: t.organizationId, name: "Gone", description: "" },
    call,
  );
  const ids: bigint[] = [];
  for (const name of ["A", "B"]) {
    const { table } = await h.catalog.createTable(
      { databaseId: database!.databaseId, name, description: "", fields: [] },
      call,
    );
    ids.push(table!.tableId);
  }
  for (const id of ids) await h.cache.set(tableSchemaCacheKey(id), "{}", 60);
  await h.catalog.deleteDatabase({ databaseId: database!.databaseId }, call);
  for (const id of ids) expect(await h.cache.get(tableSchemaCacheKey(id))).toBeNull();
});
