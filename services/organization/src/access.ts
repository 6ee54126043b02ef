import { type EntityManager, LockMode } from "@mikro-orm/postgresql";
import { allows, Code, domainError, type Permission, type Role } from "@rowbase/kit";
import { Member, type MemberRow, Organization, type OrganizationRow } from "./db/entities.js";

/** The resource 404s a non-member gets instead of a denial (existence is not leaked). */
export type NotFoundReason =
  | "organization_not_found"
  | "member_not_found"
  | "invite_not_found"
  | "api_token_not_found"
  | "database_not_found"
  | "table_not_found";

export interface Access {
  organization: OrganizationRow;
  /** The caller's membership. */
  member: MemberRow;
  role: Role;
}

export function forbidden() {
  return domainError(Code.PermissionDenied, "organization_forbidden");
}

/**
 * The caller's membership, read from the database (never a cache, so a removed member is
 * refused at once) and checked against `permission`. A non-member, and a missing organization,
 * get `notFound`; a member without the right `organization_forbidden`. With `lock`, the
 * organization row is locked for the rest of the transaction: every write that depends on the
 * organization's members, invites or roles takes it first, so those writes run one at a time.
 */
export async function authorize(
  em: EntityManager,
  organizationId: bigint,
  userId: bigint,
  permission: Permission,
  notFound: NotFoundReason,
  options: { lock?: boolean } = {},
): Promise<Access> {
  const organization = await em.findOne(
    Organization,
    { id: organizationId },
    options.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
  );
  const member = organization ? await em.findOne(Member, { organizationId, userId }) : null;
  if (!organization || !member) throw domainError(Code.NotFound, notFound);
  if (!allows(member.role, permission)) throw forbidden();
  return { organization, member, role: member.role };
}
