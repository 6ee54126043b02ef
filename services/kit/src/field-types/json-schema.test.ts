import { describe, expect, it } from "vitest";
import { FIELD_TYPE_NAMES, type FieldLike, jsonSchemaOf, validateValue } from "./index.js";

describe("JSON Schemas of field values", () => {
  it("admits null for every type and marks the system's values read-only", () => {
    for (const type of FIELD_TYPE_NAMES) {
      const schema = jsonSchemaOf({ type, options: {} });
      const readOnly = [
        "file",
        "autonumber",
        "created_at",
        "updated_at",
        "lookup",
        "rollup",
      ].includes(type);
      expect(schema.readOnly === true, type).toBe(readOnly);
      // A link and a lookup read as [] when empty.
      if (type === "json" || type === "link" || type === "lookup") continue;
      const types = schema.type as string[] | undefined;
      const nullable =
        types?.includes("null") ||
        (schema.enum as unknown[] | undefined)?.includes(null) ||
        (schema.anyOf as { type?: string }[] | undefined)?.some((s) => s.type === "null");
      expect(nullable, type).toBe(true);
    }
  });

  it("carries the limits the options set", () => {
    expect(jsonSchemaOf({ type: "text", options: { max_length: 20 } })).toEqual({
      type: ["string", "null"],
      maxLength: 20,
      pattern: "^[^\\u0000]*$",
      examples: ["Example"],
    });
    expect(
      jsonSchemaOf({ type: "number", options: { decimals: 2, min: 0, max: 9 } }),
    ).toMatchObject({ type: ["number", "null"], minimum: 0, maximum: 9 });
    expect(jsonSchemaOf({ type: "number", options: { min: -1e300 } })).toMatchObject({
      minimum: -9007199254740991,
      maximum: 9007199254740991,
    });
    expect(
      jsonSchemaOf({
        type: "single_select",
        options: {
          choices: [
            { id: "1", name: "A" },
            { id: "2", name: "B" },
          ],
        },
      }),
    ).toEqual({ type: ["string", "null"], enum: ["A", "B", null], examples: ["A"] });
    expect(
      jsonSchemaOf({ type: "multi_select", options: { choices: [{ id: "1", name: "A" }] } }),
    ).toMatchObject({ type: ["array", "null"], items: { type: "string", enum: ["A"] } });
    expect(jsonSchemaOf({ type: "date" })).toMatchObject({ format: "date" });
    expect(jsonSchemaOf({ type: "datetime" })).toMatchObject({ format: "date-time" });
    expect(jsonSchemaOf({ type: "email" })).toMatchObject({ format: "email", maxLength: 254 });
  });

  it("describes what a write may send, which is more than what is read", () => {
    const input = jsonSchemaOf({ type: "number", options: { decimals: 0 } }, "input");
    expect(input.anyOf).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: "string" })]),
    );
    expect(
      jsonSchemaOf(
        { type: "single_select", options: { choices: [{ id: "1", name: "A" }] } },
        "input",
      ),
    ).toMatchObject({ type: ["string", "null"] });
  });

  it("lets a write name only the choices, as an enum a typed client checks", () => {
    const choices = [
      { id: "1", name: "Active" },
      { id: "2", name: "a.b (x)|[y]" },
    ];
    const single = jsonSchemaOf({ type: "single_select", options: { choices } }, "input");
    const multi = jsonSchemaOf({ type: "multi_select", options: { choices } }, "input");
    expect(single.enum).toEqual(["Active", "a.b (x)|[y]", null]);
    expect((multi.items as { enum: string[] }).enum).toEqual(["Active", "a.b (x)|[y]"]);
    expect(single.description).toContain("any case");
  });

  it("gives every type an example that its field takes", () => {
    const fields: FieldLike[] = [
      ...FIELD_TYPE_NAMES.map((type) => ({ type, options: {} })),
      { type: "link", options: { table_id: 1, multiple: false } },
      { type: "text", options: { max_length: 3 } },
      { type: "number", options: { decimals: 2, min: 100.555 } },
      { type: "number", options: { decimals: 1, max: -0.55 } },
      { type: "single_select", options: { choices: [{ id: "1", name: "Won" }] } },
      { type: "multi_select", options: { choices: [{ id: "1", name: "Won" }] } },
    ];
    for (const field of fields) {
      for (const direction of ["input", "output"] as const) {
        const { examples } = jsonSchemaOf(field, direction) as { examples: unknown[] };
        expect(examples, field.type).toHaveLength(1);
        const read = ["file", "autonumber", "created_at", "updated_at", "lookup", "rollup"];
        if (read.includes(field.type)) continue;
        // A link reads as linked records and is written as row ids.
        if (field.type === "link" && direction === "output") continue;
        expect(validateValue(field, examples[0]), JSON.stringify(field)).toMatchObject({
          ok: true,
        });
      }
    }
    expect(jsonSchemaOf(fields.at(-2)!).examples).toEqual(["Won"]);
    expect(jsonSchemaOf(fields.at(-4)!).examples).toEqual([100.56]);
  });

  it("holds url and phone values to what a write may store", () => {
    const url = new RegExp(jsonSchemaOf({ type: "url" }, "input").pattern as string, "u");
    expect(["https://example.com/x", "HTTP://a.b", " http://x.y "].map((v) => url.test(v))).toEqual(
      [true, true, true],
    );
    expect(
      ["mailto:ada@example.com", "ftp://x.y", "example.com", "https:///x"].map((v) => url.test(v)),
    ).toEqual([false, false, false, false]);
    const phone = new RegExp(jsonSchemaOf({ type: "phone" }, "input").pattern as string, "u");
    for (const [value, valid] of [
      ["+1 555 0100", true],
      ["(555) 010-0100 ext. 12", true],
      ["555.0100 x9", true],
      ["1".repeat(20), true],
      ["12", false],
      ["call me", false],
      ["+1 555 0100 x", false],
      ["++123", false],
      ["1".repeat(21), false],
    ] as const) {
      expect({ value, valid: phone.test(value) }).toEqual({ value, valid });
      expect({ value, valid: validateValue({ type: "phone" }, value).ok }).toEqual({
        value,
        valid,
      });
    }
  });

  it("refuses NUL in texts, the year 0 and a numeric top-level domain, as writes do", () => {
    for (const [type, value] of [
      ["text", "a\u0000b"],
      ["long_text", "\u0000"],
      ["date", "0000-01-01"],
      ["email", "ada@example.123"],
      ["email", "ada@example.-x"],
    ] as const) {
      const pattern = new RegExp(jsonSchemaOf({ type }, "input").pattern as string, "u");
      expect({ type, value, schema: pattern.test(value) }).toEqual({ type, value, schema: false });
      expect(validateValue({ type }, value).ok).toBe(false);
    }
    for (const [type, value] of [
      ["text", "plain"],
      ["date", "0001-01-01"],
      ["email", "ada@example.com"],
      ["email", "ada@example.xn--p1ai"],
      ["email", " ada@пример.рф "],
    ] as const) {
      const pattern = new RegExp(jsonSchemaOf({ type }, "input").pattern as string, "u");
      expect({ type, value, schema: pattern.test(value) }).toEqual({ type, value, schema: true });
      expect(validateValue({ type }, value).ok).toBe(true);
    }
  });
});
