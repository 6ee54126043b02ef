import { describe, expect, it } from "vitest";
import { checkDescription, checkName } from "./validation.js";

describe("checkName", () => {
  it("trims and takes 1-100 characters", () => {
    expect(checkName("  Projects ")).toEqual({ name: "Projects" });
    expect(checkName("x".repeat(100))).toEqual({ name: "x".repeat(100) });
    expect(checkName(` ${"é".repeat(100)} `)).toEqual({ name: "é".repeat(100) });
    // Characters, not UTF-16 units: each emoji is two of those.
    expect(checkName("🗂".repeat(100))).toEqual({ name: "🗂".repeat(100) });
    expect(checkName("🗂".repeat(101))).toEqual({ problem: "must be 1-100 characters" });
  });

  it.each([
    ["", "must be 1-100 characters"],
    ["   ", "must be 1-100 characters"],
    ["x".repeat(101), "must be 1-100 characters"],
    ["a\u0000b", "must not contain control characters"],
    ["a\nb", "must not contain control characters"],
    ["a\tb", "must not contain control characters"],
    ["a\u0085b", "must not contain control characters"],
    ["a\u007fb", "must not contain control characters"],
    ["a\ud800b", "must be valid Unicode"],
    ["\u200b", "must contain a visible character"],
    [" \u200c\u2060 \ufeff ", "must contain a visible character"],
  ])("refuses %j", (raw, problem) => {
    expect(checkName(raw)).toEqual({ problem });
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
