import { type Orm, query } from "@rowbase/kit";
import { createTestDatabase, sessionIn, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { markFieldDeleted, sweepDeletedField } from "../src/db/record-store.js";
import { createRecordsOrm, migrateRecords, SCHEMA } from "../src/service.js";

// `sweepDeletedField`: a deleted field's values dropped a chunk per statement, without the
// table's lock, after `markFieldDeleted`. How the catalog consumer runs them is tested with the
// service in events.int.test.ts.

let orm: Orm;
let url: string;
let drop: () => Promise<void>;

/** Records of `tableId` with `data`, in order; returns their row ids. */
async function insert(tableId: number, datas: object[]): Promise<string[]> {
  const rows = await query<{ row_id: string }>(
    orm.em.fork(),
    `insert into record (table_id, organization_id, data, created_by, updated_by)
     select $1, 1, d, 'system', 'system' from jsonb_array_elements($2::jsonb) with ordinality as e(d, n)
     order by n returning row_id`,
    [tableId, JSON.stringify(datas)],
  );
  return rows.map((row) => row.row_id);
}

async function datas(tableId: number): Promise<object[]> {
  const rows = await query<{ data: object }>(
    orm.em.fork(),
    "select data from record where table_id = $1 order by row_id",
    [tableId],
  );
  return rows.map((row) => row.data);
}

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
  await migrateRecords(url);
  orm = await createRecordsOrm(url);
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

describe("a deleted field's sweep", () => {
  it("drops the field's values of every record of its table, a chunk at a time", async () => {
    const given = Array.from({ length: 11 }, (_, i) =>
      i % 4 === 3 ? { 1: `name ${i}` } : { 1: `name ${i}`, 2: i },
    );
    await insert(10, given);
    await insert(11, [{ 2: "another table's field 2" }]);
    await orm.em.fork().transactional((em) => markFieldDeleted(em, 10n, 2n));
    // Nine of them hold a value: three full chunks, then one that finds none.
    expect(await sweepDeletedField(orm.em.fork(), 10n, 2n, 3)).toBe(9);
    expect(await datas(10)).toEqual(given.map((data) => ({ 1: data[1] })));
    expect(await datas(11)).toEqual([{ 2: "another table's field 2" }]);
    const marks = await query(
      orm.em.fork(),
      "select table_id, field_id from deleted_field where table_id = 10",
    );
    expect(marks).toEqual([{ table_id: "10", field_id: "2" }]);
    // Again (a redelivery): nothing left to drop.
    expect(await sweepDeletedField(orm.em.fork(), 10n, 2n, 3)).toBe(0);
  });

  it("drops the value a write carried into a record while the sweep waited for it", async () => {
    const rows = await insert(
      20,
      Array.from({ length: 9 }, (_, i) => ({ 1: `n${i}`, 2: i })),
    );
    const writer = await sessionIn(url, SCHEMA);
    try {
      // A patch of the seventh record under way: it holds the record and read its data with
      // the field's value, which it writes back with its own change.
      await writer.query("begin");
      await writer.query("select data from record where row_id = $1 for update", [rows[6]]);
      const sweep = sweepDeletedField(orm.em.fork(), 20n, 2n, 3);
      await expect
        .poll(
          async () =>
            (
              await query<{ n: number }>(
                orm.em.fork(),
                `select count(*)::int as n from pg_stat_activity
                 where datname = current_database() and wait_event_type = 'Lock'`,
              )
            )[0]!.n,
          { timeout: 10_000 },
        )
        .toBe(1);
      await writer.query(`update record set data = '{"1": "patched", "2": 6}' where row_id = $1`, [
        rows[6],
      ]);
      await writer.query("commit");
      expect(await sweep).toBe(9);
    } finally {
      await writer.end();
    }
    const after = await datas(20);
    expect(after[6]).toEqual({ 1: "patched" });
    expect(after.filter((data) => "2" in data)).toEqual([]);
  });
});
