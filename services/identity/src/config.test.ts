import { describe, expect, it } from "vitest";
import { identityEnv, oidcSettingsOf } from "./config.js";

const BASE = {
  DATABASE_URL: "postgres://postgres@127.0.0.1:5432/rowbase",
  INTERNAL_JWT_SECRET: "test-internal-secret-of-at-least-32-chars",
  JWT_SIGNING_KEYS: JSON.stringify([{ kty: "OKP", crv: "Ed25519", kid: "k", x: "x", d: "d" }]),
};

const OIDC = {
  OIDC_ISSUER: "https://login.example.com",
  OIDC_CLIENT_ID: "rowbase",
  OIDC_CLIENT_SECRET: "secret",
  OIDC_REDIRECT_URI: "https://app.example.com/oauth/callback",
};

function problems(env: Record<string, string>): string[] {
  const result = identityEnv.safeParse({ ...BASE, ...env });
  return result.success
    ? []
    : result.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
}

describe("OpenID Connect settings", () => {
  it("are off when none is set, including when they are empty", () => {
    expect(oidcSettingsOf(identityEnv.parse(BASE))).toBeUndefined();
    const empty = { OIDC_ISSUER: "", OIDC_CLIENT_ID: "", OIDC_CLIENT_SECRET: "" };
    expect(oidcSettingsOf(identityEnv.parse({ ...BASE, ...empty }))).toBeUndefined();
  });

  it("are on when all four are set, with the default redirect URI first and URIs normalised", () => {
    const config = identityEnv.parse({
      ...BASE,
      ...OIDC,
      OIDC_ALLOWED_REDIRECT_URIS:
        " https://ADMIN.example.com/cb , https://app.example.com/oauth/callback,",
    });
    expect(oidcSettingsOf(config)).toEqual({
      issuer: "https://login.example.com",
      clientId: "rowbase",
      clientSecret: "secret",
      redirectUri: "https://app.example.com/oauth/callback",
      redirectUris: ["https://app.example.com/oauth/callback", "https://admin.example.com/cb"],
    });
  });

  it("refuse a partial configuration, naming what is missing", () => {
    expect(problems({ OIDC_ISSUER: OIDC.OIDC_ISSUER, OIDC_CLIENT_ID: "rowbase" })).toEqual([
      "OIDC_CLIENT_SECRET: is required when OIDC_ISSUER, OIDC_CLIENT_ID are set",
      "OIDC_REDIRECT_URI: is required when OIDC_ISSUER, OIDC_CLIENT_ID are set",
    ]);
    expect(problems({ OIDC_ALLOWED_REDIRECT_URIS: "https://app.example.com/cb" })).toEqual([
      "OIDC_ALLOWED_REDIRECT_URIS: needs OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI",
    ]);
  });

  it("want an https issuer except on loopback, and redirect URIs without query or fragment", () => {
    expect(problems({ ...OIDC, OIDC_ISSUER: "http://login.example.com" })).toEqual([
      "OIDC_ISSUER: must use https (plain http only on localhost)",
    ]);
    expect(problems({ ...OIDC, OIDC_ISSUER: "http://127.0.0.1:4000" })).toEqual([]);
    expect(problems({ ...OIDC, OIDC_ISSUER: "http://localhost:4000/realm" })).toEqual([]);
    expect(problems({ ...OIDC, OIDC_REDIRECT_URI: "https://app.example.com/cb?x=1" })).toEqual([
      "OIDC_REDIRECT_URI: 'https://app.example.com/cb?x=1' must not have a query or fragment",
    ]);
    expect(
      problems({ ...OIDC, OIDC_ALLOWED_REDIRECT_URIS: "/relative,https://a.example/#x" }),
    ).toEqual([
      "OIDC_ALLOWED_REDIRECT_URIS: '/relative' is not an absolute URL",
      "OIDC_ALLOWED_REDIRECT_URIS: 'https://a.example/#x' must not have a query or fragment",
    ]);
  });
});
