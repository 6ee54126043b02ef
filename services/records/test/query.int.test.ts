import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { RecordCount } from "@rowbase/proto/rowbase/records/v1/records_pb";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pageStatement } from "../src/db/reads.js";
import { fieldColumn, fieldIndex, userTable } from "../src/db/user-tables/names.js";
import {
  type ConditionNode,
  type Literal,
  type Operator,
  printWhere,
  type WhereNode,
} from "../src/query/index.js";
import { listQuery } from "../src/records.js";
import type { TableSchema } from "../src/table-schema.js";
import {
  ALL_TYPES,
  as,
  createTable,
  def,
  eventually,
  failureOf,
  type Harness,
  reasonOf,
  startHarness,
  type Team,
  type TestTable,
  team,
  validationOf,
} from "./harness.js";
import type { ShownRecord as RecordMessage } from "./json-records-client.js";

// `where`, `sort`, `fields`, `limit` and `offset` through ListRecords against the real stack:
// every operator on every type it fits, sorting every sortable type both ways with nulls, and a
// property test that the SQL answers what an in-memory evaluation of the same filter answers.

let h: Harness;
let t: Team;

const DAY = 86_400_000;
const day = (offset: number) => new Date(Date.now() + offset * DAY).toISOString().slice(0, 10);
const TODAY = day(0);
const YESTERDAY = day(-1);
const TOMORROW = day(1);

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

async function list(
  table: TestTable,
  params: {
    where?: string;
    sort?: string;
    limit?: number;
    offset?: number;
    fields?: string;
    count?: RecordCount;
  },
) {
  const { sort, fields, ...rest } = params;
  return h.records.listRecords(
    {
      tableId: table.tableId,
      databaseId: table.databaseId,
      ...rest,
      sortList: sort ?? "",
      fieldList: fields ?? "",
    },
    await as(t.viewer),
  );
}

