import { describe, expect, it } from "vitest";
import { checkDescription, fieldNameProblem } from "./validation.js";

describe("fieldNameProblem", () => {
  it("is the rule for names, and no __proto__", () => {
    expect(fieldNameProblem("Projects")).toBeUndefined();
    expect(fieldNameProblem("a\u202eb")).toBe("must not contain control characters");
    expect(fieldNameProblem("__proto__")).toBe('must not be "__proto__"');
  });
});

describe("checkDescription", () => {
  it("trims, keeps line breaks and tabs, and allows empty", () => {
    expect(checkDescription(" line one\n\tline two \r\n")).toEqual({
      description: "line one\n\tline two",
    });
    expect(checkDescription("")).toEqual({ description: "" });
    expect(checkDescription("x".repeat(1000))).toEqual({ description: "x".repeat(1000) });
  });

  it.each([
    ["x".repeat(1001), "must be at most 1000 characters"],
    ["a\u0000b", "must not contain control characters other than tabs and line breaks"],
    ["a\u001bb", "must not contain control characters other than tabs and line breaks"],
    ["a\u009fb", "must not contain control characters other than tabs and line breaks"],
    ["a\udc00b", "must be valid Unicode"],
  ])("refuses %j", (raw, problem) => {
    expect(checkDescription(raw)).toEqual({ problem });
  });
});
