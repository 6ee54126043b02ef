import { createTestDatabase, migrateBefore, sessionIn, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, expect, it } from "vitest";
import { migrations } from "../src/migrations/initial-schema.js";
import { migrateRecords, SCHEMA } from "../src/service.js";
import { appliedFrom } from "./sql-files.js";

// Migration TimestampIndexes on a database whose operator built one of its indexes beforehand,
// concurrently (as its documentation offers for a large `record`): the migration keeps that
// one and builds the other.

let url: string;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
});

afterAll(async () => {
  await drop?.();
});

it("keeps an index built beforehand under its name and builds the other", async () => {
  await migrateBefore({ url, schema: SCHEMA, entities: [], migrations }, "TimestampIndexes", () =>
    Promise.resolve(),
  );
  const session = await sessionIn(url, SCHEMA);
  try {
    await session.query(
      `insert into record (table_id, organization_id, data, created_by, updated_by)
       select 1, 1, '{}', 'system', 'system' from generate_series(1, 100)`,
    );
    await session.query(
      "create index concurrently record_table_updated on record (table_id, updated_at, row_id)",
    );
    const before = await session.query<{ oid: string }>(
      "select 'record_table_updated'::regclass::oid::text as oid",
    );
    expect(await migrateRecords(url)).toEqual(appliedFrom("TimestampIndexes"));
    const { rows } = await session.query<{ indexname: string; indexdef: string }>(
      `select indexname, indexdef from pg_indexes
       where schemaname = $1 and indexname like 'record_table_%' order by indexname`,
      [SCHEMA],
    );
    expect(
      rows.map((row) => [row.indexname, row.indexdef.replace(/ ON \S+/, " ON record")]),
    ).toEqual([
      [
        "record_table_created",
        "CREATE INDEX record_table_created ON record USING btree (table_id, created_at, row_id)",
      ],
      [
        "record_table_row",
        "CREATE INDEX record_table_row ON record USING btree (table_id, row_id)",
      ],
      [
        "record_table_updated",
        "CREATE INDEX record_table_updated ON record USING btree (table_id, updated_at, row_id)",
      ],
    ]);
    const after = await session.query<{ oid: string }>(
      "select 'record_table_updated'::regclass::oid::text as oid",
    );
    expect(after.rows[0]!.oid).toBe(before.rows[0]!.oid);
  } finally {
    await session.end();
  }
});
