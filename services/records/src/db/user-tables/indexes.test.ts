import type { JsonObject } from "@bufbuild/protobuf";
import { FIELD_TYPE_NAMES, type FieldTypeName } from "@rowbase/kit/field-types";
import { describe, expect, it } from "vitest";
import {
  dropFieldIndexSql,
  fieldIndexChangeSql,
  fieldIndexExpression,
  indexKeysOf,
  orderedBy,
} from "./indexes.js";

const field = (type: FieldTypeName, options: JsonObject = {}) => ({ id: 7n, type, options });

describe("a field's index", () => {
  it("is on the column, or the text in code point order, for the types a btree serves", () => {
    const expressions = Object.fromEntries(
      FIELD_TYPE_NAMES.map((type) => [type, fieldIndexExpression(field(type))]),
    );
    expect(expressions).toEqual({
      text: undefined,
      long_text: undefined,
      number: "(f_7)",
      boolean: undefined,
      date: "(f_7)",
      datetime: "(f_7)",
      single_select: "(f_7)",
      multi_select: undefined,
      email: `((nullif(f_7, '') COLLATE "C"))`,
      url: undefined,
      phone: `((nullif(f_7, '') COLLATE "C"))`,
      json: undefined,
      file: undefined,
      autonumber: "(f_7)",
      created_at: undefined,
      updated_at: undefined,
    });
  });

  it("is on a text only when its longest value fits a btree entry", () => {
    expect(fieldIndexExpression(field("text", { max_length: 600 }))).toBe(
      `((nullif(f_7, '') COLLATE "C"))`,
    );
    expect(fieldIndexExpression(field("text", { max_length: 601 }))).toBeUndefined();
  });

  it("is dropped by a change in place that leaves it another expression or none", () => {
    const short = field("text", { max_length: 100 });
    expect(fieldIndexChangeSql(1n, 2n, short, field("text", { max_length: 200 }))).toEqual([]);
    expect(fieldIndexChangeSql(1n, 2n, short, field("email"))).toEqual([]);
    for (const to of [field("text"), field("long_text"), field("single_select")]) {
      expect(fieldIndexChangeSql(1n, 2n, short, to)).toEqual([dropFieldIndexSql(1n, 2n, 7n)]);
    }
  });
});

describe("the indexes a list could use", () => {
  const schema = {
    tableId: 1n,
    databaseId: 1n,
    organizationId: 1n,
    name: "T",
    fields: (
      [
        ["1", "single_select"],
        ["2", "number"],
        ["3", "date"],
        ["4", "boolean"],
        ["5", "long_text"],
      ] as const
    ).map(([id, type]) => ({
      id,
      name: `F${id}`,
      type,
      options: {},
      required: false,
      description: "",
    })),
  };
  const keys = (
    equalities: string[],
    ranges: string[],
    fieldIds: string[],
    sorted: string[] = [],
    exact: string[] = [],
  ) => indexKeysOf(schema, { fieldIds, conjuncts: { equalities, ranges, exact } }, sorted);

  it("takes one index of an equality's field and a second condition's, the equality's first", () => {
    expect(keys(["1"], ["2"], ["2", "1"], ["3"])).toEqual({ filter: [["1", "2"]], sort: [["3"]] });
    expect(keys(["2", "1"], ["3"], ["2", "1", "3"])).toEqual({ filter: [["2", "1"]], sort: [] });
  });

  it("takes one per field otherwise, and none for a field that gets no index", () => {
    expect(keys([], ["2", "3"], ["2", "3"])).toEqual({ filter: [["2"], ["3"]], sort: [] });
    expect(keys(["4"], ["2"], ["4", "2"], ["5"])).toEqual({ filter: [["2"]], sort: [] });
    expect(keys(["1", "1"], [], ["1"], ["1", "3"])).toEqual({ filter: [["1"]], sort: [["3"]] });
  });

  it("orders by a pair of an eq field and the first sort field, which keeps the page's order", () => {
    // Status eq Open, Amount >= x, sorted by Due then Amount: (Status, Amount) counts,
    // (Status, Due) hands the Open rows over in Due order; Amount's own index for the rest.
    expect(keys(["1"], ["2"], ["1", "2"], ["3", "2"], ["1"])).toEqual({
      filter: [["1", "2"]],
      sort: [["1", "3"], ["2"]],
    });
    // `in` is no single value: its rows come in several runs of the pair, not in Due order.
    expect(keys(["1"], ["2"], ["1", "2"], ["3"], [])).toEqual({
      filter: [["1", "2"]],
      sort: [["3"]],
    });
    // Sorted by the select itself (its choices' order): no pair; by the eq field: its own.
    expect(keys(["2"], [], ["2"], ["1"], ["2"])).toEqual({ filter: [["2"]], sort: [["1"]] });
    expect(keys(["2"], [], ["2"], ["2", "3"], ["2"])).toEqual({ filter: [["2"]], sort: [["3"]] });
  });
});

describe("the fields a served index keeps in order", () => {
  it("are those of one field, and a served sort pair's second", () => {
    const served = new Set(["1,2", "1,3", "4"]);
    expect([...orderedBy(served, [["1", "3"], ["5"]])].sort()).toEqual(["1,2", "1,3", "3", "4"]);
    expect([...orderedBy(new Set(["4"]), [["1", "3"]])]).toEqual(["4"]);
  });
});
