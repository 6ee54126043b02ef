import { errorInfoOf } from "@rowbase/kit";
import { FIELD_TYPE_NAMES, foldName } from "@rowbase/kit/field-types";
import { describe, expect, it } from "vitest";
import {
  inverseFieldName,
  keepLinkIdentity,
  rollupFunctionProblem,
  shownFieldProblem,
} from "./relational-options.js";

describe("shownFieldProblem", () => {
  it("refuses links, lookups, rollups and files, nothing else", () => {
    const refused = FIELD_TYPE_NAMES.filter((type) => shownFieldProblem(type) !== undefined);
    expect(refused).toEqual(["file", "link", "lookup", "rollup"]);
  });
});

describe("rollupFunctionProblem", () => {
  const takes = (fn: Parameters<typeof rollupFunctionProblem>[0]) =>
    FIELD_TYPE_NAMES.filter((type) => !shownFieldProblem(type)).filter(
      (type) => rollupFunctionProblem(fn, type) === undefined,
    );

  it("counts any field, sums numbers, takes the least and most of numbers and times", () => {
    const shown = FIELD_TYPE_NAMES.filter((type) => !shownFieldProblem(type));
    expect(takes("count")).toEqual(shown);
    expect(takes("count_values")).toEqual(shown);
    expect(takes("sum")).toEqual(["number", "autonumber"]);
    expect(takes("avg")).toEqual(["number", "autonumber"]);
    const ordered = ["number", "date", "datetime", "autonumber", "created_at", "updated_at"];
    expect(takes("min")).toEqual(ordered);
    expect(takes("max")).toEqual(ordered);
    expect(rollupFunctionProblem("sum", "text")).toBe(
      "sum needs a number or autonumber field, not text",
    );
  });
});

describe("inverseFieldName", () => {
  const used = (...names: string[]) => new Set(names.map(foldName));

  it("takes the table's name, else numbers it past the names used regardless of case", () => {
    expect(inverseFieldName("Orders", used("Name"))).toBe("Orders");
    expect(inverseFieldName("Orders", used("orders"))).toBe("Orders (2)");
    expect(inverseFieldName("Orders", used("ORDERS", "orders (2)", "Orders (3)"))).toBe(
      "Orders (4)",
    );
  });

  it("cuts a long name to leave room for the number, and never answers __proto__", () => {
    const long = "x".repeat(100);
    expect(inverseFieldName(long, used())).toBe(long);
    expect(inverseFieldName(long, used(long))).toBe(`${"x".repeat(96)} (2)`);
    expect(inverseFieldName("__proto__", used())).toBe("__proto__ (2)");
  });
});

describe("keepLinkIdentity", () => {
  const stored = { table_id: 7, multiple: true, inverse_field_id: 9 };
  const errorsOf = (next: Record<string, number | boolean>) => {
    try {
      keepLinkIdentity(stored, next);
    } catch (error) {
      return JSON.parse(errorInfoOf(error)?.metadata.errors ?? "[]");
    }
    return [];
  };

  it("keeps the stored inverse whether the client leaves it out or sends it", () => {
    expect(keepLinkIdentity(stored, { table_id: 7, multiple: false })).toEqual({
      table_id: 7,
      multiple: false,
      inverse_field_id: 9,
    });
    expect(keepLinkIdentity(stored, { table_id: 7, multiple: true, inverse_field_id: 9 })).toEqual(
      stored,
    );
  });

  it("refuses another table or another inverse", () => {
    expect(errorsOf({ table_id: 8, multiple: true, inverse_field_id: 10 })).toEqual([
      { key: "options.table_id", message: "cannot be changed; create a new link field instead" },
      {
        key: "options.inverse_field_id",
        message: "is set by the server: leave it out or send the stored value",
      },
    ]);
  });
});
