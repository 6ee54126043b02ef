import type { Client } from "@connectrpc/connect";
import { Role as RoleEnum } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { MembershipLookup, Role } from "./authorization.js";
import { callAs } from "./principal.js";

/** The one mapping between the contract's Role enum and the role names stored and spoken. */
const ROLE_TO_PROTO: Readonly<Record<Role, RoleEnum>> = {
  owner: RoleEnum.OWNER,
  admin: RoleEnum.ADMIN,
  editor: RoleEnum.EDITOR,
  viewer: RoleEnum.VIEWER,
};

export function roleToProto(role: Role): RoleEnum {
  return ROLE_TO_PROTO[role];
}

/** The role a Role value names; undefined for ROLE_UNSPECIFIED or an unknown number. */
export function roleFromProto(role: RoleEnum): Role | undefined {
  return (Object.keys(ROLE_TO_PROTO) as Role[]).find((name) => ROLE_TO_PROTO[name] === role);
}

/**
 * Roles from OrganizationService.GetMembership, asked as the service `service`: the lookup
 * behind a service's Authorizer.
 */
export function organizationMembershipLookup(
  organizations: Client<typeof OrganizationService>,
  internalSecret: string,
  service: string,
): MembershipLookup {
  return async (organizationId, userId) => {
    const membership = await organizations.getMembership(
      { organizationId, userId },
      await callAs(internalSecret, { kind: "service", service }),
    );
    return membership.member ? roleFromProto(membership.role) : undefined;
  };
}
