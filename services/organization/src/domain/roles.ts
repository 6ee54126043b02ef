import { allows, type Role } from "@rowbase/kit";

/** Roles a member can be given by invite or role change; ownership moves only by transfer. */
export type GrantableRole = Exclude<Role, "owner">;

export const GRANTABLE_ROLES: readonly GrantableRole[] = ["admin", "editor", "viewer"];

/** Giving the admin role takes the owner; the other roles take `manage` (owner or admin). */
export function mayGrant(actor: Role, role: GrantableRole): boolean {
  return allows(actor, role === "admin" ? "own" : "manage");
}

/**
 * Whether `actor` may change the role of, or remove, a member holding `target`: nobody touches
 * the owner, only the owner touches an admin.
 */
export function mayManageMember(actor: Role, target: Role): boolean {
  if (target === "owner") return false;
  return allows(actor, target === "admin" ? "own" : "manage");
}
