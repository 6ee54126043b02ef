import { createOrm, type Orm } from "@rowbase/kit";
import { createTestDatabase, migrateBefore, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fieldNameUsed, tableNameUsed } from "../src/db/constraints.js";
import { entities } from "../src/db/entities.js";
import { migrations } from "../src/migrations/initial-schema.js";
import { migrateCatalog, SCHEMA } from "../src/service.js";

// The migration NameKeys against names written under the old indexes on lower(name), which
// C.UTF-8 let through although foldName makes them one name ("İ" and "i̇", and "é" precomposed
// or not).

let orm: Orm;
let url: string;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
  const applied = await migrateBefore(
    { url, schema: SCHEMA, entities, migrations },
    "NameKeys",
    (old) =>
      old.em.fork().execute(`
      insert into databases (id, organization_id, name) values (1, 1, 'Base');
      insert into tables (id, database_id, name) values
        (1, 1, 'İstanbul'), (2, 1, 'i̇stanbul'), (3, 1, 'Other');
      insert into fields (id, table_id, name, type, position) values
        (1, 1, 'Café', 'text', 0), (2, 1, 'İ', 'text', 1), (3, 1, 'cafe${"\u0301"}', 'text', 2),
        (4, 1, 'i̇', 'text', 3), (5, 3, 'café', 'text', 0);
    `),
  );
  expect(applied).toEqual(["InitialSchema", "ProcessedEvents"]);
  expect(await migrateCatalog(url)).toEqual([
    "NameKeys",
    "SchemaVersion",
    "Forms",
    "RelationalFields",
  ]);
  orm = await createOrm({ url, schema: SCHEMA, entities, migrations });
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

it("keys every name by foldName, leaving the later of two equal names without a key", async () => {
  const em = orm.em.fork();
  expect(await em.execute("select id::int, name_key from tables order by id")).toEqual([
    { id: 1, name_key: "i̇stanbul" },
    { id: 2, name_key: null },
    { id: 3, name_key: "other" },
  ]);
  expect(await em.execute("select id::int, name_key from fields order by id")).toEqual([
    { id: 1, name_key: "café" },
    { id: 2, name_key: "i̇" },
    { id: 3, name_key: null },
    { id: 4, name_key: null },
    { id: 5, name_key: "café" },
  ]);
});

it("counts a name left without a key as taken, even when the keyed one is renamed", async () => {
  const em = orm.em.fork();
  expect(await fieldNameUsed(em, 1n, "CAFÉ")).toBe(true);
  // Renaming field 1 away: field 3 still holds the name.
  expect(await fieldNameUsed(em, 1n, "CAFE\u0301", 1n)).toBe(true);
  expect(await fieldNameUsed(em, 1n, "I\u0307", 2n)).toBe(true);
  expect(await fieldNameUsed(em, 1n, "New")).toBe(false);
  expect(await tableNameUsed(em, 1n, "İSTANBUL", 1n)).toBe(true);
  // "istanbul" is another name under foldName, though PostgreSQL's lower() made it one.
  expect(await tableNameUsed(em, 1n, "ISTANBUL")).toBe(false);
  expect(await tableNameUsed(em, 1n, "Ankara")).toBe(false);
});

it("keeps the key unique: a name equal under foldName cannot be inserted beside it", async () => {
  await expect(
    orm.em
      .fork()
      .execute(
        "insert into fields (id, table_id, name, name_key, type, position) values (9, 3, 'CAFÉ', 'café', 'text', 1)",
      ),
  ).rejects.toMatchObject({ constraint: "fields_table_name_key" });
});