describe("filters, sorting and paging over every field type", () => {
  let table: TestTable;
  /** Row ids of the fixture rows r1..r7, by their number. */
  const row: bigint[] = [];
  const FIELDS = ALL_TYPES.map((field) =>
    field.name === "Age" ? def("Age", FieldType.NUMBER, { decimals: 2 }) : field,
  );

  beforeAll(async () => {
    table = await createTable(h, t.owner, t.organizationId, FIELDS);
    const rows: JsonObject[] = [
      {
        Name: "Ada",
        Notes: "likes 100% cotton_wool",
        Age: 36,
        Vip: true,
        Due: TODAY,
        At: `${TODAY}T10:15:00.000Z`,
        Status: "Active",
        Tags: ["a", "b"],
        Email: "ada@example.com",
        Site: "https://ada.dev",
        Phone: "+1 555 0100",
        Meta: { k: 1 },
      },
      {
        Name: "bob",
        Notes: "plain",
        Age: 17,
        Vip: false,
        Due: YESTERDAY,
        At: `${YESTERDAY}T23:59:59.999Z`,
        Status: "Done",
        Tags: ["b"],
        Email: "bob@example.com",
      },
      { Name: "", Notes: null, Age: null, Vip: null, Due: "", At: null, Status: "", Tags: [] },
      {},
      {
        Name: 'Zoë, "the" (1st)',
        Age: 18,
        Vip: false,
        Due: TOMORROW,
        At: `${TOMORROW}T00:00:00+01:00`,
        Status: "Act%ive_",
        Tags: ["a,b", "c"],
        Meta: "",
      },
      {
        Name: "ada lovelace",
        Age: -2.5,
        Vip: true,
        Due: "0001-01-01",
        At: "9999-12-31T23:59:59.999Z",
        Status: "Active",
        Tags: ["c"],
      },
      {
        Name: "It's'; drop table record; --",
        Age: 9e15,
        Due: "2024-02-29",
        At: "2024-02-29T12:00:00Z",
        Status: "Done",
        Tags: ["a", "c"],
      },
    ];
    const { records } = await h.records.batchCreateRecords(
      { tableId: table.tableId, records: rows.map((data) => ({ data })) },
      await as(t.editor),
    );
    row.push(0n, ...records.map((r) => r.rowId));
  });

  const ALL = [1, 2, 3, 4, 5, 6, 7];
  const except = (...n: number[]) => ALL.filter((i) => !n.includes(i));

  async function matching(where: string): Promise<number[]> {
    const result = await list(table, { where, limit: 1000 });
    expect(result.total).toBe(BigInt(result.records.length));
    return result.records.map((r) => row.indexOf(r.rowId));
  }

  const CASES: Array<[string, number[]]> = [
    // text, long text, e-mail, URL, phone
    ["(Name,eq,Ada)", [1]],
    ["(Name,eq,ada)", []],
    ["(Name,neq,Ada)", except(1)],
    ["(Name,like,ADA)", [1, 6]],
    ["(Name,nlike,ada)", except(1, 6)],
    ['(Name,like,"""the""")', [5]],
    ['(Name,eq,"Zoë, ""the"" (1st)")', [5]],
    ["(Name,eq,\"It's'; drop table record; --\")", [7]],
    ["(Name,gt,a)", [2, 6]],
    ["(Name,gte,bob)", [2]],
    ["(Name,lt,a)", [1, 5, 7]],
    ["(Name,lte,Ada)", [1]],
    ["(Name,btw,A,Z)", [1, 7]],
    ["(Name,in,Ada,bob)", [1, 2]],
    ["(Name,nin,Ada,bob)", except(1, 2)],
    ["(Name,blank)", [3, 4]],
    ["(Name,notblank)", [1, 2, 5, 6, 7]],
    ["(Notes,like,100%)", [1]],
    ["(Notes,like,n_w)", [1]],
    ["(Notes,like,n%w)", []],
    ["(Notes,blank)", except(1, 2)],
    ["(Email,like,@EXAMPLE.com)", [1, 2]],
    ["(Email,eq,ada@example.com)", [1]],
    ["(Email,blank)", except(1, 2)],
    ["(Site,like,https://)", [1]],
    ["(Phone,eq,+1 555 0100)", [1]],
    // number, autonumber
    ["(Age,eq,18)", [5]],
    ["(Age,eq,18.0)", [5]],
    ["(Age,eq,-2.50)", [6]],
    ["(Age,neq,18)", except(5)],
    ["(Age,gt,17)", [1, 5, 7]],
    ["(Age,gte,17)", [1, 2, 5, 7]],
    ["(Age,lt,18)", [2, 6]],
    ["(Age,lte,18)", [2, 5, 6]],
    ["(Age,gte,1e15)", [7]],
    ["(Age,btw,17,36)", [1, 2, 5]],
    ["(Age,btw,36,17)", []],
    ["(Age,in,17,36)", [1, 2]],
    ["(Age,nin,17,36)", except(1, 2)],
    ["(Age,blank)", [3, 4]],
    ["(Age,notblank)", [1, 2, 5, 6, 7]],
    ["(Seq,gt,2)", [3, 4, 5, 6, 7]],
    ["(Seq,in,1,7)", [1, 7]],
    ["(Seq,blank)", []],
    // boolean
    ["(Vip,checked)", [1, 6]],
    ["(Vip,notchecked)", except(1, 6)],
    ["(Vip,eq,false)", [2, 5]],
    ["(Vip,eq,1)", [1, 6]],
    ["(Vip,neq,true)", except(1, 6)],
    ["(Vip,blank)", [3, 4, 7]],
    ["(Vip,notblank)", [1, 2, 5, 6]],
    // date
    ["(Due,eq,today)", [1]],
    ["(Due,eq,yesterday)", [2]],
    ["(Due,eq,tomorrow)", [5]],
    ["(Due,eq,daysAgo:1)", [2]],
    ["(Due,eq,daysFromNow:1)", [5]],
    ["(Due,eq,DAYSAGO:0)", [1]],
    ["(Due,gt,today)", [5]],
    ["(Due,gte,today)", [1, 5]],
    ["(Due,lt,today)", [2, 6, 7]],
    ["(Due,lte,yesterday)", [2, 6, 7]],
    ["(Due,btw,2024-01-01,yesterday)", [2, 7]],
    ["(Due,in,2024-02-29,0001-01-01)", [6, 7]],
    ["(Due,nin,2024-02-29,0001-01-01)", except(6, 7)],
    ["(Due,neq,today)", except(1)],
    ["(Due,blank)", [3, 4]],
    ["(Due,notblank)", [1, 2, 5, 6, 7]],
    // datetime
    ["(At,eq,today)", [1, 5]],
    ["(At,eq,yesterday)", [2]],
    [`(At,eq,${TODAY}T10:15:00Z)`, [1]],
    [`(At,eq,${TODAY}T11:15:00+01:00)`, [1]],
    ["(At,gt,today)", [6]],
    ["(At,gte,today)", [1, 5, 6]],
    ["(At,lt,today)", [2, 7]],
    ["(At,lte,today)", [1, 2, 5, 7]],
    [`(At,gt,${TODAY}T10:15:00Z)`, [5, 6]],
    [`(At,lte,${TODAY}T10:15:00Z)`, [1, 2, 7]],
    ["(At,btw,yesterday,today)", [1, 2, 5]],
    ["(At,in,2024-02-29,9999-12-31)", [6, 7]],
    ["(At,neq,today)", except(1, 5)],
    ["(At,nin,today,yesterday)", except(1, 2, 5)],
    ["(At,blank)", [3, 4]],
    ["(At,notblank)", [1, 2, 5, 6, 7]],
    // single select
    ["(Status,eq,Active)", [1, 6]],
    ["(Status,eq,active)", [1, 6]],
    ["(Status,neq,Active)", except(1, 6)],
    ["(Status,in,Active,Done)", [1, 2, 6, 7]],
    ["(Status,anyof,Active,done)", [1, 2, 6, 7]],
    ["(Status,nin,Active,Done)", [3, 4, 5]],
    ["(Status,nanyof,Active,Done)", [3, 4, 5]],
    ["(Status,like,%ive_)", [5]],
    ["(Status,like,act)", [1, 5, 6]],
    ["(Status,nlike,act)", [2, 3, 4, 7]],
    ["(Status,blank)", [3, 4]],
    ["(Status,notblank)", [1, 2, 5, 6, 7]],
    // multi select
    ["(Tags,anyof,a)", [1, 7]],
    ['(Tags,anyof,"a,b")', [5]],
    ["(Tags,anyof,a,c)", [1, 5, 6, 7]],
    ['(Tags,anyof,"a,b",B)', [1, 2, 5]],
    ["(Tags,allof,a,c)", [7]],
    ["(Tags,allof,a)", [1, 7]],
    ["(Tags,allof,b)", [1, 2]],
    ["(Tags,nanyof,a)", except(1, 7)],
    ["(Tags,blank)", [3, 4]],
    ["(Tags,notblank)", [1, 2, 5, 6, 7]],
    // json
    ["(Meta,blank)", except(1)],
    ["(Meta,notblank)", [1]],
    // the record's own columns and the created/updated fields that show them
    ["(created_at,notblank)", ALL],
    ["(Updated,blank)", []],
    ["(Created,eq,today)", ALL],
    ["(updated_at,lt,yesterday)", []],
    // combinations
    ["(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))", [1, 6]],
    ["(Status,eq,Done)~or(Age,gte,18)~and(Vip,notchecked)", [2, 5, 7]],
    ["((Status,eq,Done)~or(Age,gte,18))~and(Vip,notchecked)", [2, 5, 7]],
    ["~not(Age,gte,18)", [2, 3, 4, 6]],
    ["~not((Status,eq,Done)~or(Name,blank))", [1, 5, 6]],
    ["~not~not(Vip,checked)", [1, 6]],
    [" ( Name , eq , Ada ) ~AND ( Vip , CHECKED ) ", [1]],
  ];

  it.each(CASES)("%s", async (where, expected) => {
    expect(await matching(where)).toEqual(expected);
  });

  it("filters by row id", async () => {
    expect(await matching(`(row_id,gt,${row[5]})`)).toEqual([6, 7]);
    expect(await matching(`(row_id,in,${row[1]},${row[3]})`)).toEqual([1, 3]);
    expect(await matching(`(row_id,btw,${row[2]},${row[4]})`)).toEqual([2, 3, 4]);
  });

  it("filters by field id as by name", async () => {
    expect(await matching(`(${table.id.Age},gte,36)`)).toEqual([1, 7]);
  });

  it.each([
    ["(Name,eqq,Ada)", "unknown operator 'eqq' at 7"],
    ["(Name,eq,Ada", "unexpected end of filter, expected ')' after the value at 13"],
    ["(Nope,eq,1)", "unknown field 'Nope' at 2"],
    ["(Age,eq,abc)", "'abc' is not a number at 9"],
    ["(Vip,like,x)", "operator 'like' does not apply to boolean field 'Vip' at 6"],
    ["(Tags,eq,a)", "operator 'eq' does not apply to multi_select field 'Tags' at 7"],
    ["(Doc,notblank)", "operator 'notblank' does not apply to file field 'Doc' at 6"],
    ["(Due,eq,2023-02-30)", null],
    ["(Age,btw,1)", null],
    ["(Name,eq,)", null],
    ["(Name,eq,Ada)~and", null],
    ["(Name,eq,Ada)(Vip,checked)", null],
    ["   ", "must not be empty"],
    [`(Name,eq,${"x".repeat(4100)})`, "must be at most 4096 characters"],
    [`${"~not".repeat(10)}(Vip,checked)`, null],
    [Array.from({ length: 51 }, () => "(Vip,checked)").join("~and"), null],
  ])("refuses %s with a positioned 400", async (where, message) => {
    const issues = await validationOf(list(table, { where }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ key: "where", source: "query" });
    if (message) expect(issues[0]!.message).toBe(message);
    else expect(issues[0]!.message).toMatch(/ at \d+$/);
  });

  /** A value as the query language orders it; null when blank (nulls sort apart). */
  function orderValue(record: RecordMessage, name: string): string | number | null {
    if (name === "row_id") return Number(record.rowId);
    const value = record.data![table.id[name]!] as JsonValue;
    if (value === null || value === "" || (Array.isArray(value) && value.length === 0)) return null;
    switch (name) {
      case "Vip":
        return value ? 1 : 0;
      case "At":
      case "Created":
      case "Updated":
        return Date.parse(value as string);
      case "Tags":
        // jsonb's text form of the array, compared by code point.
        return `[${(value as string[]).map((v) => JSON.stringify(v)).join(", ")}]`;
      default:
        return value as string | number;
    }
  }

  function expectedOrder(records: RecordMessage[], name: string, descending: boolean): bigint[] {
    const codePoints = (a: string, b: string) => {
      const x = Array.from(a).map((c) => c.codePointAt(0)!);
      const y = Array.from(b).map((c) => c.codePointAt(0)!);
      for (let i = 0; i < Math.min(x.length, y.length); i++)
        if (x[i] !== y[i]) return x[i]! - y[i]!;
      return x.length - y.length;
    };
    return [...records]
      .sort((a, b) => {
        const [x, y] = [orderValue(a, name), orderValue(b, name)];
        let order = 0;
        if (x === null || y === null) {
          // Nulls last ascending, first descending.
          order = x === y ? 0 : x === null ? (descending ? -1 : 1) : descending ? 1 : -1;
        } else {
          order = typeof x === "string" ? codePoints(x, y as string) : x - (y as number);
          if (descending) order = -order;
        }
        return order !== 0 ? order : Number(a.rowId - b.rowId);
      })
      .map((r) => r.rowId);
  }

  const SORTABLE = [
    "Name",
    "Notes",
    "Age",
    "Vip",
    "Due",
    "At",
    "Status",
    "Tags",
    "Email",
    "Site",
    "Phone",
    "Seq",
    "Created",
    "Updated",
    "row_id",
  ];

  it.each(SORTABLE.flatMap((name) => [[name], [`-${name}`]]))("sorts by %s", async (sort) => {
    const name = sort.replace(/^-/, "");
    const all = (await list(table, { limit: 1000 })).records;
    const sorted = (await list(table, { sort, limit: 1000 })).records;
    expect(sorted.map((r) => r.rowId)).toEqual(expectedOrder(all, name, sort.startsWith("-")));
  });

  it("sorts by several keys, ties broken by row id", async () => {
    const sorted = await list(table, { sort: "Status,-Age", limit: 1000 });
    expect(sorted.records.map((r) => row.indexOf(r.rowId))).toEqual([5, 1, 6, 7, 2, 3, 4]);
    const spaced = await list(table, { sort: ' "Status" , - Age ', limit: 1000 });
    expect(spaced.records.map((r) => r.rowId)).toEqual(sorted.records.map((r) => r.rowId));
    const byVip = await list(table, { sort: "Vip", limit: 1000 });
    expect(byVip.records.map((r) => row.indexOf(r.rowId))).toEqual([2, 5, 1, 6, 3, 4, 7]);
  });

  it("refuses unsortable and unknown sort keys", async () => {
    for (const [sort, message] of [
      ["Meta", "cannot sort by json field 'Meta' at 1"],
      ["Doc", "cannot sort by file field 'Doc' at 1"],
      ["Nope", "unknown field 'Nope' at 1"],
      ["Age,-age", "'age' is sorted by twice at 6"],
    ] as const) {
      expect(await validationOf(list(table, { sort }))).toEqual([
        { key: "sort", message, source: "query", code: expect.any(String) },
      ]);
    }
    // A blank parameter names no field (an empty one is the default order).
    expect(await validationOf(list(table, { sort: " " }))).toEqual([
      {
        key: "sort",
        message: "must name at least one field",
        source: "query",
        code: "invalid_syntax",
      },
    ]);
  });

  it("pages with limit and offset in a stable order, total counting every match", async () => {
    const pages: bigint[] = [];
    for (let offset = 0; offset < 7; offset += 3) {
      const page = await list(table, { where: "(Name,notblank)~or(Name,blank)", limit: 3, offset });
      expect(page).toMatchObject({ total: 7n, limit: 3, offset });
      pages.push(...page.records.map((r) => r.rowId));
    }
    expect(pages).toEqual(row.slice(1));
    const past = await list(table, { limit: 5, offset: 100 });
    expect(past.records).toEqual([]);
    expect(past.total).toBe(7n);
    expect((await list(table, {})).limit).toBe(50);
    const issues = await validationOf(list(table, { limit: 1001, offset: -1 }));
    expect(issues).toEqual([
      { key: "limit", message: "must be 1-1000", source: "query", code: "out_of_range" },
      { key: "offset", message: "must be 0 or more", source: "query", code: "out_of_range" },
    ]);
    expect((await validationOf(list(table, { limit: -1 })))[0]!.key).toBe("limit");
  });

  it("pages a filtered list in a field's order, total counting every match", async () => {
    const where = "(Age,notblank)~or(Name,notblank)";
    const whole = await list(table, { where, sort: "-Age", limit: 1000 });
    expect(whole.total).toBe(BigInt(whole.records.length));
    expect(whole.records.length).toBeGreaterThan(3);
    const pages: bigint[] = [];
    for (let offset = 0; offset < whole.records.length; offset += 2) {
      const page = await list(table, { where, sort: "-Age", limit: 2, offset });
      expect(page.total).toBe(whole.total);
      pages.push(...page.records.map((r) => r.rowId));
    }
    expect(pages).toEqual(whole.records.map((r) => r.rowId));
    const past = await list(table, { where, sort: "-Age", limit: 2, offset: 100 });
    expect(past.records).toEqual([]);
    expect(past.total).toBe(whole.total);
    const none = await list(table, { where: "(Name,eq,nobody)", sort: "Name" });
    expect(none).toMatchObject({ records: [], total: 0n });
  });

  it("shows only the selected fields", async () => {
    const { records } = await list(table, { fields: "Age, Name", where: "(Name,eq,Ada)" });
    expect(records[0]!.data).toEqual({ [table.id.Age!]: 36, [table.id.Name!]: "Ada" });
  });

  it("answers table_not_found for another database", async () => {
    const elsewhere = await createTable(h, t.owner, t.organizationId, [def("X", FieldType.TEXT)]);
    expect(
      await reasonOf(
        h.records.listRecords(
          { tableId: table.tableId, databaseId: elsewhere.databaseId },
          await as(t.viewer),
        ),
      ),
    ).toBe("table_not_found");
  });
});

