import { describe, expect, it } from "vitest";
import {
  API_TOKEN_PATTERN,
  newApiTokenSecret,
  newCode,
  randomBase62,
  sha256Hex,
} from "./secrets.js";

describe("secrets", () => {
  it("makes rb_ tokens of 40 base62 characters, all different", () => {
    const tokens = new Set(Array.from({ length: 200 }, newApiTokenSecret));
    expect(tokens.size).toBe(200);
    for (const token of tokens) expect(token).toMatch(API_TOKEN_PATTERN);
  });

  it("uses every base62 character about equally", () => {
    const counts = new Map<string, number>();
    for (const char of randomBase62(62_000)) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(62);
    for (const count of counts.values()) expect(count).toBeGreaterThan(800);
  });

  it("makes 6-digit codes and hex SHA-256 digests", () => {
    expect(newCode()).toMatch(/^\d{6}$/);
    expect(sha256Hex("abc")).toBe(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  });
});
