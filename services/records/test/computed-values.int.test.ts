import type { JsonObject } from "@bufbuild/protobuf";
import { query, type SchemaField } from "@rowbase/kit";
import { validationOf } from "@rowbase/kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findRecord, type PageQuery, pageStatement, pageWithTotal } from "../src/db/reads.js";
import { applyDdl, createLinkJunctionSql, createTableSql } from "../src/db/user-tables/ddl.js";
import { indexKeysOf } from "../src/db/user-tables/indexes.js";
import { linkJunction, userTable } from "../src/db/user-tables/names.js";
import { userTableRows } from "../src/db/user-tables/table-rows.js";
import { listQuery } from "../src/records.js";
import type { TableSchema } from "../src/table-schema.js";
import { openRecordsDatabase } from "./database.js";

// Lookups and rollups computed in the page's statement, and `where` and `sort` on links,
// lookups and rollups, on PostgreSQL: two user tables (projects linking tasks) whose junction's
// pairs are inserted directly.

const ORGANIZATION = 7n;
const PROJECTS = 70n;
const TASKS = 71n;

const field = (id: string, name: string, type: SchemaField["type"], options = {}) =>
  ({ id, name, type, options, required: false, description: "" }) as SchemaField;
const rollup = (id: string, name: string, fn: string, fieldId: number) =>
  field(id, name, "rollup", { link_field_id: 2, field_id: fieldId, function: fn });
const lookup = (id: string, name: string, fieldId: number) =>
  field(id, name, "lookup", { link_field_id: 2, field_id: fieldId });

const TASK_FIELDS: SchemaField[] = [
  field("20", "Projects", "link", { table_id: 70, multiple: true, inverse_field_id: 2 }),
  field("21", "Title", "text"),
  field("22", "Status", "single_select", {
    choices: [
      { id: "ch_o", name: "Open" },
      { id: "ch_d", name: "Done" },
    ],
  }),
  field("23", "Hours", "number", { decimals: 2 }),
  field("24", "Due", "date"),
  field("25", "At", "datetime"),
];

const PROJECT_FIELDS: SchemaField[] = [
  field("1", "Name", "text"),
  field("2", "Tasks", "link", { table_id: 71, multiple: true, inverse_field_id: 20 }),
  lookup("3", "Task names", 21),
  lookup("4", "Task status", 22),
  lookup("5", "Task hours", 23),
  lookup("6", "Task due", 24),
  rollup("7", "Count", "count", 21),
  rollup("8", "Hours sum", "sum", 23),
  rollup("9", "Hours avg", "avg", 23),
  rollup("10", "Hours min", "min", 23),
  rollup("11", "Hours max", "max", 23),
  rollup("12", "Due min", "min", 24),
  rollup("13", "Due max", "max", 24),
  rollup("14", "Titled", "count_values", 21),
  rollup("15", "At max", "max", 25),
  lookup("16", "Gone", 999),
  lookup("17", "Task at", 25),
];

const SCHEMA: TableSchema = {
  tableId: PROJECTS,
  databaseId: 1n,
  organizationId: ORGANIZATION,
  name: "Projects",
  fields: PROJECT_FIELDS,
};
const LINKED = new Map([[TASKS.toString(), TASK_FIELDS]]);

// Projects 1-5 and the tasks each links.
const LINKS: Record<number, number[]> = {
  1: [101, 102, 103],
  2: [104],
  3: [],
  4: [105],
  5: [104, 102],
};
const TASK_ROWS = [
  [101, "Write", "ch_o", "2.5", "2026-01-10", "2026-01-10T10:00:00Z"],
  [102, "Review", "ch_d", "4", "2026-01-05", "2026-01-11T08:30:00Z"],
  [103, "", null, null, null, null],
  [104, "Ship", "ch_o", "10", "2026-02-01", "2026-02-01T00:00:00Z"],
  [105, null, null, null, null, null],
] as const;

