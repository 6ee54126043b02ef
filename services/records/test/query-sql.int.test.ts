import { isCalendarDate } from "@rowbase/kit/field-types";
import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { QueryField } from "../src/query/field-reference.js";
import { parseFields } from "../src/query/fields-parser.js";
import { QueryError } from "../src/query/query-error.js";
import { orderBySql, orderTerms, parseSort } from "../src/query/sort.js";
import {
  SQL_DATE_PATTERN,
  SQL_DATETIME_PATTERN,
  valueSource,
} from "../src/query/value-expression.js";
import { OPERATORS } from "../src/query/where-ast.js";
import { buildWhere } from "../src/query/where-compiler.js";
import { printWhere } from "../src/query/where-printer.js";
import { randomFittingTree, randomTree, seededRandom } from "./random-where.js";

/** The ORDER BY list of sort keys, as SQL. */
const orderBy = (...args: Parameters<typeof orderTerms>) => orderBySql(orderTerms(...args));

// The compiled SQL against a real PostgreSQL: every operator on every type, blanks, missing
// keys and malformed stored values, sorting with nulls, and no query that fails.

const FIELDS: QueryField[] = [
  { id: "1", name: "Name", type: "text" },
  { id: "2", name: "Notes", type: "long_text" },
  { id: "3", name: "Age", type: "number" },
  { id: "4", name: "Vip", type: "boolean" },
  { id: "5", name: "Due", type: "date" },
  { id: "6", name: "At", type: "datetime" },
  { id: "7", name: "Status", type: "single_select" },
  { id: "8", name: "Tags", type: "multi_select" },
  { id: "9", name: "Email", type: "email" },
  { id: "10", name: "Site", type: "url" },
  { id: "11", name: "Phone", type: "phone" },
  { id: "12", name: "Meta", type: "json" },
  { id: "13", name: "Doc", type: "file" },
  { id: "14", name: "Seq", type: "autonumber" },
  { id: "15", name: "Created", type: "created_at" },
  { id: "16", name: "Updated", type: "updated_at" },
];

const NOW = new Date("2026-11-21T10:15:00.000Z");

/**
 * Rows 1-9. Row 3 holds explicit blanks, row 4 no keys, row 5 malformed values (a number as a
 * string, an autonumber as an array), row 9 only the value of a field that is gone.
 */
const ROWS: Array<{ data: unknown; created: string; updated: string | null }> = [
  {
    data: {
      1: "Ada",
      2: "likes 100% cotton_wool",
      3: 36,
      4: true,
      5: "2026-11-21",
      6: "2026-11-21T10:15:00.000Z",
      7: "Active",
      8: ["a", "b"],
      9: "ada@example.com",
      10: "https://ada.dev",
      11: "+1 555 0100",
      12: { k: 1 },
      13: { file_name: "a.pdf" },
      14: 1,
    },
    created: "2026-01-01T00:00:00.123456Z",
    updated: "2026-01-01T00:00:00.123456Z",
  },
  {
    data: {
      1: "bob",
      2: "plain",
      3: 17,
      4: false,
      5: "2026-11-20",
      6: "2026-11-20T23:59:59.999Z",
      7: "Done",
      8: ["b"],
      9: "bob@example.com",
      14: 2,
    },
    created: "2026-01-02T00:00:00Z",
    updated: "2026-01-02T00:00:00Z",
  },
  {
    data: {
      1: "",
      2: null,
      3: null,
      4: null,
      5: "",
      6: null,
      7: "",
      8: [],
      9: "",
      12: null,
      13: null,
      14: 3,
    },
    created: "2026-01-02T00:00:00Z",
    updated: "2026-01-02T00:00:00Z",
  },
  { data: {}, created: "2026-01-04T00:00:00Z", updated: null },
  {
    data: {
      1: 42,
      3: "18",
      4: "true",
      5: "2026-02-30",
      6: "not a date",
      7: ["Active"],
      8: "a",
      12: [],
      14: [7],
    },
    created: "2026-01-05T00:00:00Z",
    updated: "2026-01-05T00:00:00Z",
  },
  {
    data: {
      1: 'Zoë, "the" (1st)',
      3: 18,
      4: false,
      5: "2026-11-22",
      6: "2026-11-22T00:00:00+01:00",
      7: "Act%ive_",
      8: ["a,b", "c"],
      12: "",
      14: 6,
    },
    created: "2026-01-06T00:00:00Z",
    updated: "2026-01-06T00:00:00Z",
  },
  {
    data: {
      1: "ada lovelace",
      3: -2.5,
      4: true,
      5: "0001-01-01",
      6: "9999-12-31T23:59:59.999Z",
      7: "Active",
      8: ["c"],
      14: 7,
    },
    created: "2026-01-07T00:00:00Z",
    updated: "2026-01-07T00:00:00Z",
  },
  {
    data: {
      1: "It's'; drop table record; --",
      3: 1e21,
      5: "2024-02-29",
      6: "2024-02-29T12:00:00Z",
      7: "Done",
      8: ["a", "c"],
      14: 8,
    },
    created: "2026-01-08T00:00:00Z",
    updated: "2026-01-08T00:00:00Z",
  },
  { data: { 99: "gone" }, created: "2026-01-09T00:00:00Z", updated: "2026-01-09T00:00:00Z" },
];