// ---------------------------------------------------------------------------------------------
// The property: random records, random filters, SQL == in-memory evaluation.

type Kind = "text" | "number" | "boolean" | "date" | "datetime" | "single" | "multi";

const PROPERTY_FIELDS: Array<{ name: string; kind: Kind; def: ReturnType<typeof def> }> = [
  { name: "T", kind: "text", def: def("T", FieldType.TEXT) },
  { name: "N", kind: "number", def: def("N", FieldType.NUMBER, { decimals: 1 }) },
  { name: "B", kind: "boolean", def: def("B", FieldType.BOOLEAN) },
  { name: "D", kind: "date", def: def("D", FieldType.DATE) },
  { name: "W", kind: "datetime", def: def("W", FieldType.DATETIME) },
  {
    name: "S",
    kind: "single",
    def: def("S", FieldType.SINGLE_SELECT, {
      choices: [{ name: "Red" }, { name: "green" }, { name: "Blue sky" }],
    }),
  },
  {
    name: "M",
    kind: "multi",
    def: def("M", FieldType.MULTI_SELECT, {
      choices: [{ name: "x" }, { name: "y" }, { name: "z,w" }],
    }),
  },
];

const OPERATORS_OF: Record<Kind, Operator[]> = {
  text: [
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "btw",
    "in",
    "nin",
    "like",
    "nlike",
    "blank",
    "notblank",
  ],
  number: ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"],
  date: ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"],
  datetime: ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"],
  boolean: ["eq", "neq", "checked", "notchecked", "blank", "notblank"],
  single: ["eq", "neq", "in", "nin", "anyof", "nanyof", "like", "nlike", "blank", "notblank"],
  multi: ["anyof", "allof", "nanyof", "blank", "notblank"],
};

