import { randomUUID } from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from "jose";
import type { SigningJwk } from "../config.js";

/** The issuer the gateway requires in every access token. */
export const ACCESS_TOKEN_ISSUER = "rowbase";

export interface PublicJwk {
  kid: string;
  kty: string;
  crv: string;
  x: string;
  alg: string;
  use: string;
}

/**
 * Signs access JWTs (EdDSA, `kid` in the header) with the first configured key and publishes
 * the public half of every key, so a key can be rotated in before the old one is dropped.
 */
export class AccessTokenSigner {
  private constructor(
    private readonly signingKey: { kid: string; key: Awaited<ReturnType<typeof importJWK>> },
    private readonly publicKeys: PublicJwk[],
    readonly ttlSeconds: number,
  ) {}

  static async create(keys: SigningJwk[], ttlSeconds: number): Promise<AccessTokenSigner> {
    const first = keys[0];
    if (!first) throw new Error("at least one signing key is required");
    const key = await importJWK(first, "EdDSA");
    const publicKeys = keys.map(({ kid, kty, crv, x }) => ({
      kid,
      kty,
      crv,
      x,
      alg: "EdDSA",
      use: "sig",
    }));
    return new AccessTokenSigner({ kid: first.kid, key }, publicKeys, ttlSeconds);
  }

  sign(userId: bigint, sessionId: string): Promise<string> {
    return new SignJWT({ sid: sessionId })
      .setProtectedHeader({ alg: "EdDSA", kid: this.signingKey.kid, typ: "JWT" })
      .setIssuer(ACCESS_TOKEN_ISSUER)
      .setSubject(userId.toString())
      .setIssuedAt()
      .setExpirationTime(`${this.ttlSeconds}s`)
      .sign(this.signingKey.key);
  }

  jwks(): PublicJwk[] {
    return this.publicKeys;
  }
}

/** A new Ed25519 signing key as a private JWK (for first start and tests). */
export async function generateSigningKey(): Promise<SigningJwk> {
  const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  const jwk: JWK = await exportJWK(privateKey);
  return { kty: "OKP", crv: "Ed25519", kid: randomUUID(), x: jwk.x!, d: jwk.d! };
}