const ALL = [1, 2, 3, 4, 5, 6, 7, 8, 9];
const except = (...ids: number[]) => ALL.filter((id) => !ids.includes(id));

let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
let client: pg.Client;

beforeAll(async () => {
  const infra = await testInfra();
  database = await createTestDatabase(infra.databaseUrl);
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(
    "create table record (row_id bigserial primary key, data jsonb not null, created_at timestamptz, updated_at timestamptz)",
  );
  for (const row of ROWS) {
    await client.query("insert into record (data, created_at, updated_at) values ($1, $2, $3)", [
      JSON.stringify(row.data),
      row.created,
      row.updated,
    ]);
  }
});

afterAll(async () => {
  await client?.end();
  await database?.drop();
});

/** The row ids a filter selects, through a statement shaped like the service's. */
async function select(where: string): Promise<number[]> {
  const compiled = buildWhere(where, FIELDS, { paramOffset: 1, now: NOW, tableAlias: "r" });
  const result = await client.query<{ row_id: string }>(
    `select r.row_id from record r where r.row_id > $1 and ${compiled.sql} order by r.row_id`,
    [0, ...compiled.params],
  );
  return result.rows.map((row) => Number(row.row_id));
}

async function sorted(sort: string): Promise<number[]> {
  const order = orderBy(parseSort(sort, FIELDS));
  const result = await client.query<{ row_id: string }>(
    `select row_id from record order by ${order}`,
  );
  return result.rows.map((row) => Number(row.row_id));
}

