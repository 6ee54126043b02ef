import { describe, expect, it } from "vitest";
import { fieldNameProblem } from "./validation.js";

describe("fieldNameProblem", () => {
  it("is the rule for names, and no __proto__", () => {
    expect(fieldNameProblem("Projects")).toBeUndefined();
    expect(fieldNameProblem("a\u202eb")).toBe("must not contain control characters");
    expect(fieldNameProblem("__proto__")).toBe('must not be "__proto__"');
  });
});
