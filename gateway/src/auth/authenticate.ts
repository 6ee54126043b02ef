import { type Cache, Code, ConnectError, domainError, type Principal } from "@rowbase/kit";
import { decodeJwt } from "jose";
import { WWW_AUTHENTICATE_METADATA } from "../errors/error-table.js";
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
    if (!credential) throw unauthorized(authorization ? "malformed" : "missing");
    if (credential.startsWith(API_TOKEN_PREFIX)) throw unauthorized("api_token_refused");
    const claims = await this.verifier.verify(credential);
    if (!claims) throw unauthorized(hasExpired(credential) ? "session_expired" : "session_invalid");
    if (await this.isRevoked(claims.sessionId)) throw unauthorized("session_revoked");
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

/** How every API token starts (`rb_`), which no session JWT does. */
export const API_TOKEN_PREFIX = "rb_";

/**
 * Why a credential was refused, as the `WWW-Authenticate` header of the 401 says it (RFC 6750):
 * the `error` code, if any, and a description for the person reading it. The body is the same
 * `unauthorized` for every one of them.
 */
const REFUSALS = {
  missing: [undefined, "send a credential as Authorization: Bearer <token>"],
  malformed: ["invalid_request", "the Authorization header must be Bearer <token>"],
  api_token_refused: [
    "invalid_token",
    "API tokens are not accepted on this route; it takes a session token",
  ],
  session_refused: ["invalid_token", "this route takes an API token, not a session token"],
  session_invalid: ["invalid_token", "the session token is malformed or its signature is unknown"],
  session_expired: ["invalid_token", "the session token has expired; refresh it"],
  session_revoked: ["invalid_token", "the session has ended (signed out or revoked)"],
  api_token_unknown: ["invalid_token", "the API token is unknown or revoked"],
} as const satisfies Record<string, readonly [string | undefined, string]>;

export type Refusal = keyof typeof REFUSALS;

/** The `WWW-Authenticate` value of a refusal. */
export function wwwAuthenticate(refusal: Refusal): string {
  const [error, description] = REFUSALS[refusal];
  const parts = ['realm="rowbase"'];
  if (error) parts.push(`error="${error}"`);
  parts.push(`error_description="${description}"`);
  return `Bearer ${parts.join(", ")}`;
}

/**
 * 401 `unauthorized`: the one answer to every missing, malformed or unknown credential, with
 * the reason in its `WWW-Authenticate` header only.
 */
export function unauthorized(refusal: Refusal) {
  return domainError(Code.Unauthenticated, "unauthorized", {
    [WWW_AUTHENTICATE_METADATA]: wwwAuthenticate(refusal),
  });
}

/**
 * Whether a refused session token is a JWT whose `exp` has passed. Only the wording of the 401
 * depends on it: the token was refused already.
 */
function hasExpired(credential: string): boolean {
  try {
    const { exp } = decodeJwt(credential);
    return typeof exp === "number" && exp * 1000 <= Date.now();
  } catch {
    return false;
  }
}