const CASES: Array<[string, number[]]> = [
  // text
  ["(Name,eq,Ada)", [1]],
  ["(Name,eq,ada)", []],
  ["(Name,neq,Ada)", except(1)],
  ["(Name,like,ADA)", [1, 7]],
  ["(Name,nlike,ada)", except(1, 7)],
  ['(Name,like,"""the""")', [6]],
  ['(Name,eq,"Zoë, ""the"" (1st)")', [6]],
  ["(Name,eq,\"It's'; drop table record; --\")", [8]],
  ["(Name,eq,42)", []],
  ["(Name,gt,a)", [2, 7]],
  ["(Name,lt,a)", [1, 6, 8]],
  ["(Name,btw,A,Z)", [1, 8]],
  ["(Name,in,Ada,bob)", [1, 2]],
  ["(Name,nin,Ada,bob)", except(1, 2)],
  ["(Name,blank)", [3, 4, 9]],
  ["(Name,notblank)", [1, 2, 5, 6, 7, 8]],
  ["(Notes,like,100%)", [1]],
  ["(Notes,like,n_w)", [1]],
  ["(Notes,like,n%w)", []],
  ["(Notes,like,t_n)", []],
  ["(Notes,blank)", except(1, 2)],
  ["(Email,like,@EXAMPLE.com)", [1, 2]],
  ["(Email,eq,ada@example.com)", [1]],
  ["(Email,blank)", except(1, 2)],
  ["(Site,like,https://)", [1]],
  ["(Phone,eq,+1 555 0100)", [1]],
  // number
  ["(Age,eq,18)", [6]],
  ["(Age,eq,18.0)", [6]],
  ["(Age,eq,-2.50)", [7]],
  ["(Age,eq,1e21)", [8]],
  ["(Age,neq,18)", except(6)],
  ["(Age,gt,17)", [1, 6, 8]],
  ["(Age,gte,17)", [1, 2, 6, 8]],
  ["(Age,lt,18)", [2, 7]],
  ["(Age,lte,18)", [2, 6, 7]],
  ["(Age,gte,1e20)", [8]],
  ["(Age,lt,-1)", [7]],
  ["(Age,lt,1e21)", [1, 2, 6, 7]],
  ["(Age,gt,-1e-7)", [1, 2, 6, 8]],
  ["(Age,btw,17,36)", [1, 2, 6]],
  ["(Age,btw,36,17)", []],
  ["(Age,in,17,36)", [1, 2]],
  ["(Age,nin,17,36)", except(1, 2)],
  ["(Age,blank)", [3, 4, 9]],
  ["(Age,notblank)", [1, 2, 5, 6, 7, 8]],
  ["(3,gte,36)", [1, 8]],
  ["(Seq,gt,2)", [3, 6, 7, 8]],
  ["(Seq,blank)", [4, 9]],
  // boolean
  ["(Vip,checked)", [1, 7]],
  ["(Vip,notchecked)", except(1, 7)],
  ["(Vip,eq,false)", [2, 6]],
  ["(Vip,neq,true)", except(1, 7)],
  ["(Vip,blank)", [3, 4, 8, 9]],
  ["(Vip,notblank)", [1, 2, 5, 6, 7]],
  // date
  ["(Due,eq,today)", [1]],
  ["(Due,eq,yesterday)", [2]],
  ["(Due,eq,tomorrow)", [6]],
  ["(Due,eq,daysAgo:1)", [2]],
  ["(Due,eq,daysFromNow:1)", [6]],
  ["(Due,eq,DAYSAGO:0)", [1]],
  ["(Due,gt,today)", [6]],
  ["(Due,gte,today)", [1, 6]],
  ["(Due,lt,today)", [2, 7, 8]],
  ["(Due,lte,2026-11-20)", [2, 7, 8]],
  ["(Due,btw,2024-01-01,yesterday)", [2, 8]],
  ["(Due,in,2024-02-29,0001-01-01)", [7, 8]],
  ["(Due,nin,2024-02-29,0001-01-01)", except(7, 8)],
  ["(Due,neq,today)", except(1)],
  ["(Due,blank)", [3, 4, 9]],
  ["(Due,notblank)", [1, 2, 5, 6, 7, 8]],
  // datetime
  ["(At,eq,today)", [1, 6]],
  ["(At,eq,yesterday)", [2]],
  ["(At,eq,2026-11-21T10:15:00Z)", [1]],
  ["(At,eq,2026-11-21T11:15:00+01:00)", [1]],
  ["(At,eq,2026-11-21T10:15:00.0005Z)", [1]],
  ["(At,eq,2026-11-21T23:00:00Z)", [6]],
  ["(At,gt,today)", [7]],
  ["(At,gte,today)", [1, 6, 7]],
  ["(At,lt,today)", [2, 8]],
  ["(At,lte,today)", [1, 2, 6, 8]],
  ["(At,gt,2026-11-21T10:15:00Z)", [6, 7]],
  ["(At,lte,2026-11-21T10:15:00Z)", [1, 2, 8]],
  ["(At,btw,2026-11-20,2026-11-21)", [1, 2, 6]],
  ["(At,in,2024-02-29,9999-12-31)", [7, 8]],
  // Rows 1 and 6 lie between the two days, in neither.
  ["(At,in,2026-11-20,2026-11-22)", [2]],
  ["(At,in,2026-11-21T10:15:00Z,2026-11-20T23:59:59.999Z)", [1, 2]],
  ["(At,eq,9999-12-31)", [7]],
  ["(At,neq,today)", except(1, 6)],
  ["(At,nin,today,yesterday)", except(1, 2, 6)],
  ["(At,blank)", [3, 4, 9]],
  ["(At,notblank)", [1, 2, 5, 6, 7, 8]],
  // single_select
  ["(Status,eq,Active)", [1, 7]],
  ["(Status,neq,Active)", except(1, 7)],
  ["(Status,in,Active,Done)", [1, 2, 7, 8]],
  ["(Status,anyof,Active,Done)", [1, 2, 7, 8]],
  ["(Status,nin,Active,Done)", [3, 4, 5, 6, 9]],
  ["(Status,nanyof,Active,Done)", [3, 4, 5, 6, 9]],
  ["(Status,like,%ive_)", [6]],
  ["(Status,like,act)", [1, 6, 7]],
  ["(Status,blank)", [3, 4, 9]],
  // multi_select
  ["(Tags,anyof,a)", [1, 8]],
  ['(Tags,anyof,"a,b")', [6]],
  ["(Tags,anyof,a,c)", [1, 6, 7, 8]],
  ['(Tags,anyof,"a,b",b)', [1, 2, 6]],
  ["(Tags,allof,a,c)", [8]],
  ["(Tags,allof,a)", [1, 8]],
  ["(Tags,allof,b)", [1, 2]],
  ["(Tags,nanyof,a)", except(1, 8)],
  ["(Tags,blank)", [3, 4, 9]],
  ["(Tags,notblank)", [1, 2, 5, 6, 7, 8]],
  // json
  ["(Meta,blank)", except(1)],
  ["(Meta,notblank)", [1]],
  // the record's own columns, and created_at / updated_at fields
  ["(created_at,eq,2026-01-01T00:00:00.123Z)", [1]],
  ["(Created,eq,2026-01-02)", [2, 3]],
  ["(created_at,gte,2026-01-08)", [8, 9]],
  ["(created_at,lt,daysAgo:320)", [1, 2, 3, 4]],
  ["(updated_at,blank)", [4]],
  ["(Updated,notblank)", except(4)],
  ["(row_id,gt,7)", [8, 9]],
  ["(row_id,in,1,3)", [1, 3]],
  ["(row_id,btw,2,4)", [2, 3, 4]],
  ["(row_id,neq,1)", except(1)],
  // combinations
  ["(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))", [1, 7]],
  ["(Status,eq,Done)~or(Age,gte,18)~and(Vip,notchecked)", [2, 6, 8]],
  ["((Status,eq,Done)~or(Age,gte,18))~and(Vip,notchecked)", [2, 6, 8]],
  ["~not(Age,gte,18)", [2, 3, 4, 5, 7, 9]],
  ["~not((Status,eq,Done)~or(Name,blank))", [1, 5, 6, 7]],
  ["~not~not(Vip,checked)", [1, 7]],
];

