import type { Client } from "@connectrpc/connect";
import { callAs, type MembershipLookup, type Role } from "@rowbase/kit";
import { Role as RoleEnum } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";

const ROLES = new Map<RoleEnum, Role>([
  [RoleEnum.OWNER, "owner"],
  [RoleEnum.ADMIN, "admin"],
  [RoleEnum.EDITOR, "editor"],
  [RoleEnum.VIEWER, "viewer"],
]);

/** Roles from OrganizationService.GetMembership, asked as the records service. */
export function organizationMembershipLookup(
  organizations: Client<typeof OrganizationService>,
  internalSecret: string,
): MembershipLookup {
  return async (organizationId, userId) => {
    const membership = await organizations.getMembership(
      { organizationId, userId },
      await callAs(internalSecret, { kind: "service", service: "records" }),
    );
    return membership.member ? ROLES.get(membership.role) : undefined;
  };
}
