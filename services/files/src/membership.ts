import { callAs, createServiceClient, type MembershipLookup, type Role } from "@rowbase/kit";
import { Role as RoleEnum } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";

const ROLES = new Map<RoleEnum, Role>([
  [RoleEnum.OWNER, "owner"],
  [RoleEnum.ADMIN, "admin"],
  [RoleEnum.EDITOR, "editor"],
  [RoleEnum.VIEWER, "viewer"],
]);

/** Roles from OrganizationService.GetMembership, asked as the files service. */
export function organizationMembershipLookup(
  baseUrl: string,
  internalSecret: string,
): MembershipLookup {
  const organizations = createServiceClient(OrganizationService, baseUrl);
  return async (organizationId, userId) => {
    const membership = await organizations.getMembership(
      { organizationId, userId },
      await callAs(internalSecret, { kind: "service", service: "files" }),
    );
    return membership.member ? ROLES.get(membership.role) : undefined;
  };
}