describe("where against PostgreSQL", () => {
  it.each(CASES)("%s", async (where, expected) => {
    expect(await select(where)).toEqual(expected);
  });

  it("runs every operator on every field and column without a database error", async () => {
    const values = [
      "1",
      "a",
      "today",
      "2026-11-21",
      "2026-11-21T10:15:00Z",
      "true",
      "-1.5",
      "daysAgo:3",
    ];
    const refs = [...FIELDS.map((f) => f.name), "row_id", "created_at", "updated_at"];
    let ran = 0;
    for (const ref of refs) {
      for (const operator of OPERATORS) {
        for (const value of [
          "",
          ...values.map((v) => `,${v}`),
          ...values.map((v) => `,${v},${v}`),
        ]) {
          const where = `(${ref},${operator}${value})`;
          let rows: number[];
          let complement: number[];
          try {
            rows = await select(where);
            complement = await select(`~not${where}`);
          } catch (error) {
            if (error instanceof QueryError) continue;
            throw new Error(`${where} failed: ${String(error)}`);
          }
          ran++;
          // ~not is the exact complement: together they are every row, once.
          expect(
            [...rows, ...complement].sort((a, b) => a - b),
            where,
          ).toEqual(ALL);
        }
      }
    }
    expect(ran).toBeGreaterThan(300);
  });

  it("runs random filters without a database error, ~not giving exactly the other rows", async () => {
    const refs = [...FIELDS.map((f) => f.name), "row_id", "created_at", "updated_at"];
    let ran = 0;
    // Most random trees hold a value that does not fit its field; go on until 250 ran.
    for (let seed = 1; seed <= 10_000 && ran < 250; seed++) {
      const tree = randomTree(seededRandom(seed), refs, 4);
      let rows: number[];
      let complement: number[];
      try {
        rows = await select(printWhere(tree));
        complement = await select(printWhere({ kind: "not", operand: tree, position: 0 }));
      } catch (error) {
        if (error instanceof QueryError) continue;
        throw new Error(`seed ${seed}: ${printWhere(tree)} failed: ${String(error)}`);
      }
      ran++;
      expect(
        [...rows, ...complement].sort((a, b) => a - b),
        `seed ${seed}`,
      ).toEqual(ALL);
    }
    expect(ran).toBe(250);
  });

  it("runs random fitting filters, range edges included, without a database error", async () => {
    // Conditions whose operators fit their fields and whose values parse (the extremes of
    // numbers, dates and relative dates among them): what the service accepts must run.
    const refs = [
      ...FIELDS.flatMap((f) => [
        { ref: f.name, type: f.type },
        { ref: f.id, type: f.type },
      ]),
      { ref: "row_id", type: "autonumber" },
      { ref: "created_at", type: "created_at" },
      { ref: "updated_at", type: "updated_at" },
    ];
    let ran = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const where = printWhere(randomFittingTree(seededRandom(seed), refs, 4));
      let rows: number[];
      let complement: number[];
      try {
        rows = await select(where);
        complement = await select(`~not(${where})`);
      } catch (error) {
        if (error instanceof QueryError) continue;
        throw new Error(`seed ${seed}: ${where} failed: ${String(error)}`);
      }
      ran++;
      expect(
        [...rows, ...complement].sort((a, b) => a - b),
        `seed ${seed}: ${where}`,
      ).toEqual(ALL);
    }
    expect(ran).toBeGreaterThan(200);
  });

  it("makes each negative operator the complement of its positive one", async () => {
    const pairs: Array<[string, string]> = [
      ["(Name,eq,Ada)", "(Name,neq,Ada)"],
      ["(Name,like,a)", "(Name,nlike,a)"],
      ["(Age,in,17,18)", "(Age,nin,17,18)"],
      ["(Tags,anyof,a,b)", "(Tags,nanyof,a,b)"],
      ["(Vip,checked)", "(Vip,notchecked)"],
      ["(Due,blank)", "(Due,notblank)"],
      ["(At,eq,today)", "(At,neq,today)"],
    ];
    for (const [positive, negative] of pairs) {
      const both = [...(await select(positive)), ...(await select(negative))];
      expect(
        both.sort((a, b) => a - b),
        positive,
      ).toEqual(ALL);
    }
  });

  it("keeps injection attempts in parameters, where they match as plain text", async () => {
    const attempts = [
      "(Name,eq,'; drop table record; --)",
      '(Name,eq,"\')--")',
      "(Name,like,\"%'||pg_sleep(1)||'\")",
      '(Name,in,"a\'),(\'b","c"")--",d"")',
      '(Tags,anyof,"""]}{\\",x)',
      "(Name,eq,$1)",
      "(Name,eq,\\')",
      "(Name,eq,__proto__)",
      "(Name,like,\\)",
      "(Name,like,a\\)",
      "(Notes,like,%\\%)",
      "(Name,eq,😀 ünïcødé)",
    ];
    for (const where of attempts) expect(await select(where), where).toEqual([]);
    const count = await client.query("select count(*)::int as n from record");
    expect(count.rows[0].n).toBe(9);
  });
});

