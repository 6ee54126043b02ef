import { randomUUID } from "node:crypto";
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT, UnsecuredJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { SessionTokenVerifier } from "./session-token-verifier.js";

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function signingKey(): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair("EdDSA", {
    crv: "Ed25519",
    extractable: true,
  });
  const kid = randomUUID();
  const { x, kty, crv } = await exportJWK(publicKey);
  // As the identity service publishes it (proto Jwk: kid, kty, crv, x, alg, use).
  return { kid, privateKey, publicJwk: { kid, kty, crv, x, alg: "EdDSA", use: "sig" } };
}

function accessToken(
  key: SigningKey,
  claims: { sub?: string; sid?: string; iss?: string; exp?: number | string } = {},
) {
  const jwt = new SignJWT(claims.sid === undefined ? { sid: "session-1" } : { sid: claims.sid })
    .setProtectedHeader({ alg: "EdDSA", kid: key.kid, typ: "JWT" })
    .setIssuer(claims.iss ?? "rowbase")
    .setSubject(claims.sub ?? "42")
    .setIssuedAt()
    .setExpirationTime(claims.exp ?? "15m");
  return jwt.sign(key.privateKey);
}

/** A JWKS source whose keys the test changes, counting fetches (no service is involved). */
function keySource(initial: JWK[]) {
  const source = {
    keys: initial,
    fetches: 0,
    fetch: async () => {
      source.fetches += 1;
      return source.keys;
    },
  };
  return source;
}

describe("SessionTokenVerifier", () => {
  let current: SigningKey;
  let next: SigningKey;

  beforeAll(async () => {
    [current, next] = await Promise.all([signingKey(), signingKey()]);
  });

  it("accepts an EdDSA token of issuer rowbase and returns user and session", async () => {
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch);
    const claims = await verifier.verify(await accessToken(current, { sub: "9007199254740993" }));
    expect(claims).toEqual({ userId: 9007199254740993n, sessionId: "session-1" });
    await verifier.verify(await accessToken(current));
    expect(source.fetches).toBe(1);
  });

  it("refuses alg none, HS256, a missing kid and garbage without fetching keys", async () => {
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch);
    const none = new UnsecuredJWT({ sid: "s" }).setIssuer("rowbase").setSubject("42").encode();
    const hs256 = await new SignJWT({ sid: "s" })
      .setProtectedHeader({ alg: "HS256", kid: current.kid })
      .setIssuer("rowbase")
      .setSubject("42")
      .setExpirationTime("15m")
      .sign(new TextEncoder().encode("x".repeat(32)));
    const noKid = await new SignJWT({ sid: "s" })
      .setProtectedHeader({ alg: "EdDSA" })
      .setIssuer("rowbase")
      .setSubject("42")
      .setExpirationTime("15m")
      .sign(current.privateKey);
    for (const token of [none, hs256, noKid, "abc", "rb_notajwt", "a.b.c"]) {
      expect(await verifier.verify(token)).toBeUndefined();
    }
    expect(source.fetches).toBe(0);
  });

  it("refuses a wrong issuer, an expired token, a bad subject and a missing session", async () => {
    const verifier = new SessionTokenVerifier(keySource([current.publicJwk]).fetch);
    const past = Math.floor(Date.now() / 1000) - 1;
    for (const token of await Promise.all([
      accessToken(current, { iss: "someone-else" }),
      accessToken(current, { exp: past }),
      accessToken(current, { sub: "alice" }),
      accessToken(current, { sub: "0" }),
      accessToken(current, { sid: "" }),
    ])) {
      expect(await verifier.verify(token)).toBeUndefined();
    }
  });

  it("refuses a token signed by another key under a known kid", async () => {
    const verifier = new SessionTokenVerifier(keySource([current.publicJwk]).fetch);
    const forged = await accessToken({ ...next, kid: current.kid });
    expect(await verifier.verify(forged)).toBeUndefined();
  });

  it("refetches on an unknown kid (rotation), at most once per interval", async () => {
    let now = 1_000_000;
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch, { now: () => now });
    expect(await verifier.verify(await accessToken(current))).toBeDefined();
    expect(source.fetches).toBe(1);

    // A kid nobody published: refused, and within 30 s it costs no further fetch.
    const unknown = await accessToken({ ...next, kid: "unknown-kid" });
    now += 5_000;
    expect(await verifier.verify(unknown)).toBeUndefined();
    expect(source.fetches).toBe(1);
    now += 30_000;
    expect(await verifier.verify(unknown)).toBeUndefined();
    expect(source.fetches).toBe(2);
    now += 1_000;
    expect(await verifier.verify(unknown)).toBeUndefined();
    expect(source.fetches).toBe(2);

    // The identity service rotates a new key in: found on the next refetch.
    source.keys = [next.publicJwk, current.publicJwk];
    now += 30_000;
    expect(await verifier.verify(await accessToken(next))).toEqual({
      userId: 42n,
      sessionId: "session-1",
    });
    expect(source.fetches).toBe(3);
  });

  it("drops a removed key once the cached keys grow old", async () => {
    let now = 1_000_000;
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch, { now: () => now, maxAgeMs: 60_000 });
    const token = await accessToken(current);
    expect(await verifier.verify(token)).toBeDefined();
    source.keys = [next.publicJwk];
    now += 61_000;
    expect(await verifier.verify(token)).toBeUndefined();
    expect(source.fetches).toBe(2);
  });

  it("remembers a verified token for 30 s, so a removed key's tokens stop within that", async () => {
    let now = 1_000_000;
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch, { now: () => now, maxAgeMs: 5_000 });
    const token = await accessToken(current);
    expect(await verifier.verify(token)).toEqual({ userId: 42n, sessionId: "session-1" });
    source.keys = [next.publicJwk];
    // Past maxAgeMs the keys would be refetched, but the token is remembered.
    now += 10_000;
    expect(await verifier.verify(token)).toEqual({ userId: 42n, sessionId: "session-1" });
    expect(source.fetches).toBe(1);
    now += 21_000;
    expect(await verifier.verify(token)).toBeUndefined();
    expect(source.fetches).toBe(2);
    // A refused token is not remembered: the same text is checked again each time.
    source.keys = [current.publicJwk];
    now += 31_000;
    expect(await verifier.verify(token)).toEqual({ userId: 42n, sessionId: "session-1" });
  });

  it("keeps the cached keys when a refresh fails, and fails when there are none", async () => {
    let now = 1_000_000;
    let down = false;
    const verifier = new SessionTokenVerifier(
      async () => {
        if (down) throw new Error("identity unreachable");
        return [current.publicJwk];
      },
      { now: () => now, maxAgeMs: 60_000 },
    );
    const token = await accessToken(current);
    expect(await verifier.verify(token)).toBeDefined();
    down = true;
    now += 61_000;
    expect(await verifier.verify(token)).toBeDefined();

    const cold = new SessionTokenVerifier(async () => {
      throw new Error("identity unreachable");
    });
    await expect(cold.verify(token)).rejects.toThrow("identity unreachable");
  });

  it("shares one fetch between concurrent first requests", async () => {
    const source = keySource([current.publicJwk]);
    const verifier = new SessionTokenVerifier(source.fetch);
    const token = await accessToken(current);
    const results = await Promise.all(Array.from({ length: 5 }, () => verifier.verify(token)));
    expect(results.every((claims) => claims?.userId === 42n)).toBe(true);
    expect(source.fetches).toBe(1);
  });
});