/** What each project shows, by field id. */
const EXPECTED: Record<number, JsonObject> = {
  1: {
    1: "Alpha",
    3: ["Write", "Review"],
    4: ["Open", "Done"],
    5: [2.5, 4],
    6: ["2026-01-10", "2026-01-05"],
    7: 3,
    8: 6.5,
    9: 3.25,
    10: 2.5,
    11: 4,
    12: "2026-01-05",
    13: "2026-01-10",
    14: 2,
    15: "2026-01-11T08:30:00.000Z",
    16: [],
    17: ["2026-01-10T10:00:00.000Z", "2026-01-11T08:30:00.000Z"],
  },
  2: {
    1: "Beta",
    3: ["Ship"],
    4: ["Open"],
    5: [10],
    6: ["2026-02-01"],
    7: 1,
    8: 10,
    9: 10,
    10: 10,
    11: 10,
    12: "2026-02-01",
    13: "2026-02-01",
    14: 1,
    15: "2026-02-01T00:00:00.000Z",
    16: [],
    17: ["2026-02-01T00:00:00.000Z"],
  },
  3: {
    1: "Gamma",
    3: [],
    4: [],
    5: [],
    6: [],
    7: 0,
    8: 0,
    9: null,
    10: null,
    11: null,
    12: null,
    13: null,
    14: 0,
    15: null,
    16: [],
    17: [],
  },
  // Its one task holds no value.
  4: {
    1: "Delta",
    3: [],
    4: [],
    5: [],
    6: [],
    7: 1,
    8: 0,
    9: null,
    10: null,
    11: null,
    12: null,
    13: null,
    14: 0,
    15: null,
    16: [],
    17: [],
  },
  5: {
    1: "Eps",
    3: ["Review", "Ship"],
    4: ["Done", "Open"],
    5: [4, 10],
    6: ["2026-01-05", "2026-02-01"],
    7: 2,
    8: 14,
    9: 7,
    10: 4,
    11: 10,
    12: "2026-01-05",
    13: "2026-02-01",
    14: 2,
    15: "2026-02-01T00:00:00.000Z",
    16: [],
    17: ["2026-01-11T08:30:00.000Z", "2026-02-01T00:00:00.000Z"],
  },
};

let db: Awaited<ReturnType<typeof openRecordsDatabase>>;
const run = (sql: string, params: readonly unknown[] = []) => query(db.orm.em.fork(), sql, params);
const read = <R extends object>(sql: string, params: readonly unknown[]) =>
  query<R>(db.orm.em.fork(), sql, params);

beforeAll(async () => {
  db = await openRecordsDatabase();
  const stored = (fields: SchemaField[]) => fields.map((f) => ({ ...f, id: BigInt(f.id) }));
  await applyDdl(db.orm.em.fork(), [
    ...createTableSql(ORGANIZATION, PROJECTS, stored(PROJECT_FIELDS)),
    ...createTableSql(ORGANIZATION, TASKS, stored(TASK_FIELDS)),
    ...createLinkJunctionSql(ORGANIZATION, {
      id: 2n,
      tableId: PROJECTS,
      inverseFieldId: 20n,
      linkedTableId: TASKS,
    }),
  ]);
  for (const [n, name] of [
    [1, "Alpha"],
    [2, "Beta"],
    [3, "Gamma"],
    [4, "Delta"],
    [5, "Eps"],
  ] as const) {
    await run(
      `insert into ${userTable(ORGANIZATION, PROJECTS)} (row_id, created_by, updated_by, f_1)
       values ($1, 'system', 'system', $2)`,
      [n, name],
    );
  }
  for (const row of TASK_ROWS) {
    await run(
      `insert into ${userTable(ORGANIZATION, TASKS)}
         (row_id, created_by, updated_by, f_21, f_22, f_23, f_24, f_25)
       values ($1, 'system', 'system', $2, $3, $4, $5, $6)`,
      [...row],
    );
  }
  const junction = linkJunction(ORGANIZATION, 2n, 20n);
  for (const [project, tasks] of Object.entries(LINKS)) {
    for (const task of tasks) {
      await run(
        `insert into ${junction.relation} (${junction.own}, ${junction.other}) values ($1, $2)`,
        [project, task],
      );
    }
  }
  await run(`analyze ${junction.relation}`);
});

afterAll(async () => {
  await db?.close();
});

function listOf(where: string, sort = "", count: "exact" | "none" = "exact"): PageQuery {
  return listQuery(
    SCHEMA,
    { where, sort, limit: 50, offset: 0, count },
    "columns",
    new Set(),
    LINKED,
  );
}

