import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { LockMode } from "@mikro-orm/postgresql";
import {
  Code,
  changesBetween,
  domainError,
  type Logger,
  membershipCacheKey,
  type Role,
  roleToProto,
  SUBJECTS,
  textProblemCode,
  validationFailed,
  valuesSet,
} from "@rowbase/kit";
import { emailProblem, normalizeEmail } from "@rowbase/kit/field-types";
import type { Mailer } from "@rowbase/kit/mailer";
import {
  InviteCreatedSchema,
  InviteStatusChangedSchema,
  MemberAddedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { authorize, forbidden } from "./access.js";
import type { ChangeSet, Transactions, UserCall } from "./change-set.js";
import type { OrganizationConfig } from "./config.js";
import { violates } from "./db/constraints.js";
import { Invite, type InviteRow, Member, Organization } from "./db/entities.js";
import { limitsOf } from "./domain/plans.js";
import { type GrantableRole, mayGrant } from "./domain/roles.js";
import type { UserDirectory } from "./user-directory.js";
import { type InviteState, inviteStatusToProto } from "./wire.js";

/** An invite as listed, with the name of its organization. */
export interface InviteView {
  invite: InviteRow;
  organizationName: string;
}

export interface InvitesDeps {
  tx: Transactions;
  directory: UserDirectory;
  mailer: Mailer;
  logger: Logger;
  config: Pick<OrganizationConfig, "INVITE_TTL_SECONDS" | "PUBLIC_BASE_URL">;
}

function inviteNotFound() {
  return domainError(Code.NotFound, "invite_not_found");
}

export function memberLimitExceeded() {
  return domainError(Code.ResourceExhausted, "member_limit_exceeded");
}

/** Pending and not yet expired: what counts toward the members limit and can be answered. */
function live(now = new Date()) {
  return { status: "pending" as const, expiresAt: { $gt: now } };
}

/**
 * Invitations. An invite is pending until it is accepted, declined or canceled, or until it
 * expires; an expired one is stored as `expired` the next time its address is invited.
 */
export class Invites {
  constructor(private readonly deps: InvitesDeps) {}

  /**
   * Invites an address with a role other than owner. Members plus live invites may not pass
   * the plan's `members`; the organization row is locked while counting, so parallel invites
   * and acceptances cannot pass it either.
   */
  async create(
    call: UserCall,
    organizationId: bigint,
    rawEmail: string,
    role: Role | undefined,
  ): Promise<InviteView> {
    const email = normalizeEmail(rawEmail);
    const problem = emailProblem(email);
    if (problem) {
      throw validationFailed([
        { key: "email", message: problem, source: "body", code: textProblemCode(email, problem) },
      ]);
    }
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
    const granted: GrantableRole = role;
    let inviter = "";
    let view: InviteView;
    try {
      view = await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const { organization, role: actor } = await authorize(
          em,
          organizationId,
          call.userId,
          "manage",
          "organization_not_found",
          { lock: true },
        );
        if (!mayGrant(actor, granted)) throw forbidden();
        const members = await em.find(Member, { organizationId });
        const users = await this.deps.directory.users(
          members.map((m) => m.userId),
          call.requestId,
        );
        const me = users.get(call.userId);
        inviter = me?.name || me?.email || "";
        if ([...users.values()].some((user) => user.email === email)) {
          throw domainError(Code.AlreadyExists, "already_member");
        }
        const now = new Date();
        await em.nativeUpdate(
          Invite,
          { organizationId, email, status: "pending", expiresAt: { $lte: now } },
          { status: "expired" },
        );
        if ((await em.count(Invite, { organizationId, email, ...live(now) })) > 0) {
          throw domainError(Code.AlreadyExists, "invite_already_exists");
        }
        const pending = await em.count(Invite, { organizationId, ...live(now) });
        const limits = limitsOf(organization.plan, organization.enterpriseLimits);
        if (BigInt(members.length + pending + 1) > limits.members) throw memberLimitExceeded();
        const invite = em.create(Invite, {
          organizationId,
          email,
          role: granted,
          status: "pending",
          invitedBy: call.userId,
          // From the same instant, so that an invite shows exactly its lifetime.
          createdAt: now,
          expiresAt: new Date(now.getTime() + this.deps.config.INVITE_TTL_SECONDS * 1000),
        });
        await em.flush();
        await changes.publish(SUBJECTS.inviteCreated, InviteCreatedSchema, {
          organizationId,
          inviteId: invite.id,
          email,
          role: roleToProto(granted),
          expiresAt: timestampFromDate(invite.expiresAt),
        });
        await changes.audit(
          organizationId,
          "invite.created",
          { type: "invite", id: invite.id },
          valuesSet({ email, role: granted, expires_at: invite.expiresAt.toISOString() }),
        );
        return { invite, organizationName: organization.name };
      });
    } catch (error) {
      if (violates(error, "invites_one_pending")) {
        throw domainError(Code.AlreadyExists, "invite_already_exists");
      }
      throw error;
    }
    await this.mailInvite(view, inviter);
    return view;
  }

  /**
   * The invite is stored and listed for the invitee whatever happens to the mail, so a mail
   * that cannot go out is logged rather than failing the call.
   */
  private async mailInvite({ invite, organizationName }: InviteView, inviter: string) {
    const base = this.deps.config.PUBLIC_BASE_URL;
    const lines = [
      `${inviter || "A member"} invited you to join the organization "${organizationName}" on Rowbase as ${invite.role}.`,
      "",
      `Sign in to Rowbase with ${invite.email} to accept or decline it; the invitation is valid until ${invite.expiresAt.toISOString()}.`,
      ...(base ? ["", `Rowbase: ${base}`] : []),
    ];
    try {
      await this.deps.mailer.send({
        to: invite.email,
        subject: `You are invited to join ${organizationName} on Rowbase`,
        text: `${lines.join("\n")}\n`,
      });
    } catch (error) {
      this.deps.logger.warn({ err: error, invite_id: invite.id }, "invite mail failed");
    }
  }

  async cancel(call: UserCall, organizationId: bigint, inviteId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const { role: actor } = await authorize(
        em,
        organizationId,
        call.userId,
        "manage",
        "invite_not_found",
        { lock: true },
      );
      // The invite's row too (after the organization's, the order acceptance keeps): a decline,
      // which locks only the invite, either commits first (not found here) or waits.
      const invite = await em.findOne(
        Invite,
        { id: inviteId, organizationId, ...live() },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!invite) throw inviteNotFound();
      // Only who may give its role may take the offer back: an admin cannot undo the owner's
      // invitation of another admin.
      if (!mayGrant(actor, invite.role as GrantableRole)) throw forbidden();
      await this.answer(changes, invite, "canceled");
    });
  }

  /** The organization's live invites, oldest first. */
  async list(call: UserCall, organizationId: bigint): Promise<InviteView[]> {
    const em = this.deps.tx.em();
    const { organization } = await authorize(
      em,
      organizationId,
      call.userId,
      "manage",
      "organization_not_found",
    );
    const invites = await em.find(
      Invite,
      { organizationId, ...live() },
      { orderBy: { id: "asc" } },
    );
    return invites.map((invite) => ({ invite, organizationName: organization.name }));
  }

  /** Live invites addressed to the caller's e-mail, once identity has verified it. */
  async listMine(call: UserCall): Promise<InviteView[]> {
    const email = await this.verifiedEmail(call);
    if (!email) return [];
    const em = this.deps.tx.em();
    const invites = await em.find(Invite, { email, ...live() }, { orderBy: { id: "asc" } });
    if (invites.length === 0) return [];
    const organizations = await em.find(Organization, {
      id: { $in: [...new Set(invites.map((i) => i.organizationId))] },
    });
    const names = new Map(organizations.map((o) => [o.id, o.name]));
    return invites.map((invite) => ({
      invite,
      organizationName: names.get(invite.organizationId) ?? "",
    }));
  }

  /**
   * Makes the caller a member with the invite's role. The members limit is checked again,
   * since the plan or the membership may have changed since the invite went out.
   */
  async accept(call: UserCall, inviteId: bigint): Promise<void> {
    const email = await this.verifiedEmail(call);
    if (!email) throw inviteNotFound();
    try {
      await this.deps.tx.run(call, async (changes) => {
        const { em } = changes;
        const found = await em.findOne(Invite, { id: inviteId, email, ...live() });
        if (!found) throw inviteNotFound();
        const { organizationId } = found;
        // The organization first (the lock order of every member change), then the invite.
        const organization = await em.findOne(
          Organization,
          { id: organizationId },
          { lockMode: LockMode.PESSIMISTIC_WRITE },
        );
        const invite = await em.findOne(
          Invite,
          { id: inviteId, email, ...live() },
          { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true },
        );
        if (!organization || !invite) throw inviteNotFound();
        if ((await em.count(Member, { organizationId, userId: call.userId })) > 0) {
          throw domainError(Code.AlreadyExists, "already_member");
        }
        const members = await em.count(Member, { organizationId });
        const limits = limitsOf(organization.plan, organization.enterpriseLimits);
        if (BigInt(members + 1) > limits.members) throw memberLimitExceeded();
        await this.answer(changes, invite, "accepted");
        const member = em.create(Member, {
          organizationId,
          userId: call.userId,
          role: invite.role,
        });
        await em.flush();
        await changes.publish(SUBJECTS.memberAdded, MemberAddedSchema, {
          organizationId,
          memberId: member.id,
          userId: call.userId,
          role: roleToProto(member.role),
        });
        await changes.audit(
          organizationId,
          "member.added",
          { type: "member", id: member.id },
          valuesSet({
            user_id: Number(call.userId),
            role: member.role,
            invite_id: Number(invite.id),
          }),
        );
        // A lookup from before the membership may have cached "not a member".
        changes.evict(membershipCacheKey(organizationId, call.userId));
      });
    } catch (error) {
      if (violates(error, "members_organization_user_key")) {
        throw domainError(Code.AlreadyExists, "already_member");
      }
      throw error;
    }
  }

  async decline(call: UserCall, inviteId: bigint): Promise<void> {
    const email = await this.verifiedEmail(call);
    if (!email) throw inviteNotFound();
    await this.deps.tx.run(call, async (changes) => {
      const invite = await changes.em.findOne(
        Invite,
        { id: inviteId, email, ...live() },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!invite) throw inviteNotFound();
      await this.answer(changes, invite, "declined");
    });
  }

  /** Ends a pending invite with `status`, announcing and auditing it. */
  private async answer(
    changes: ChangeSet,
    invite: InviteRow,
    status: Exclude<InviteState, "pending" | "expired">,
  ) {
    const before = { status: invite.status };
    invite.status = status;
    invite.respondedAt = new Date();
    await changes.em.flush();
    await changes.publish(SUBJECTS.inviteStatusChanged, InviteStatusChangedSchema, {
      organizationId: invite.organizationId,
      inviteId: invite.id,
      email: invite.email,
      status: inviteStatusToProto(status),
    });
    await changes.audit(
      invite.organizationId,
      `invite.${status}`,
      { type: "invite", id: invite.id },
      changesBetween(before, { status }),
    );
  }

  /** The caller's e-mail if identity has verified it: invites go only to proven addresses. */
  private async verifiedEmail(call: UserCall): Promise<string | undefined> {
    const user = await this.deps.directory.user(call.userId, call.requestId);
    return user?.emailVerified ? normalizeEmail(user.email) : undefined;
  }
}
