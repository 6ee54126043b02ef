import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import {
  createLogger,
  errorInfoOf,
  hasSqlState,
  query,
  type SchemaField,
  type TableSchema,
} from "@rowbase/kit";
import { createTestDatabase, migrateBefore, testInfra } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreateTarget, createRecords, lockForCreate } from "../src/db/create-gate.js";
import { readRecordVersion } from "../src/db/reads.js";
import { RECORD_ROWS, type RecordRow, type TableRows, toStored } from "../src/db/rows.js";
import {
  deleteOrganizationRecords,
  deleteTablesRecords,
  tablesWithRecords,
} from "../src/db/schema-changes.js";
import { moveTable } from "../src/db/user-tables/move.js";
import { userTable } from "../src/db/user-tables/names.js";
import { StoredTables } from "../src/db/user-tables/registry.js";
import { createUserTable } from "../src/db/user-tables/schema-changes.js";
import { userTableRows } from "../src/db/user-tables/table-rows.js";
import {
  allocateRowIds,
  deleteRecords,
  writeRecordIfUnchanged,
  writeRecords,
} from "../src/db/writes.js";
import { migrations } from "../src/migrations/initial-schema.js";
import { createRecordsOrm, migrateRecords, SCHEMA } from "../src/service.js";
import { TableSchemas } from "../src/table-schema.js";
import { catalogSchemaOf, catalogTableIds, Upgrade, type UpgradeRound } from "../src/upgrade.js";
import { openRecordsDatabase } from "./database.js";
import {
  ALL_TYPES,
  as,
  createTable,
  eventually,
  type Harness,
  type Replica,
  reasonOf,
  SECRET,
  startHarness,
  type Team,
  team,
} from "./harness.js";
import { appliedFrom, SQL_FILES } from "./sql-files.js";

// The upgrade in place on a database that the jsonb storage's code made and filled: every
// table's records, written through the jsonb statements (`RECORD_ROWS`), move into tables of
// their own and read back through `userTableRows` as they were, with their counts; writes racing
// a move are neither lost nor written twice; tables without records are registered from
// catalog's list, and then `record` is dropped, for good.

let url: string;
let close: () => Promise<void>;
let orm: Awaited<ReturnType<typeof createRecordsOrm>>;
const em = () => orm.em.fork() as EntityManager;
const logger = createLogger("records", "silent");

beforeAll(async () => {
  ({ url, orm, close } = await openRecordsDatabase());
});

afterAll(() => close?.());

const CHOICES = {
  choices: [
    { id: "ch_a", name: "Alpha" },
    { id: "ch_b", name: "Beta, with a comma" },
    { id: "ch_c", name: 'say "hi"' },
  ],
};

function field(id: number, type: SchemaField["type"], options: JsonObject = {}): SchemaField {
  return { id: String(id), name: `F${id}`, type, options, required: false, description: "" };
}

/** Every field type; the file, created_at and updated_at fields hold nothing in `data`. */
function fieldsOf(base: number): SchemaField[] {
  return [
    field(base + 1, "text"),
    field(base + 2, "long_text"),
    field(base + 3, "email"),
    field(base + 4, "url"),
    field(base + 5, "phone"),
    field(base + 6, "number", { decimals: 4 }),
    field(base + 7, "boolean"),
    field(base + 8, "date"),
    field(base + 9, "datetime"),
    field(base + 10, "single_select", CHOICES),
    field(base + 11, "multi_select", CHOICES),
    field(base + 12, "json"),
    field(base + 13, "autonumber"),
    field(base + 14, "file"),
    field(base + 15, "created_at"),
    field(base + 16, "updated_at"),
  ];
}

const NAMES = CHOICES.choices.map((c) => c.name);

/** A record's data as the write path stores it: empty values left out. */
function dataOf(fields: readonly SchemaField[], n: number): JsonObject {
  const pick = <T>(values: readonly T[]) => values[n % values.length] as T;
  const f = (i: number) => fields[i]!.id;
  const data: Record<string, JsonValue> = {
    [f(0)]: pick(["Ada", "", "Zoë ΟΔΥΣΣΕΥΣ", "100% cotton_wool", "a\\b", `text ${n}`]),
    [f(1)]: pick(["a\nlong\ntext", "**bold**", "x".repeat(300)]),
    [f(2)]: pick(["ada@example.com", "bob@example.org"]),
    [f(3)]: "https://example.com/a?b=c",
    [f(4)]: "+44 20 7946 0958",
    [f(5)]: pick([0, -0.5, 12.3456, 123456789012.25, n, -99999.9999, 0.0001]),
    [f(6)]: n % 2 === 0,
    [f(7)]:
      `2026-${String((n % 12) + 1).padStart(2, "0")}-${String((n % 28) + 1).padStart(2, "0")}`,
    [f(8)]:
      `2026-03-${String((n % 28) + 1).padStart(2, "0")}T${String(n % 24).padStart(2, "0")}:07:09.${String(n % 1000).padStart(3, "0")}Z`,
    [f(9)]: pick(NAMES),
    [f(10)]: pick([[], [NAMES[0]!], [NAMES[2]!, NAMES[0]!], NAMES]),
    [f(11)]: pick<JsonValue>([
      { k: 1, nested: { a: [1, "x", null] } },
      [],
      "",
      [1, 2.5],
      "x",
      7,
      true,
    ]),
    [f(12)]: n,
  };
  // Some records leave fields empty, as a client may.
  if (n % 5 === 0) {
    delete data[f(0)];
    delete data[f(5)];
    delete data[f(9)];
    delete data[f(10)];
    delete data[f(11)];
  }
  return data;
}

const ACTOR = "user:1";