const TEXTS = [
  ...["", "a", "A", "ab", "Ab c", "b", "ba", "z", "a,b", 'q"t', "(x)", "10%", "_"],
  ...["Émile", "éM", "ΟΔΥΣΣΕΥΣ", "υσ", "Straße", "ss"],
];
const NUMBERS = ["-2", "-1.5", "0", "0.5", "1", "2.5", "3", "10"];
const DATES = [day(-2), YESTERDAY, TODAY, TOMORROW, "2020-02-29"];
const TIMES = [
  `${YESTERDAY}T00:00:00.000Z`,
  `${YESTERDAY}T23:59:59.999Z`,
  `${TODAY}T00:00:00.000Z`,
  `${TODAY}T12:30:00.000Z`,
  `${TOMORROW}T06:00:00.000Z`,
];
const SINGLES = ["Red", "red", "green", "Blue sky", "BLUE SKY", "Purple"];
const MULTIS = ["x", "y", "z,w", "X", "nope"];

/** Values a condition may name, per kind: ones that hit stored values and ones that miss. */
const FILTER_VALUES: Record<Kind, string[]> = {
  text: TEXTS.filter((v) => v !== ""),
  number: [...NUMBERS, "1.0", "-0"],
  date: [...DATES, "today", "yesterday", "daysAgo:2", "daysFromNow:1"],
  datetime: [...TIMES, ...DATES, "today", "tomorrow", `${TODAY}T13:30:00+01:00`],
  boolean: ["true", "false", "1", "0"],
  single: SINGLES,
  multi: MULTIS,
};

const storedValue: Record<Kind, fc.Arbitrary<JsonValue>> = {
  text: fc.constantFrom(...TEXTS),
  number: fc.constantFrom(...NUMBERS.map(Number)),
  boolean: fc.boolean(),
  date: fc.constantFrom(...DATES),
  datetime: fc.constantFrom(...TIMES),
  single: fc.constantFrom("Red", "green", "Blue sky"),
  multi: fc.subarray(["x", "y", "z,w"]),
};

const recordArbitrary = fc.record(
  Object.fromEntries(
    PROPERTY_FIELDS.map((f) => [f.name, fc.option(storedValue[f.kind], { nil: null })]),
  ),
  { requiredKeys: [] },
) as fc.Arbitrary<Record<string, JsonValue>>;

const literal = (text: string): Literal => ({ text, position: 0 });