/** The indexes a plan searches with a condition (not merely walks in order). */
function indexConditions(node: PlanNode): string[] {
  const own = node["Index Name"] && node["Index Cond"] ? [node["Index Name"]] : [];
  return [...own, ...(node.Plans ?? []).flatMap(indexConditions)];
}

interface PlanNode {
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

describe("indexes", () => {
  // With sequential scans priced out, PostgreSQL searches an index wherever the condition allows
  // it: so these fail when a condition is wrapped in something no index serves.
  it.each([
    ["(Status,eq,Done)", "record_data"],
    ["(Status,in,Done,Active)", "record_data"],
    ["(Tags,anyof,a,c)", "record_data"],
    ["(Tags,allof,a,b)", "record_data"],
    ["(Vip,checked)", "record_data"],
    ["(Age,eq,36)", "record_data"],
    ["(row_id,eq,3)", "record_pkey"],
    ["(row_id,gt,3)", "record_pkey"],
    ["(row_id,in,2,4)", "record_pkey"],
  ])("%s can be served by %s", async (where, index) => {
    const compiled = buildWhere(where, FIELDS, { paramOffset: 0, now: NOW, tableAlias: "r" });
    await client.query("begin");
    try {
      await client.query("create index record_data on record using gin (data jsonb_path_ops)");
      await client.query("set local enable_seqscan = off");
      const plan = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
        `explain (format json) select r.row_id from record r where ${compiled.sql}`,
        compiled.params,
      );
      expect(indexConditions(plan.rows[0]["QUERY PLAN"][0].Plan)).toContainEqual(index);
    } finally {
      await client.query("rollback");
    }
  });
});

