import { type Orm, query } from "@rowbase/kit";
import { createTestDatabase, migrateBefore, sessionIn, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteTablesRecords } from "../src/db/schema-changes.js";
import { migrations } from "../src/migrations/initial-schema.js";
import { createRecordsOrm, migrateRecords, SCHEMA } from "../src/service.js";
import { appliedFrom } from "./sql-files.js";

// `record_count` (migration RecordCounts): the records a table holds, kept by triggers on
// `record` in the writing transaction, against what count(*) says, with writers racing.
// Tables whose count is 0 are left out of both sides.

let orm: Orm;
let url: string;
let drop: () => Promise<void>;

const INSERT = `insert into record (table_id, organization_id, data, created_by, updated_by)
  select $1, 1, '{}', 'system', 'system' from generate_series(1, $2)`;

async function counted(): Promise<Record<string, number>> {
  const rows = await query<{ table_id: string; n: string }>(
    orm.em.fork(),
    "select table_id, sum(delta) as n from record_count group by table_id having sum(delta) <> 0 order by table_id",
  );
  return Object.fromEntries(rows.map((row) => [row.table_id, Number(row.n)]));
}

async function actual(): Promise<Record<string, number>> {
  const rows = await query<{ table_id: string; n: string }>(
    orm.em.fork(),
    "select table_id, count(*) as n from record group by table_id order by table_id",
  );
  return Object.fromEntries(rows.map((row) => [row.table_id, Number(row.n)]));
}

async function rowsOf(tableId: number): Promise<number> {
  const [row] = await query<{ n: string }>(
    orm.em.fork(),
    "select count(*) as n from record_count where table_id = $1",
    [tableId],
  );
  return Number(row!.n);
}

beforeAll(async () => {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  url = db.url;
  drop = db.drop;
  await migrateBefore(
    { url, schema: SCHEMA, entities: [], migrations },
    "RecordCounts",
    async (old) => {
      const em = old.em.fork();
      await query(em, INSERT, [1, 3]);
      await query(em, INSERT, [2, 2]);
    },
  );
  expect(await migrateRecords(url)).toEqual(appliedFrom("RecordCounts"));
  orm = await createRecordsOrm(url);
});

afterAll(async () => {
  await orm?.close();
  await drop?.();
});

describe("record_count", () => {
  it("starts from the records there were before the migration", async () => {
    expect(await counted()).toEqual({ 1: 3, 2: 2 });
  });

  it("follows inserts and deletes of one or several tables", async () => {
    const em = orm.em.fork();
    await query(em, INSERT, [3, 1000]);
    await query(em, `delete from record where table_id = 3 and row_id % 3 = 0`);
    await query(em, INSERT, [1, 1]);
    // One statement over two tables, and one that deletes nothing.
    await query(
      em,
      `delete from record where row_id in (
        (select min(row_id) from record where table_id = 1),
        (select min(row_id) from record where table_id = 3))`,
    );
    await query(em, "delete from record where table_id = 999");
    await query(em, "delete from record where table_id = 2");
    expect(await counted()).toEqual(await actual());
    expect(Object.keys(await counted())).toEqual(["1", "3"]);
  });

  it("goes with its table's records when the table is deleted", async () => {
    await query(orm.em.fork(), INSERT, [5, 3]);
    expect(await rowsOf(5)).toBeGreaterThan(0);
    await orm.em.fork().transactional((em) => deleteTablesRecords(em, [5n]));
    expect(await rowsOf(5)).toBe(0);
    expect(await counted()).toEqual(await actual());
  });

  it("leaves nothing of a rolled-back write", async () => {
    const before = await counted();
    await expect(
      orm.em.fork().transactional(async (em) => {
        await query(em, INSERT, [1, 5]);
        await query(em, "delete from record where table_id = 3");
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    expect(await counted()).toEqual(before);
  });

  it("never waits on a count row another transaction holds", async () => {
    const [holder, writer] = [await sessionIn(url, SCHEMA), await sessionIn(url, SCHEMA)];
    try {
      await writer.query(INSERT, [6, 1]);
      const slot = (await writer.query<{ slot: number }>("select pg_backend_pid() % 1024 as slot"))
        .rows[0]!.slot;
      await holder.query("begin");
      const held = await holder.query(
        "select id from record_count where table_id = 6 and slot = $1 for update",
        [slot],
      );
      expect(held.rowCount).toBe(1);
      // Waiting would end in this error (the holder never lets go while the writer runs).
      await writer.query("set lock_timeout = '2s'");
      await writer.query(INSERT, [6, 2]);
      await writer.query(`delete from record where row_id = (
        select min(row_id) from record where table_id = 6)`);
      await holder.query("commit");
      expect((await counted())[6]).toBe(2);
      expect(await counted()).toEqual(await actual());
    } finally {
      await holder.end();
      await writer.end();
    }
  });

  it("stays exact with writers racing on one table", async () => {
    const writers = await Promise.all(Array.from({ length: 8 }, () => sessionIn(url, SCHEMA)));
    try {
      await Promise.all(
        writers.map(async (client, index) => {
          for (let round = 0; round < 25; round++) {
            await client.query("begin");
            await client.query(INSERT, [4, 1 + ((index + round) % 4)]);
            if (round % 3 === 0) {
              await client.query(
                `delete from record where row_id = (
                   select min(row_id) from record where table_id = 4 and created_by = 'system'
                 )`,
              );
            }
            // Some transactions give everything up.
            await client.query(round % 5 === 4 ? "rollback" : "commit");
          }
        }),
      );
    } finally {
      await Promise.all(writers.map((client) => client.end()));
    }
    expect(await counted()).toEqual(await actual());
    // A row per writer at most, whatever the interleaving: a writer finding its connection's
    // slot held takes the next free row of that slot, or adds one.
    expect(await rowsOf(4)).toBeGreaterThan(0);
    expect(await rowsOf(4)).toBeLessThanOrEqual(writers.length);
  });
});
