import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
