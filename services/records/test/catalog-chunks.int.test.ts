import { type Orm, query } from "@rowbase/kit";
import { sessionIn } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { numberReserved, reserveAutonumbers } from "../src/db/autonumbers.js";
import {
  type ChoiceRename,
  clearTypeChangePending,
  deleteRecordsInChunks,
  lastRowId,
  markFieldDeleted,
  markTablesDeleted,
  markTypeChangePending,
  renameChoicesInChunks,
  renameChoicesOf,
  renamesRepeatable,
  sweepDeletedField,
} from "../src/db/schema-changes.js";
import { SCHEMA } from "../src/service.js";
import { openRecordsDatabase } from "./database.js";

// Catalog changes that rewrite a table's records a chunk per statement, without the table's
// lock: a deleted field's values dropped (`sweepDeletedField`, after `markFieldDeleted`), a
// new autonumber field's numbers given to the records that exist (`numberReserved`, after
// `reserveAutonumbers`), a select's renamed choices (`renameChoicesInChunks`, the rest by
// `renameChoicesOf`), and a deleted table's records (`deleteRecordsInChunks`, after
// `markTablesDeleted`). How the catalog consumer runs them is tested with the service in
// events.int.test.ts.

let orm: Orm;
let url: string;
let close: () => Promise<void>;

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

/** How many sessions of the test database wait for a lock. */
async function lockWaiters(): Promise<number> {
  const [row] = await query<{ n: number }>(
    orm.em.fork(),
    `select count(*)::int as n from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock'`,
  );
  return row!.n;
}

/**
 * A patch of record `rowId` under way while `change` runs: it holds the record (and read its
 * data), `change` comes to wait for it, and the patch writes `data` and commits. Returns what
 * `change` returned.
 */
async function withPatchUnderWay(
  rowId: string,
  data: object,
  change: () => Promise<number>,
): Promise<number> {
  const writer = await sessionIn(url, SCHEMA);
  try {
    await writer.query("begin");
    await writer.query("select data from record where row_id = $1 for update", [rowId]);
    const changing = change();
    await expect.poll(lockWaiters, { timeout: 10_000 }).toBe(1);
    await writer.query("update record set data = $2 where row_id = $1", [rowId, data]);
    await writer.query("commit");
    return await changing;
  } finally {
    await writer.end();
  }
}

beforeAll(async () => {
  ({ url, orm, close } = await openRecordsDatabase());
});

afterAll(() => close?.());

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
    // A patch of the seventh record under way: it read the data with the field's value, which
    // it writes back with its own change.
    const swept = await withPatchUnderWay(rows[6]!, { 1: "patched", 2: 6 }, () =>
      sweepDeletedField(orm.em.fork(), 20n, 2n, 3),
    );
    expect(swept).toBe(9);
    const after = await datas(20);
    expect(after[6]).toEqual({ 1: "patched" });
    expect(after.filter((data) => "2" in data)).toEqual([]);
  });
});

describe("numbering the records that exist when an autonumber field is added", () => {
  const counter = async (tableId: number) =>
    (
      await query<{ last_value: string }>(
        orm.em.fork(),
        "select last_value from autonumber_counter where table_id = $1 and field_id = '5'",
        [tableId],
      )
    )[0]?.last_value;

  it("numbers them in creation order, a chunk at a time, within what it reserved", async () => {
    const rows = await insert(
      30,
      Array.from({ length: 8 }, (_, i) => ({ 1: `n${i}` })),
    );
    const reservation = await orm.em.fork().transactional((em) => reserveAutonumbers(em, 30n, "5"));
    expect(reservation).toEqual({ after: 0, count: 8, lastRowId: rows[7] });
    expect(await counter(30)).toBe("8");
    // Meanwhile a record is deleted, and a create numbers itself from the counter.
    await query(orm.em.fork(), "delete from record where row_id = $1", [rows[2]]);
    await insert(30, [{ 1: "new", 5: 9 }]);
    expect(await numberReserved(orm.em.fork(), 30n, "5", reservation, 3)).toBe(7);
    expect(await datas(30)).toEqual([
      ...[0, 1, 3, 4, 5, 6, 7].map((i, n) => ({ 1: `n${i}`, 5: n + 1 })),
      { 1: "new", 5: 9 },
    ]);
    // Again (a redelivery): nothing left to number, nothing reserved.
    const again = await orm.em.fork().transactional((em) => reserveAutonumbers(em, 30n, "5"));
    expect(again.count).toBe(0);
    expect(await numberReserved(orm.em.fork(), 30n, "5", again, 3)).toBe(0);
    expect(await counter(30)).toBe("8");
  });

  it("numbers a record a write changed while the numbering waited for it, keeping the write", async () => {
    const rows = await insert(
      31,
      Array.from({ length: 5 }, (_, i) => ({ 1: `n${i}` })),
    );
    const reservation = await orm.em.fork().transactional((em) => reserveAutonumbers(em, 31n, "5"));
    const numbered = await withPatchUnderWay(rows[3]!, { 1: "patched" }, () =>
      numberReserved(orm.em.fork(), 31n, "5", reservation, 2),
    );
    expect(numbered).toBe(5);
    expect(await datas(31)).toEqual([
      { 1: "n0", 5: 1 },
      { 1: "n1", 5: 2 },
      { 1: "n2", 5: 3 },
      { 1: "patched", 5: 4 },
      { 1: "n4", 5: 5 },
    ]);
  });
});