async function pageOf(where: string, sort = "") {
  const page = await pageWithTotal(read, listOf(where, sort));
  if (page === "over_budget") throw new Error("over budget");
  return page;
}

async function idsOf(where: string, sort = ""): Promise<number[]> {
  const page = await pageOf(where, sort);
  expect(page.total).toBe(BigInt(page.records.length));
  return page.records.map((record) => Number(record.rowId));
}

/** The 400 a list answers for a `where` or `sort`: its problems as JSON text. */
async function refusal(where: string, sort = ""): Promise<string> {
  try {
    listOf(where, sort);
  } catch (error) {
    return JSON.stringify(await validationOf(Promise.reject(error)));
  }
  throw new Error(`${where} ${sort} was accepted`);
}

/** A record's data without its link fields' values (the link tests' concern, links.int.test.ts). */
function computedData(data: JsonObject): JsonObject {
  // The link fields of both schemas here: Projects/Tasks (20, 2) and Parent/Children (41, 42).
  const links = new Set(["2", "20", "41", "42"]);
  return Object.fromEntries(Object.entries(data).filter(([key]) => !links.has(key)));
}

describe("lookup and rollup values", () => {
  it("computes each project's lookups and rollups in the page's statement", async () => {
    const page = await pageOf("");
    expect(page.records.map((r) => Number(r.rowId))).toEqual([1, 2, 3, 4, 5]);
    for (const record of page.records) {
      expect(computedData(record.data)).toEqual(EXPECTED[Number(record.rowId)]);
    }
  });

  it("reads the same values by id", async () => {
    const rows = userTableRows(ORGANIZATION, PROJECTS, PROJECT_FIELDS, LINKED);
    const page = await pageOf("");
    for (const n of [1, 3, 4, 5]) {
      const one = await findRecord(db.orm.em.fork(), PROJECTS, BigInt(n), rows);
      expect(computedData(one!.data)).toEqual(EXPECTED[n]);
      // In jsonb's key order, as the page's record has them.
      const listed = page.records.find((r) => r.rowId === BigInt(n))!;
      expect(Object.keys(one!.data)).toEqual(Object.keys(listed.data));
    }
  });

  it("reads [] and null for lookups and rollups whose link or linked table is not known", async () => {
    const page = await pageWithTotal(
      read,
      listQuery(
        SCHEMA,
        { where: "", sort: "", limit: 1, offset: 0 },
        "columns",
        new Set(),
        new Map(),
      ),
    );
    if (page === "over_budget") throw new Error("over budget");
    expect(computedData(page.records[0]!.data)).toEqual({
      ...Object.fromEntries(
        PROJECT_FIELDS.filter((f) => f.type === "lookup").map((f) => [f.id, []]),
      ),
      ...Object.fromEntries(
        PROJECT_FIELDS.filter((f) => f.type === "rollup").map((f) => [
          f.id,
          f.id === "7" ? 3 : null,
        ]),
      ),
      1: "Alpha",
    });
  });
});

