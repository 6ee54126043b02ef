import type { EntityManager } from "@mikro-orm/postgresql";
import {
  allows,
  Code,
  ConnectError,
  changesBetween,
  codeHash,
  codeMatches,
  domainError,
  membershipCacheKey,
  newCode,
  type Role,
  roleToProto,
  SUBJECTS,
  validationFailed,
  valuesRemoved,
} from "@rowbase/kit";
import { lifetimeText, type Mailer } from "@rowbase/kit/mailer";
import {
  MemberRemovedSchema,
  MemberUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { authorize, forbidden } from "./access.js";
import { revokeTokensCreatedBy } from "./api-tokens.js";
import type { ChangeSet, Transactions, UserCall } from "./change-set.js";
import type { OrganizationConfig } from "./config.js";
import { lockOwnedOrganizations, ownedOrganizations } from "./db/constraints.js";
import { Member, type MemberRow, TransferCode } from "./db/entities.js";
import { MAX_OWNED_ORGANIZATIONS } from "./domain/plans.js";
import { type GrantableRole, mayGrant, mayManageMember } from "./domain/roles.js";
import type { OrganizationView } from "./organizations.js";
import type { UserDirectory } from "./user-directory.js";

/** Wrong codes that kill an owner-transfer code. */
const MAX_CODE_ATTEMPTS = 5;

/** A member as listed, with the e-mail and name identity knows now. */
export interface MemberView {
  member: MemberRow;
  email: string;
  name: string;
}

export interface MembersDeps {
  tx: Transactions;
  directory: UserDirectory;
  mailer: Mailer;
  config: Pick<OrganizationConfig, "CODE_TTL_SECONDS">;
}

function memberNotFound() {
  return domainError(Code.NotFound, "member_not_found");
}

function grantableRole(role: Role | undefined): GrantableRole {
  if (role === undefined || role === "owner") {
    throw validationFailed([
      {
        key: "role",
        message: "must be admin, editor or viewer",
        source: "body",
        code: "invalid_value",
      },
    ]);
  }
  return role;
}

/** Members: listing, role changes, removal and leaving, and the owner transfer. */
export class Members {
  constructor(private readonly deps: MembersDeps) {}

  /** Every member, in the order they joined; any member may list them. */
  async list(call: UserCall, organizationId: bigint): Promise<MemberView[]> {
    await authorize(
      this.deps.tx.em(),
      organizationId,
      call.userId,
      "read",
      "organization_not_found",
    );
    return this.listOf(organizationId, call.requestId);
  }

  /**
   * An organization's members for another service, without a role check (the webhooks service
   * mails the owner and admins when a webhook stops); none for an organization that is gone.
   */
  async listOf(organizationId: bigint, requestId: string): Promise<MemberView[]> {
    const em = this.deps.tx.em();
    const members = await em.find(Member, { organizationId }, { orderBy: { id: "asc" } });
    const users = await this.deps.directory.users(
      members.map((m) => m.userId),
      requestId,
    );
    return members.map((member) => ({
      member,
      email: users.get(member.userId)?.email ?? "",
      name: users.get(member.userId)?.name ?? "",
    }));
  }

  /** Changes a member's role. Nobody changes the owner; only the owner touches an admin. */
  async update(
    call: UserCall,
    organizationId: bigint,
    memberId: bigint,
    rawRole: Role | undefined,
  ): Promise<void> {
    const role = grantableRole(rawRole);
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { role: actor } = await authorize(
        em,
        organizationId,
        call.userId,
        "manage",
        "member_not_found",
        { lock: true },
      );
      const target = await em.findOne(Member, { id: memberId, organizationId });
      if (!target) throw memberNotFound();
      if (!mayManageMember(actor, target.role) || !mayGrant(actor, role)) throw forbidden();
      if (target.role === role) return;
      await this.changeRole(changes, target, role);
    });
  }

  /**
   * Removes a member, or lets a member leave. The owner can do neither (ownership moves only
   * by transfer). The removed user's access ends with the commit: roles are read from the
   * database here, and the shared membership cache entry is deleted.
   */
  async remove(call: UserCall, organizationId: bigint, memberId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { role: actor } = await authorize(
        em,
        organizationId,
        call.userId,
        "read",
        "member_not_found",
        { lock: true },
      );
      const target = await em.findOne(Member, { id: memberId, organizationId });
      if (!target) throw memberNotFound();
      const leaving = target.userId === call.userId;
      if (target.role === "owner") throw forbidden();
      if (!leaving && !(allows(actor, "manage") && mayManageMember(actor, target.role))) {
        throw forbidden();
      }
      await em.nativeDelete(Member, { id: target.id });
      await revokeTokensCreatedBy(changes, organizationId, target.userId);
      await changes.publish(SUBJECTS.memberRemoved, MemberRemovedSchema, {
        organizationId,
        memberId: target.id,
        userId: target.userId,
      });
      await changes.audit(
        organizationId,
        "member.removed",
        { type: "member", id: target.id },
        valuesRemoved({ user_id: Number(target.userId), role: target.role }),
      );
      changes.evict(membershipCacheKey(organizationId, target.userId));
    });
  }

  /**
   * Mails the owner a 6-digit code that confirms handing ownership to `memberId`. A new code
   * replaces the previous one (with its failed attempts).
   */
  async sendTransferCode(call: UserCall, organizationId: bigint, memberId: bigint): Promise<void> {
    const code = newCode();
    const organization = await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { organization } = await authorize(
        em,
        organizationId,
        call.userId,
        "own",
        "organization_not_found",
        { lock: true },
      );
      const target = await this.transferTarget(em, call, organizationId, memberId);
      const fields = {
        targetMemberId: target.id,
        codeHash: codeHash([organizationId, target.id], code),
        createdAt: new Date(),
        expiresAt: new Date(Date.now() + this.deps.config.CODE_TTL_SECONDS * 1000),
        failedAttempts: 0,
      };
      const existing = await em.findOne(TransferCode, { organizationId });
      if (existing) em.assign(existing, fields);
      else em.create(TransferCode, { organizationId, ...fields });
      await em.flush();
      return organization;
    });
    const owner = await this.deps.directory.user(call.userId, call.requestId);
    if (!owner) throw new Error(`identity does not know the owner ${call.userId}`);
    await this.deps.mailer
      .send({
        to: owner.email,
        subject: `Your Rowbase ownership transfer code: ${code}`,
        text:
          `Your code to hand the ownership of "${organization.name}" to another member is ${code}.\n` +
          `It is valid for ${lifetimeText(this.deps.config.CODE_TTL_SECONDS)}. If you did not ask for it, ignore this mail.\n`,
      })
      .catch((error: unknown) => {
        // The mail server is a dependency like any other: away, it is 503, not a 500. The code
        // nobody received stays stored until the owner asks for another, which replaces it.
        throw new ConnectError(
          "the transfer code could not be mailed",
          Code.Unavailable,
          undefined,
          [],
          error,
        );
      });
  }

  /**
   * Makes the member the owner and the old owner an admin, in one transaction. A wrong code
   * counts even though the call fails, so the outcome leaves the transaction (which commits)
   * before it becomes an error.
   */
  async confirmTransfer(
    call: UserCall,
    organizationId: bigint,
    memberId: bigint,
    code: string,
  ): Promise<OrganizationView> {
    const outcome = await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { organization, member: owner } = await authorize(
        em,
        organizationId,
        call.userId,
        "own",
        "organization_not_found",
        { lock: true },
      );
      const target = await this.transferTarget(em, call, organizationId, memberId);
      const row = await em.findOne(TransferCode, { organizationId });
      if (!row || row.failedAttempts >= MAX_CODE_ATTEMPTS) return { kind: "invalid" as const };
      if (row.expiresAt <= new Date()) return { kind: "expired" as const };
      if (
        row.targetMemberId !== target.id ||
        !codeMatches(row.codeHash, [organizationId, target.id], code)
      ) {
        row.failedAttempts += 1;
        return { kind: "invalid" as const };
      }
      await lockOwnedOrganizations(em, target.userId);
      if ((await ownedOrganizations(em, target.userId)) >= MAX_OWNED_ORGANIZATIONS) {
        throw domainError(Code.ResourceExhausted, "organization_limit_exceeded");
      }
      em.remove(row);
      // The old owner steps down first: the unique index allows one owner at any moment.
      await this.changeRole(changes, owner, "admin");
      await this.changeRole(changes, target, "owner");
      return { kind: "ok" as const, organization };
    });
    if (outcome.kind === "invalid") {
      throw domainError(Code.InvalidArgument, "invalid_verification_code");
    }
    if (outcome.kind === "expired") {
      throw domainError(Code.InvalidArgument, "transfer_verification_code_expired");
    }
    return { organization: outcome.organization, role: "admin" };
  }

  /** The member ownership would go to: another member of the organization. */
  private async transferTarget(
    em: EntityManager,
    call: UserCall,
    organizationId: bigint,
    memberId: bigint,
  ): Promise<MemberRow> {
    const target = await em.findOne(Member, { id: memberId, organizationId });
    if (!target) throw memberNotFound();
    if (target.userId === call.userId) {
      throw domainError(Code.InvalidArgument, "cannot_transfer_to_self");
    }
    return target;
  }

  private async changeRole(changes: ChangeSet, member: MemberRow, role: Role): Promise<void> {
    const previous = member.role;
    member.role = role;
    await changes.em.flush();
    if (!allows(role, "manage")) {
      await revokeTokensCreatedBy(changes, member.organizationId, member.userId);
    }
    await changes.publish(SUBJECTS.memberUpdated, MemberUpdatedSchema, {
      organizationId: member.organizationId,
      memberId: member.id,
      userId: member.userId,
      role: roleToProto(role),
      previousRole: roleToProto(previous),
    });
    await changes.audit(
      member.organizationId,
      "member.updated",
      { type: "member", id: member.id },
      changesBetween({ role: previous }, { role }),
    );
    changes.evict(membershipCacheKey(member.organizationId, member.userId));
  }
}
