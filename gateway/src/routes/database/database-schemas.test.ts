import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import {
  DatabaseCreateSchema,
  DatabaseIdQuery,
  DatabaseOrganizationQuery,
  DatabaseUpdateSchema,
} from "./database-schemas.js";

function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

describe("database bodies", () => {
  it("create takes a trimmed name and an optional description, nothing else", () => {
    expect(parse(DatabaseCreateSchema, { name: " CRM " }, "body")).toEqual({
      ok: true,
      value: { name: "CRM" },
    });
    expect(
      parse(DatabaseCreateSchema, { name: "CRM", description: "\tLeads\r\nand deals " }, "body"),
    ).toEqual({ ok: true, value: { name: "CRM", description: "Leads\r\nand deals" } });
    expect(parse(DatabaseCreateSchema, { name: "CRM", organization_id: 1 }, "body")).toEqual({
      ok: false,
      items: [
        { key: "organization_id", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });

  it("checks the name by the rule for names and the description by its documented limits", () => {
    const cases: [unknown, { key: string; message: string }[]][] = [
      [{}, [{ key: "name", message: "is required" }]],
      [{ name: " \t " }, [{ key: "name", message: "must be 1-100 characters" }]],
      [{ name: "x".repeat(101) }, [{ key: "name", message: "must be 1-100 characters" }]],
      [{ name: "a\u001bb" }, [{ key: "name", message: "must not contain control characters" }]],
      [{ name: " \u200b \ufeff" }, [{ key: "name", message: "must contain a visible character" }]],
      [
        { name: "a", description: "x".repeat(1001) },
        [{ key: "description", message: "must be at most 1000 characters" }],
      ],
      [
        { name: "a", description: "nul\u0000" },
        [
          {
            key: "description",
            message: "must not contain control characters other than tabs and line breaks",
          },
        ],
      ],
      [{ name: "a", description: null }, [{ key: "description", message: "must be a string" }]],
    ];
    for (const [body, items] of cases) {
      expect({ body, result: parse(DatabaseCreateSchema, body, "body") }).toEqual({
        body,
        result: {
          ok: false,
          items: items.map((item) => ({ ...item, source: "body", code: expect.any(String) })),
        },
      });
    }
    expect(
      parse(DatabaseCreateSchema, { name: "x".repeat(100), description: "y".repeat(1000) }, "body")
        .ok,
    ).toBe(true);
    // Counted once trimmed.
    expect(
      parse(DatabaseCreateSchema, { name: "a", description: ` ${"y".repeat(1000)} ` }, "body").ok,
    ).toBe(true);
  });

  it("update takes either key or none, an empty description clearing it", () => {
    expect(parse(DatabaseUpdateSchema, {}, "body")).toEqual({ ok: true, value: {} });
    expect(parse(DatabaseUpdateSchema, { description: "" }, "body")).toEqual({
      ok: true,
      value: { description: "" },
    });
    expect(parse(DatabaseUpdateSchema, { name: "", tables: [] }, "body")).toEqual({
      ok: false,
      items: [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
        { key: "tables", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});

describe("database query parameters", () => {
  it("take the organization or the database as an integer id, nothing else", () => {
    expect(parse(DatabaseOrganizationQuery, { organization_id: "1" }, "query")).toEqual({
      ok: true,
      value: { organization_id: 1n },
    });
    expect(parse(DatabaseIdQuery, { database_id: "9007199254740991" }, "query")).toEqual({
      ok: true,
      value: { database_id: 9007199254740991n },
    });
    expect(parse(DatabaseIdQuery, { organization_id: "1" }, "query")).toEqual({
      ok: false,
      items: [
        { key: "database_id", message: "is required", source: "query", code: "required" },
        { key: "organization_id", message: "is not allowed", source: "query", code: "unknown_key" },
      ],
    });
  });
});
