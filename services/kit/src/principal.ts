import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { type JWTPayload, jwtVerify, SignJWT } from "jose";
import { Code, domainError } from "./errors.js";
import { LocalCache } from "./local-cache.js";

/** The header that carries the signed principal from the gateway to the services. */
export const PRINCIPAL_HEADER = "x-rowbase-principal";
export const REQUEST_ID_HEADER = "x-request-id";
/**
 * Set on a call its caller repeats on a timer (an open change stream asking for new changes
 * four times a second): the service logs its successful answers at debug, not one info line
 * per poll.
 */
export const POLL_HEADER = "x-rowbase-poll";

/** How a caller reached the API when not through the REST routes: the MCP endpoint. */
export type Via = "mcp";

/**
 * Who is calling, as the gateway authenticated it. A user acts through a session; an API token
 * acts inside its own organization with its access level.
 */
export type Principal =
  | { kind: "user"; userId: bigint; sessionId: string }
  | {
      kind: "api_token";
      tokenId: bigint;
      organizationId: bigint;
      access: "read" | "read_write";
      /** Set when the token acts through the MCP endpoint: its writes are audited so. */
      via?: Via;
    }
  /** Another Rowbase process calling an internal RPC (GetMembership, ResolveApiToken, ...). */
  | { kind: "service"; service: string }
  /** A person operating the installation through the admin CLI (plan changes). */
  | { kind: "operator"; name: string }
  /**
   * A public form's submission, signed by the gateway once it checked the form and the values:
   * it may create records in the form's table and nothing else (not a member of anything).
   */
  | { kind: "form"; formId: bigint; organizationId: bigint; tableId: bigint };

const ISSUER = "rowbase-gateway";
const LIFETIME_SECONDS = 60;

function keyOf(secret: string): Uint8Array {
  return new TextEncoder().encode(secret);
}

/** Signs a principal for one downstream call chain (HS256, 60 s). */
export async function signPrincipal(secret: string, principal: Principal): Promise<string> {
  const [subject, claims] = claimsOf(principal);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(ISSUER)
    .setSubject(subject.toString())
    .setIssuedAt()
    .setExpirationTime(`${LIFETIME_SECONDS}s`)
    .sign(keyOf(secret));
}

function claimsOf(principal: Principal): [string, Record<string, string>] {
  switch (principal.kind) {
    case "user":
      return [principal.userId.toString(), { k: "user", sid: principal.sessionId }];
    case "api_token":
      return [
        principal.tokenId.toString(),
        {
          k: "api_token",
          org: principal.organizationId.toString(),
          acc: principal.access,
          ...(principal.via ? { via: principal.via } : {}),
        },
      ];
    case "service":
      return [principal.service, { k: "service" }];
    case "operator":
      return [principal.name, { k: "operator" }];
    case "form":
      return [
        principal.formId.toString(),
        {
          k: "form",
          org: principal.organizationId.toString(),
          tbl: principal.tableId.toString(),
        },
      ];
  }
}

/**
 * The secrets a principal may be signed with: the current one, and while it is being rotated
 * the previous one too (INTERNAL_JWT_SECRET_PREVIOUS). Signing always uses the current one.
 */
export type PrincipalSecrets = string | readonly (string | undefined)[];

/** Verifies a signed principal; anything forged, expired or malformed yields undefined. */
export async function verifyPrincipal(
  secrets: PrincipalSecrets,
  token: string,
): Promise<Principal | undefined> {
  return (await verified(secrets, token))?.principal;
}

/**
 * `verifyPrincipal` with a memory of the tokens it verified, each until it expires: the gateway
 * signs a caller's principal once and sends the same token for many calls, so a service checks
 * each token's signature once instead of once per call. Only valid tokens are kept, under their
 * exact text, so a token is accepted from memory only if the same bytes passed the check.
 */
export function cachedPrincipalVerifier(
  secrets: PrincipalSecrets,
  maxEntries = 10_000,
): (token: string) => Promise<Principal | undefined> {
  const cache = new LocalCache<Principal>(LIFETIME_SECONDS * 1000, maxEntries);
  return async (token) => {
    const hit = cache.get(token);
    if (hit) return hit;
    const result = await verified(secrets, token);
    if (!result) return undefined;
    cache.set(token, result.principal, result.expiresAt - Date.now());
    return result.principal;
  };
}

async function verified(
  secrets: PrincipalSecrets,
  token: string,
): Promise<{ principal: Principal; expiresAt: number } | undefined> {
  for (const secret of typeof secrets === "string" ? [secrets] : secrets) {
    if (!secret) continue;
    try {
      const { payload } = await jwtVerify(token, keyOf(secret), {
        issuer: ISSUER,
        algorithms: ["HS256"],
      });
      const principal = principalOf(payload);
      if (!principal || typeof payload.exp !== "number") return undefined;
      return { principal, expiresAt: payload.exp * 1000 };
    } catch {
      // Not this secret's (or not valid at all): the next one may have signed it.
    }
  }
  return undefined;
}

function principalOf(payload: JWTPayload): Principal | undefined {
  if (payload.k === "service" && payload.sub) return { kind: "service", service: payload.sub };
  if (payload.k === "operator" && payload.sub) return { kind: "operator", name: payload.sub };
  const subject = BigInt(payload.sub ?? "");
  if (payload.k === "user" && typeof payload.sid === "string") {
    return { kind: "user", userId: subject, sessionId: payload.sid };
  }
  if (payload.k === "form" && typeof payload.org === "string" && typeof payload.tbl === "string") {
    return {
      kind: "form",
      formId: subject,
      organizationId: BigInt(payload.org),
      tableId: BigInt(payload.tbl),
    };
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
      ...(payload.via === "mcp" ? { via: payload.via } : {}),
    };
  }
  return undefined;
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

/** Internal RPCs answer only other Rowbase processes (and operators), never end users. */
export function requireService(
  ctx: HandlerContext,
): Extract<Principal, { kind: "service" | "operator" }> {
  const principal = requirePrincipal(ctx);
  if (principal.kind !== "service" && principal.kind !== "operator") {
    throw domainError(Code.PermissionDenied, "internal_only");
  }
  return principal;
}

/** Operator RPCs (plan changes) answer only the admin CLI. */
export function requireOperator(ctx: HandlerContext): Extract<Principal, { kind: "operator" }> {
  const principal = requirePrincipal(ctx);
  if (principal.kind !== "operator") throw domainError(Code.PermissionDenied, "operator_only");
  return principal;
}

/** Call options that carry a principal (and request id) to another service. */
export async function callAs(
  secret: string,
  principal: Principal,
  requestId?: string,
): Promise<{ headers: Record<string, string> }> {
  const headers: Record<string, string> = {
    [PRINCIPAL_HEADER]: await signPrincipal(secret, principal),
  };
  if (requestId) headers[REQUEST_ID_HEADER] = requestId;
  return { headers };
}

/** The verified user caller, or Unauthenticated (an API token is not a user). */
export function requireUser(ctx: HandlerContext): Extract<Principal, { kind: "user" }> {
  const principal = requirePrincipal(ctx);
  if (principal.kind !== "user") throw domainError(Code.Unauthenticated, "unauthorized");
  return principal;
}
