import { describe, expect, it } from "vitest";
import { isPlainObject } from "./plain-object.js";

describe("isPlainObject", () => {
  it("takes objects as JSON gives them, and nothing else", () => {
    expect(isPlainObject({})).toBe(true);
    expect(isPlainObject(JSON.parse('{"a":[1]}'))).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
    for (const value of [null, undefined, [], [{}], "{}", 1, true, new Date(), new Map()]) {
      expect(isPlainObject(value), String(value)).toBe(false);
    }
  });
});
