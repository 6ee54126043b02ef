import { describe, expect, it } from "vitest";
import type { SchemaField } from "../table-schema.js";
import { applyValues, checkInput } from "./record-input.js";

const field = (
  id: string,
  name: string,
  type: SchemaField["type"],
  extra: Partial<SchemaField> = {},
) => ({ id, name, type, options: {}, required: false, description: "", ...extra }) as SchemaField;

const FIELDS: SchemaField[] = [
  field("1", "Name", "text", { required: true }),
  field("2", "Age", "number"),
  field("3", "Seq", "autonumber"),
  field("4", "12", "text"),
];

describe("checking written values", () => {
  it("keys values by field id, referenced by id or by name in any case", () => {
    const checked = checkInput(FIELDS, { name: "Ada", 2: "36" }, "create");
    expect(checked).toEqual({
      ok: true,
      values: new Map<string, unknown>([
        ["1", "Ada"],
        ["2", 36],
      ]),
    });
  });

  it("reads an all-digit reference as an id, never as a name", () => {
    const checked = checkInput(FIELDS, { Name: "x", 12: "y" }, "create");
    expect(checked.ok).toBe(false);
    if (!checked.ok) {
      expect(checked.items).toEqual([
        { key: "12", message: "is not a field of this table", source: "body", code: "not_found" },
      ]);
    }
  });

  it("lists every bad key, with the batch prefix", () => {
    const checked = checkInput(
      FIELDS,
      { Nope: 1, Age: "many", Seq: 3, name: "a", NAME: "b" },
      "create",
      "records.2.data.",
    );
    expect(checked.ok ? [] : checked.items).toEqual([
      {
        key: "records.2.data.Nope",
        message: "is not a field of this table",
        source: "body",
        code: "not_found",
      },
      {
        key: "records.2.data.Age",
        message: "must be a number",
        source: "body",
        code: "invalid_value",
      },
      { key: "records.2.data.Seq", message: "is read-only", source: "body", code: "read_only" },
      {
        key: "records.2.data.NAME",
        message: "names the same field as 'name'",
        source: "body",
        code: "invalid_value",
      },
    ]);
  });

  it("requires required fields on create and refuses to clear them", () => {
    expect(checkInput(FIELDS, { Age: 1 }, "create")).toEqual({
      ok: false,
      items: [{ key: "Name", message: "is required", source: "body", code: "required" }],
    });
    expect(checkInput(FIELDS, { Name: "" }, "create")).toEqual({
      ok: false,
      items: [{ key: "Name", message: "is required", source: "body", code: "required" }],
    });
    expect(checkInput(FIELDS, { Name: null }, "update")).toEqual({
      ok: false,
      items: [
        {
          key: "Name",
          message: "is required and cannot be cleared",
          source: "body",
          code: "required",
        },
      ],
    });
    expect(checkInput(FIELDS, { Age: null }, "update")).toEqual({
      ok: true,
      values: new Map([["2", null]]),
    });
  });
});

it("stores a cleared value as no key", () => {
  expect(
    applyValues(
      { 1: "a", 2: 3 },
      new Map([
        ["2", null],
        ["1", "b"],
      ]),
    ),
  ).toEqual({ 1: "b" });
});