const conditionArbitrary: fc.Arbitrary<ConditionNode> = fc
  .constantFrom(...PROPERTY_FIELDS)
  .chain((field) =>
    fc.constantFrom(...OPERATORS_OF[field.kind]).chain((operator) => {
      const values = fc.constantFrom(...FILTER_VALUES[field.kind]);
      const base = { kind: "condition" as const, ref: literal(field.name), operator };
      const node = (value: ConditionNode["value"]) =>
        ({ ...base, operatorPosition: 0, position: 0, value }) as ConditionNode;
      if (["blank", "notblank", "checked", "notchecked"].includes(operator)) {
        return fc.constant(node({ kind: "none" }));
      }
      if (operator === "btw") {
        return fc
          .tuple(values, values)
          .map(([a, b]) => node({ kind: "list", items: [literal(a), literal(b)] }));
      }
      if (["in", "nin", "anyof", "allof", "nanyof"].includes(operator)) {
        return fc
          .array(values, { minLength: 1, maxLength: 3 })
          .map((items) => node({ kind: "list", items: items.map(literal) }));
      }
      return values.map((v) => node({ kind: "single", value: literal(v) }));
    }),
  );

const whereArbitrary: fc.Arbitrary<WhereNode> = fc
  .letrec<{ node: WhereNode }>((tie) => ({
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      conditionArbitrary,
      tie("node").map((operand) => ({ kind: "not" as const, operand, position: 0 })),
      fc
        .tuple(
          fc.constantFrom("and" as const, "or" as const),
          fc.array(tie("node"), { minLength: 2, maxLength: 3 }),
        )
        .map(([kind, operands]) => ({ kind, operands })),
    ),
  }))
  .node.filter((node) => printWhere(node).length < 1500 && depthOf(node) <= 8);

function depthOf(node: WhereNode): number {
  if (node.kind === "condition") return 1;
  if (node.kind === "not") return 1 + depthOf(node.operand);
  return 1 + Math.max(...node.operands.map(depthOf));
}

// The in-memory evaluator: the semantics of the query language as the compiler documents them.

const FIELD_KIND = new Map(PROPERTY_FIELDS.map((f) => [f.name, f.kind]));
const CHOICES = ["Red", "green", "Blue sky", "x", "y", "z,w"];

function choiceName(text: string): string {
  if (CHOICES.includes(text)) return text;
  return CHOICES.find((c) => c.toLowerCase() === text.toLowerCase()) ?? text;
}

function relativeDay(text: string): string | undefined {
  const lower = text.toLowerCase();
  if (lower === "today") return TODAY;
  if (lower === "yesterday") return YESTERDAY;
  if (lower === "tomorrow") return TOMORROW;
  const match = /^(daysago|daysfromnow):(\d+)$/.exec(lower);
  if (!match) return undefined;
  return day((match[1] === "daysago" ? -1 : 1) * Number(match[2]));
}

function span(text: string): [number, number] {
  const date = relativeDay(text) ?? (/^\d{4}-\d{2}-\d{2}$/.test(text) ? text : undefined);
  if (date) {
    const from = Date.parse(`${date}T00:00:00Z`);
    return [from, from + DAY];
  }
  const ms = Date.parse(text);
  return [ms, ms + 1];
}

function isBlank(value: JsonValue | undefined): boolean {
  return (
    value === undefined ||
    value === null ||
    value === "" ||
    (Array.isArray(value) && value.length === 0)
  );
}

const codePointCompare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function positive(
  kind: Kind,
  operator: Operator,
  value: JsonValue | undefined,
  args: string[],
): boolean {
  if (operator === "blank") return isBlank(value);
  if (isBlank(value)) return false;
  switch (kind) {
    case "boolean":
      if (operator === "checked") return value === true;
      return value === (args[0] === "true" || args[0] === "1");
    case "multi": {
      const names = args.map(choiceName);
      const items = value as string[];
      return operator === "allof"
        ? names.every((n) => items.includes(n))
        : names.some((n) => items.includes(n));
    }
    case "datetime": {
      const at = Date.parse(value as string);
      const spans = args.map(span);
      const [from, to] = spans[0]!;
      switch (operator) {
        case "eq":
          return at >= from && at < to;
        case "in":
          return spans.some(([f, t]) => at >= f && at < t);
        case "gt":
          return at >= to;
        case "gte":
          return at >= from;
        case "lt":
          return at < from;
        case "lte":
          return at < to;
        case "btw":
          return at >= from && at < spans[1]![1];
      }
      break;
    }
    default: {
      const parse = (text: string): string | number => {
        if (kind === "number") return Number(text);
        if (kind === "date") return relativeDay(text) ?? text;
        if (kind === "single") return choiceName(text);
        return text;
      };
      const stored = value as string | number;
      const compare = (a: string | number, b: string | number) =>
        typeof a === "number" ? a - (b as number) : codePointCompare(a, b as string);
      const [first, second] = args.map(parse);
      switch (operator) {
        case "eq":
          return compare(stored, first!) === 0;
        case "in":
        case "anyof":
          return args.map(parse).some((a) => compare(stored, a) === 0);
        case "gt":
          return compare(stored, first!) > 0;
        case "gte":
          return compare(stored, first!) >= 0;
        case "lt":
          return compare(stored, first!) < 0;
        case "lte":
          return compare(stored, first!) <= 0;
        case "btw":
          return compare(stored, first!) >= 0 && compare(stored, second!) <= 0;
        case "like":
          // JavaScript's toUpperCase is Unicode's default upper-casing, as ICU's root locale.
          return String(stored).toUpperCase().includes(args[0]!.toUpperCase());
      }
    }
  }
  throw new Error(`no evaluation for ${kind} ${operator}`);
}

const NEGATED: Partial<Record<Operator, Operator>> = {
  neq: "eq",
  nlike: "like",
  nin: "in",
  nanyof: "anyof",
  notchecked: "checked",
  notblank: "blank",
};