describe("renaming a select's choices", () => {
  // Field 3 is a single select, field 4 a multi select.
  const rename: ChoiceRename[] = [
    ["A", "Alpha"],
    ["B", "Beta"],
  ];

  it("renames both kinds of select a chunk at a time, up to the last record it was given", async () => {
    const given = [
      { 3: "A", 4: ["A", "C", "B"] },
      { 3: "C", 4: ["C"] },
      { 3: "B", 4: [] },
      { 1: "A", 3: "C" },
      { 3: "A" },
      { 4: ["B"] },
      { 3: "a", 4: ["a"] },
    ];
    const rows = await insert(40, given);
    await insert(41, [{ 3: "A", 4: ["A"] }]);
    const upTo = await lastRowId(orm.em.fork(), 40n);
    expect(upTo).toBe(rows.at(-1));
    // Created after the chunks were given their end: left to the last transaction.
    await insert(40, [{ 3: "A", 4: ["B"] }]);
    const renamed = [
      { 3: "Alpha", 4: ["Alpha", "C", "Beta"] },
      { 3: "C", 4: ["C"] },
      { 3: "Beta", 4: [] },
      { 1: "A", 3: "C" },
      { 3: "Alpha" },
      { 4: ["Beta"] },
      { 3: "a", 4: ["a"] },
    ];
    // Three records hold a renamed choice in the single select (a full chunk, then one that is
    // not), two in the multi select (a full chunk, then one that finds none).
    expect(await renameChoicesInChunks(orm.em.fork(), 40n, "3", rename, upTo, 2)).toBe(3);
    expect(await renameChoicesInChunks(orm.em.fork(), 40n, "4", rename, upTo, 2)).toBe(2);
    expect(await datas(40)).toEqual([...renamed, { 3: "A", 4: ["B"] }]);
    expect(await datas(41)).toEqual([{ 3: "A", 4: ["A"] }]);
    // Again (a redelivery): nothing left to rename.
    expect(await renameChoicesInChunks(orm.em.fork(), 40n, "3", rename, upTo, 2)).toBe(0);

    // The last transaction: the records after the chunks' end, and those a write noted (the
    // first, written with an old name after its chunk).
    await query(orm.em.fork(), "update record set data = $2 where row_id = $1", [
      rows[0],
      { 3: "B", 4: ["Alpha", "B"] },
    ]);
    const noted = { writes: [{ rowId: rows[0]!, asChanged: false }], pendingUntil: undefined };
    expect(await renameChoicesOf(orm.em.fork(), 40n, "3", rename, upTo, noted)).toBe(2);
    expect(await renameChoicesOf(orm.em.fork(), 40n, "4", rename, upTo, noted)).toBe(2);
    expect(await datas(40)).toEqual([
      { 3: "Beta", 4: ["Alpha", "Beta"] },
      ...renamed.slice(1),
      { 3: "Alpha", 4: ["Beta"] },
    ]);
  });

  it("renames a record a write changed while its chunk waited for it, keeping the write", async () => {
    const rows = await insert(
      42,
      Array.from({ length: 5 }, (_, i) => ({ 1: `n${i}`, 3: "A" })),
    );
    const upTo = await lastRowId(orm.em.fork(), 42n);
    const renamed = await withPatchUnderWay(rows[3]!, { 1: "patched", 3: "B" }, () =>
      renameChoicesInChunks(orm.em.fork(), 42n, "3", rename, upTo, 2),
    );
    expect(renamed).toBe(5);
    expect(await datas(42)).toEqual([
      { 1: "n0", 3: "Alpha" },
      { 1: "n1", 3: "Alpha" },
      { 1: "n2", 3: "Alpha" },
      { 1: "patched", 3: "Beta" },
      { 1: "n4", 3: "Alpha" },
    ]);
  });

  it("renames no record written once the change was no longer pending (its event came late)", async () => {
    const swap: ChoiceRename[] = [
      ["A", "B"],
      ["B", "A"],
    ];
    const target = { tableId: 45n, fieldId: 3n, toType: "single_select", toOptions: {} };
    await insert(45, [{ 3: "A" }]);
    // A mark that stops holding writes at once, as one whose event came after PENDING_SECONDS.
    await orm.em
      .fork()
      .transactional((em) => markTypeChangePending(em, target, 0, "converts", "late"));
    // Written after it: not noted, with the new choices.
    await insert(45, [{ 3: "A" }]);
    // Another field's check of the table meanwhile keeps the expired mark.
    const other = { ...target, fieldId: 4n, toType: "number" };
    await orm.em.fork().transactional((em) => markTypeChangePending(em, other, 120));
    const cleared = await orm.em
      .fork()
      .transactional((em) => clearTypeChangePending(em, target, "late"));
    expect(cleared.writes).toEqual([]);
    expect(cleared.pendingUntil).toMatch(/^[0-9]+$/);
    expect(await renameChoicesOf(orm.em.fork(), 45n, "3", swap, "0", cleared)).toBe(1);
    expect(await datas(45)).toEqual([{ 3: "B" }, { 3: "A" }]);
  });

  it("renames swaps and chains all at once, which renaming again would undo", async () => {
    expect(renamesRepeatable(rename)).toBe(true);
    expect(
      renamesRepeatable([
        ["A", "B"],
        ["B", "A"],
      ]),
    ).toBe(false);
    expect(
      renamesRepeatable([
        ["B", "C"],
        ["A", "B"],
      ]),
    ).toBe(false);
    const rows = await insert(43, [
      { 3: "A", 4: ["A", "B", "C"] },
      { 3: "B" },
      { 3: "C" },
      { 3: "C", 4: ["A"] },
    ]);
    const chain: ChoiceRename[] = [
      ["B", "C"],
      ["A", "B"],
      ["C", "A"],
    ];
    // The last record was last written with the new names (a write noted it so): it is left
    // alone; one noted as written with the old names is renamed as any other.
    const noted = {
      writes: [
        { rowId: rows[3]!, asChanged: true },
        { rowId: rows[1]!, asChanged: false },
      ],
      pendingUntil: undefined,
    };
    expect(await renameChoicesOf(orm.em.fork(), 43n, "3", chain, "0", noted)).toBe(3);
    expect(await renameChoicesOf(orm.em.fork(), 43n, "4", chain, "0", noted)).toBe(1);
    expect(await datas(43)).toEqual([
      { 3: "B", 4: ["B", "C", "A"] },
      { 3: "C" },
      { 3: "A" },
      { 3: "C", 4: ["A"] },
    ]);
  });
});

