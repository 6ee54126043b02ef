import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateRecords } from "../src/index.js";
import { as, createTable, def, type Harness, startHarness, type Team, team } from "./harness.js";

// `like` and `nlike` through ListRecords on a database made with locale C, where PostgreSQL's
// own case folding (ILIKE, lower(), upper() under the database's collation) knows ASCII only:
// the filter folds the same as on any other server.

describe("like and nlike on a database of locale C", () => {
  let h: Harness;
  let t: Team;
  const NAMES = [
    "Émile Zola",
    "émile",
    "Emile",
    "ΟΔΥΣΣΕΥΣ",
    "οδυσσευς",
    "Äpfel",
    "äpfel",
    "Straße",
    "100% ja_nein",
    "100x jaXnein",
    "",
  ];
  /** Row ids of the records, in the order of NAMES. */
  let rows: bigint[] = [];
  let tableId: bigint;

  beforeAll(async () => {
    h = await startHarness({ databaseLocale: "C" });
    t = await team(h);
    const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    tableId = table.tableId;
    const { records } = await h.records.batchCreateRecords(
      { tableId, records: NAMES.map((Name) => ({ data: { Name } })) },
      await as(t.editor),
    );
    rows = records.map((record) => record.rowId);
  });

  afterAll(async () => {
    await h?.stop();
  });

  async function matching(where: string): Promise<string[]> {
    const result = await h.records.listRecords({ tableId, where, limit: 100 }, await as(t.viewer));
    expect(result.total).toBe(BigInt(result.records.length));
    return result.records.map((record) => NAMES[rows.indexOf(record.rowId)]!);
  }

  const except = (...names: string[]) => NAMES.filter((name) => !names.includes(name));

  it.each<[string, string[]]>([
    ["(Name,like,émile)", ["Émile Zola", "émile"]],
    ["(Name,like,ÉMILE)", ["Émile Zola", "émile"]],
    ["(Name,nlike,Émile)", except("Émile Zola", "émile")],
    // Σ folds to σ and ς alike, wherever it stands in the value or the pattern.
    ["(Name,like,ΟΔΥΣ)", ["ΟΔΥΣΣΕΥΣ", "οδυσσευς"]],
    ["(Name,like,ευσ)", ["ΟΔΥΣΣΕΥΣ", "οδυσσευς"]],
    ["(Name,like,Σσευς)", ["ΟΔΥΣΣΕΥΣ", "οδυσσευς"]],
    ["(Name,nlike,οδυς)", except("ΟΔΥΣΣΕΥΣ", "οδυσσευς")],
    ["(Name,like,ÄPFEL)", ["Äpfel", "äpfel"]],
    ["(Name,like,äp)", ["Äpfel", "äpfel"]],
    ["(Name,like,STRASSE)", ["Straße"]],
    ["(Name,like,ß)", ["Straße"]],
    // Accents are not case: "e" does not find "é".
    ["(Name,like,emile)", ["Emile"]],
    ["(Name,like,100%)", ["100% ja_nein"]],
    ["(Name,like,a_n)", ["100% ja_nein"]],
    ["(Name,nlike,A_N)", except("100% ja_nein")],
  ])("%s", async (where, expected) => {
    expect(await matching(where)).toEqual(expected);
  });
});

describe("a database that cannot use the ICU collation", () => {
  const MESSAGE =
    'records needs the ICU collation "und-x-icu" (its like/nlike filters fold case by it), which this database cannot use';

  /** Migrates records on the database and expects it refused, with none of records' tables. */
  async function refused(database: Awaited<ReturnType<typeof createTestDatabase>>, cause: string) {
    await expect(migrateRecords(database.url)).rejects.toThrow(`${MESSAGE}: ${cause}`);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query(`select to_regclass('records.record') as found`);
      expect(rows).toEqual([{ found: null }]);
    } finally {
      await client.end();
    }
  }

  it("fails records' migrations on a PostgreSQL without ICU", async () => {
    const database = await createTestDatabase((await testInfra()).databaseUrl);
    try {
      // What a server built without ICU lacks: its initdb creates no ICU collation.
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.query(`drop collation pg_catalog."und-x-icu"`).finally(() => client.end());
      await refused(database, "PostgreSQL must be built with ICU");
    } finally {
      await database.drop();
    }
  });

  it("fails records' migrations on a database encoded in SQL_ASCII", async () => {
    const database = await createTestDatabase((await testInfra()).databaseUrl, {
      locale: "C",
      encoding: "SQL_ASCII",
    });
    try {
      await refused(
        database,
        "PostgreSQL must be built with ICU (every common build is) and the database encoded in UTF8 (this one is SQL_ASCII)",
      );
    } finally {
      await database.drop();
    }
  });
});
