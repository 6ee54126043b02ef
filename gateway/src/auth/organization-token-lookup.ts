import type { Client } from "@connectrpc/connect";
import { Code, ConnectError, callAs, errorInfoOf, type Principal } from "@rowbase/kit";
import type {
  OrganizationService,
  ResolveApiTokenResponse,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { tokenAccessName } from "../presentation/organization-enums.js";
import type { ApiTokenLookup } from "./api-token-authenticator.js";
import type { ApiTokenCaller } from "./authenticate.js";
import { RPC_TIMEOUT_MS } from "./downstream-call.js";

/** ResolveApiToken is internal: the gateway calls it as itself, not for the request's caller. */
export const GATEWAY_PRINCIPAL = {
  kind: "service",
  service: "gateway",
} as const satisfies Principal;

/** The organization service's answer for a hash no live token has. */
export function isUnknownTokenError(error: unknown): boolean {
  if (!(error instanceof ConnectError)) return false;
  const reason = errorInfoOf(error)?.reason;
  return reason === "api_token_not_found" || (reason === undefined && error.code === Code.NotFound);
}

/** A resolved token as the caller passed on to services; a half-filled answer is a bug (500). */
export function apiTokenCallerOf(response: ResolveApiTokenResponse): ApiTokenCaller {
  if (response.tokenId <= 0n || response.organizationId <= 0n) {
    throw new Error("ResolveApiToken answered without a token or organization id");
  }
  return {
    kind: "api_token",
    tokenId: response.tokenId,
    organizationId: response.organizationId,
    access: tokenAccessName(response.access),
  };
}

/** ApiTokenLookup through OrganizationService.ResolveApiToken. */
export function organizationTokenLookup(
  organization: Client<typeof OrganizationService>,
  internalSecret: string,
): ApiTokenLookup {
  return async (sha256, requestId) => {
    const options = await callAs(internalSecret, GATEWAY_PRINCIPAL, requestId);
    try {
      const response = await organization.resolveApiToken(
        { tokenSha256: sha256 },
        { ...options, timeoutMs: RPC_TIMEOUT_MS },
      );
      return apiTokenCallerOf(response);
    } catch (error) {
      if (isUnknownTokenError(error)) return undefined;
      throw error;
    }
  };
}
