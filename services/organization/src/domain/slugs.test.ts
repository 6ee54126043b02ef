import { describe, expect, it } from "vitest";
import { isSlug, SLUG_MAX, slugCandidate, slugFromName } from "./slugs.js";

describe("slugs", () => {
  it("derives valid slugs from any name", () => {
    expect(slugFromName("Acme Corp")).toBe("acme-corp");
    expect(slugFromName("  Café  Zürich!! ")).toBe("cafe-zurich");
    expect(slugFromName("A")).toBe("a-org");
    expect(slugFromName("日本語")).toBe("organization");
    expect(slugFromName("--x--y--")).toBe("x-y");
    const long = slugFromName(`${"word ".repeat(30)}`);
    expect(long.length).toBeLessThanOrEqual(SLUG_MAX);
    for (const name of ["Acme Corp", "A", "日本語", "word ".repeat(30), "ab-"]) {
      expect(isSlug(slugFromName(name)), name).toBe(true);
    }
  });

  it("numbers candidates within the length limit", () => {
    expect(slugCandidate("acme", 1)).toBe("acme");
    expect(slugCandidate("acme", 2)).toBe("acme-2");
    const base = "a".repeat(SLUG_MAX);
    expect(slugCandidate(base, 12)).toBe(`${"a".repeat(SLUG_MAX - 3)}-12`);
    expect(slugCandidate(`${"a".repeat(45)}-bc`, 2)).toBe(`${"a".repeat(45)}-2`);
  });

  it("accepts only 3-48 characters of a-z, 0-9 and '-'", () => {
    expect(isSlug("abc")).toBe(true);
    expect(isSlug("a-1")).toBe(true);
    expect(isSlug("ab")).toBe(false);
    expect(isSlug("ABC")).toBe(false);
    expect(isSlug("a_b")).toBe(false);
    expect(isSlug("a".repeat(49))).toBe(false);
  });
});
