import { describe, expect, it } from "vitest";
import { normalizeEmail } from "./emails.js";

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