describe("where on links, lookups and rollups", () => {
  it("finds the records that link a row id, or none", async () => {
    expect(await idsOf("(Tasks,has,104)")).toEqual([2, 5]);
    expect(await idsOf("(Tasks,hasnot,104)")).toEqual([1, 3, 4]);
    expect(await idsOf("(Tasks,has,999999)")).toEqual([]);
    expect(await idsOf("(Tasks,hasnot,999999)")).toEqual([1, 2, 3, 4, 5]);
    expect(await idsOf("(Tasks,blank)")).toEqual([3]);
    expect(await idsOf("(Tasks,notblank)")).toEqual([1, 2, 4, 5]);
    expect(await idsOf("~not(Tasks,has,101)~and(Tasks,notblank)")).toEqual([2, 4, 5]);
  });

  it("holds a lookup's positive operators for any value, its negative ones for none", async () => {
    expect(await idsOf("(Task names,eq,Ship)")).toEqual([2, 5]);
    expect(await idsOf("(Task names,neq,Ship)")).toEqual([1, 3, 4]);
    expect(await idsOf("(Task names,like,VIEW)")).toEqual([1, 5]);
    expect(await idsOf("(Task names,nlike,view)")).toEqual([2, 3, 4]);
    expect(await idsOf("(Task names,blank)")).toEqual([3, 4]);
    expect(await idsOf("(Task names,notblank)")).toEqual([1, 2, 5]);
    expect(await idsOf("(Task status,eq,open)")).toEqual([1, 2, 5]);
    expect(await idsOf("(Task status,anyof,Done)")).toEqual([1, 5]);
    expect(await idsOf("(Task status,nanyof,Done)")).toEqual([2, 3, 4]);
    expect(await idsOf("(Task status,blank)")).toEqual([3, 4]);
    expect(await idsOf("(Task hours,gt,5)")).toEqual([2, 5]);
    expect(await idsOf("(Task hours,lte,2.5)")).toEqual([1]);
    expect(await idsOf("(Task hours,nin,4,10)")).toEqual([3, 4]);
    expect(await idsOf("(Task due,btw,2026-01-01,2026-01-06)")).toEqual([1, 5]);
    expect(await idsOf("(Task at,eq,2026-01-11)")).toEqual([1, 5]);
  });

  it("compares a rollup's value as a number or a date", async () => {
    expect(await idsOf("(Hours sum,gte,10)")).toEqual([2, 5]);
    expect(await idsOf("(Hours sum,eq,0)")).toEqual([3, 4]);
    expect(await idsOf("(Hours avg,blank)")).toEqual([3, 4]);
    expect(await idsOf("(Hours avg,lt,5)")).toEqual([1]);
    expect(await idsOf("(Hours avg,neq,10)")).toEqual([1, 3, 4, 5]);
    expect(await idsOf("(Count,eq,1)")).toEqual([2, 4]);
    expect(await idsOf("(Count,neq,1)")).toEqual([1, 3, 5]);
    expect(await idsOf("(Titled,gt,1)")).toEqual([1, 5]);
    expect(await idsOf("(Hours max,in,4,10)")).toEqual([1, 2, 5]);
    expect(await idsOf("(Due min,lt,2026-01-06)")).toEqual([1, 5]);
    expect(await idsOf("(Due max,notblank)")).toEqual([1, 2, 5]);
    expect(await idsOf("(At max,eq,2026-02-01)")).toEqual([2, 5]);
  });

  it("answers 400 for operators that do not apply, and for a lookup with nothing to look up", async () => {
    expect(await refusal("(Tasks,eq,1)")).toContain(
      "operator 'eq' does not apply to link field 'Tasks' at 8",
    );
    expect(await refusal("(Tasks,has,one)")).toContain("'one' is not a whole number at 12");
    expect(await refusal("(Task hours,like,1)")).toContain("does not apply to lookup field");
    expect(await refusal("(Hours sum,like,1)")).toContain("does not apply to rollup field");
    expect(await refusal("(Gone,blank)")).toContain("does not apply to lookup field 'Gone'");
  });

  it("sends field ids and no names or values in the SQL, and asks for no index of them", () => {
    const evil = "x'); drop table t; --";
    const page = listOf(
      `(Task names,eq,"${evil.replace(/"/g, "")}")~or(Hours sum,gt,1)`,
      "-Hours avg,Tasks",
    );
    const { sql, params } = pageStatement(page);
    expect(sql).not.toContain("drop table");
    expect(sql).not.toMatch(/Task names|Hours|Tasks/);
    expect(sql).toContain("org_7.l_2");
    expect(params).toContain(evil);
    expect(page.indexCandidates).toEqual([]);
    expect(
      indexKeysOf(
        SCHEMA,
        {
          fieldIds: ["3", "8", "2"],
          conjuncts: { equalities: ["3", "8"], ranges: ["9"], exact: ["3"] },
        },
        ["8", "2"],
      ),
    ).toEqual({ filter: [], sort: [] });
  });
});

