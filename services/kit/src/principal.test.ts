import { SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { cachedPrincipalVerifier, signPrincipal, verifyPrincipal } from "./principal.js";

const SECRET = "a-shared-internal-secret-of-32-chars!";

describe("signed principal", () => {
  it("round-trips users and API tokens", async () => {
    const user = { kind: "user", userId: 7n, sessionId: "s-1" } as const;
    const token = { kind: "api_token", tokenId: 9n, organizationId: 3n, access: "read" } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, user))).toEqual(user);
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, token))).toEqual(token);
    // A token acting through the MCP endpoint says so, for the audit log.
    const viaMcp = { ...token, via: "mcp" } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, viaMcp))).toEqual(viaMcp);
    const service = { kind: "service", service: "gateway" } as const;
    const operator = { kind: "operator", name: "admin-cli" } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, service))).toEqual(service);
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, operator))).toEqual(operator);
    const form = { kind: "form", formId: 4n, organizationId: 3n, tableId: 12n } as const;
    expect(await verifyPrincipal(SECRET, await signPrincipal(SECRET, form))).toEqual(form);
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

describe("cached principal verifier", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("accepts a verified token from memory until it expires, and nothing it did not verify", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-22T10:00:00Z"));
    const verify = cachedPrincipalVerifier(SECRET);
    const user = { kind: "user", userId: 7n, sessionId: "s-1" } as const;
    const signed = await signPrincipal(SECRET, user);
    expect(await verify(signed)).toEqual(user);
    expect(await verify(signed)).toEqual(user);

    // Another secret's token, or a tampered copy of the cached one: never from memory.
    const foreign = await signPrincipal("another-secret-that-is-also-32-chars", user);
    expect(await verify(foreign)).toBeUndefined();
    expect(await verify(foreign)).toBeUndefined();
    const [header, payload, signature] = signed.split(".");
    const elevated = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), sub: "2" }),
    ).toString("base64url");
    expect(await verify(`${header}.${elevated}.${signature}`)).toBeUndefined();

    // Signed for 60 s: still good at 59 s, gone at 61 s.
    vi.setSystemTime(new Date("2026-11-22T10:00:59Z"));
    expect(await verify(signed)).toEqual(user);
    vi.setSystemTime(new Date("2026-11-22T10:01:01Z"));
    expect(await verify(signed)).toBeUndefined();
  });
});
