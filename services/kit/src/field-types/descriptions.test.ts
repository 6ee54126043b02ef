import { describe, expect, it } from "vitest";
import { DESCRIPTION_MAX_LENGTH, descriptionProblem } from "./descriptions.js";

describe("descriptionProblem", () => {
  it("takes line breaks, tabs, empty and up to 1000 code points", () => {
    expect(descriptionProblem("line one\n\tline two\r\nthree")).toBeUndefined();
    expect(descriptionProblem("")).toBeUndefined();
    expect(descriptionProblem("x".repeat(DESCRIPTION_MAX_LENGTH))).toBeUndefined();
    // 1000 emoji are 2000 UTF-16 units but 1000 characters.
    expect(descriptionProblem("😀".repeat(DESCRIPTION_MAX_LENGTH))).toBeUndefined();
  });

  it.each([
    ["x".repeat(1001), "must be at most 1000 characters"],
    ["😀".repeat(1001), "must be at most 1000 characters"],
    ["a\u0000b", "must not contain control characters other than tabs and line breaks"],
    ["a\u001bb", "must not contain control characters other than tabs and line breaks"],
    ["a\u009fb", "must not contain control characters other than tabs and line breaks"],
    ["a\udc00b", "must be valid Unicode"],
    // Length first, then control characters, then Unicode: one problem, the first found.
    [`${"x".repeat(1001)}\u0000`, "must be at most 1000 characters"],
    ["\u0000\udc00", "must not contain control characters other than tabs and line breaks"],
  ])("refuses %j", (description, problem) => {
    expect(descriptionProblem(description)).toBe(problem);
  });
});
