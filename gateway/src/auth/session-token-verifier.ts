import { LocalCache, type Logger } from "@rowbase/kit";
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWK,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";

/** The issuer the identity service puts in every access token, checked on every one. */
export const ACCESS_TOKEN_ISSUER = "rowbase";

/** The only signature algorithm accepted; `none`, HS256 and the rest never reach a key. */
const ALGORITHM = "EdDSA";

/** Who a valid session access token speaks for. */
export interface SessionClaims {
  userId: bigint;
  sessionId: string;
}

/** Fetches the identity service's current public keys (IdentityService.GetJwks). */
export type JwksSource = () => Promise<JWK[]>;

export interface SessionTokenVerifierOptions {
  /** An unknown `kid` refetches the keys at most this often (a forged kid must not flood). */
  refetchIntervalMs?: number;
  /** Keys older than this are refetched on the next request, so a dropped key stops working. */
  maxAgeMs?: number;
  now?: () => number;
  logger?: Logger;
}

const USER_ID = /^[1-9][0-9]{0,18}$/;

/**
 * How long a verified token is remembered (never past its `exp`): the EdDSA check was a
 * quarter of the gateway's CPU per session request. A key the identity service drops stops
 * working this much later than it would otherwise (keys are refetched every `maxAgeMs`);
 * revocation is unaffected (checked in Redis on every request, `authenticate.ts`).
 */
const VERIFIED_TTL_MS = 30_000;

/**
 * Verifies session access JWTs locally against a cached JWKS: no call per request. The keys are
 * fetched on first use, again when a token names a `kid` we do not know (rotation) and when
 * they grow old; if a refresh fails the old keys stay in use. A token that verified is
 * remembered for up to `VERIFIED_TTL_MS` (by its exact text), never past its expiry.
 */
export class SessionTokenVerifier {
  private keys: JWTVerifyGetKey | undefined;
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private attemptedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<JWTVerifyGetKey> | undefined;
  private readonly refetchIntervalMs: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;
  private readonly verified: LocalCache<SessionClaims>;

  constructor(
    private readonly source: JwksSource,
    private readonly options: SessionTokenVerifierOptions = {},
  ) {
    this.refetchIntervalMs = options.refetchIntervalMs ?? 30_000;
    this.maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.now = options.now ?? Date.now;
    this.verified = new LocalCache(VERIFIED_TTL_MS, 10_000, this.now);
  }

  /**
   * The claims of a valid token, or undefined for anything forged, expired, malformed or signed
   * with an unknown key. Throws only when the keys cannot be fetched at all (identity down).
   */
  async verify(token: string): Promise<SessionClaims | undefined> {
    const remembered = this.verified.get(token);
    if (remembered) return remembered;
    const result = await this.verifyWithKeys(token);
    if (!result) return undefined;
    this.verified.set(token, result.claims, result.expiresAt - this.now());
    return result.claims;
  }

  private async verifyWithKeys(token: string): Promise<Verified | undefined> {
    if (!hasAcceptableHeader(token)) return undefined;
    let keys = await this.currentKeys();
    try {
      return await verifyWith(token, keys);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) return undefined;
      if (this.now() - this.attemptedAt < this.refetchIntervalMs) return undefined;
      keys = await this.load();
    }
    try {
      return await verifyWith(token, keys);
    } catch {
      return undefined;
    }
  }

  private async currentKeys(): Promise<JWTVerifyGetKey> {
    if (!this.keys) return this.load();
    const stale = this.now() - this.fetchedAt > this.maxAgeMs;
    if (stale && this.now() - this.attemptedAt >= this.refetchIntervalMs) {
      try {
        return await this.load();
      } catch (error) {
        this.options.logger?.warn({ err: error }, "JWKS refresh failed; keeping the cached keys");
      }
    }
    return this.keys;
  }

  /** One fetch at a time; concurrent requests wait for the same one. */
  private load(): Promise<JWTVerifyGetKey> {
    this.loading ??= (async () => {
      this.attemptedAt = this.now();
      try {
        const keys = createLocalJWKSet(toKeySet(await this.source()));
        this.keys = keys;
        this.fetchedAt = this.now();
        return keys;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }
}

/** Refuses before any key lookup a token without `kid` or with another algorithm. */
function hasAcceptableHeader(token: string): boolean {
  try {
    const header = decodeProtectedHeader(token);
    return header.alg === ALGORITHM && typeof header.kid === "string" && header.kid !== "";
  } catch {
    return false;
  }
}

/** Valid claims and when the token expires (ms since the epoch). */
interface Verified {
  claims: SessionClaims;
  expiresAt: number;
}

async function verifyWith(token: string, keys: JWTVerifyGetKey): Promise<Verified> {
  const { payload } = await jwtVerify(token, keys, {
    issuer: ACCESS_TOKEN_ISSUER,
    algorithms: [ALGORITHM],
    requiredClaims: ["sub", "sid", "exp"],
  });
  const { sub, sid } = payload;
  if (typeof sub !== "string" || !USER_ID.test(sub)) {
    throw new errors.JWTClaimValidationFailed("sub is not a user id", payload, "sub", "invalid");
  }
  if (typeof sid !== "string" || sid === "" || sid.length > 200) {
    throw new errors.JWTClaimValidationFailed("sid is not a session id", payload, "sid", "invalid");
  }
  return { claims: { userId: BigInt(sub), sessionId: sid }, expiresAt: (payload.exp ?? 0) * 1000 };
}

/** Only Ed25519 signing keys; empty proto fields are left out rather than sent as "". */
function toKeySet(keys: JWK[]): JSONWebKeySet {
  return {
    keys: keys
      .filter((key) => key.kty === "OKP" && (!key.use || key.use === "sig"))
      .map((key) =>
        Object.fromEntries(
          Object.entries(key).filter(([, value]) => value !== "" && value != null),
        ),
      ),
  };
}
