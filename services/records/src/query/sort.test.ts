import { describe, expect, it } from "vitest";
import type { QueryField } from "./field-reference.js";
import { QueryError } from "./query-error.js";
import { orderBySql, orderTerms, parseSort } from "./sort.js";

/** The ORDER BY list of sort keys, as SQL. */
const orderBy = (...args: Parameters<typeof orderTerms>) => orderBySql(orderTerms(...args));

const FIELDS: QueryField[] = [
  { id: "1", name: "Name", type: "text" },
  { id: "2", name: "Age", type: "number" },
  { id: "3", name: "Size, net", type: "number" },
  { id: "4", name: "-odd", type: "date" },
  { id: "5", name: "Meta", type: "json" },
  { id: "6", name: "Doc", type: "file" },
  { id: "7", name: "Created", type: "created_at" },
  { id: "8", name: "Vip", type: "boolean" },
  { id: "9", name: "At", type: "datetime" },
  { id: "10", name: "Tags", type: "multi_select" },
];

function sortError(text: string): QueryError {
  try {
    parseSort(text, FIELDS);
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
  throw new Error(`${text} parsed`);
}

const described = (text: string) =>
  parseSort(text, FIELDS).map((key) => {
    const name = key.target.kind === "field" ? key.target.field.id : key.target.column;
    return `${key.descending ? "-" : "+"}${name}`;
  });

describe("parseSort", () => {
  it.each([
    ["Name", ["+1"]],
    ["-Age,Name", ["-2", "+1"]],
    [" - Age , 1 ", ["-2", "+1"]],
    ['"Size, net",-"Size, net"x', undefined],
    ['-"Size, net"', ["-3"]],
    ['"-odd"', ["+4"]],
    ['-"-odd"', ["-4"]],
    ["row_id", ["+row_id"]],
    ["-created_at,updated_at", ["-created_at", "+updated_at"]],
    ["-Created,created_at", ["-7", "+created_at"]],
    ["name,AGE", ["+1", "+2"]],
  ])("%s", (text, expected) => {
    if (expected === undefined) {
      expect(sortError(text).message).toBe("expected ',' after the quoted name at 25");
    } else {
      expect(described(text)).toEqual(expected);
    }
  });

  it.each([
    ["Nope", "unknown field 'Nope' at 1"],
    ["Name,-Nope", "unknown field 'Nope' at 7"],
    ["-odd", "unknown field 'odd' at 2"],
    ["Name,-Name", "'Name' is sorted by twice at 7"],
    ["Age,2", "'2' is sorted by twice at 5"],
    ["row_id,-row_id", "'row_id' is sorted by twice at 9"],
    ["Meta", "cannot sort by json field 'Meta' at 1"],
    ["-Doc", "cannot sort by file field 'Doc' at 2"],
    ["Name,,Age", "expected a field reference at 6"],
    ["Name,", "expected a field reference at 6"],
    ["-", "expected a field reference at 2"],
    ['"Name', "unterminated quoted text at 1"],
    ["", "must name at least one field"],
    ["  ", "must name at least one field"],
  ])("%j is refused", (text, message) => {
    const error = sortError(text);
    expect(error.message).toBe(message);
    expect(error.key).toBe("sort");
  });

  it("allows 20 keys and refuses 21", () => {
    const fields: QueryField[] = Array.from({ length: 21 }, (_, i) => ({
      id: String(i + 1),
      name: `F${i + 1}`,
      type: "number",
    }));
    const list = (n: number) =>
      fields
        .slice(0, n)
        .map((f) => f.name)
        .join(",");
    expect(parseSort(list(20), fields)).toHaveLength(20);
    expect(() => parseSort(list(21), fields)).toThrow("more than 20 sort keys at 72");
  });

  it("refuses overlong text", () => {
    expect(sortError("a".repeat(16_385)).message).toBe("must be at most 16384 characters");
  });
});

describe("orderTerms", () => {
  it("orders by typed values with nulls last ascending and first descending, then row_id", () => {
    expect(orderBy(parseSort("-Age,Name", FIELDS))).toBe(
      "(CASE WHEN jsonb_typeof(data->'2') = 'number' THEN (data->'2')::numeric END) DESC NULLS FIRST, " +
        "(CASE WHEN jsonb_typeof(data->'1') = 'string' AND (data->>'1') <> '' THEN (data->>'1') END) COLLATE \"C\" ASC NULLS LAST, " +
        "row_id ASC",
    );
  });

  it("reads the record's columns for system references and created_at fields", () => {
    expect(orderBy(parseSort("-Created,updated_at", FIELDS), { tableAlias: "r" })).toBe(
      "r.created_at DESC NULLS FIRST, r.updated_at ASC NULLS LAST, r.row_id ASC",
    );
  });

  it("needs no tie-break when row_id is a key", () => {
    expect(orderBy(parseSort("Age,-row_id", FIELDS))).toBe(
      "(CASE WHEN jsonb_typeof(data->'2') = 'number' THEN (data->'2')::numeric END) ASC NULLS LAST, row_id DESC NULLS FIRST",
    );
  });

  it("defaults to row_id ascending", () => {
    expect(orderBy([])).toBe("row_id ASC");
    expect(orderBy([], { tableAlias: "rec" })).toBe("rec.row_id ASC");
  });

  it("casts booleans behind checks, orders dates and datetimes of the stored shape and choices as text", () => {
    const sql = orderBy(
      parseSort("Vip,-odd,At,Tags", [...FIELDS, { id: "11", name: "odd", type: "date" }]),
    );
    expect(sql).toContain("THEN (data->'8')::boolean END) ASC NULLS LAST");
    expect(sql).toContain(
      `(CASE WHEN (data->>'11') LIKE '____-__-__' THEN (data->>'11') END) COLLATE "C" DESC NULLS FIRST`,
    );
    expect(sql).toContain(
      `(CASE WHEN (data->>'9') LIKE '____-__-__T__:__:__.___Z' THEN (data->>'9') END) COLLATE "C" ASC NULLS LAST`,
    );
    expect(sql).toContain("THEN (data->>'10') END) COLLATE \"C\" ASC NULLS LAST");
    expect(sql).not.toContain("?");
  });

  it("refuses an invalid alias as a server fault", () => {
    expect(() => orderBy([], { tableAlias: "x y" })).toThrow(/invalid table alias/);
  });
});
