import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { signPrincipal, verifyPrincipal } from "./principal.js";

const SECRET = "a-shared-internal-secret-of-32-chars!";

describe("signed principal", () => {
  it("round-trips users and API tokens", async () => {
    const user = { kind: "user", userId: 7n, sessionId: "s-1" } as const;
    const token = { kind: "api_token", tokenId: 9n, organizationId: 3n, access: "read" } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, user))).toEqual(user);
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, token))).toEqual(token);
    const service = { kind: "service", service: "gateway" } as const;
    const operator = { kind: "operator", name: "admin-cli" } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, service))).toEqual(service);
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, operator))).toEqual(operator);
  });

  it("refuses another secret, tampering, expiry and other algorithms", async () => {
    const signed = await signPrincipal(SECRET, { kind: "user", userId: 1n, sessionId: "s" });
    expect(await verifyPrincipal("another-secret-that-is-also-32-chars", signed)).toBeUndefined();
    const [header, payload, signature] = signed.split(".");
    const elevated = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), sub: "2" }),
    ).toString("base64url");
    expect(await verifyPrincipal(SECRET, `${header}.${elevated}.${signature}`)).toBeUndefined();
    const none = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${payload}.`;
    expect(await verifyPrincipal(SECRET, none)).toBeUndefined();
    const expired = await new SignJWT({ k: "user", sid: "s" })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuer("rowbase-gateway")
      .setSubject("1")
      .setExpirationTime(Math.floor(Date.now() / 1000) - 10)
      .sign(new TextEncoder().encode(SECRET));
    expect(await verifyPrincipal(SECRET, expired)).toBeUndefined();
    expect(await verifyPrincipal(SECRET, "garbage")).toBeUndefined();
  });
});
