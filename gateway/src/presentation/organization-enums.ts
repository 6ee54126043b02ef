import {
  InviteStatus,
  PlanName,
  Role,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";

/**
 * The REST names of the organization contract's enums (roles, invite statuses, plans, token
 * access), both ways where
 * requests carry them. A `_UNSPECIFIED` or unknown value in an answer breaks the contract: it
 * throws, which the error middleware logs and answers 500, rather than inventing a name.
 */

export const ROLES = ["owner", "admin", "editor", "viewer"] as const;
export type RoleName = (typeof ROLES)[number];

/** The roles an invite or a role change may give: the owner changes only by transfer. */
export const ASSIGNABLE_ROLES = ["admin", "editor", "viewer"] as const;
export type AssignableRoleName = (typeof ASSIGNABLE_ROLES)[number];

/** The REST API spells the cancelled state the British way; the proto says CANCELED. */
export const INVITE_STATUSES = ["pending", "accepted", "declined", "cancelled", "expired"] as const;
export type InviteStatusName = (typeof INVITE_STATUSES)[number];

export const PLANS = ["free", "plus", "business", "enterprise"] as const;
export type PlanWireName = (typeof PLANS)[number];

export const TOKEN_ACCESS = ["read", "read_write"] as const;
export type TokenAccessName = (typeof TOKEN_ACCESS)[number];

const ROLE_NAMES: Record<Role, RoleName | undefined> = {
  [Role.UNSPECIFIED]: undefined,
  [Role.OWNER]: "owner",
  [Role.ADMIN]: "admin",
  [Role.EDITOR]: "editor",
  [Role.VIEWER]: "viewer",
};

const ASSIGNABLE_ROLE_VALUES: Record<AssignableRoleName, Role> = {
  admin: Role.ADMIN,
  editor: Role.EDITOR,
  viewer: Role.VIEWER,
};

const INVITE_STATUS_NAMES: Record<InviteStatus, InviteStatusName | undefined> = {
  [InviteStatus.UNSPECIFIED]: undefined,
  [InviteStatus.PENDING]: "pending",
  [InviteStatus.ACCEPTED]: "accepted",
  [InviteStatus.DECLINED]: "declined",
  [InviteStatus.CANCELED]: "cancelled",
  [InviteStatus.EXPIRED]: "expired",
};

const PLAN_NAMES: Record<PlanName, PlanWireName | undefined> = {
  [PlanName.UNSPECIFIED]: undefined,
  [PlanName.FREE]: "free",
  [PlanName.PLUS]: "plus",
  [PlanName.BUSINESS]: "business",
  [PlanName.ENTERPRISE]: "enterprise",
};

const TOKEN_ACCESS_NAMES: Record<TokenAccess, TokenAccessName | undefined> = {
  [TokenAccess.UNSPECIFIED]: undefined,
  [TokenAccess.READ]: "read",
  [TokenAccess.READ_WRITE]: "read_write",
};

const TOKEN_ACCESS_VALUES: Record<TokenAccessName, TokenAccess> = {
  read: TokenAccess.READ,
  read_write: TokenAccess.READ_WRITE,
};

function nameOf<V extends number, N extends string>(
  names: Record<V, N | undefined>,
  value: V,
  what: string,
): N {
  const name = names[value];
  if (name === undefined) throw new Error(`the service answered ${what} ${value}`);
  return name;
}

export function roleName(role: Role): RoleName {
  return nameOf(ROLE_NAMES, role, "role");
}

/** An invite's role: never the owner, by the contract. */
export function assignableRoleName(role: Role): AssignableRoleName {
  const name = roleName(role);
  if (name === "owner") throw new Error("the service answered an invite for the owner role");
  return name;
}

export function assignableRoleValue(role: AssignableRoleName): Role {
  return ASSIGNABLE_ROLE_VALUES[role];
}

export function inviteStatusName(status: InviteStatus): InviteStatusName {
  return nameOf(INVITE_STATUS_NAMES, status, "invite status");
}

export function planName(plan: PlanName): PlanWireName {
  return nameOf(PLAN_NAMES, plan, "plan");
}

export function tokenAccessName(access: TokenAccess): TokenAccessName {
  return nameOf(TOKEN_ACCESS_NAMES, access, "token access");
}

export function tokenAccessValue(access: TokenAccessName): TokenAccess {
  return TOKEN_ACCESS_VALUES[access];
}
