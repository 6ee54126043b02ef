import { FIELD_TYPE_NAMES } from "@rowbase/kit/field-types";
import { describe, expect, it } from "vitest";
import type { QueryField, QueryFieldType } from "./field-reference.js";
import { QueryError } from "./query-error.js";
import { LIST_OPERATORS, OPERATORS, type Operator, VALUELESS_OPERATORS } from "./where-ast.js";
import { buildWhere, type CompileOptions } from "./where-compiler.js";

const FIELDS: QueryField[] = [
  { id: "11", name: "Status", type: "single_select" },
  { id: "12", name: "Age", type: "number" },
  { id: "13", name: "Vip", type: "boolean" },
  { id: "14", name: "Tags", type: "multi_select" },
  { id: "15", name: "At", type: "datetime" },
  { id: "16", name: "Due", type: "date" },
  { id: "17", name: "Name", type: "text" },
  { id: "18", name: "row_id", type: "text" },
  { id: "19", name: "Meta", type: "json" },
];

const NOW = new Date("2026-11-21T10:15:00.000Z");
const OPTIONS: CompileOptions = { paramOffset: 1, now: NOW };

function compileError(where: string, fields: QueryField[] = FIELDS): QueryError {
  try {
    buildWhere(where, fields, OPTIONS);
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
  throw new Error(`${where} compiled`);
}

/** The operators each type accepts, written out independently of the compiler's table. */
const COMPARE = ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"];
const TEXT = [...COMPARE, "like", "nlike"];
const ALLOWED: Record<QueryFieldType, string[]> = {
  text: TEXT,
  long_text: TEXT,
  email: TEXT,
  url: TEXT,
  phone: TEXT,
  number: COMPARE,
  autonumber: COMPARE,
  date: COMPARE,
  datetime: COMPARE,
  created_at: COMPARE,
  updated_at: COMPARE,
  boolean: ["eq", "neq", "checked", "notchecked", "blank", "notblank"],
  single_select: [
    "eq",
    "neq",
    "in",
    "nin",
    "anyof",
    "nanyof",
    "like",
    "nlike",
    "blank",
    "notblank",
  ],
  multi_select: ["anyof", "allof", "nanyof", "blank", "notblank"],
  json: ["blank", "notblank"],
  file: [],
  link: [],
  lookup: [],
  rollup: [],
};

/** A value every accepting type parses: "1" is a number, "true" a boolean... so pick per type. */
const SAMPLE: Record<QueryFieldType, string> = {
  text: "x",
  long_text: "x",
  email: "x",
  url: "x",
  phone: "x",
  number: "1",
  autonumber: "1",
  date: "2026-01-01",
  datetime: "2026-01-01T00:00:00Z",
  created_at: "today",
  updated_at: "today",
  boolean: "true",
  single_select: "x",
  multi_select: "x",
  json: "x",
  file: "x",
  link: "1",
  lookup: "x",
  rollup: "1",
};

function conditionFor(ref: string, operator: Operator, sample: string): string {
  if (VALUELESS_OPERATORS.has(operator)) return `(${ref},${operator})`;
  if (LIST_OPERATORS.has(operator)) return `(${ref},${operator},${sample},${sample})`;
  return `(${ref},${operator},${sample})`;
}

/**
 * A date or datetime range's parameters once: its bounds come twice, for the stored text and
 * for the checked value (where-compiler's `range`).
 */
function onceEach(params: unknown[]): unknown[] {
  const half = params.length / 2;
  const [first, second] = [params.slice(0, half), params.slice(half)];
  return half >= 1 && JSON.stringify(first) === JSON.stringify(second) ? first : params;
}

describe("compileWhere", () => {
  it("compiles the documented example to parameterised SQL", () => {
    const compiled = buildWhere(
      "(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))",
      FIELDS,
      OPTIONS,
    );
    expect(compiled.sql).toBe(
      "(data @> $2::jsonb AND " +
        "(coalesce(jsonb_path_exists(data, $3::jsonpath, '{}', true), false) OR " +
        "data @> $4::jsonb))",
    );
    expect(compiled.params).toEqual([
      '{"11":"Active"}',
      'strict $."12" ? (@ >= 18)',
      '{"13":true}',
    ]);
  });

  it("numbers placeholders after the caller's and qualifies columns with the alias", () => {
    const compiled = buildWhere("(Age,btw,1,2)~or(row_id,gt,3)~or(created_at,blank)", FIELDS, {
      paramOffset: 4,
      now: NOW,
      tableAlias: "r",
    });
    expect(compiled.sql).toContain("jsonb_path_exists(r.data, $5::jsonpath, '{}', true)");
    expect(compiled.sql).toContain("(r.created_at IS NULL)");
    // A field named row_id wins over the column.
    expect(compiled.sql).toContain("(r.data->>'18') END) COLLATE \"C\" > $6::text");
    expect(compiled.sql).not.toMatch(/\$[1-4](?![0-9])/);
    expect(compiled.params).toEqual(['strict $."12" ? (@ >= 1 && @ <= 2)', "3"]);
  });

  it("compiles ~not and the negative operators as exact complements", () => {
    expect(buildWhere("~not(Age,eq,1)", FIELDS, OPTIONS).sql).toBe("(NOT data @> $2::jsonb)");
    expect(buildWhere("(Age,neq,1)", FIELDS, OPTIONS).sql).toBe("(NOT data @> $2::jsonb)");
    expect(buildWhere("(Meta,notblank)", FIELDS, OPTIONS).sql).toBe(
      "(NOT (coalesce(data->'19', 'null'::jsonb) IN ('null'::jsonb, '\"\"'::jsonb, '[]'::jsonb)))",
    );
  });

  describe("operators and types", () => {
    for (const type of FIELD_TYPE_NAMES) {
      it(`applies exactly the operators that fit a ${type} field`, () => {
        const fields: QueryField[] = [{ id: "7", name: "F", type }];
        const accepted = OPERATORS.filter((operator) => {
          const where = conditionFor("F", operator, SAMPLE[type]);
          try {
            const { sql } = buildWhere(where, fields, OPTIONS);
            expect(sql).not.toContain("?");
            expect(sql).not.toContain("\\");
            return true;
          } catch (error) {
            if (!(error instanceof QueryError)) throw error;
            expect(error.message).toBe(
              `operator '${operator}' does not apply to ${type} field 'F' at 4`,
            );
            return false;
          }
        });
        expect(accepted.sort()).toEqual([...ALLOWED[type]].sort());
      });
    }

    it("applies the number operators to row_id and the datetime ones to created_at", () => {
      for (const operator of OPERATORS) {
        const rowId = conditionFor("row_id", operator, "1");
        const created = conditionFor("updated_at", operator, "today");
        const fits = COMPARE.includes(operator);
        for (const where of [rowId, created]) {
          if (fits) expect(() => buildWhere(where, [], OPTIONS)).not.toThrow();
          else expect(compileError(where, []).reason).toMatch(/does not apply to the column/);
        }
      }
    });
  });

  describe("references", () => {
    it("finds fields by id, by exact name and by name regardless of case", () => {
      const byId = buildWhere("(12,eq,1)", FIELDS, OPTIONS);
      const byName = buildWhere("(Age,eq,1)", FIELDS, OPTIONS);
      const folded = buildWhere("(aGE,eq,1)", FIELDS, OPTIONS);
      expect(byId).toEqual(byName);
      expect(folded).toEqual(byName);
    });

    it("lets a field named like a column win, and reaches the columns otherwise", () => {
      expect(buildWhere("(row_id,eq,5)", FIELDS, OPTIONS).params).toEqual(['{"18":"5"}']);
      expect(buildWhere("(row_id,eq,5)", [], OPTIONS)).toEqual({
        sql: "row_id = $2::bigint",
        params: ["5"],
        readsData: false,
        fieldIds: [],
        conjuncts: { equalities: [], ranges: [], exact: [] },
      });
    });

    it("treats an all-digit reference as an id even when a field has that name", () => {
      const fields: QueryField[] = [
        { id: "1", name: "2024", type: "number" },
        { id: "2024", name: "Other", type: "number" },
      ];
      expect(buildWhere("(2024,eq,1)", fields, OPTIONS).params).toEqual(['{"2024":1}']);
      expect(compileError("(2025,eq,1)", fields).message).toBe("unknown field '2025' at 2");
    });

    it.each([
      ["(Nope,eq,1)", "unknown field 'Nope' at 2"],
      ["(Age,eq,1)~and( 99 ,eq,1)", "unknown field '99' at 17"],
      ['("Sta,tus",eq,1)', "unknown field 'Sta,tus' at 2"],
      ["(__proto__,eq,1)", "unknown field '__proto__' at 2"],
      ["(constructor,blank)", "unknown field 'constructor' at 2"],
      ["(id,blank)", "unknown field 'id' at 2"],
    ])("%s", (where, message) => {
      expect(compileError(where).message).toBe(message);
    });
  });

  describe("values", () => {
    it.each([
      ["(Age,eq,abc)", "'abc' is not a number at 9"],
      ["(Age,eq,1e999)", "'1e999' is not a finite number at 9"],
      ["(Age,eq,NaN)", "'NaN' is not a number at 9"],
      ["(Age,eq,0x10)", "'0x10' is not a number at 9"],
      ["(Age,in,1,two)", "'two' is not a number at 11"],
      ["(Age,btw,1,2,)", "empty value (use blank or notblank) at 14"],
      ["(Vip,eq,yes)", "'yes' is not true or false at 9"],
      [
        "(Due,eq,2026-02-30)",
        "'2026-02-30' is not a date (YYYY-MM-DD, today, daysAgo:N, ...) at 9",
      ],
      [
        "(Due,eq,0000-01-01)",
        "'0000-01-01' is not a date (YYYY-MM-DD, today, daysAgo:N, ...) at 9",
      ],
      [
        "(Due,eq,2026-01-01T00:00:00Z)",
        "'2026-01-01T00:00:00Z' is not a date (YYYY-MM-DD, today, daysAgo:N, ...) at 9",
      ],
      ["(Due,eq,daysAgo:9999999)", "'daysAgo:9999999' is outside the years 1-9999 at 9"],
      [
        "(Due,eq,daysAgo:-1)",
        "'daysAgo:-1' is not a date (YYYY-MM-DD, today, daysAgo:N, ...) at 9",
      ],
      [
        "(At,gt,2026-11-21T25:00:00Z)",
        "'2026-11-21T25:00:00Z' is not a date-time (RFC 3339 such as 2026-11-21T10:15:00Z, a date, today, ...) at 8",
      ],
      ["(At,lt,daysFromNow:9999999)", "'daysFromNow:9999999' is outside the years 1-9999 at 8"],
      [
        "(At,eq,9999-12-31T23:59:59-01:00)",
        "'9999-12-31T23:59:59-01:00' is outside the years 1-9999 at 8",
      ],
    ])("%s", (where, message) => {
      expect(compileError(where).message).toBe(message);
    });

    it.each([
      ["(row_id,eq,1.5)", "'1.5' is not a whole number at 12"],
      ["(row_id,eq,9223372036854775808)", "'9223372036854775808' is out of range at 12"],
      ["(row_id,in,1,x)", "'x' is not a whole number at 14"],
    ])("%s", (where, message) => {
      expect(compileError(where, []).message).toBe(message);
    });

    it("parses numbers as finite decimals", () => {
      const bound = (value: string) => {
        const [path] = buildWhere(`(Age,gt,${value})`, FIELDS, OPTIONS).params;
        return /^strict \$\."12" \? \(@ > (.+)\)$/.exec(String(path))?.[1];
      };
      expect(bound("18")).toBe("18");
      expect(bound("+1.50")).toBe("1.5");
      expect(bound("-0")).toBe("0");
      expect(bound(".5")).toBe("0.5");
      expect(bound("1e-7")).toBe("1e-7");
      expect(bound("1E21")).toBe("1e+21");
    });

    it("resolves relative dates against now, in UTC", () => {
      const params = (value: string) =>
        onceEach(buildWhere(`(Due,gte,${value})`, FIELDS, OPTIONS).params);
      expect(params("today")).toEqual(["2026-11-21"]);
      expect(params("Yesterday")).toEqual(["2026-11-20"]);
      expect(params("TOMORROW")).toEqual(["2026-11-22"]);
      expect(params("daysAgo:21")).toEqual(["2026-10-31"]);
      expect(params("daysFromNow:41")).toEqual(["2027-01-01"]);
      expect(params("daysAgo:0")).toEqual(["2026-11-21"]);
      const lateEvening = { ...OPTIONS, now: new Date("2026-11-21T23:59:59.999-05:00") };
      expect(onceEach(buildWhere("(Due,gte,today)", FIELDS, lateEvening).params)).toEqual([
        "2026-11-22",
      ]);
      // A stored date is its day's only text: equality is containment (the GIN index serves it).
      expect(buildWhere("(Due,eq,today)", FIELDS, OPTIONS).params).toEqual(['{"16":"2026-11-21"}']);
    });

    it("compares datetimes to the millisecond or the whole UTC day", () => {
      const params = (where: string) => onceEach(buildWhere(where, FIELDS, OPTIONS).params);
      expect(params("(At,eq,2026-11-21T12:15:00.123456+02:00)")).toEqual([
        "2026-11-21T10:15:00.123Z",
        "2026-11-21T10:15:00.124Z",
      ]);
      expect(params("(At,eq,today)")).toEqual([
        "2026-11-21T00:00:00.000Z",
        "2026-11-22T00:00:00.000Z",
      ]);
      // The spans' hull as text, then the spans for the values within it, or for the others.
      const spans = [
        '["2026-11-21T00:00:00.000Z","2026-11-22T00:00:00.000Z")',
        '["2026-01-01T00:00:00.000Z","2026-01-01T00:00:00.001Z")',
      ];
      expect(params("(At,in,today,2026-01-01T00:00:00Z)")).toEqual([
        "2026-01-01T00:00:00.000Z",
        "2026-11-22T00:00:00.000Z",
        spans,
        spans,
      ]);
      expect(params("(At,gt,2026-01-01)")).toEqual(["2026-01-02T00:00:00.000Z"]);
      expect(params("(At,gte,2026-01-01)")).toEqual(["2026-01-01T00:00:00.000Z"]);
      expect(params("(At,lt,2026-01-01)")).toEqual(["2026-01-01T00:00:00.000Z"]);
      expect(params("(At,lte,2026-01-01)")).toEqual(["2026-01-02T00:00:00.000Z"]);
      expect(params("(At,btw,yesterday,today)")).toEqual([
        "2026-11-20T00:00:00.000Z",
        "2026-11-22T00:00:00.000Z",
      ]);
      expect(params("(At,eq,9999-12-31)")).toEqual([
        "9999-12-31T00:00:00.000Z",
        "10000-01-01T00:00:00.000Z",
      ]);
      expect(params("(At,eq,0001-01-01T00:00:00Z)")).toEqual([
        "0001-01-01T00:00:00.000Z",
        "0001-01-01T00:00:00.001Z",
      ]);
    });

    it("matches select values to their choices as writes do", () => {
      const fields: QueryField[] = [
        { id: "1", name: "Status", type: "single_select", choices: ["Active", "Done"] },
        { id: "2", name: "Tags", type: "multi_select", choices: ["Red", "Blue"] },
        { id: "3", name: "Plain", type: "single_select" },
      ];
      const params = (where: string) => buildWhere(where, fields, OPTIONS).params;
      expect(params("(Status,eq,active)")).toEqual(['{"1":"Active"}']);
      expect(params("(Status,in,DONE,gone)")).toEqual([['{"1":"Done"}', '{"1":"gone"}']]);
      expect(params("(Status,like,act)")).toEqual(["%act%"]);
      expect(params("(Tags,anyof,red,BLUE)")).toEqual([['{"2":["Red"]}', '{"2":["Blue"]}']]);
      expect(params("(Tags,allof,blue)")).toEqual(['{"2":["Blue"]}']);
      expect(params("(Plain,eq,active)")).toEqual(['{"3":"active"}']);
    });

    it("takes %, _ and \\ in like values literally", () => {
      expect(buildWhere("(Name,like,100%_a\\b)", FIELDS, OPTIONS)).toEqual({
        sql: "coalesce(upper((CASE WHEN jsonb_typeof(data->'17') = 'string' AND (data->>'17') <> '' THEN (data->>'17') END) COLLATE \"und-x-icu\") LIKE upper($2::text COLLATE \"und-x-icu\"), false)",
        params: ["%100\\%\\_a\\\\b%"],
        readsData: true,
        fieldIds: ["17"],
        conjuncts: { equalities: [], ranges: [], exact: [] },
      });
    });

    it("compiles multi_select list operators to containment", () => {
      expect(buildWhere('(Tags,anyof,"a,b",c)', FIELDS, OPTIONS)).toEqual({
        sql: "data @> ANY($2::jsonb[])",
        params: [['{"14":["a,b"]}', '{"14":["c"]}']],
        readsData: true,
        fieldIds: ["14"],
        conjuncts: { equalities: [], ranges: [], exact: [] },
      });
      expect(buildWhere("(Tags,allof,a,b)", FIELDS, OPTIONS)).toEqual({
        sql: "data @> $2::jsonb",
        params: ['{"14":["a","b"]}'],
        readsData: true,
        fieldIds: ["14"],
        conjuncts: { equalities: [], ranges: [], exact: [] },
      });
      expect(buildWhere("(Tags,nanyof,a)", FIELDS, OPTIONS).sql).toBe(
        "(NOT data @> ANY($2::jsonb[]))",
      );
    });
  });

  describe("injection", () => {
    const NASTY = [
      "'; drop table record; --",
      '")--',
      "' OR '1'='1",
      "$1",
      "\\'",
      "__proto__",
      "😀 ünïcødé",
      "a\u200bb",
      "data->>'1'",
      "*/ select 1 /*",
      "\u0001\u001f",
    ];
    const quote = (text: string) => `"${text.replaceAll('"', '""')}"`;

    it.each(NASTY)("keeps %j out of the SQL text", (nasty) => {
      for (const template of [
        "(Name,eq,V)",
        "(Name,like,V)",
        "(Name,gt,V)",
        "(Name,btw,V,V)",
        "(Name,nin,V,V)",
        "(Status,anyof,V)",
        "(Tags,allof,V,V)",
        "(Tags,nanyof,V)",
      ]) {
        const benign = buildWhere(template.replaceAll("V", "x"), FIELDS, OPTIONS);
        const compiled = buildWhere(template.replaceAll("V", quote(nasty)), FIELDS, OPTIONS);
        // The SQL does not depend on the value at all: only the parameters do.
        expect(compiled.sql).toBe(benign.sql);
        expect(compiled.sql).not.toContain(nasty);
        expect(compiled.params).not.toEqual(benign.params);
      }
    });

    it.each(NASTY)("uses only the field id for a field named %j", (nasty) => {
      const fields: QueryField[] = [{ id: "42", name: nasty, type: "text" }];
      const compiled = buildWhere(`(${quote(nasty)},eq,x)`, fields, OPTIONS);
      expect(compiled).toEqual({
        sql: "data @> $2::jsonb",
        params: ['{"42":"x"}'],
        readsData: true,
        fieldIds: ["42"],
        conjuncts: { equalities: ["42"], ranges: [], exact: ["42"] },
      });
      const sort = buildWhere(`(${quote(nasty)},gt,x)`, fields, OPTIONS);
      expect(sort.sql).not.toContain(nasty);
    });

    it("refuses a field id that is not digits before it reaches SQL, as a server fault", () => {
      const fields: QueryField[] = [{ id: "1'; drop table x; --", name: "Evil", type: "number" }];
      expect(() => buildWhere("(Evil,gt,1)", fields, OPTIONS)).toThrow(
        /^field id must be 1-19 digits/,
      );
      expect(() => buildWhere("(Evil,gt,1)", fields, OPTIONS)).not.toThrow(QueryError);
    });

    it("refuses a bad alias, offset or clock as server faults", () => {
      expect(() => buildWhere("(Age,eq,1)", FIELDS, { ...OPTIONS, tableAlias: "r; drop" })).toThrow(
        /invalid table alias/,
      );
      expect(() => buildWhere("(Age,eq,1)", FIELDS, { ...OPTIONS, paramOffset: -1 })).toThrow(
        /parameter offset/,
      );
      expect(() =>
        buildWhere("(Age,eq,1)", FIELDS, { ...OPTIONS, now: new Date(Number.NaN) }),
      ).toThrow(/now must be a valid Date/);
    });
  });
});

describe("the conjuncts of a where", () => {
  const conjuncts = (where: string) => buildWhere(where, FIELDS, OPTIONS).conjuncts;
  it("lists the fields ANDed at the top level by equality and by range, in the order named", () => {
    expect(conjuncts("(Age,gte,3)~and(Name,eq,x)~and((Name,in,a,b)~and(Age,btw,1,2))")).toEqual({
      equalities: ["17", "17"],
      ranges: ["12", "12"],
      exact: ["17"],
    });
  });
  it("leaves out what one btree cannot serve: ORs, NOTs, negations, like, blanks, checks", () => {
    for (const where of [
      "(Name,eq,x)~or(Age,gt,1)",
      "~not(Name,eq,x)",
      "(Name,neq,x)~and(Name,like,y)~and(Name,blank)~and(Vip,checked)",
    ]) {
      expect(conjuncts(where)).toEqual({ equalities: [], ranges: [], exact: [] });
    }
  });
});
