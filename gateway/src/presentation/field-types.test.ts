import { FieldType, FieldTypeSchema } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { describe, expect, it } from "vitest";
import { FIELD_TYPES, fieldTypeName, fieldTypeValue } from "./field-types.js";

describe("field types on the wire", () => {
  it("name every FieldType of the contract as the REST API spells it", () => {
    const named = FieldTypeSchema.values.filter((value) => value.number !== FieldType.UNSPECIFIED);
    // A value added to the proto without a wire name fails here, not in production.
    expect(named.map((value) => fieldTypeName(value.number))).toEqual(
      named.map((value) => value.name.replace(/^FIELD_TYPE_/, "").toLowerCase()),
    );
    expect(named.map((value) => fieldTypeName(value.number))).toEqual([...FIELD_TYPES]);
    expect(FIELD_TYPES).toEqual([
      "text",
      "long_text",
      "number",
      "boolean",
      "date",
      "datetime",
      "single_select",
      "multi_select",
      "email",
      "url",
      "phone",
      "json",
      "file",
      "autonumber",
      "created_at",
      "updated_at",
      "link",
      "lookup",
      "rollup",
    ]);
  });

  it("turn every wire name into its FieldType and back", () => {
    for (const name of FIELD_TYPES) expect(fieldTypeName(fieldTypeValue(name))).toBe(name);
    expect(fieldTypeValue("single_select")).toBe(FieldType.SINGLE_SELECT);
    expect(fieldTypeValue("created_at")).toBe(FieldType.CREATED_AT);
    expect(new Set(FIELD_TYPES.map(fieldTypeValue)).size).toBe(FIELD_TYPES.length);
  });

  it("refuse the unspecified zero value and values this gateway does not know", () => {
    expect(() => fieldTypeName(FieldType.UNSPECIFIED)).toThrow(/field type 0/);
    expect(() => fieldTypeName(99 as FieldType)).toThrow(/field type 99/);
  });
});
