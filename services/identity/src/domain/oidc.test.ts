import { describe, expect, it } from "vitest";
import { chooseRedirectUri, profileOf } from "./oidc.js";

describe("chooseRedirectUri", () => {
  const fallback = "https://app.example.com/oauth/callback";
  const allowed = [fallback, "https://admin.example.com/cb"];

  it("takes the default when none is asked for, and an allowed one in any spelling", () => {
    expect(chooseRedirectUri("", fallback, allowed)).toBe(fallback);
    expect(chooseRedirectUri("https://ADMIN.example.com:443/cb", fallback, allowed)).toBe(
      "https://admin.example.com/cb",
    );
  });

  it("refuses anything else", () => {
    for (const requested of [
      "https://evil.example/cb",
      "https://admin.example.com/cb/",
      "https://admin.example.com/cb?next=/",
      "http://admin.example.com/cb",
      "admin.example.com/cb",
    ]) {
      expect(chooseRedirectUri(requested, fallback, allowed)).toBeUndefined();
    }
  });
});

describe("profileOf", () => {
  it("normalises the e-mail and trusts only a boolean email_verified", () => {
    expect(profileOf({ email: " Ada@Example.COM ", email_verified: true, name: " Ada " })).toEqual({
      email: "ada@example.com",
      emailVerified: true,
      name: "Ada",
    });
    expect(profileOf({ email: "ada@example.com", email_verified: "true" }).emailVerified).toBe(
      false,
    );
    expect(profileOf({ email: "ada@example.com" }).emailVerified).toBe(false);
  });

  it("drops what is not an address and keeps names fit for display", () => {
    expect(profileOf({ email: "no address" }).email).toBeUndefined();
    expect(profileOf({ email: 42 }).email).toBeUndefined();
    expect(profileOf({ email: `${"a".repeat(250)}@example.com` }).email).toBeUndefined();
    // Not folded onto another address: the Kelvin sign lower-cases to "k".
    expect(profileOf({ email: "\u212Aate@example.com" }).email).toBeUndefined();
    expect(profileOf({ email: "kaïa@example.com" }).email).toBeUndefined();
    expect(profileOf({ email: "a\u0000b@example.com" }).email).toBeUndefined();
    expect(profileOf({ email: "a@b@example.com" }).email).toBeUndefined();
    // The rule the registration route applies: no address there would be none here either.
    expect(profileOf({ email: `${"a".repeat(65)}@example.com` }).email).toBeUndefined();
    expect(profileOf({ email: "ada@localhost" }).email).toBeUndefined();
    expect(profileOf({ email: "ada lovelace@example.com" }).email).toBeUndefined();
    expect(profileOf({ email: `${"a".repeat(64)}@example.com` }).email).toBe(
      `${"a".repeat(64)}@example.com`,
    );
    expect(profileOf({ name: "Ada\nLovelace\u0000" }).name).toBe("Ada Lovelace");
    expect(profileOf({ name: "Ada\u202Eecalevol" }).name).toBe("Ada ecalevol");
    expect(profileOf({ name: "x".repeat(300) }).name).toHaveLength(100);
    expect(profileOf({}).name).toBe("");
    // A name that shows nothing is no name, as the registration route refuses it.
    expect(profileOf({ name: "\u200b \u2060\ufeff" }).name).toBe("");
  });
});