describe("sort against PostgreSQL", () => {
  it.each([
    ["Age", [7, 2, 6, 1, 8, 3, 4, 5, 9]],
    ["-Age", [3, 4, 5, 9, 8, 1, 6, 2, 7]],
    ["Name", [1, 8, 6, 7, 2, 3, 4, 5, 9]],
    ["created_at", [1, 2, 3, 4, 5, 6, 7, 8, 9]],
    ["-created_at", [9, 8, 7, 6, 5, 4, 2, 3, 1]],
    ["-Created", [9, 8, 7, 6, 5, 4, 2, 3, 1]],
    ["updated_at", [1, 2, 3, 5, 6, 7, 8, 9, 4]],
    // Dates and datetimes sort by their stored text when it has the stored form's shape: row
    // 5's 30 February (which nothing stores) by its text, rows 6 and 8 (an offset, no
    // milliseconds: not the stored form, which is UTC with milliseconds) with the blanks.
    ["Due", [7, 8, 5, 2, 1, 6, 3, 4, 9]],
    ["At", [2, 1, 7, 3, 4, 5, 6, 8, 9]],
    ["-At", [3, 4, 5, 6, 8, 9, 7, 1, 2]],
    ["Vip", [2, 6, 1, 7, 3, 4, 5, 8, 9]],
    ["-Vip", [3, 4, 5, 8, 9, 1, 7, 2, 6]],
    ["Tags", [1, 8, 6, 2, 7, 3, 4, 5, 9]],
    ["Status,-Age", [6, 1, 7, 8, 2, 3, 4, 5, 9]],
    ["Seq", [1, 2, 3, 6, 7, 8, 4, 5, 9]],
    ["-row_id", [9, 8, 7, 6, 5, 4, 3, 2, 1]],
  ])("%s", async (sort, expected) => {
    expect(await sorted(sort)).toEqual(expected);
  });

  it("sorts by every sortable field in both directions without a database error", async () => {
    for (const field of FIELDS.filter((f) => f.type !== "json" && f.type !== "file")) {
      expect(await sorted(field.name)).toHaveLength(9);
      expect(await sorted(`-${field.id}`)).toHaveLength(9);
    }
  });

  it("orders stored dates and datetimes as the days and instants they are", async () => {
    const random = seededRandom(7);
    const first = Date.UTC(1, 0, 1) - 1900 * 365.2425 * 86_400_000; // 0001-01-01, about
    const last = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
    const day = Date.UTC(2026, 10, 27);
    // Stored forms (kit's `datetimeString`, a date its first 10 characters), across the years
    // 1-9999 and within one day.
    const stored = [
      ...Array.from({ length: 200 }, () => first + random() * (last - first)),
      ...Array.from({ length: 100 }, () => day + random() * 86_400_000),
    ]
      .map((ms) => new Date(Math.floor(ms)))
      .filter((date) => date.getUTCFullYear() >= 1 && date.getUTCFullYear() <= 9999)
      .map((date) => date.toISOString());
    expect(stored.length).toBeGreaterThan(250);
    const order = (source: ReturnType<typeof valueSource>, by: "typed" | "sortable") =>
      `select s from (select jsonb_build_object('5', left(s, 10), '6', s) as data, s, n
         from unnest($1::text[]) with ordinality as u(s, n)) r order by ${source[by]}, n`;
    for (const field of [FIELDS[4]!, FIELDS[5]!]) {
      const source = valueSource({ kind: "field", field }, "r");
      const byType = await client.query(order(source, "typed"), [stored]);
      const byText = await client.query(order(source, "sortable"), [stored]);
      expect(byText.rows.map((row) => row.s)).toEqual(byType.rows.map((row) => row.s));
      expect(byText.rows.map((row) => row.s)).not.toEqual(stored);
    }
  });

  it("orders by row_id alone by default", async () => {
    const result = await client.query(`select row_id from record order by ${orderBy([])}`);
    expect(result.rows.map((row) => Number(row.row_id))).toEqual(ALL);
  });
});

