import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createTestDatabase, migrateBefore, sessionIn, testInfra } from "@rowbase/kit/testing";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WRITE_LOCK_TIMEOUT_MS } from "../src/db/create-gate.js";
import { migrations } from "../src/migrations/initial-schema.js";
import { migrateRecords, SCHEMA } from "../src/service.js";
import { appliedFrom, MIGRATIONS, SQL_FILES } from "./sql-files.js";

// The functions and triggers of records' write path are the files of sql/, on a database
// migrated fresh and on one migrated before they moved there (their old definitions, overloads
// included, from fixtures/functions-before-sql-folder.sql): both end with exactly the same.

const SQL_FOLDER = join(import.meta.dirname, "..", "sql");

interface Definitions {
  functions: { signature: string; definition: string; body: string }[];
  triggers: { name: string; definition: string }[];
}

async function definitionsIn(session: pg.Client): Promise<Definitions> {
  const functions = await session.query<Definitions["functions"][number]>(
    `select p.oid::regprocedure::text as signature, pg_get_functiondef(p.oid) as definition,
       p.prosrc as body
     from pg_proc p where p.pronamespace = $1::regnamespace order by 1`,
    [SCHEMA],
  );
  const triggers = await session.query<Definitions["triggers"][number]>(
    `select t.tgname as name, pg_get_triggerdef(t.oid) as definition
     from pg_trigger t join pg_class c on c.oid = t.tgrelid
     where c.relnamespace = $1::regnamespace and not t.tgisinternal order by 1`,
    [SCHEMA],
  );
  return { functions: functions.rows, triggers: triggers.rows };
}

/** The bodies (between the dollar quotes) of the functions the sql/ files make. */
async function fileBodies(): Promise<string[]> {
  const bodies: string[] = [];
  for (const name of SQL_FILES) {
    const text = await readFile(join(SQL_FOLDER, name), "utf8");
    for (const match of text.matchAll(/\bas \$(\w*)\$([\s\S]*?)\$\1\$/g)) bodies.push(match[2]!);
  }
  return bodies.sort();
}

const databases: { url: string; drop(): Promise<void>; session?: pg.Client }[] = [];

async function database(): Promise<{ url: string; session: () => Promise<pg.Client> }> {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  const entry: (typeof databases)[number] = db;
  databases.push(entry);
  return {
    url: db.url,
    session: async () => {
      entry.session ??= await sessionIn(db.url, SCHEMA);
      return entry.session;
    },
  };
}

let fresh: Awaited<ReturnType<typeof database>>;
let existing: Awaited<ReturnType<typeof database>>;
let before: Definitions;

beforeAll(async () => {
  fresh = await database();
  existing = await database();
  expect(await migrateRecords(fresh.url)).toEqual(appliedFrom());
  const old = await readFile(
    join(import.meta.dirname, "fixtures/functions-before-sql-folder.sql"),
    "utf8",
  );
  await migrateBefore(
    { url: existing.url, schema: SCHEMA, entities: [], migrations },
    "DropCreateGateOverloads",
    async () => {
      await (await existing.session()).query(old);
    },
  );
  before = await definitionsIn(await existing.session());
  expect(await migrateRecords(existing.url)).toEqual(appliedFrom("DropCreateGateOverloads"));
});

afterAll(async () => {
  for (const db of databases) {
    await db.session?.end();
    await db.drop();
  }
});

describe("records' migrations", () => {
  // Append-only: a database keeps the names of the migrations it ran, so a migration of a
  // release never moves, changes its name or goes. A new one is added here, at the end.
  it("run in the order they were released", () => {
    expect(MIGRATIONS).toEqual([
      "InitialSchema",
      "CreateGateAutonumbers",
      "WriteGate",
      "PendingWrites",
      "RequiredMarks",
      "ChangeIds",
      "IcuCollation",
      "RecordCounts",
      "PendingWritesAsChanged",
      "TimestampIndexes",
      "DropCreateGateOverloads",
      "UserTables",
      "RecordChanges",
      "RowIdSequence",
      "RecordChangeWrites",
      "Lz4Compression",
      "RecordChangesJson",
      "UsageShares",
    ]);
  });
});

