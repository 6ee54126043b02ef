import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { describe, expect, it } from "vitest";
import { checkFieldDefinition } from "./field-definition.js";

const input = (overrides: Partial<Parameters<typeof checkFieldDefinition>[0]> = {}) => ({
  name: "Price",
  type: FieldType.NUMBER,
  required: false,
  description: "",
  ...overrides,
});

describe("checkFieldDefinition", () => {
  it("normalises name, description and options", () => {
    expect(
      checkFieldDefinition(
        input({ name: " Price ", description: " In EUR ", options: { decimals: 2 } }),
      ),
    ).toEqual({
      ok: true,
      field: {
        name: "Price",
        type: "number",
        options: { decimals: 2 },
        required: false,
        description: "In EUR",
      },
    });
  });

  it("sorts problems into validation failures and option errors, keyed with the prefix", () => {
    expect(
      checkFieldDefinition(
        input({ name: "", type: FieldType.AUTONUMBER, required: true, options: { start: 1 } }),
        "fields.3.",
      ),
    ).toEqual({
      ok: false,
      validation: [
        {
          key: "fields.3.name",
          message: "must be 1-100 characters",
          source: "body",
          code: "too_short",
        },
      ],
      options: [
        { key: "fields.3.options.start", message: "is not allowed" },
        { key: "fields.3.required", message: "cannot be true for a read-only type" },
      ],
    });
  });

  it("takes a link's options with their defaults, and refuses an inverse_field_id in them", () => {
    expect(checkFieldDefinition(input({ type: FieldType.LINK, options: { table_id: 7 } }))).toEqual(
      {
        ok: true,
        field: {
          name: "Price",
          type: "link",
          options: { table_id: 7, multiple: true },
          required: false,
          description: "",
        },
      },
    );
    for (const inverse of [8, "8", null]) {
      expect(
        checkFieldDefinition(
          input({ type: FieldType.LINK, options: { table_id: 7, inverse_field_id: inverse } }),
          "fields.0.",
        ),
      ).toEqual({
        ok: false,
        validation: [],
        options: [{ key: "fields.0.options.inverse_field_id", message: "is set by the server" }],
      });
    }
  });

  it("does not look at options of an unknown type", () => {
    const result = checkFieldDefinition(input({ type: FieldType.UNSPECIFIED, options: { x: 1 } }));
    expect(result).toMatchObject({ ok: false, options: [] });
    expect(result.ok ? [] : result.validation.map((v) => v.key)).toEqual(["type"]);
  });
});
