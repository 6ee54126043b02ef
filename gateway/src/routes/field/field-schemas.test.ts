import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import { FIELD_TYPES } from "../../presentation/field-types.js";
import {
  FieldCreateSchema,
  FieldIdQuery,
  FieldTableQuery,
  FieldUpdateSchema,
} from "./field-schemas.js";

function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

const TYPE_MESSAGE = `must be one of ${FIELD_TYPES.join(", ")}`;

describe("FieldCreate", () => {
  it("takes a trimmed name, a wire type name and the optional keys", () => {
    expect(parse(FieldCreateSchema, { name: "  Status ", type: "single_select" }, "body")).toEqual({
      ok: true,
      value: { name: "Status", type: "single_select" },
    });
    const full = {
      name: "Price",
      type: "number",
      options: { decimals: 2, min: 0 },
      required: true,
      description: "  Net price\nin EUR  ",
    };
    expect(parse(FieldCreateSchema, full, "body")).toEqual({
      ok: true,
      value: { ...full, description: "Net price\nin EUR" },
    });
    for (const type of FIELD_TYPES) {
      expect(parse(FieldCreateSchema, { name: "x", type }, "body")).toMatchObject({ ok: true });
    }
  });

  it("refuses unknown type names, type names in another spelling, and a missing type", () => {
    for (const type of ["string", "Text", "FIELD_TYPE_TEXT", "single-select", "", 1, null]) {
      expect({ type, result: parse(FieldCreateSchema, { name: "x", type }, "body") }).toEqual({
        type,
        result: {
          ok: false,
          items: [{ key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" }],
        },
      });
    }
    expect(parse(FieldCreateSchema, { name: "x" }, "body")).toEqual({
      ok: false,
      items: [{ key: "type", message: "is required", source: "body", code: "invalid_value" }],
    });
  });

  it("takes options only as a JSON object, whatever its keys (the service judges them)", () => {
    expect(
      parse(FieldCreateSchema, { name: "x", type: "text", options: { nonsense: [1] } }, "body"),
    ).toEqual({ ok: true, value: { name: "x", type: "text", options: { nonsense: [1] } } });
    for (const options of [[{ decimals: 2 }], "decimals=2", 2, null]) {
      expect(parse(FieldCreateSchema, { name: "x", type: "number", options }, "body")).toEqual({
        ok: false,
        items: [
          {
            key: "options",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_value",
          },
        ],
      });
    }
  });

  it("refuses unknown keys and bad values of the other keys, all at once", () => {
    expect(
      parse(
        FieldCreateSchema,
        {
          name: "A\u0000",
          type: "text",
          required: "yes",
          description: "x".repeat(1001),
          position: 0,
        },
        "body",
      ),
    ).toEqual({
      ok: false,
      items: [
        {
          key: "name",
          message: "must not contain control characters",
          source: "body",
          code: "invalid_value",
        },
        { key: "required", message: "must be a boolean", source: "body", code: "invalid_type" },
        {
          key: "description",
          message: "must be at most 1000 characters",
          source: "body",
          code: "too_long",
        },
        { key: "position", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});

describe("FieldUpdate", () => {
  it("takes any subset of its keys, none included", () => {
    expect(parse(FieldUpdateSchema, {}, "body")).toEqual({ ok: true, value: {} });
    expect(
      parse(
        FieldUpdateSchema,
        { name: " Renamed ", type: "long_text", options: {}, required: false, description: "" },
        "body",
      ),
    ).toEqual({
      ok: true,
      value: { name: "Renamed", type: "long_text", options: {}, required: false, description: "" },
    });
  });

  it("takes a position as a non-negative integer; past int32 it still means last", () => {
    for (const position of [0, 3, 2_147_483_647]) {
      expect(parse(FieldUpdateSchema, { position }, "body")).toEqual({
        ok: true,
        value: { position },
      });
    }
    for (const position of [2 ** 40, 1e20]) {
      expect(parse(FieldUpdateSchema, { position }, "body")).toEqual({
        ok: true,
        value: { position: 2_147_483_647 },
      });
    }
    const cases: [unknown, string][] = [
      [-1, "must be an integer of at least 0"],
      [1.5, "must be an integer of at least 0"],
      ["2", "must be a number"],
      [null, "must be a number"],
    ];
    for (const [position, message] of cases) {
      expect({ position, result: parse(FieldUpdateSchema, { position }, "body") }).toEqual({
        position,
        result: {
          ok: false,
          items: [
            {
              key: "position",
              message,
              source: "body",
              code:
                position === -1
                  ? "out_of_range"
                  : position === 1.5
                    ? "invalid_value"
                    : "invalid_type",
            },
          ],
        },
      });
    }
  });

  it("refuses bad types, options and unknown keys", () => {
    expect(
      parse(FieldUpdateSchema, { type: "varchar", options: [], table_id: 3, name: "" }, "body"),
    ).toEqual({
      ok: false,
      items: [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
        { key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" },
        { key: "options", message: "must be a JSON object", source: "body", code: "invalid_value" },
        { key: "table_id", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});

describe("field query parameters", () => {
  it("take the table or the field as an integer id", () => {
    expect(parse(FieldTableQuery, { table_id: "7" }, "query")).toEqual({
      ok: true,
      value: { table_id: 7n },
    });
    expect(parse(FieldIdQuery, { field_id: "8" }, "query")).toEqual({
      ok: true,
      value: { field_id: 8n },
    });
    expect(parse(FieldIdQuery, { field_id: "0", table_id: "1" }, "query")).toEqual({
      ok: false,
      items: [
        {
          key: "field_id",
          message: "must be an integer between 1 and 9007199254740991",
          source: "query",
          code: "out_of_range",
        },
        { key: "table_id", message: "is not allowed", source: "query", code: "unknown_key" },
      ],
    });
  });
});
