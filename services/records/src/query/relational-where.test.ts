import { describe, expect, it } from "vitest";
import type { LinkPath, QueryField } from "./field-reference.js";
import { QueryError } from "./query-error.js";
import { orderTerms, parseSort } from "./sort.js";
import { buildWhere, type CompileOptions } from "./where-compiler.js";

// Links, lookups and rollups on the per-table storage: EXISTS over the link's junction for links
// and lookups, the rollup's aggregate for rollups; ids only in the SQL, values as parameters.

const PATH: LinkPath = {
  junction: "org_7.l_2",
  own: "row_id",
  other: "linked_row_id",
  table: "org_7.t_71",
};
const STATUS: QueryField = {
  id: "22",
  name: "Status",
  type: "single_select",
  choices: ["Open", "Done"],
  choiceIds: ["ch_o", "ch_d"],
};
const HOURS: QueryField = { id: "23", name: "Hours", type: "number" };
const DUE: QueryField = { id: "24", name: "Due", type: "date" };

const FIELDS: QueryField[] = [
  { id: "2", name: "Tasks", type: "link", relation: { type: "link", path: PATH } },
  {
    id: "4",
    name: "Task status",
    type: "lookup",
    relation: { type: "lookup", path: PATH, field: STATUS },
  },
  {
    id: "8",
    name: "Hours sum",
    type: "rollup",
    relation: { type: "rollup", path: PATH, function: "sum", field: HOURS },
  },
  {
    id: "9",
    name: "Hours avg",
    type: "rollup",
    relation: { type: "rollup", path: PATH, function: "avg", field: HOURS },
  },
  {
    id: "12",
    name: "Due min",
    type: "rollup",
    relation: { type: "rollup", path: PATH, function: "min", field: DUE },
  },
  { id: "16", name: "Gone", type: "lookup" },
];

const OPTIONS: CompileOptions = {
  paramOffset: 0,
  now: new Date("2026-11-21T10:15:00.000Z"),
  tableAlias: "r",
  storage: "columns",
};

const LINKS = "from org_7.l_2 jn where jn.row_id = r.row_id";
const LINKED = `from org_7.l_2 jn join org_7.t_71 lk on lk.row_id = jn.linked_row_id where jn.row_id = r.row_id`;

function compileError(where: string): QueryError {
  try {
    buildWhere(where, FIELDS, OPTIONS);
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
  throw new Error(`${where} compiled`);
}

describe("where on links", () => {
  it("compiles has and hasnot to EXISTS over the junction, the row id a parameter", () => {
    expect(buildWhere("(Tasks,has,104)", FIELDS, OPTIONS)).toMatchObject({
      sql: `(EXISTS (select 1 ${LINKS} and jn.linked_row_id = $1::bigint))`,
      params: ["104"],
    });
    expect(buildWhere("(Tasks,hasnot,104)", FIELDS, OPTIONS).sql).toBe(
      `(NOT (EXISTS (select 1 ${LINKS} and jn.linked_row_id = $1::bigint)))`,
    );
  });

  it("compiles blank as no links and notblank as some", () => {
    expect(buildWhere("(Tasks,blank)", FIELDS, OPTIONS).sql).toBe(
      `(NOT EXISTS (select 1 ${LINKS}))`,
    );
    expect(buildWhere("(Tasks,notblank)", FIELDS, OPTIONS).sql).toBe(
      `(NOT (NOT EXISTS (select 1 ${LINKS})))`,
    );
  });

  it("refuses other operators and a row id that is no whole number, with positions", () => {
    expect(compileError("(Tasks,eq,1)").message).toBe(
      "operator 'eq' does not apply to link field 'Tasks' at 8",
    );
    expect(compileError("(Tasks,has,x1)").message).toBe("'x1' is not a whole number at 12");
    expect(compileError("(Hours sum,has,1)").message).toBe(
      "operator 'has' does not apply to rollup field 'Hours sum' at 12",
    );
  });
});

describe("where on lookups", () => {
  it("holds a positive operator when any linked value satisfies it", () => {
    const compiled = buildWhere("(Task status,eq,open)", FIELDS, OPTIONS);
    expect(compiled.sql).toBe(
      `(EXISTS (select 1 ${LINKED} and (lk.f_22 = $1::text AND lk.f_22 IS NOT NULL)))`,
    );
    // The choice's id, found by its name regardless of case.
    expect(compiled.params).toEqual(["ch_o"]);
  });

  it("holds a negative operator when no linked value satisfies its positive form", () => {
    const positive = buildWhere("(Task status,anyof,Done)", FIELDS, OPTIONS).sql;
    expect(buildWhere("(Task status,nanyof,Done)", FIELDS, OPTIONS).sql).toBe(`(NOT ${positive})`);
    const eq = buildWhere("(Task status,eq,Done)", FIELDS, OPTIONS).sql;
    expect(buildWhere("(Task status,neq,Done)", FIELDS, OPTIONS).sql).toBe(`(NOT ${eq})`);
  });

  it("is blank when no linked record holds a value", () => {
    expect(buildWhere("(Task status,blank)", FIELDS, OPTIONS).sql).toBe(
      `(NOT EXISTS (select 1 ${LINKED} and not (lk.f_22 IS NULL)))`,
    );
  });

  it("takes the looked-up field's operators only", () => {
    expect(compileError("(Task status,gt,1)").message).toBe(
      "operator 'gt' does not apply to lookup field 'Task status' at 14",
    );
    // A lookup whose link or field is gone has no value to test.
    expect(compileError("(Gone,blank)").message).toBe(
      "operator 'blank' does not apply to lookup field 'Gone' at 7",
    );
  });
});

describe("where and sort on rollups", () => {
  const SUM = `(select coalesce(sum(lk.f_23), 0) ${LINKED})`;
  const AVG = `(select avg(lk.f_23) ${LINKED})`;

  it("compares the aggregate, read once, as a number or a date", () => {
    expect(buildWhere("(Hours sum,gte,10)", FIELDS, OPTIONS)).toMatchObject({
      sql: `${SUM} >= $1::numeric`,
      params: ["10"],
    });
    expect(buildWhere("(Hours avg,lt,5)", FIELDS, OPTIONS).sql).toBe(
      `coalesce(${AVG} < $1::numeric, false)`,
    );
    expect(buildWhere("(Hours avg,blank)", FIELDS, OPTIONS).sql).toBe(`(${AVG} IS NULL)`);
    expect(buildWhere("(Due min,lt,2026-01-06)", FIELDS, OPTIONS)).toMatchObject({
      sql: `coalesce((select min(lk.f_24) ${LINKED}) < $1::date, false)`,
      params: ["2026-01-06"],
    });
    expect(compileError("(Due min,like,x)").message).toBe(
      "operator 'like' does not apply to rollup field 'Due min' at 10",
    );
  });

  it("sorts a rollup by its value and a link by its count; a lookup not at all", () => {
    const terms = orderTerms(parseSort("-Hours sum,Tasks", FIELDS), {
      tableAlias: "r",
      storage: "columns",
      indexed: new Set(["8", "2"]),
    });
    expect(terms).toEqual([
      { value: SUM, direction: "DESC NULLS FIRST", rowId: false, column: false },
      {
        value: `(select count(*) ${LINKS})`,
        direction: "ASC NULLS LAST",
        rowId: false,
        column: false,
      },
      { value: "r.row_id", direction: "ASC", rowId: true, column: true },
    ]);
    expect(() => parseSort("Task status", FIELDS)).toThrow(
      "cannot sort by lookup field 'Task status' at 1",
    );
  });
});