function evaluate(node: WhereNode, record: Record<string, JsonValue>): boolean {
  switch (node.kind) {
    case "not":
      return !evaluate(node.operand, record);
    case "and":
      return node.operands.every((operand) => evaluate(operand, record));
    case "or":
      return node.operands.some((operand) => evaluate(operand, record));
    case "condition": {
      const kind = FIELD_KIND.get(node.ref.text)!;
      const args =
        node.value.kind === "none"
          ? []
          : node.value.kind === "single"
            ? [node.value.value.text]
            : node.value.items.map((item) => item.text);
      const value = record[node.ref.text];
      const base = NEGATED[node.operator];
      return base ? !positive(kind, base, value, args) : positive(kind, node.operator, value, args);
    }
  }
}

describe("lists in the order of the record's timestamps", () => {
  let table: TestTable;
  let schema: TableSchema;
  const RECORDS = 60;

  beforeAll(async () => {
    table = await createTable(h, t.owner, t.organizationId, [
      def("Name", FieldType.TEXT),
      def("Changed", FieldType.UPDATED_AT),
    ]);
    schema = {
      tableId: table.tableId,
      databaseId: table.databaseId,
      organizationId: t.organizationId,
      name: "Timestamps",
      fields: [
        {
          id: table.id.Name!,
          name: "Name",
          type: "text",
          options: {},
          required: false,
          description: "",
        },
      ],
    };
    const call = await as(t.editor);
    // Six batches of ten: each batch's records share their created_at (and updated_at until
    // updated), so the timestamps tie in groups that row_id orders.
    for (let batch = 0; batch < 6; batch++) {
      await h.records.batchCreateRecords(
        {
          tableId: table.tableId,
          records: Array.from({ length: 10 }, (_, i) => ({
            data: { Name: `n${(batch * 7 + i * 3) % 10}` },
          })),
        },
        call,
      );
    }
    const ids = await oracle("row_id asc", "true");
    for (const index of [17, 3, 42, 8, 55, 30, 21]) {
      await h.records.updateRecord(
        { tableId: table.tableId, rowId: ids[index]!, data: { Name: `u${index}` } },
        call,
      );
    }
  });

  /**
   * The table's row ids in `order` among those matching `condition`, as plain SQL sees them in
   * the table's user table.
   */
  async function oracle(order: string, condition: string, params: unknown[] = []) {
    const { rows } = await h.db.query<{ row_id: string }>(
      `select row_id from ${userTable(t.organizationId, table.tableId)}
       where ${condition} order by ${order}`,
      params,
    );
    return rows.map((r) => BigInt(r.row_id));
  }

  /** Every page of a list, `limit` at a time, and the total each page answered. */
  async function pages(params: { where?: string; sort?: string }, limit = 7) {
    const ids: bigint[] = [];
    const totals = new Set<bigint>();
    for (let offset = 0; offset < RECORDS + limit; offset += limit) {
      const page = await list(table, { ...params, limit, offset });
      ids.push(...page.records.map((r) => r.rowId));
      totals.add(page.total!);
    }
    return { ids, totals: [...totals] };
  }

  it.each([
    ["-updated_at", "updated_at desc, row_id asc"],
    ["updated_at", "updated_at asc, row_id asc"],
    ["-created_at", "created_at desc, row_id asc"],
    ["created_at", "created_at asc, row_id asc"],
    ["-Changed,-Name", "updated_at desc, NAME desc, row_id asc"],
  ])("pages by %s, ties by row id, with the table's total", async (sort, order) => {
    const name = fieldColumn(BigInt(table.id.Name!));
    const expected = await oracle(order.replace("NAME", name), "true");
    expect(await pages({ sort })).toEqual({ ids: expected, totals: [BigInt(RECORDS)] });
  });

  it("filters on the timestamps, each way, counting every match", async () => {
    const [boundary] = (
      await h.db.query<{ at: string }>(
        `select to_char(updated_at at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at
         from ${userTable(t.organizationId, table.tableId)}
         order by updated_at desc offset 3 limit 1`,
      )
    ).rows;
    const at = boundary!.at;
    // The where's datetime names its millisecond: gte takes it from its start.
    const since = "updated_at >= $1::timestamptz";
    for (const [where, sort, order, condition] of [
      [`(updated_at,gte,${at})`, "-updated_at", "updated_at desc, row_id", since],
      [`(updated_at,gte,${at})`, "", "row_id", since],
      [`~not(updated_at,gte,${at})`, "updated_at", "updated_at, row_id", `not (${since})`],
      [`(Changed,gte,${at})~and(Name,notblank)`, "-created_at", "created_at desc, row_id", since],
    ] as const) {
      const expected = await oracle(order, condition, [at]);
      expect(expected.length).toBeGreaterThan(0);
      expect(await pages({ where, sort })).toEqual({
        ids: expected,
        totals: [BigInt(expected.length)],
      });
    }
  });

  it("reads a page sorted or filtered by a timestamp from its index, not every record", async () => {
    /** The most rows any scan of the table's user table read, running the list's own statement. */
    async function mostRowsRead(params: { where: string; sort: string }) {
      const { sql, params: values } = pageStatement(
        listQuery(schema, { ...params, limit: 5, offset: 0 }, "columns"),
      );
      const client = await h.db.connect();
      try {
        // Sequential and bitmap scans off: on a table this small PostgreSQL would rather read
        // it all and sort it, which is not what a large table gets.
        await client.query("begin");
        await client.query("set local search_path = records");
        await client.query("set local enable_seqscan = off");
        await client.query("set local enable_bitmapscan = off");
        const { rows } = await client.query(`explain (analyze, format json) ${sql}`, values);
        await client.query("rollback");
        let most = 0;
        const visit = (node: Record<string, unknown>) => {
          if (node["Relation Name"] === `t_${table.tableId}`) {
            const read = Number(node["Actual Rows"]) + Number(node["Rows Removed by Filter"] ?? 0);
            most = Math.max(most, read * Number(node["Actual Loops"]));
          }
          for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) {
            visit(child);
          }
        };
        visit(rows[0]["QUERY PLAN"][0].Plan);
        return most;
      } finally {
        client.release();
      }
    }
    // A page of 5 needs the 5 and the rest of the last one's tie (at most 10 here).
    expect(await mostRowsRead({ where: "", sort: "-updated_at" })).toBeLessThanOrEqual(15);
    expect(await mostRowsRead({ where: "", sort: "created_at" })).toBeLessThanOrEqual(15);
    // A condition on a timestamp is a range of the index: nothing past it is read.
    expect(await mostRowsRead({ where: "(updated_at,gte,2999-01-01)", sort: "-updated_at" })).toBe(
      0,
    );
    // A filter on data with a timestamp order reads every match, as any order on data does.
    expect(await mostRowsRead({ where: "(Name,notblank)", sort: "-updated_at" })).toBe(RECORDS);
  });
});

