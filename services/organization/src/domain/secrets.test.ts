import { describe, expect, it } from "vitest";
import { API_TOKEN_PATTERN, newApiTokenSecret } from "./secrets.js";

describe("secrets", () => {
  it("makes rb_ tokens of 40 base62 characters, all different", () => {
    const tokens = new Set(Array.from({ length: 200 }, newApiTokenSecret));
    expect(tokens.size).toBe(200);
    for (const token of tokens) expect(token).toMatch(API_TOKEN_PATTERN);
  });
});