describe("sort by rollups and links", () => {
  it("sorts by a rollup's value, nulls last ascending and first descending, ties by row id", async () => {
    expect(await idsOf("", "Hours sum")).toEqual([3, 4, 1, 2, 5]);
    expect(await idsOf("", "-Hours sum")).toEqual([5, 2, 1, 3, 4]);
    expect(await idsOf("", "Hours avg")).toEqual([1, 5, 2, 3, 4]);
    expect(await idsOf("", "-Hours avg")).toEqual([3, 4, 2, 5, 1]);
    expect(await idsOf("", "Due min,-Name")).toEqual([5, 1, 2, 3, 4]);
    expect(await idsOf("(Tasks,notblank)", "-Due max")).toEqual([4, 2, 5, 1]);
  });

  it("sorts by a link's count of links", async () => {
    expect(await idsOf("", "Tasks")).toEqual([3, 2, 4, 5, 1]);
    expect(await idsOf("", "-Tasks")).toEqual([1, 5, 2, 4, 3]);
  });

  it("refuses to sort by a lookup", async () => {
    expect(await refusal("", "Task names")).toContain("cannot sort by lookup field 'Task names'");
  });
});

describe("a table linked to itself", () => {
  const TABLE = 80n;
  const FIELDS: SchemaField[] = [
    field("40", "Name", "text"),
    field("41", "Parent", "link", { table_id: 80, multiple: false, inverse_field_id: 42 }),
    field("42", "Children", "link", { table_id: 80, multiple: true, inverse_field_id: 41 }),
    field("43", "Child count", "rollup", { link_field_id: 42, field_id: 40, function: "count" }),
    field("44", "Parent name", "lookup", { link_field_id: 41, field_id: 40 }),
    field("45", "Child names", "lookup", { link_field_id: 42, field_id: 40 }),
  ];
  const TREE: TableSchema = { ...SCHEMA, tableId: TABLE, name: "Tree", fields: FIELDS };
  const linked = new Map([[TABLE.toString(), FIELDS]]);

  beforeAll(async () => {
    await applyDdl(db.orm.em.fork(), [
      ...createTableSql(
        ORGANIZATION,
        TABLE,
        FIELDS.map((f) => ({ ...f, id: BigInt(f.id) })),
      ),
      ...createLinkJunctionSql(ORGANIZATION, {
        id: 41n,
        tableId: TABLE,
        inverseFieldId: 42n,
        linkedTableId: TABLE,
      }),
    ]);
    for (const [n, name] of [
      [201, "Root"],
      [202, "A"],
      [203, "B"],
    ] as const) {
      await run(
        `insert into ${userTable(ORGANIZATION, TABLE)} (row_id, created_by, updated_by, f_40)
         values ($1, 'system', 'system', $2)`,
        [n, name],
      );
    }
    // Parent (field 41) of 202 and 203 is 201; Children (its inverse) of 201 are them.
    const parent = linkJunction(ORGANIZATION, 41n, 42n);
    for (const child of [202, 203]) {
      await run(
        `insert into ${parent.relation} (${parent.own}, ${parent.other}) values ($1, 201)`,
        [child],
      );
    }
  });

  const list = (where: string, sort = "") =>
    listQuery(TREE, { where, sort, limit: 50, offset: 0 }, "columns", new Set(), linked);

  it("reads each side of the junction for its own link", async () => {
    const page = await pageWithTotal(read, list(""));
    if (page === "over_budget") throw new Error("over budget");
    expect(page.records.map((r) => computedData(r.data))).toEqual([
      { 40: "Root", 43: 2, 44: [], 45: ["A", "B"] },
      { 40: "A", 43: 0, 44: ["Root"], 45: [] },
      { 40: "B", 43: 0, 44: ["Root"], 45: [] },
    ]);
    const rows = userTableRows(ORGANIZATION, TABLE, FIELDS, linked);
    const one = await findRecord(db.orm.em.fork(), TABLE, 201n, rows);
    expect(one?.data).toEqual(page.records[0]!.data);
  });

  it("filters and sorts by either side", async () => {
    const ids = async (where: string, sort = "") => {
      const page = await pageWithTotal(read, list(where, sort));
      if (page === "over_budget") throw new Error("over budget");
      return page.records.map((r) => Number(r.rowId));
    };
    expect(await ids("(Children,has,202)")).toEqual([201]);
    expect(await ids("(Parent,has,201)")).toEqual([202, 203]);
    expect(await ids("(Parent,blank)")).toEqual([201]);
    expect(await ids("(Parent name,eq,Root)")).toEqual([202, 203]);
    expect(await ids("", "-Children,-Name")).toEqual([201, 203, 202]);
  });
});