describe("the where property", () => {
  let table: TestTable;

  beforeAll(async () => {
    table = await createTable(
      h,
      t.owner,
      t.organizationId,
      PROPERTY_FIELDS.map((f) => f.def),
      "Random",
    );
  });

  it("selects in SQL exactly the records an in-memory evaluation selects", async () => {
    const editor = await as(t.editor);
    const viewer = await as(t.viewer);
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordArbitrary, { minLength: 1, maxLength: 25 }),
        fc.array(whereArbitrary, { minLength: 1, maxLength: 6 }),
        async (drafts, filters) => {
          const existing = await h.records.listRecords(
            { tableId: table.tableId, limit: 1000 },
            viewer,
          );
          if (existing.records.length > 0) {
            await h.records.batchDeleteRecords(
              { tableId: table.tableId, rowIds: existing.records.map((r) => r.rowId) },
              editor,
            );
          }
          const { records } = await h.records.batchCreateRecords(
            { tableId: table.tableId, records: drafts.map((data) => ({ data })) },
            editor,
          );
          // Evaluate on what the service stored (keyed by name), not on what was sent.
          const stored = records.map((record) => ({
            rowId: record.rowId,
            values: Object.fromEntries(
              PROPERTY_FIELDS.map((f) => [f.name, record.data![table.id[f.name]!] as JsonValue]),
            ),
          }));
          for (const filter of filters) {
            const where = printWhere(filter);
            const result = await h.records.listRecords(
              { tableId: table.tableId, where, limit: 1000 },
              viewer,
            );
            const expected = stored.filter((r) => evaluate(filter, r.values)).map((r) => r.rowId);
            expect(
              result.records.map((r) => r.rowId),
              where,
            ).toEqual(expected);
            expect(result.total, where).toBe(BigInt(expected.length));
            compared += 1;
          }
        },
      ),
      { numRuns: 40 },
    );
    expect(compared).toBeGreaterThanOrEqual(40);
  }, 180_000);

  it("answers any where text with records or a validation error, never anything else", async () => {
    const viewer = await as(t.viewer);
    const piece = fc.constantFrom(
      ...'(),~" \t'.split(""),
      "~and",
      "~or",
      "~not",
      "T",
      "N",
      "B",
      "D",
      "W",
      "S",
      "M",
      "row_id",
      "eq",
      "gt",
      "btw",
      "in",
      "like",
      "blank",
      "checked",
      "anyof",
      "allof",
      "1",
      "-1.5",
      "1e400",
      "today",
      "daysAgo:99999999",
      "2026-02-30",
      `${TODAY}T25:00:00Z`,
      "%",
      "_",
      "\\",
      "'",
      "$1",
      "?",
      "😀",
      "\u0000",
      "\ud800",
    );
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { maxLength: 30 }), async (pieces) => {
        const where = pieces.join("");
        try {
          await h.records.listRecords({ tableId: table.tableId, where, limit: 5 }, viewer);
        } catch (error) {
          const issues = await validationOf(Promise.reject(error));
          expect(issues, where).toHaveLength(1);
          expect(issues[0]!.key, where).toBe("where");
        }
      }),
      { numRuns: 300 },
    );
  }, 120_000);
});

describe("field references regardless of case", () => {
  it("fold names as catalog's unique key does, in data keys, where, sort and fields", async () => {
    // "İ" and "i" are two fields (catalog's foldName makes "İ" "i̇", i and U+0307, whatever
    // PostgreSQL's lower() says); "é" precomposed and "e" with U+0301 name one field.
    const table = await createTable(h, t.owner, t.organizationId, [
      def("İ", FieldType.TEXT),
      def("i", FieldType.TEXT),
      def("Café", FieldType.NUMBER),
    ]);
    const { records } = await h.records.batchCreateRecords(
      {
        tableId: table.tableId,
        records: [
          { data: { "i\u0307": "dotted 1", I: "plain 1", "CAFE\u0301": 2 } },
          { data: { "I\u0307": "dotted 2", i: "plain 2", "cafe\u0301": 1 } },
        ],
      },
      await as(t.editor),
    );
    expect(records.map((r) => r.data)).toEqual([
      { [table.id.İ!]: "dotted 1", [table.id.i!]: "plain 1", [table.id.Café!]: 2 },
      { [table.id.İ!]: "dotted 2", [table.id.i!]: "plain 2", [table.id.Café!]: 1 },
    ]);
    const values = async (params: Parameters<typeof list>[1]) =>
      (await list(table, params)).records.map((r) => r.data);
    expect(await values({ where: "(i\u0307,eq,dotted 2)", fields: "I" })).toEqual([
      { [table.id.i!]: "plain 2" },
    ]);
    expect(await values({ where: "(I,eq,plain 1)", fields: "i\u0307" })).toEqual([
      { [table.id.İ!]: "dotted 1" },
    ]);
    expect(await values({ sort: "cafe\u0301", fields: "CAFÉ" })).toEqual([
      { [table.id.Café!]: 1 },
      { [table.id.Café!]: 2 },
    ]);
  });
});