describe("a deleted table's records", () => {
  it("go a chunk at a time, their count given back to the organization's usage", async () => {
    const usage = async () =>
      (
        await query<{ records: string }>(orm.em.fork(), "select record_usage(1)::text as records")
      )[0]?.records;
    await insert(
      50,
      Array.from({ length: 7 }, (_, i) => ({ 1: `n${i}` })),
    );
    await insert(51, [{ 1: "kept" }, { 1: "kept too" }]);
    await query(
      orm.em.fork(),
      `insert into organization_usage (organization_id, records) values (1, 9)
       on conflict (organization_id) do update set records = 9`,
    );
    await orm.em.fork().transactional((em) => markTablesDeleted(em, [50n]));
    // Two full chunks, then one that is not.
    expect(await deleteRecordsInChunks(orm.em.fork(), 50n, 3)).toBe(7);
    expect(await datas(50)).toEqual([]);
    expect(await datas(51)).toEqual([{ 1: "kept" }, { 1: "kept too" }]);
    expect(await usage()).toBe("2");
    const marks = await query(orm.em.fork(), "select table_id from deleted_table");
    expect(marks).toEqual([{ table_id: "50" }]);
    // Again (a redelivery): nothing left.
    expect(await deleteRecordsInChunks(orm.em.fork(), 50n, 3)).toBe(0);
    expect(await usage()).toBe("2");
  });
});
