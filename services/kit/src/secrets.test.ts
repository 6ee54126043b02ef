import { describe, expect, it } from "vitest";
import { codeHash, codeMatches, newCode, randomBase62, sha256Hex } from "./secrets.js";

describe("secrets", () => {
  it("uses every base62 character about equally", () => {
    const counts = new Map<string, number>();
    for (const char of randomBase62(62_000)) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(62);
    for (const count of counts.values()) expect(count).toBeGreaterThan(800);
  });

  it("makes base62 strings of the length asked for", () => {
    for (const length of [0, 1, 40, 48]) expect(randomBase62(length)).toMatch(/^[0-9A-Za-z]*$/);
    expect(randomBase62(48)).toHaveLength(48);
  });

  it("makes 6-digit codes, leading zeros kept, and hex SHA-256 digests", () => {
    for (let i = 0; i < 200; i++) expect(newCode()).toMatch(/^\d{6}$/);
    expect(sha256Hex("abc")).toBe(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  });

  it("stores a code bound to what it is for, as rows already stored hold it", () => {
    expect(codeHash([7n], "012345")).toBe(sha256Hex("7:012345"));
    expect(codeHash([3n, 12n], "012345")).toBe(sha256Hex("3:12:012345"));
    const stored = codeHash([3n, 12n], "012345");
    expect(codeMatches(stored, [3n, 12n], "012345")).toBe(true);
    expect(codeMatches(stored, [3n, 12n], "012346")).toBe(false);
    expect(codeMatches(stored, [3n, 13n], "012345")).toBe(false);
    expect(codeMatches(stored, [12n], "012345")).toBe(false);
    expect(codeMatches("", [3n, 12n], "012345")).toBe(false);
  });
});
