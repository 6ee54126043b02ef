import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { jwtVerify, SignJWT } from "jose";
import { Code, domainError } from "./errors.js";

/** The header that carries the signed principal from the gateway to the services. */
export const PRINCIPAL_HEADER = "x-rowbase-principal";
export const REQUEST_ID_HEADER = "x-request-id";

/**
 * Who is calling, as the gateway authenticated it. A user acts through a session; an API token
 * acts inside its own organization with its access level.
 */
export type Principal =
  | { kind: "user"; userId: bigint; sessionId: string }
  | { kind: "api_token"; tokenId: bigint; organizationId: bigint; access: "read" | "read_write" };

const ISSUER = "rowbase-gateway";
const LIFETIME_SECONDS = 60;

function keyOf(secret: string): Uint8Array {
  return new TextEncoder().encode(secret);
}

/** Signs a principal for one downstream call chain (HS256, 60 s). */
export async function signPrincipal(secret: string, principal: Principal): Promise<string> {
  const claims =
    principal.kind === "user"
      ? { k: "user", sid: principal.sessionId }
      : { k: "api_token", org: principal.organizationId.toString(), acc: principal.access };
  const subject = principal.kind === "user" ? principal.userId : principal.tokenId;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(ISSUER)
    .setSubject(subject.toString())
    .setIssuedAt()
    .setExpirationTime(`${LIFETIME_SECONDS}s`)
    .sign(keyOf(secret));
}

/** Verifies a signed principal; anything forged, expired or malformed yields undefined. */
export async function verifyPrincipal(
  secret: string,
  token: string,
): Promise<Principal | undefined> {
  try {
    const { payload } = await jwtVerify(token, keyOf(secret), {
      issuer: ISSUER,
      algorithms: ["HS256"],
    });
    const subject = BigInt(payload.sub ?? "");
    if (payload.k === "user" && typeof payload.sid === "string") {
      return { kind: "user", userId: subject, sessionId: payload.sid };
    }
    if (
      payload.k === "api_token" &&
      typeof payload.org === "string" &&
      (payload.acc === "read" || payload.acc === "read_write")
    ) {
      return {
        kind: "api_token",
        tokenId: subject,
        organizationId: BigInt(payload.org),
        access: payload.acc,
      };
    }
    return undefined;
  } catch {
    return undefined;
  }
}

/** Set by the server interceptor when the call carries a valid principal. */
export const principalKey = createContextKey<Principal | undefined>(undefined, {
  description: "rowbase principal",
});

/** The verified caller, or Unauthenticated. */
export function requirePrincipal(ctx: HandlerContext): Principal {
  const principal = ctx.values.get(principalKey);
  if (!principal) throw domainError(Code.Unauthenticated, "unauthorized");
  return principal;
}

/** The verified user caller, or Unauthenticated (an API token is not a user). */
export function requireUser(ctx: HandlerContext): Extract<Principal, { kind: "user" }> {
  const principal = requirePrincipal(ctx);
  if (principal.kind !== "user") throw domainError(Code.Unauthenticated, "unauthorized");
  return principal;
}