describe("a list PostgreSQL takes too long over", () => {
  // Lists go through the read pool, whose connections carry the timeout; with one connection
  // in all, through a transaction that sets it on the ORM's.
  it.each([
    ["on the read pool", {}],
    ["with one connection", { DATABASE_POOL_MAX: "1" }],
  ])(
    "is cancelled at the list timeout and answers DeadlineExceeded, not Internal (%s)",
    async (_, env) => {
      const table = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
      await h.records.batchCreateRecords(
        { tableId: table.tableId, records: [{ data: { Name: "listed" } }] },
        await as(t.editor),
      );
      const replica = await h.replica({ LIST_TIMEOUT_MS: "200", ...env });
      const listed = await replica.records.listRecords(
        { tableId: table.tableId },
        await as(t.viewer),
      );
      expect(listed.total).toBe(1n);
      const blocker = await h.db.connect();
      try {
        // The table's user table locked whole: the list's statement waits, as a slow one would work.
        await blocker.query("begin");
        const stored = userTable(t.organizationId, table.tableId);
        await blocker.query(`lock table ${stored} in access exclusive mode`);
        const failure = await failureOf(
          replica.records.listRecords({ tableId: table.tableId }, await as(t.viewer)),
        );
        expect(failure.code).toBe(Code.DeadlineExceeded);
        // PostgreSQL no longer works on it: nothing of the replica waits for the lock.
        const { rows } = await h.db.query(
          "select count(*)::int as n from pg_locks where not granted and relation = $1::regclass",
          [stored],
        );
        expect(rows[0].n).toBe(0);
      } finally {
        await blocker.query("rollback");
        blocker.release();
        await replica.stop();
      }
    },
  );
});

describe("a list's count and has_more", () => {
  let table: TestTable;
  const MATCHES = 1_205;

  beforeAll(async () => {
    table = await createTable(h, t.owner, t.organizationId, [
      def("N", FieldType.NUMBER),
      def("Tag", FieldType.TEXT),
    ]);
    for (let from = 0; from < MATCHES + 10; from += 1000) {
      const records = [];
      for (let n = from; n < Math.min(from + 1000, MATCHES + 10); n++) {
        records.push({ data: { N: n, Tag: n < MATCHES ? "in" : "out" } });
      }
      await h.records.batchCreateRecords({ tableId: table.tableId, records }, await as(t.editor));
    }
  });

  const countOf = { exact: RecordCount.EXACT, estimated: RecordCount.ESTIMATED };

  it("says whether another page follows, whatever the count", async () => {
    for (const count of [RecordCount.EXACT, RecordCount.ESTIMATED, RecordCount.NONE]) {
      for (const [offset, more] of [
        [0, true],
        [MATCHES - 5, false],
        [MATCHES - 6, true],
        [MATCHES + 40, false],
      ] as const) {
        for (const sort of ["", "-N"]) {
          const page = await list(table, { where: "(Tag,eq,in)", sort, limit: 5, offset, count });
          expect({ count, offset, sort, more: page.hasMore }).toEqual({
            count,
            offset,
            sort,
            more,
          });
        }
      }
    }
    const last = await list(table, { limit: 1000, offset: MATCHES + 9 });
    expect(last).toMatchObject({ hasMore: false, total: BigInt(MATCHES + 10) });
    expect(last.records).toHaveLength(1);
  });

  it("makes no count with count none", async () => {
    const page = await list(table, { where: "(Tag,eq,in)", limit: 3, count: RecordCount.NONE });
    expect(page.total).toBeUndefined();
    expect(page.totalEstimated).toBe(false);
    expect(page.records.map((r) => r.data[table.id.N!])).toEqual([0, 1, 2]);
    const past = await list(table, { where: "(Tag,eq,in)", offset: 5000, count: RecordCount.NONE });
    expect(past).toMatchObject({ records: [], hasMore: false });
    expect(past.total).toBeUndefined();
  });

  it("counts exactly up to 1,000 matches and estimates past them with count estimated", async () => {
    const few = await list(table, { where: "(N,lt,1000)", limit: 2, count: countOf.estimated });
    expect(few).toMatchObject({ total: 1000n, totalEstimated: false, hasMore: true });
    const many = await list(table, { where: "(Tag,eq,in)", limit: 2, count: countOf.estimated });
    expect(many.totalEstimated).toBe(true);
    // The planner's estimate, never below the matches seen.
    expect(many.total).toBeGreaterThanOrEqual(1001n);
    expect(many.total).toBeLessThan(100_000n);
    const exact = await list(table, { where: "(Tag,eq,in)", limit: 2, count: countOf.exact });
    expect(exact).toMatchObject({ total: BigInt(MATCHES), totalEstimated: false });
    // Without a filter the table's own count is exact and cheap: it is given as it is.
    const all = await list(table, { limit: 2, count: countOf.estimated });
    expect(all).toMatchObject({ total: BigInt(MATCHES + 10), totalEstimated: false });
    const past = await list(table, {
      where: "(Tag,eq,in)",
      offset: 5000,
      count: countOf.estimated,
    });
    expect(past).toMatchObject({ records: [], totalEstimated: true, hasMore: false });
  });

  it("refuses a count mode it does not know", async () => {
    expect(await validationOf(list(table, { count: 9 as RecordCount }))).toEqual([
      {
        key: "count",
        message: "must be exact, estimated or none",
        source: "query",
        code: "invalid_value",
      },
    ]);
  });
});

describe("a list of a table of 10,000 records", () => {
  it("has the index of the field it filters on built, and answers the same with it", async () => {
    const table = await createTable(h, t.owner, t.organizationId, [def("N", FieldType.NUMBER)]);
    const column = fieldColumn(BigInt(table.id.N!));
    const relation = userTable(t.organizationId, table.tableId);
    // Written straight into the table: 10,000 records through the API would take long.
    await h.db.query(
      `insert into ${relation} (row_id, created_by, updated_by, ${column})
       select nextval('records.row_id_seq'),
              'system', 'system', g
       from generate_series(1, 10000) g`,
    );
    await h.db.query(`analyze ${relation}`);
    const params = { where: "(N,gte,9990)", sort: "-N", limit: 3, count: RecordCount.NONE };
    const first = await list(table, params);
    const values = (page: typeof first) => page.records.map((r) => r.data[table.id.N!]);
    expect(values(first)).toEqual([10000, 9999, 9998]);
    // Built in the background after the list answered.
    await eventually(async () => {
      const { rows } = await h.db.query(
        "select indisvalid as valid from pg_index where indexrelid = to_regclass($1)",
        [`org_${t.organizationId}.${fieldIndex(table.tableId, BigInt(table.id.N!))}`],
      );
      expect(rows).toEqual([{ valid: true }]);
    });
    // Now from the index, in its order: the same answers.
    const again = await list(table, { ...params, offset: 10 });
    expect(values(again)).toEqual([9990]);
    expect(again.hasMore).toBe(false);
  });
});
