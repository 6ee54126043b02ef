import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import {
  MAX_FIELDS_ON_CREATE,
  TableCreateSchema,
  TableDatabaseQuery,
  TableIdQuery,
  TableUpdateSchema,
} from "./table-schemas.js";

function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

describe("TableCreate", () => {
  it("takes a name, an optional description and optional first fields", () => {
    expect(parse(TableCreateSchema, { name: " Leads " }, "body")).toEqual({
      ok: true,
      value: { name: "Leads" },
    });
    expect(
      parse(
        TableCreateSchema,
        {
          name: "Leads",
          description: "From the form",
          fields: [
            { name: " Email ", type: "email", required: true },
            { name: "Stage", type: "single_select", options: { choices: [{ name: "New" }] } },
          ],
        },
        "body",
      ),
    ).toEqual({
      ok: true,
      value: {
        name: "Leads",
        description: "From the form",
        fields: [
          { name: "Email", type: "email", required: true },
          { name: "Stage", type: "single_select", options: { choices: [{ name: "New" }] } },
        ],
      },
    });
    expect(parse(TableCreateSchema, { name: "T", fields: [] }, "body")).toEqual({
      ok: true,
      value: { name: "T", fields: [] },
    });
  });

  it("names each bad field by its index", () => {
    expect(
      parse(
        TableCreateSchema,
        {
          name: "T",
          fields: [
            { name: "ok", type: "text" },
            { name: "a", type: "uuid" },
            { name: "b", type: "number", options: [2] },
            { name: "c", type: "text", position: 1 },
            "d",
          ],
        },
        "body",
      ),
    ).toEqual({
      ok: false,
      items: [
        {
          key: "fields.1.type",
          message: expect.stringMatching(/^must be one of text, long_text, /),
          source: "body",
          code: "invalid_value",
        },
        {
          key: "fields.2.options",
          message: "must be a JSON object",
          source: "body",
          code: "invalid_value",
        },
        {
          key: "fields.3.position",
          message: "is not allowed",
          source: "body",
          code: "unknown_key",
        },
        { key: "fields.4", message: "must be an object", source: "body", code: "invalid_type" },
      ],
    });
  });

  it(`takes at most ${MAX_FIELDS_ON_CREATE} fields`, () => {
    const fields = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ name: `f${i}`, type: "text" }));
    expect(parse(TableCreateSchema, { name: "T", fields: fields(500) }, "body").ok).toBe(true);
    expect(parse(TableCreateSchema, { name: "T", fields: fields(501) }, "body")).toEqual({
      ok: false,
      items: [
        {
          key: "fields",
          message: "must have at most 500 items",
          source: "body",
          code: "too_long",
        },
      ],
    });
    expect(parse(TableCreateSchema, { name: "T", fields: { a: 1 } }, "body")).toEqual({
      ok: false,
      items: [{ key: "fields", message: "must be an array", source: "body", code: "invalid_type" }],
    });
  });
});

describe("TableUpdate and the query parameters", () => {
  it("update takes a name and a description only", () => {
    expect(parse(TableUpdateSchema, { name: "Deals", description: "" }, "body")).toEqual({
      ok: true,
      value: { name: "Deals", description: "" },
    });
    expect(parse(TableUpdateSchema, { fields: [] }, "body")).toEqual({
      ok: false,
      items: [{ key: "fields", message: "is not allowed", source: "body", code: "unknown_key" }],
    });
  });

  it("take the database or the table as an integer id", () => {
    expect(parse(TableDatabaseQuery, { database_id: "2" }, "query")).toEqual({
      ok: true,
      value: { database_id: 2n },
    });
    expect(parse(TableIdQuery, { table_id: ["1", "2"] }, "query")).toEqual({
      ok: false,
      items: [
        { key: "table_id", message: "must be given once", source: "query", code: "invalid_value" },
      ],
    });
  });
});