/** An outbox event, as every update of a record writes one. */
const event = () => [
  { subject: "test.event", payload: new Uint8Array([1]), eventId: crypto.randomUUID() },
];

function targetOf(schema: TableSchema, rows?: TableRows): CreateTarget {
  return {
    tableId: schema.tableId,
    organizationId: schema.organizationId,
    limit: 1_000_000n,
    autonumberFields: null,
    fields: [],
    pendingChecked: [],
    actor: ACTOR,
    ...(rows ? { rows } : {}),
  };
}

/** Creates records through the jsonb storage's create, as the routes do today. */
async function createJsonb(schema: TableSchema, datas: readonly JsonObject[]): Promise<bigint[]> {
  const ids = await allocateRowIds(em(), datas.length);
  const created = await createRecords(
    em(),
    targetOf(schema),
    datas.map((data, i) => ({ rowId: ids[i]!, data })),
    [],
  );
  expect(created.outcome).toBe("ok");
  return ids;
}

/** Every record of a table in row id order, through a storage's select list. */
async function readAll(rows: TableRows, tableId: bigint) {
  const read = await query<RecordRow & Record<string, unknown>>(
    em(),
    `select ${rows.values} from ${rows.relation} r where ${rows.ofTable("$1")} order by r.row_id`,
    [tableId],
  );
  return read
    .map((row) => toStored({ ...row, data: rows.recordOf(row).data }))
    .map((record) => ({
      ...record,
      // The user table names every field with a column, empty ones as null; `data` leaves them out.
      data: Object.fromEntries(Object.entries(record.data).filter(([, value]) => value !== null)),
    }));
}

async function keptCount(tableId: bigint): Promise<string> {
  const [row] = await query<{ n: string }>(
    em(),
    "select coalesce(sum(delta), 0)::text as n from record_count where table_id = $1",
    [tableId],
  );
  return row!.n;
}

async function recordRows(tableId: bigint): Promise<number> {
  const [row] = await query<{ n: number }>(
    em(),
    "select count(*)::int as n from record where table_id = $1",
    [tableId],
  );
  return row!.n;
}

async function registered(): Promise<string[]> {
  const rows = await query<{ table_id: string; organization_id: string }>(
    em(),
    "select table_id::text, organization_id::text from user_table order by table_id",
  );
  return rows.map((row) => `${row.organization_id}/${row.table_id}`);
}

/** Runs rounds until one finds nothing left; returns the rounds but that last. */
async function upgradeAll(upgrade: Upgrade): Promise<UpgradeRound[]> {
  const rounds: UpgradeRound[] = [];
  for (let i = 0; i < 50; i++) {
    const round = await upgrade.runOnce();
    if (round.kind === "idle") return rounds;
    rounds.push(round);
  }
  throw new Error(`no end of rounds: ${JSON.stringify(rounds.slice(-3), String)}`);
}

/** Runs rounds, past the idle ones, until the upgrade is finished; returns them but the idle. */
async function upgradeToEnd(upgrade: Upgrade): Promise<UpgradeRound[]> {
  const rounds: UpgradeRound[] = [];
  for (let i = 0; i < 50; i++) {
    const round = await upgrade.runOnce();
    if (round.kind !== "idle") rounds.push(round);
    if (round.kind === "dropped" || round.kind === "done") return rounds;
  }
  throw new Error(`no end of rounds: ${JSON.stringify(rounds.slice(-3), String)}`);
}

async function recordExists(): Promise<boolean> {
  const [row] = await query<{ kept: boolean }>(
    em(),
    "select to_regclass('record') is not null as kept",
  );
  return row!.kept;
}

/**
 * Polls until PostgreSQL shows `n` lock waits of the kind in this database (other tests share
 * the server): the racing statements are queued.
 */
