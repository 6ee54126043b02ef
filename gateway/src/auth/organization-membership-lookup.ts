import type { Client } from "@connectrpc/connect";
import { callAs, type MembershipLookup } from "@rowbase/kit";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { roleName } from "../presentation/organization-enums.js";
import { RPC_TIMEOUT_MS } from "./downstream-call.js";
import { GATEWAY_PRINCIPAL } from "./organization-token-lookup.js";

/**
 * Members' roles through OrganizationService.GetMembership, asked as the gateway: the lookup
 * behind kit's Authorizer, which caches the answer in the shared cache under the key the
 * organization service evicts when a membership changes.
 */
export function organizationMembershipLookup(
  organization: Client<typeof OrganizationService>,
  internalSecret: string,
): MembershipLookup {
  return async (organizationId, userId) => {
    const options = await callAs(internalSecret, GATEWAY_PRINCIPAL);
    const membership = await organization.getMembership(
      { organizationId, userId },
      { ...options, timeoutMs: RPC_TIMEOUT_MS },
    );
    return membership.member ? roleName(membership.role) : undefined;
  };
}