describe("records' SQL functions", () => {
  it("are the same on a fresh database and on one migrated before sql/", async () => {
    expect(before.functions.map((f) => f.signature)).toContain(
      "create_gate(bigint,bigint,bigint,bigint)",
    );
    const fromFresh = await definitionsIn(await fresh.session());
    const fromExisting = await definitionsIn(await existing.session());
    expect(fromExisting).toEqual(fromFresh);
    expect(fromFresh.functions.map((f) => f.signature)).toEqual([
      "create_checks(bigint,bigint,bigint,bigint,bigint[],bigint[],bigint[])",
      "create_gate(bigint,bigint,bigint,bigint,bigint[],bigint[],bigint[])",
      "record_change_capture()",
      "record_change_sequence(integer)",
      "record_count_add(bigint,bigint)",
      "record_count_change()",
      "record_usage(bigint)",
      "record_usage_add(bigint,bigint)",
      "reserve_records(bigint,bigint,bigint)",
      "take_records(bigint,bigint,bigint)",
      "user_table_rows_change()",
      "write_gate(bigint,bigint[],bigint[])",
    ]);
    expect(fromFresh.triggers).toEqual([
      {
        name: "record_change_capture",
        definition:
          "CREATE TRIGGER record_change_capture BEFORE INSERT ON records.outbox FOR EACH ROW WHEN ((new.subject = 'records.changes'::text)) EXECUTE FUNCTION record_change_capture()",
      },
      {
        name: "record_count_delete",
        definition:
          "CREATE TRIGGER record_count_delete AFTER DELETE ON records.record REFERENCING OLD TABLE AS old_records FOR EACH STATEMENT EXECUTE FUNCTION record_count_change()",
      },
      {
        name: "record_count_insert",
        definition:
          "CREATE TRIGGER record_count_insert AFTER INSERT ON records.record REFERENCING NEW TABLE AS new_records FOR EACH STATEMENT EXECUTE FUNCTION record_count_change()",
      },
    ]);
  });

  it("have the bodies of the sql/ files, one function per file, named after it", async () => {
    const { functions } = await definitionsIn(await fresh.session());
    expect(functions.map((f) => f.body).sort()).toEqual(await fileBodies());
    expect(functions.map((f) => `${f.signature.replace(/\(.*$/, "")}.sql`)).toEqual(SQL_FILES);
  });

  it("bound a write's wait for its table's lock as the create of several statements does", async () => {
    const { rows } = await (await fresh.session()).query<{ name: string; config: string[] }>(
      `select proname as name, proconfig as config from pg_proc
       where pronamespace = $1::regnamespace and proname in ('write_gate', 'create_checks')
       order by 1`,
      [SCHEMA],
    );
    const bound = `lock_timeout=${WRITE_LOCK_TIMEOUT_MS / 1000}s`;
    expect(rows.map((row) => [row.name, row.config.includes(bound)])).toEqual([
      ["create_checks", true],
      ["write_gate", true],
    ]);
  });

  it("count records once on the migrated database: its old triggers were replaced", async () => {
    const session = await existing.session();
    await session.query(
      `insert into record (table_id, organization_id, data, created_by, updated_by)
       select 7, 1, '{}', 'system', 'system' from generate_series(1, 3)`,
    );
    await session.query(
      "delete from record where table_id = 7 and row_id = (select min(row_id) from record where table_id = 7)",
    );
    const { rows } = await session.query<{ n: string }>(
      "select sum(delta)::text as n from record_count where table_id = 7",
    );
    expect(rows).toEqual([{ n: "2" }]);
  });

  it("are applied again by neither database once they are in force", async () => {
    expect(await migrateRecords(fresh.url)).toEqual([]);
    expect(await migrateRecords(existing.url)).toEqual([]);
  });
});