async function waitingOn(locktype: "advisory" | "transactionid", n: number): Promise<void> {
  for (;;) {
    const [row] = await query<{ n: number }>(
      em(),
      `select count(*)::int as n from pg_locks
       where locktype = $1 and not granted and pid in (
         select pid from pg_stat_activity where datname = current_database())`,
      [locktype],
    );
    if (row!.n >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("the upgrade of a filled jsonb database", () => {
  const schemas = new Map<bigint, TableSchema>();
  const schema = (organizationId: bigint, tableId: bigint, base: number): TableSchema => {
    const made = {
      tableId,
      databaseId: 1n,
      organizationId,
      name: `T${tableId}`,
      fields: fieldsOf(base),
    };
    schemas.set(tableId, made);
    return made;
  };
  // Two organizations, several tables, one of them empty of records, one catalog says is gone.
  const a1 = schema(101n, 1001n, 100);
  const a2 = schema(101n, 1002n, 200);
  const b1 = schema(202n, 2001n, 300);
  const b2 = schema(202n, 2002n, 400);
  const gone = { ...schema(202n, 2003n, 500) };
  schemas.delete(gone.tableId);
  const tables = [a1, a2, b1, b2];
  const before = new Map<bigint, Awaited<ReturnType<typeof readAll>>>();
  const counts = new Map<bigint, string>();
  // Catalog's tables, as the upgrade pages through them: unavailable until the last tests, so
  // that the rounds before stop where `record` holds nothing (they would go on to drop it).
  let catalogUp = false;
  const tableIdsAfter = async (after: bigint, limit: number) => {
    if (!catalogUp) throw new Error("catalog unavailable");
    return [...schemas.keys()]
      .filter((id) => id > after)
      .sort((a, b) => (a < b ? -1 : 1))
      .slice(0, limit);
  };
  const upgradeOf = () =>
    new Upgrade({
      em: orm.em,
      schemaOf: async (tableId) => schemas.get(tableId),
      tableIdsAfter,
      logger,
    });

  beforeAll(async () => {
    const sizes = new Map([
      [a1.tableId, 1200],
      [a2.tableId, 7],
      [b1.tableId, 40],
      [b2.tableId, 0],
      [gone.tableId, 25],
    ]);
    for (const table of [...tables, gone]) {
      const datas = Array.from({ length: sizes.get(table.tableId)! }, (_, i) =>
        dataOf(table.fields, i + 1),
      );
      // In batches of up to 500, as clients create them, at different times.
      for (let i = 0; i < datas.length; i += 500) await createJsonb(table, datas.slice(i, i + 500));
    }
    // A few records updated later, so that updated_at differs from created_at; one holds a
    // choice name no choice has (written before the choice's removal was applied).
    const [first] = await readAll(RECORD_ROWS, b1.tableId);
    const select = b1.fields[9]!.id;
    await writeRecords(em(), "user:2", [
      { rowId: first!.rowId, data: { ...first!.data, [select]: "Removed choice" } },
    ]);
    for (const table of tables) {
      before.set(table.tableId, await readAll(RECORD_ROWS, table.tableId));
      counts.set(table.tableId, await keptCount(table.tableId));
    }
    expect(counts.get(a1.tableId)).toBe("1200");
  });

  it("moves every table's records into its own table, as they were", async () => {
    const usage = await query(
      em(),
      `select organization_id, record_usage(organization_id)::text as records
       from organization_usage order by organization_id`,
    );
    const rounds = await upgradeAll(upgradeOf());
    expect(rounds.map((round) => [round.kind, "tableId" in round ? round.tableId : 0n])).toEqual([
      ["moved", 1001n],
      ["moved", 1002n],
      ["moved", 2001n],
      ["gone", 2003n],
    ]);
    expect(rounds[0]).toMatchObject({ records: 1200 });
    for (const table of tables.filter((t) => t !== b2)) {
      const rows = userTableRows(table.organizationId, table.tableId, table.fields);
      const after = await readAll(rows, table.tableId);
      const expected = before.get(table.tableId)!.map((record) => ({
        ...record,
        data: Object.fromEntries(
          Object.entries(record.data).filter(([, value]) => value !== "Removed choice"),
        ),
      }));
      expect(after).toEqual(expected);
      expect(await keptCount(table.tableId)).toBe(counts.get(table.tableId));
      expect(await recordRows(table.tableId)).toBe(0);
    }
    // The table without records has no rows to move: the pass over `record` does not find it
    // (the pass over catalog's tables does, below).
    expect(before.get(b2.tableId)).toEqual([]);
    expect(await registered()).toEqual(["101/1001", "101/1002", "202/2001"]);
    const [stamps] = await query<{ versions: string[]; actors: string[] }>(
      em(),
      `select array_agg(distinct version::text) as versions,
         array_agg(distinct created_by || '/' || updated_by) as actors
       from ${userTable(b1.organizationId, b1.tableId)}`,
    );
    expect(stamps).toEqual({ versions: ["1"], actors: ["user:1/user:1", "user:1/user:2"] });
    // The gone table's records are deleted and given back; the others' usage is unchanged.
    expect(await recordRows(gone.tableId)).toBe(0);
    expect(await keptCount(gone.tableId)).toBe("0");
    const usageAfter = await query(
      em(),
      `select organization_id, record_usage(organization_id)::text as records
       from organization_usage order by organization_id`,
    );
    expect(usageAfter).toEqual(
      usage.map((row) =>
        row.organization_id === "202" ? { ...row, records: String(Number(row.records) - 25) } : row,
      ),
    );
    expect(await query(em(), "select count(*)::int as n from record")).toEqual([{ n: 0 }]);
  });

  it("changes nothing when run again, nor when a table is moved twice", async () => {
    const snapshot = async () =>
      Promise.all(
        tables
          .filter((t) => t !== b2)
          .map((t) => readAll(userTableRows(t.organizationId, t.tableId, t.fields), t.tableId)),
      );
    const was = await snapshot();
    // With no row left in `record`, the round goes on to catalog's tables: unreachable here, the
    // round fails, and changes nothing.
    await expect(upgradeOf().runOnce()).rejects.toThrow("catalog unavailable");
    expect(await moveTable(em(), a1)).toEqual({ outcome: "registered" });
    expect(await snapshot()).toEqual(was);
    expect(await registered()).toEqual(["101/1001", "101/1002", "202/2001"]);
  });

  it("moves a table once when two replicas move it at the same time", async () => {
    const table = schema(101n, 1004n, 600);
    await createJsonb(
      table,
      Array.from({ length: 300 }, (_, i) => dataOf(table.fields, i)),
    );
    const outcomes = await Promise.all([moveTable(em(), table), moveTable(em(), table)]);
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(["moved", "registered"]);
    expect(await keptCount(table.tableId)).toBe("300");
    expect(await recordRows(table.tableId)).toBe(0);
    const [row] = await query<{ n: number }>(
      em(),
      `select count(*)::int as n from ${userTable(table.organizationId, table.tableId)}`,
    );
    expect(row!.n).toBe(300);
  });

  it("lets one replica run the upgrade at a time", async () => {
    const held = deferred();
    const holding = deferred();
    const holder = em().transactional(async (tx) => {
      await query(tx, "select pg_advisory_xact_lock(hashtextextended('records.upgrade', 0))");
      holding.resolve();
      await held.promise;
    });
    await holding.promise;
    expect(await upgradeOf().runOnce()).toEqual({ kind: "busy" });
    held.resolve();
    await holder;
    // Past the lock, up to catalog's tables (unreachable here).
    await expect(upgradeOf().runOnce()).rejects.toThrow("catalog unavailable");
  });

  it("refuses a table whose records hold values of a field its schema does not have", async () => {
    const table = schema(101n, 1005n, 700);
    await createJsonb(table, [dataOf(table.fields, 1), dataOf(table.fields, 2)]);
    // A field added after the schema was read (and numbered, say): its values would be lost.
    const stale = { ...table, fields: table.fields.slice(0, -4) };
    await expect(moveTable(em(), stale)).rejects.toThrow(
      /values of fields its schema does not have/,
    );
    const staleUpgrade = new Upgrade({
      em: orm.em,
      schemaOf: async (tableId) => (tableId === table.tableId ? stale : schemas.get(tableId)),
      tableIdsAfter,
      logger,
    });
    expect(await staleUpgrade.runOnce()).toMatchObject({
      kind: "refused",
      tableId: table.tableId,
      reason: expect.stringMatching(/2 records hold values of fields its schema does not have/),
    });
    expect(await recordRows(table.tableId)).toBe(2);
    expect(await keptCount(table.tableId)).toBe("2");
    expect(await registered()).not.toContain("101/1005");
    expect(await moveTable(em(), table)).toEqual({ outcome: "moved", records: 2 });
  });

  it("leaves a table whose values are still being changed for a later round", async () => {
    const table = schema(101n, 1007n, 1100);
    const [numberedId] = await createJsonb(table, [dataOf(table.fields, 1)]);
    const serial = table.fields[12]!.id;
    // A record the numbering of a new autonumber field has not reached yet.
    const [unnumberedId] = await createJsonb(table, [
      Object.fromEntries(Object.entries(dataOf(table.fields, 2)).filter(([k]) => k !== serial)),
    ]);
    const was = await readAll(RECORD_ROWS, table.tableId);
    expect(await moveTable(em(), table)).toEqual({ outcome: "pending" });
    expect(await readAll(RECORD_ROWS, table.tableId)).toEqual(was);
    expect(await keptCount(table.tableId)).toBe("2");
    expect(await registered()).not.toContain("101/1007");
    await query(
      em(),
      `update record set data = data || jsonb_build_object($1::text, 2) where row_id = $2`,
      [serial, unnumberedId],
    );
    // A type change checked and not yet applied.
    await query(
      em(),
      `insert into pending_type_change (table_id, field_id, to_type, to_options, expires_at)
       values ($1, $2, 'text', '{}', now() + interval '1 hour')`,
      [table.tableId, table.fields[5]!.id],
    );
    expect(await moveTable(em(), table)).toEqual({ outcome: "pending" });
    expect(await recordRows(table.tableId)).toBe(2);
    await query(em(), "delete from pending_type_change where table_id = $1", [table.tableId]);
    expect(await moveTable(em(), table)).toEqual({ outcome: "moved", records: 2 });
    const moved = await readAll(
      userTableRows(table.organizationId, table.tableId, table.fields),
      table.tableId,
    );
    expect(moved.map((r) => [r.rowId, r.data[serial]])).toEqual([
      [numberedId, 1],
      [unnumberedId, 2],
    ]);
  });

  it("adds the column of a field catalog added while the table moved", async () => {
    const table = schema(101n, 1008n, 1200);
    await createJsonb(table, [dataOf(table.fields, 1)]);
    // The schema the move reads lacks the last field with a column; catalog has it afterwards.
    const before = { ...table, fields: table.fields.filter((f) => f.id !== table.fields[1]!.id) };
    let asked = 0;
    const upgrade = new Upgrade({
      em: orm.em,
      schemaOf: async (tableId) =>
        tableId === table.tableId && asked++ === 0 ? before : schemas.get(tableId),
      tableIdsAfter,
      logger,
    });
    const longText = table.fields[1]!.id;
    await query(em(), "update record set data = data - $1::text where table_id = $2", [
      longText,
      table.tableId,
    ]);
    expect(await upgrade.runOnce()).toMatchObject({ kind: "moved", tableId: table.tableId });
    const columns = await query<{ column_name: string }>(
      em(),
      `select column_name from information_schema.columns
       where table_schema = 'org_101' and table_name = 't_1008' and column_name = $1`,
      [`f_${longText}`],
    );
    expect(columns).toEqual([{ column_name: `f_${longText}` }]);
  });

  it("keeps a late TableCreated from hiding a table still in record", async () => {
    const table = schema(202n, 2005n, 1300);
    await createJsonb(table, [dataOf(table.fields, 1), dataOf(table.fields, 2)]);
    const was = await readAll(RECORD_ROWS, table.tableId);
    // The table's TableCreated delivered again: an empty user table, but no registration.
    await createUserTable(em(), table);
    expect(await registered()).not.toContain("202/2005");
    expect(await readAll(RECORD_ROWS, table.tableId)).toEqual(was);
    expect(await moveTable(em(), table)).toEqual({ outcome: "moved", records: 2 });
    expect(
      await readAll(
        userTableRows(table.organizationId, table.tableId, table.fields),
        table.tableId,
      ),
    ).toEqual(was);
    expect(await keptCount(table.tableId)).toBe("2");
  });

  it("runs in the background until stopped", async () => {
    const table = schema(202n, 2004n, 800);
    await createJsonb(table, [dataOf(table.fields, 3)]);
    const background = new Upgrade({
      em: orm.em,
      schemaOf: async (tableId) => schemas.get(tableId),
      tableIdsAfter,
      logger,
      idleMs: 10,
    });
    background.start();
    while ((await recordRows(table.tableId)) > 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await background.stop();
    expect(await registered()).toContain("202/2004");
  });

  it("neither loses nor repeats writes racing a move", async () => {
    const table = schema(101n, 1003n, 900);
    const rows = userTableRows(table.organizationId, table.tableId, table.fields);
    const ids = await createJsonb(
      table,
      Array.from({ length: 30 }, (_, i) => dataOf(table.fields, i)),
    );
    const text = table.fields[0]!.id;

    // A create that holds the table's write lock shared when the move starts: the move waits for
    // it and moves its record.
    const commitEarly = deferred();
    const earlyTaken = deferred();
    const [earlyId] = await allocateRowIds(em(), 1);
    const early = em().transactional(async (tx) => {
      await lockForCreate(tx, table.tableId, table.organizationId);
      earlyTaken.resolve();
      const created = await createRecords(
        tx,
        targetOf(table),
        [{ rowId: earlyId!, data: { [text]: "early", [table.fields[12]!.id]: 30 } }],
        [],
      );
      await commitEarly.promise;
      return created;
    });
    await earlyTaken.promise;
    const move = moveTable(em(), table);
    await waitingOn("advisory", 1);
    commitEarly.resolve();
    expect((await early).outcome).toBe("ok");

    // Meanwhile a delete in a transaction has locked a record (deletes take no advisory lock):
    // the move waits for its row, holding the table's lock; an update and a create that chose
    // the jsonb storage queue behind that lock.
    await move; // the first move done: its table is registered; race the next one.
    const next = schema(101n, 1006n, 1000);
    const nextRows = userTableRows(next.organizationId, next.tableId, next.fields);
    const nextIds = await createJsonb(
      next,
      Array.from({ length: 30 }, (_, i) => dataOf(next.fields, i)),
    );
    const nextText = next.fields[0]!.id;
    const deleting = deferred();
    const rowLocked = deferred();
    const deletion = em().transactional(async (tx) => {
      await query(tx, "select row_id from record where row_id = $1 for update", [nextIds[3]]);
      rowLocked.resolve();
      await deleting.promise;
      await deleteRecords(tx, next.tableId, [nextIds[3]!]);
    });
    await rowLocked.promise;
    const read = (await readRecordVersion(em(), next.tableId, nextIds[5]!))!;
    const racing = moveTable(em(), next);
    await waitingOn("transactionid", 1);
    const update = writeRecordIfUnchanged(
      em(),
      {
        tableId: next.tableId,
        rowId: nextIds[5]!,
        version: read.version,
        actor: ACTOR,
        data: { ...read.record.data, [nextText]: "updated during the move" },
        fields: [nextText],
      },
      event(),
    ).catch((error: unknown) => error);
    const [lateId] = await allocateRowIds(em(), 1);
    const late = createRecords(
      em(),
      targetOf(next),
      [{ rowId: lateId!, data: { [nextText]: "late", [next.fields[12]!.id]: 30 } }],
      [],
    ).catch((error: unknown) => error);
    await waitingOn("advisory", 2);
    deleting.resolve();
    await deletion;
    expect(await racing).toEqual({ outcome: "moved", records: 29 });

    // The update finds no row in `record` and writes nothing; the create is refused (RB002):
    // both are told, and each is sent again to the table's own storage.
    expect(await update).toBeUndefined();
    expect(hasSqlState(await late, "RB002")).toBe(true);
    expect(await recordRows(next.tableId)).toBe(0);
    const moved = await readAll(nextRows, next.tableId);
    expect(moved.map((r) => r.rowId)).toEqual(nextIds.filter((_, i) => i !== 3));
    expect(moved.find((r) => r.rowId === nextIds[5])?.data[nextText]).toBe(
      read.record.data[nextText],
    );
    expect(await keptCount(next.tableId)).toBe("29");

    const readAgain = (await readRecordVersion(em(), next.tableId, nextIds[5]!, nextRows))!;
    const written = await writeRecordIfUnchanged(
      em(),
      {
        tableId: next.tableId,
        rowId: nextIds[5]!,
        version: readAgain.version,
        actor: ACTOR,
        data: { ...readAgain.record.data, [nextText]: "updated during the move" },
        fields: [nextText],
        rows: nextRows,
      },
      event(),
    );
    expect(written?.data[nextText]).toBe("updated during the move");
    const again = await createRecords(
      em(),
      targetOf(next, nextRows),
      [{ rowId: lateId!, data: { [nextText]: "late", [next.fields[12]!.id]: 30 } }],
      [],
    );
    expect(again.outcome).toBe("ok");
    const final = await readAll(nextRows, next.tableId);
    expect(final.filter((r) => r.data[nextText] === "late").map((r) => r.rowId)).toEqual([lateId]);
    expect(final.find((r) => r.rowId === nextIds[5])?.data[nextText]).toBe(
      "updated during the move",
    );
    expect(await keptCount(next.tableId)).toBe("30");

    // The first table: its 30 records and the create that got in before the move.
    const first = await readAll(rows, table.tableId);
    expect(first.map((r) => r.rowId)).toEqual([...ids, earlyId]);
    expect(first.at(-1)?.data[text]).toBe("early");
    expect(await keptCount(table.tableId)).toBe("31");
  });

  it("registers a table without records under its lock: a create racing it is moved or sent to its table", async () => {
    const table = schema(101n, 1009n, 1400);
    const text = table.fields[0]!.id;
    const serial = table.fields[12]!.id;
    catalogUp = true;
    // A create that chose `record` and holds the table's write lock when the round starts: the
    // registration waits for it and moves its record.
    const commitEarly = deferred();
    const earlyTaken = deferred();
    const [earlyId] = await allocateRowIds(em(), 1);
    const early = em().transactional(async (tx) => {
      await lockForCreate(tx, table.tableId, table.organizationId);
      earlyTaken.resolve();
      const created = await createRecords(
        tx,
        targetOf(table),
        [{ rowId: earlyId!, data: { [text]: "early", [serial]: 1 } }],
        [],
      );
      await commitEarly.promise;
      return created;
    });
    await earlyTaken.promise;
    // Catalog lists it before the other table without records (b2).
    const round = upgradeOf().runOnce();
    await waitingOn("advisory", 1);
    // One that chose `record` too and comes after: it queues behind the registration's lock.
    const [lateId] = await allocateRowIds(em(), 1);
    const lateData = { [text]: "late", [serial]: 2 };
    const late = createRecords(
      em(),
      targetOf(table),
      [{ rowId: lateId!, data: lateData }],
      [],
    ).catch((error: unknown) => error);
    await waitingOn("advisory", 2);
    commitEarly.resolve();
    expect((await early).outcome).toBe("ok");
    expect(await round).toEqual({ kind: "registered", tableId: table.tableId, records: 1 });
    // Refused in `record` (RB002), and sent again to the table's own storage, as the routes do.
    expect(hasSqlState(await late, "RB002")).toBe(true);
    const rows = userTableRows(table.organizationId, table.tableId, table.fields);
    const again = await createRecords(
      em(),
      targetOf(table, rows),
      [{ rowId: lateId!, data: lateData }],
      [],
    );
    expect(again.outcome).toBe("ok");
    const stored = await readAll(rows, table.tableId);
    expect(stored.map((r) => [r.rowId, r.data[text], r.data[serial]])).toEqual([
      [earlyId, "early", 1],
      [lateId, "late", 2],
    ]);
    expect(await recordRows(table.tableId)).toBe(0);
    expect(await keptCount(table.tableId)).toBe("2");
  });

  it("registers every table catalog has, then drops record, and does nothing after", async () => {
    catalogUp = true;
    const upgrade = upgradeOf();
    expect(await upgrade.runOnce()).toEqual({
      kind: "registered",
      tableId: b2.tableId,
      records: 0,
    });
    // While a transaction that read `record` is open, its drop is left for a later round.
    const reading = deferred();
    const release = deferred();
    const reader = em().transactional(async (tx) => {
      await query(tx, "select count(*) from record");
      reading.resolve();
      await release.promise;
    });
    await reading.promise;
    expect(await upgrade.runOnce()).toEqual({ kind: "idle" });
    expect(await recordExists()).toBe(true);
    release.resolve();
    await reader;
    expect(await upgradeToEnd(upgrade)).toEqual([{ kind: "dropped" }]);
    expect(await upgrade.runOnce()).toEqual({ kind: "done" });
    expect(await upgradeOf().runOnce()).toEqual({ kind: "done" });

    // Every table catalog has is in its own table, its kept count its rows' count.
    const all = [...schemas.values()].sort((a, b) => (a.tableId < b.tableId ? -1 : 1));
    expect(await registered()).toEqual(all.map((t) => `${t.organizationId}/${t.tableId}`));
    for (const table of all) {
      const [row] = await query<{ n: string }>(
        em(),
        `select count(*)::text as n from ${userTable(table.organizationId, table.tableId)}`,
      );
      expect(await keptCount(table.tableId)).toBe(row!.n);
    }
    expect(await keptCount(a1.tableId)).toBe("1200");
    // The moved records as they were read from `record` before the upgrade.
    expect(
      await readAll(userTableRows(a2.organizationId, a2.tableId, a2.fields), a2.tableId),
    ).toEqual(before.get(a2.tableId));

    // `record` is gone, with its trigger function; the row ids' sequence goes on.
    expect(await recordExists()).toBe(false);
    const functions = await query<{ name: string }>(
      em(),
      "select proname as name from pg_proc where pronamespace = $1::regnamespace order by 1",
      [SCHEMA],
    );
    expect(functions.map((f) => f.name)).not.toContain("record_count_change");
    expect(functions.map((f) => f.name)).toContain("record_count_add");
    const [last] = await query<{ id: string }>(
      em(),
      `select max(row_id)::text as id from ${userTable(a1.organizationId, a1.tableId)}`,
    );
    const [next] = await allocateRowIds(em(), 1);
    expect(next! > BigInt(last!.id)).toBe(true);

    // Every registered table is read from its own table; one that is not is a table that does
    // not exist (nothing reads `record` any more).
    const stored = new StoredTables(em);
    expect(await stored.rowsOf(b2)).not.toBe(RECORD_ROWS);
    expect(await stored.homeOf(next!)).toBeUndefined();
    const [firstOfA1] = before.get(a1.tableId)!;
    expect(await stored.homeOf(firstOfA1!.rowId)).toEqual({
      tableId: a1.tableId,
      organizationId: a1.organizationId,
    });
    const missing = await stored.rowsOf(gone).catch((error: unknown) => error);
    expect(errorInfoOf(missing)?.reason).toBe("table_not_found");
    // The deletions of the jsonb storage find nothing to delete there.
    expect(await tablesWithRecords(em(), a1.organizationId)).toEqual([]);
    expect(await em().transactional((tx) => deleteTablesRecords(tx, [gone.tableId]))).toBe(0);
    expect(await em().transactional((tx) => deleteOrganizationRecords(tx, 303n))).toBe(0);
  });

  it("migrates the upgraded database again, its SQL files included", async () => {
    expect(await recordExists()).toBe(false);
    expect(await migrateRecords(url)).toEqual([]);
    // As when the files change: each is applied again.
    await query(em(), "delete from repeatable_sql");
    expect(await migrateRecords(url)).toEqual(SQL_FILES);
    expect(await recordExists()).toBe(false);
    const [made] = await query<{ functions: number; triggers: number }>(
      em(),
      `select (select count(*)::int from pg_proc where proname = 'record_count_change') as functions,
         (select count(*)::int from pg_trigger where tgname like 'record_count_%') as triggers`,
    );
    expect(made).toEqual({ functions: 0, triggers: 0 });
    // And the user tables' writes still count, through their own triggers.
    const rows = userTableRows(a2.organizationId, a2.tableId, a2.fields);
    const ids = await allocateRowIds(em(), 2);
    const created = await createRecords(
      em(),
      targetOf(a2, rows),
      ids.map((rowId, i) => ({ rowId, data: dataOf(a2.fields, 100 + i) })),
      [],
    );
    expect(created.outcome).toBe("ok");
    expect(await keptCount(a2.tableId)).toBe("9");
  });
});

/** Waits until catalog's outbox is relayed and records' catalog consumer has every event. */
async function caughtUp(h: Harness): Promise<void> {
  const nc = await connect({ servers: h.natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    await eventually(async () => {
      const { rows } = await h.db.query(
        "select count(*)::int as n from catalog.outbox where published_at is null",
      );
      expect(rows).toEqual([{ n: 0 }]);
      const consumer = await jsm.consumers.info(`${h.namespace}_CATALOG`, "records_catalog");
      expect(consumer.num_pending + consumer.num_ack_pending).toBe(0);
    });
  } finally {
    await nc.close();
  }
}

describe("the row ids' sequence", () => {
  it("goes on from record's identity on a database migrated before it", async () => {
    const db = await createTestDatabase((await testInfra()).databaseUrl);
    let upgraded: Awaited<ReturnType<typeof createRecordsOrm>> | undefined;
    try {
      await migrateBefore(
        { url: db.url, schema: SCHEMA, entities: [], migrations },
        "RowIdSequence",
        (old) =>
          query(
            old.em.fork() as EntityManager,
            `insert into record (table_id, organization_id, data, created_by, updated_by)
             select 7, 1, '{}', 'system', 'system' from generate_series(1, 5)`,
          ),
      );
      expect(await migrateRecords(db.url)).toEqual(appliedFrom("RowIdSequence"));
      upgraded = await createRecordsOrm(db.url);
      const tx = upgraded.em.fork() as EntityManager;
      expect(await allocateRowIds(tx, 2)).toEqual([6n, 7n]);
      // What the previous version's replicas ask for, and `record`'s own default.
      expect(
        await query(tx, "select pg_get_serial_sequence('record', 'row_id') as sequence"),
      ).toEqual([{ sequence: `${SCHEMA}.row_id_seq` }]);
      expect(
        await query(
          tx,
          `insert into record (table_id, organization_id, data, created_by, updated_by)
           values (7, 1, '{}', 'system', 'system') returning row_id::int`,
        ),
      ).toEqual([{ row_id: 8 }]);
    } finally {
      await upgraded?.close();
      await db.drop();
    }
  });
});

describe("the upgrade while the service serves", () => {
  let h: Harness;
  let t: Team;
  let replica: Replica | undefined;
  let again: Replica | undefined;
  let served: Awaited<ReturnType<typeof createRecordsOrm>> | undefined;

  beforeAll(async () => {
    // The upgrade is left to the test: each records process is started without it.
    h = await startHarness({ env: { records: { STORAGE_UPGRADE: "off" } } });
    t = await team(h);
  }, 120_000);

  afterAll(async () => {
    await again?.stop();
    await replica?.stop();
    await served?.close();
    await h?.stop();
  });

  it("moves the tables the jsonb routes served, drops record, and the routes serve them from their own tables", async () => {
    const table = await createTable(
      h,
      t.owner,
      t.organizationId,
      ALL_TYPES.filter((f) => f.name !== "Seq"),
    );
    // A table that never got a record.
    const empty = await createTable(
      h,
      t.owner,
      t.organizationId,
      ALL_TYPES.filter((f) => ["Name", "Age", "Status"].includes(f.name)),
      "Empty",
    );
    // Once catalog's TableCreated has come through the bus too (its delivery makes the user
    // table again, as ApplyCatalogEvent did).
    await caughtUp(h);
    // As tables made before the per-table storage: no user table, not registered. A replica
    // started now has not seen them, so it stores and reads their records in `record`.
    for (const made of [table, empty]) {
      await h.db.query(`drop table org_${t.organizationId}.t_${made.tableId}`);
      for (const relation of ["record_count", "row_range", "user_table"]) {
        await h.db.query(`delete from records.${relation} where table_id = $1`, [made.tableId]);
      }
    }
    replica = await h.replica();
    const call = await as(t.editor);
    const values: JsonObject[] = [
      {
        Name: "Ada",
        Notes: "a **long** text",
        Age: 36.5,
        Vip: true,
        Due: "2026-12-24",
        At: "2026-12-06T10:15:30.123Z",
        Status: "Act%ive_",
        Tags: ["a,b", "a"],
        Email: "ada@example.com",
        Site: "https://example.com",
        Phone: "+44 20 7946 0958",
        Meta: { k: [1, "x", null] },
      },
      { Name: "Bob", Age: -100, Vip: false, Tags: [] },
      {},
    ];
    const rowIds: bigint[] = [];
    for (const data of values) {
      const { record } = await replica.records.createRecord({ tableId: table.tableId, data }, call);
      rowIds.push(record!.rowId);
    }
    await replica.records.updateRecord(
      { tableId: table.tableId, rowId: rowIds[1]!, data: { Status: "Done" } },
      call,
    );
    const { rows: stored } = await h.db.query(
      "select count(*)::int as n from records.record where table_id = $1",
      [table.tableId],
    );
    expect(stored).toEqual([{ n: 3 }]);
    const before = await replica.records.listRecords({ tableId: table.tableId }, call);
    expect(before.records.map((r) => r.rowId)).toEqual(rowIds);
    expect(before.records[0]?.data).toMatchObject({
      [table.id.Name!]: "Ada",
      [table.id.Tags!]: ["a,b", "a"],
      [table.id.Meta!]: { k: [1, "x", null] },
    });
    expect(before.records[1]?.data[table.id.Status!]).toBe("Done");
    expect((await replica.records.listRecords({ tableId: empty.tableId }, call)).records).toEqual(
      [],
    );

    served = await createRecordsOrm(h.databaseUrl);
    const upgradeOf = () =>
      new Upgrade({
        em: served!.em,
        schemaOf: catalogSchemaOf(new TableSchemas(h.catalog, h.cache, SECRET, h.logger)),
        tableIdsAfter: catalogTableIds(h.catalog, SECRET),
        logger: h.logger,
      });
    const upgrade = upgradeOf();
    expect(await upgradeAll(upgrade)).toMatchObject([
      { kind: "moved", tableId: table.tableId, records: 3 },
    ]);

    const { rows: left } = await h.db.query(
      "select count(*)::int as n from records.record where table_id = $1",
      [table.tableId],
    );
    expect(left).toEqual([{ n: 0 }]);
    // Both processes now read it from its own table: the same records, times and total.
    expect(await replica.records.listRecords({ tableId: table.tableId }, call)).toEqual(before);
    expect(await h.records.listRecords({ tableId: table.tableId }, call)).toEqual(before);
    const { record } = await replica.records.updateRecord(
      { tableId: table.tableId, rowId: rowIds[2]!, data: { Name: "Cy" } },
      call,
    );
    expect(record?.data[table.id.Name!]).toBe("Cy");
    const { rows: written } = await h.db.query(
      `select count(*)::int as n from org_${t.organizationId}.t_${table.tableId}
       where f_${table.id.Name} = 'Cy' and version = 2`,
    );
    expect(written).toEqual([{ n: 1 }]);

    // Then the table without records, from catalog's list, and `record` is dropped.
    expect(await upgradeToEnd(upgrade)).toEqual([
      { kind: "registered", tableId: empty.tableId, records: 0 },
      { kind: "dropped" },
    ]);
    const { rows: relations } = await h.db.query(
      `select to_regclass('records.record') as record,
         (select count(*)::int from records.user_table where table_id = any($1::bigint[])) as registered`,
      [[table.tableId, empty.tableId]],
    );
    expect(relations).toEqual([{ record: null, registered: 2 }]);

    // Both processes serve both tables from their own tables: create, read, update, delete.
    for (const [records, name] of [
      [replica.records, "Dee"],
      [h.records, "Eve"],
    ] as const) {
      for (const target of [table, empty]) {
        const { record: created } = await records.createRecord(
          { tableId: target.tableId, data: { Name: name, Age: 7 } },
          call,
        );
        const rowId = created!.rowId;
        expect(
          (await records.getRecord({ tableId: target.tableId, rowId }, call)).record?.data,
        ).toMatchObject({ [target.id.Name!]: name, [target.id.Age!]: 7 });
        const { record: updated } = await records.updateRecord(
          { tableId: target.tableId, rowId, data: { Age: 8 } },
          call,
        );
        expect(updated?.data[target.id.Age!]).toBe(8);
        await records.deleteRecord({ tableId: target.tableId, rowId }, call);
        expect(await reasonOf(records.getRecord({ tableId: target.tableId, rowId }, call))).toBe(
          "record_not_found",
        );
      }
    }
    const { record: kept } = await h.records.createRecord(
      { tableId: empty.tableId, data: { Name: "Fay" } },
      call,
    );
    const listed = await h.records.listRecords({ tableId: empty.tableId }, call);
    expect(listed.records.map((r) => r.rowId)).toEqual([kept!.rowId]);
    expect(listed.total).toBe(1n);
    expect((await h.records.listRecords({ tableId: table.tableId }, call)).total).toBe(3n);

    // A records process started again on the database, the upgrade on: it has nothing to do,
    // and serves; so does a table made and one deleted since.
    again = await h.replica({ STORAGE_UPGRADE: "on" });
    // The replica's own first round may hold the upgrade's lock a moment (then this one is busy).
    await eventually(async () => expect(await upgradeOf().runOnce()).toEqual({ kind: "done" }));
    expect(await again.records.listRecords({ tableId: table.tableId }, call)).toMatchObject({
      total: 3n,
    });
    const later = await createTable(
      h,
      t.owner,
      t.organizationId,
      ALL_TYPES.filter((f) => f.name === "Name"),
      "Later",
    );
    const { record: first } = await again.records.createRecord(
      { tableId: later.tableId, data: { Name: "Gus" } },
      call,
    );
    expect(first?.data[later.id.Name!]).toBe("Gus");
    await h.catalog.deleteTable({ tableId: later.tableId }, await as(t.owner));
    await caughtUp(h);
    expect(await reasonOf(again.records.listRecords({ tableId: later.tableId }, call))).toBe(
      "table_not_found",
    );
    expect(await migrateRecords(h.databaseUrl)).toEqual([]);
    const { rows: gone } = await h.db.query("select to_regclass('records.record') as record");
    expect(gone).toEqual([{ record: null }]);
  });
});

describe("a new deployment", () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness();
  }, 120_000);

  afterAll(async () => {
    await h?.stop();
  });

  it("has nothing to move: the records service drops record once it started", async () => {
    const t = await team(h);
    await eventually(async () => {
      const { rows } = await h.db.query("select to_regclass('records.record') as record");
      expect(rows).toEqual([{ record: null }]);
    });
    const table = await createTable(h, t.owner, t.organizationId, ALL_TYPES.slice(0, 1));
    const call = await as(t.editor);
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "Ada" } },
      call,
    );
    expect((await h.records.listRecords({ tableId: table.tableId }, call)).records).toEqual([
      record,
    ]);
  });
});
