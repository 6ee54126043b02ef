import { describe, expect, it } from "vitest";
import { foldName, hasVisibleCharacter } from "./names.js";

describe("foldName", () => {
  it("makes names one regardless of case and of canonically equivalent spellings", () => {
    expect(foldName("Email")).toBe(foldName("eMAIL"));
    expect(foldName("ÉLÈVES")).toBe(foldName("élèves"));
    expect(foldName("İ")).toBe("i\u0307");
    expect(foldName("I\u0307")).toBe(foldName("İ"));
    expect(foldName("Café")).toBe(foldName("CAFE\u0301"));
  });

  it("keeps apart what PostgreSQL's lower() under C.UTF-8 would make one", () => {
    expect(foldName("İ")).not.toBe(foldName("i"));
  });

  it("puts marks back in canonical order after lower-casing", () => {
    // "İ" followed by a dot below lower-cases to i, U+0307, U+0323, which NFC reorders and composes.
    expect(foldName("İ\u0323")).toBe("\u1ecb\u0307");
    expect(foldName("İ\u0323")).toBe(foldName("i\u0323\u0307"));
  });
});

describe("hasVisibleCharacter", () => {
  it.each([
    ["\u200b"],
    ["\u200c\u200d"],
    [" \u2060 \ufeff "],
    ["\u00ad"],
    ["\u200e"],
    ["\ufe0f"],
    ["\u3164"],
    ["\u{e0041}"],
    ["\u3000\u00a0"],
    [""],
  ])("is false for %j, which shows nothing", (name) => {
    expect(hasVisibleCharacter(name)).toBe(false);
  });

  it.each([["a"], ["\u200bx\u200b"], ["🗂"], ["é"], ["-"]])("is true for %j", (name) => {
    expect(hasVisibleCharacter(name)).toBe(true);
  });
});
