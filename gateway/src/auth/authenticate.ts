import { type Cache, Code, ConnectError, domainError, type Principal } from "@rowbase/kit";
import type { SessionTokenVerifier } from "./session-token-verifier.js";

/** The caller of a session route, as passed on to the services. */
export type SessionCaller = Extract<Principal, { kind: "user" }>;

/** An API token acting inside its own organization with its access level. */
export type ApiTokenCaller = Extract<Principal, { kind: "api_token" }>;

/**
 * The cache key the identity service sets (value "1", living at least as long as an access
 * token) when a session family is revoked by logout or refresh-token reuse. Checking it makes a
 * revoked session's still-unexpired access tokens stop at once.
 */
export function revokedSessionKey(sessionId: string): string {
  return `session-revoked:${sessionId}`;
}

const BEARER = /^Bearer +([^\s]+) *$/i;

/** The credential of an `Authorization: Bearer <credential>` header, if that is its form. */
export function bearerOf(authorization: string | undefined): string | undefined {
  return authorization ? BEARER.exec(authorization)?.[1] : undefined;
}

/**
 * Turns an Authorization header into a session caller or 401 `unauthorized`: a valid session
 * JWT whose session has not been revoked. An API token (`rb_...`) is not a session and gets 401
 * here; routes that take one resolve it with ApiTokenAuthenticator.
 */
export class SessionAuthenticator {
  constructor(
    private readonly verifier: SessionTokenVerifier,
    private readonly cache: Cache,
  ) {}

  async authenticate(authorization: string | undefined): Promise<SessionCaller> {
    const credential = bearerOf(authorization);
    if (!credential) throw unauthorized();
    const claims = await this.verifier.verify(credential);
    if (!claims) throw unauthorized();
    if (await this.isRevoked(claims.sessionId)) throw unauthorized();
    return { kind: "user", userId: claims.userId, sessionId: claims.sessionId };
  }

  /** Fails closed: if the revocation marks cannot be read, nobody gets in (503). */
  private async isRevoked(sessionId: string): Promise<boolean> {
    let mark: string | null;
    try {
      mark = await this.cache.get(revokedSessionKey(sessionId));
    } catch (error) {
      // The error table maps Unavailable to 503 `service_unavailable`; the cause goes to the log.
      throw new ConnectError(
        "session revocation marks unreadable",
        Code.Unavailable,
        undefined,
        undefined,
        error,
      );
    }
    return mark !== null;
  }
}

/** 401 `unauthorized`: the one answer to every missing, malformed or unknown credential. */
export function unauthorized() {
  return domainError(Code.Unauthenticated, "unauthorized");
}
