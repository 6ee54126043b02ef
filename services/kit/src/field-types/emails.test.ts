import { describe, expect, it } from "vitest";
import { EMAIL_PATTERN, emailProblem, normalizeEmail } from "./emails.js";

describe("normalizeEmail", () => {
  it("trims and lower-cases, leaving the rest as sent", () => {
    expect(normalizeEmail("  Ada.Lovelace@Example.COM\n")).toBe("ada.lovelace@example.com");
    expect(normalizeEmail("ada@example.com")).toBe("ada@example.com");
    expect(normalizeEmail("A d@x")).toBe("a d@x");
  });

  it("lower-cases beyond ASCII by Unicode's mapping, independent of locale", () => {
    expect(normalizeEmail("ÉLODIE@EXAMPLE.FR")).toBe("élodie@example.fr");
    expect(normalizeEmail("I@X.TR")).toBe("i@x.tr");
  });
});

describe("emailProblem", () => {
  it("takes dotted ASCII addresses up to 64 characters before the @ and 254 in whole", () => {
    for (const address of [
      "ada@example.com",
      "Ada.Lovelace+notes@Mail.Example.COM",
      "o'brien_1-x@sub-domain.example.org",
      `${"a".repeat(64)}@example.com`,
      `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`,
    ]) {
      expect(emailProblem(address), address).toBeUndefined();
    }
  });

  it("tells one problem: the length first, then the format, then the part before the @", () => {
    const format = "must be a valid e-mail address";
    expect(emailProblem(`${"a".repeat(65)}@example.com`)).toBe(
      "must have at most 64 characters before the @",
    );
    expect(
      emailProblem(`${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}`),
    ).toBe("must be at most 254 characters");
    expect(emailProblem("x".repeat(255))).toBe("must be at most 254 characters");
    for (const address of [
      "",
      "ada",
      "@example.com",
      "ada@",
      "ada@localhost",
      "ada@example.c",
      "ada@example.123",
      "ada@@example.com",
      "a@b@example.com",
      ".ada@example.com",
      "ada.@example.com",
      "a..da@example.com",
      "ada lovelace@example.com",
      " ada@example.com",
      "ada@-example.com",
      "kaïa@example.com",
      "\u212Aate@example.com",
      "ada@exämple.com",
      "a\u0000b@example.com",
    ]) {
      expect(emailProblem(address), address).toBe(format);
    }
  });

  it("is the pattern documents show", () => {
    expect(new RegExp(EMAIL_PATTERN).test("ada@example.com")).toBe(true);
    expect(new RegExp(EMAIL_PATTERN).test("ada@localhost")).toBe(false);
  });
});
