import { describe, expect, it } from "vitest";
import { z } from "zod";
import { itemsFromIssues, VALIDATION_ITEMS_MAX, validationEnvelope } from "./validation-failed.js";

const schema = z.strictObject({
  email: z.string().email({ message: "must be a valid e-mail address" }),
  age: z.number().int(),
  nested: z.strictObject({ flag: z.boolean() }).optional(),
});

function itemsOf(value: unknown, source: "body" | "query" = "body") {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) throw new Error("expected a failure");
  return itemsFromIssues(result.error.issues, source);
}

describe("validation items", () => {
  it("names missing, wrong-typed, malformed and unknown keys, one item each", () => {
    expect(itemsOf({ email: "nope", nested: { flag: "yes", other: 1 }, color: "red" })).toEqual([
      {
        key: "email",
        message: "must be a valid e-mail address",
        source: "body",
        code: "invalid_value",
      },
      { key: "age", message: "is required", source: "body", code: "required" },
      { key: "nested.flag", message: "must be a boolean", source: "body", code: "invalid_type" },
      { key: "nested.other", message: "is not allowed", source: "body", code: "unknown_key" },
      { key: "color", message: "is not allowed", source: "body", code: "unknown_key" },
    ]);
  });

  it("says what is wrong with a body that is not an object", () => {
    expect(itemsOf(undefined)).toEqual([
      { key: "body", message: "a JSON object body is required", source: "body", code: "required" },
    ]);
    expect(itemsOf([1, 2])).toEqual([
      { key: "body", message: "must be a JSON object", source: "body", code: "invalid_type" },
    ]);
  });

  it("reports two failed checks of one value with one message once", () => {
    const long = z
      .string()
      .max(200, "must be at most 100 characters")
      .max(100, "must be at most 100 characters");
    const result = z.object({ where: long }).safeParse({ where: "x".repeat(300) });
    if (result.success) throw new Error("expected a failure");
    expect(itemsFromIssues(result.error.issues, "query")).toEqual([
      {
        key: "where",
        message: "must be at most 100 characters",
        source: "query",
        code: "too_long",
      },
    ]);
  });

  it("keeps the source it is given", () => {
    expect(itemsOf({ email: "a@b.co", age: "3" }, "query")).toEqual([
      { key: "age", message: "must be a number", source: "query", code: "invalid_type" },
    ]);
  });

  it("lists at most VALIDATION_ITEMS_MAX items, and says so only when it leaves some out", () => {
    const items = (count: number) =>
      Array.from({ length: count }, (_, i) => ({
        key: `k${i}`,
        message: "is not allowed",
        source: "body" as const,
        code: "unknown_key" as const,
      }));
    const full = validationEnvelope("POST", "/x", items(VALIDATION_ITEMS_MAX));
    expect(full.detail).toBe("Validation failed for POST /x");
    expect(full.extra).toHaveLength(VALIDATION_ITEMS_MAX);
    const over = validationEnvelope("POST", "/x", items(VALIDATION_ITEMS_MAX + 1));
    expect(over.detail).toBe(
      `Validation failed for POST /x: the first ${VALIDATION_ITEMS_MAX} of ${VALIDATION_ITEMS_MAX + 1} problems are listed`,
    );
    expect(over.extra).toEqual(items(VALIDATION_ITEMS_MAX));
  });

  it("builds the exact validation envelope", () => {
    expect(
      validationEnvelope("POST", "/database/create", [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_long" },
      ]),
    ).toEqual({
      status_code: 400,
      detail: "Validation failed for POST /database/create",
      extra: [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_long" },
      ],
    });
  });
});
