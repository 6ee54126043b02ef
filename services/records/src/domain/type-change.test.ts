import { describe, expect, it } from "vitest";
import { conversionProblem, convertedValue, sourceValue } from "./type-change.js";

const at = new Date("2026-11-21T10:15:00.123Z");
const cell = (value: unknown) => ({ value: value as never, createdAt: at, updatedAt: at });

describe("converting stored values after a type change", () => {
  it("converts what converts and empties what does not", () => {
    const text = { type: "text" as const };
    const number = { type: "number" as const, options: { decimals: 1 } };
    expect(convertedValue(text, number, cell(" 12.34 "))).toBe(12.3);
    expect(convertedValue(text, number, cell("twelve"))).toBeNull();
    expect(convertedValue(number, text, cell(12.3))).toBe("12.3");
  });

  it("keeps a value already of the new type (written after the change, or a replay)", () => {
    const text = { type: "text" as const };
    const number = { type: "number" as const };
    expect(convertedValue(text, number, cell(42))).toBe(42);
    const single = {
      type: "single_select" as const,
      options: { choices: [{ id: "1", name: "A" }] },
    };
    const multi = { type: "multi_select" as const, options: { choices: [{ id: "1", name: "A" }] } };
    expect(convertedValue(single, multi, cell("A"))).toEqual(["A"]);
    expect(convertedValue(single, multi, cell(["A"]))).toEqual(["A"]);
    // An object as jsonb gives it back, in jsonb's key order.
    const json = { type: "json" as const };
    expect(convertedValue(text, json, cell({ max: 9, decimals: 2 }))).toEqual({
      max: 9,
      decimals: 2,
    });
  });

  it("reads created_at and updated_at fields from the record's columns", () => {
    const created = { type: "created_at" as const };
    expect(sourceValue(created, cell(undefined))).toBe("2026-11-21T10:15:00.123Z");
    expect(convertedValue(created, { type: "date" }, cell(undefined))).toBe("2026-11-21");
    expect(
      conversionProblem(created, { type: "text", options: { max_length: 5 } }, cell(undefined)),
    ).toMatch(/at most 5/);
  });

  it("names the problem of a value that does not convert", () => {
    expect(conversionProblem({ type: "text" }, { type: "email" }, cell("not an e-mail"))).toMatch(
      /e-mail/,
    );
    expect(conversionProblem({ type: "text" }, { type: "email" }, cell(null))).toBeUndefined();
  });
});