describe("fields", () => {
  it("selects the named fields", () => {
    expect(parseFields("Age,1,Age", FIELDS).map((f) => f.id)).toEqual(["3", "1"]);
  });
});

describe("the date patterns guarding the casts", () => {
  const pad = (n: number, width: number) => String(n).padStart(width, "0");
  const candidates: string[] = [];
  for (const year of [0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9999]) {
    for (let month = 0; month <= 13; month++) {
      for (const day of [0, 1, 28, 29, 30, 31, 32]) {
        candidates.push(`${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`);
      }
    }
  }

  it("accepts exactly the real calendar dates, each of which PostgreSQL casts", async () => {
    const result = await client.query<{ s: string; matches: boolean; day: string | null }>(
      `select s, s ~ '${SQL_DATE_PATTERN}' as matches,
              (case when s ~ '${SQL_DATE_PATTERN}' then s::date::text end) as day
         from unnest($1::text[]) as s`,
      [candidates],
    );
    for (const row of result.rows) {
      const [y, m, d] = row.s.split("-").map(Number) as [number, number, number];
      expect(row.matches, row.s).toBe(y >= 1 && isCalendarDate(y, m, d));
      if (row.matches) expect(row.day).toBe(row.s);
    }
  });

  it("lets only date-times through that PostgreSQL casts", async () => {
    const times = [
      "T00:00:00Z",
      "t23:59:59.999999999z",
      " 12:30:00+15:59",
      "T12:30:00-15:59",
      "T24:00:00Z",
      "T12:60:00Z",
      "T12:00:60Z",
      "T12:00:00+16:00",
      "T12:00:00",
      "T12:00Z",
    ];
    const values = candidates.flatMap((date) => times.map((time) => `${date}${time}`));
    const result = await client.query<{ matched: number }>(
      `select count(*)::int as matched from unnest($1::text[]) as s
        where (case when s ~ '${SQL_DATETIME_PATTERN}' then s::timestamptz end) is not null`,
      [values],
    );
    const realDates = candidates.filter((c) => {
      const [y, m, d] = c.split("-").map(Number) as [number, number, number];
      return y >= 1 && isCalendarDate(y, m, d);
    });
    expect(result.rows[0]!.matched).toBe(realDates.length * 4);
  });
});
