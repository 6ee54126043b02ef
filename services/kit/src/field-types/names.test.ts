import { describe, expect, it } from "vitest";
import { fileNameProblem, foldName, nameProblem, replaceControlCharacters } from "./names.js";

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

describe("nameProblem", () => {
  it.each([
    ["Projects"],
    ["x".repeat(100)],
    ["é".repeat(100)],
    // Characters, not UTF-16 units: each emoji is two of those.
    ["🗂".repeat(100)],
    ["\u200bx\u200b"],
    ["a b"],
    ["-"],
  ])("takes %j", (name) => {
    expect(nameProblem(name)).toBeUndefined();
  });

  it.each([
    ["", "must be 1-100 characters"],
    ["x".repeat(101), "must be 1-100 characters"],
    ["🗂".repeat(101), "must be 1-100 characters"],
    ["a\u0000b", "must not contain control characters"],
    ["a\nb", "must not contain control characters"],
    ["a\tb", "must not contain control characters"],
    ["a\u007fb", "must not contain control characters"],
    // C1 controls.
    ["a\u0085b", "must not contain control characters"],
    ["a\u009fb", "must not contain control characters"],
    // Bidirectional controls: embeddings and overrides, isolates, marks.
    ["invoice\u202egnp.exe", "must not contain control characters"],
    ["a\u202ab", "must not contain control characters"],
    ["a\u2066b", "must not contain control characters"],
    ["a\u2069b", "must not contain control characters"],
    ["a\u200fb", "must not contain control characters"],
    ["a\u061cb", "must not contain control characters"],
    // Nothing that shows: zero-width and format characters, white space, default-ignorables.
    ["\u200b", "must contain a visible character"],
    ["\u200c\u200d", "must contain a visible character"],
    ["\u200c\u2060 \ufeff", "must contain a visible character"],
    ["\u00ad", "must contain a visible character"],
    ["\ufe0f", "must contain a visible character"],
    ["\u3164", "must contain a visible character"],
    ["\u{e0041}", "must contain a visible character"],
    ["\u3000\u00a0", "must contain a visible character"],
    ["\ud800", "must be valid Unicode"],
    ["a\udc00b", "must be valid Unicode"],
  ])("refuses %j: %s", (name, problem) => {
    expect(nameProblem(name)).toBe(problem);
  });

  it("takes another longest length", () => {
    expect(nameProblem("x".repeat(255), 255)).toBeUndefined();
    expect(nameProblem("x".repeat(256), 255)).toBe("must be 1-255 characters");
  });
});

describe("fileNameProblem", () => {
  it.each([["report 2026.pdf"], ["..hidden"], ["😀".repeat(255)]])("takes %j", (name) => {
    expect(fileNameProblem(name)).toBeUndefined();
  });

  it.each([
    ["", "must be 1-255 characters"],
    ["a".repeat(256), "must be 1-255 characters"],
    ["a\u0085b", "must not contain control characters"],
    ["invoice\u202efdp.exe", "must not contain control characters"],
    ["\u200b", "must contain a visible character"],
    ["../x", "must not contain '/' or '\\'"],
    ["a\\b", "must not contain '/' or '\\'"],
    ["..", "must not be '.' or '..'"],
  ])("refuses %j: %s", (name, problem) => {
    expect(fileNameProblem(name)).toBe(problem);
  });
});

describe("replaceControlCharacters", () => {
  it("replaces every character that names may not hold", () => {
    expect(replaceControlCharacters("a\u0000b\nc\u0085d\u202ee\u2066f")).toBe("abcdef");
    expect(replaceControlCharacters("Ada\nLovelace", " ")).toBe("Ada Lovelace");
    expect(replaceControlCharacters("\u200bkeeps invisible ones")).toBe(
      "\u200bkeeps invisible ones",
    );
  });
});
