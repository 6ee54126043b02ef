import { timestampDate } from "@bufbuild/protobuf/wkt";
import { auditChangesOf, errorInfoOf, MEMBERSHIP_CHANGED, membershipCacheKey } from "@rowbase/kit";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  InviteCreatedSchema,
  InviteStatusChangedSchema,
  MemberAddedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import {
  InviteStatus,
  PlanName,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventsOf,
  type Harness,
  newOrganization,
  OPERATOR,
  reasonOf,
  startHarness,
  stateOf,
  type TestUser,
  team,
  validationOf,
} from "./harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

async function invite(organizationId: bigint, by: TestUser, email: string, role = Role.EDITOR) {
  return (await h.org.createInvite({ organizationId, email, role }, await as(by))).invite!;
}

async function expire(inviteId: bigint) {
  await h.db.query(
    "update organization.invites set created_at = now() - interval '8 days', expires_at = now() - interval '1 day' where id = $1",
    [inviteId],
  );
}

/** How many of the database's connections wait for a lock. */
const waitingOnLocks = async () =>
  (
    await h.db.query(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and wait_event_type = 'Lock'`,
    )
  ).rows[0].n as number;

/** undefined when the call succeeds, else its reason. */
const outcomeOf = (call: Promise<unknown>) =>
  call.then(
    () => undefined,
    (error: unknown) => errorInfoOf(error)?.reason,
  );

async function memberCount(organizationId: bigint): Promise<number> {
  const { rows } = await h.db.query(
    "select count(*)::int as n from organization.members where organization_id = $1",
    [organizationId],
  );
  return rows[0].n;
}

describe("create", () => {
  it("invites an address with a role, mails it and announces it", async () => {
    const owner = await h.user("Olga Owner");
    const { organizationId } = await newOrganization(h, owner, "Invitational");
    const invitee = await h.user();
    const before = h.mail.messages.length;
    const created = await invite(organizationId, owner, `  ${invitee.email.toUpperCase()} `);
    expect(created).toMatchObject({
      organizationId,
      organizationName: "Invitational",
      email: invitee.email,
      role: Role.EDITOR,
      status: InviteStatus.PENDING,
    });
    const lifetime =
      timestampDate(created.expiresAt!).getTime() - timestampDate(created.createdAt!).getTime();
    expect(lifetime).toBe(7 * 24 * 3600 * 1000);

    const mail = await h.mail.next(invitee.email, before);
    expect(mail.subject).toBe("You are invited to join Invitational on Rowbase");
    expect(mail.raw).toContain("Olga Owner invited you");

    await expect
      .poll(() =>
        eventsOf(h.events, "org.invite.created", InviteCreatedSchema).find(
          (e) => e.organizationId === organizationId,
        ),
      )
      .toMatchObject({ inviteId: created.inviteId, email: invitee.email, role: Role.EDITOR });
    await expect
      .poll(() =>
        eventsOf(h.events, "audit.invite.created", AuditEventSchema).find(
          (e) => e.organizationId === organizationId,
        ),
      )
      .toBeDefined();
    const audit = eventsOf(h.events, "audit.invite.created", AuditEventSchema).find(
      (e) => e.organizationId === organizationId,
    )!;
    expect(audit.target).toMatchObject({ type: "invite", id: created.inviteId });
    expect(audit.meta?.actor?.id).toBe(owner.id);
    expect(
      Object.fromEntries(auditChangesOf(audit.changesJson).map((c) => [c.key, c.new])),
    ).toMatchObject({ email: invitee.email, role: "editor" });
  });

  it("refuses what the role table and the rules forbid, changing nothing", async () => {
    const { id, owner, admin, editor, viewer, outsider } = await team(h);
    await invite(id, owner, "pending@example.test");
    const before = await stateOf(h.db, id);
    const mails = h.mail.messages.length;
    const refused: [TestUser, string, Role, string][] = [
      [admin, "new-admin@example.test", Role.ADMIN, "organization_forbidden"],
      [editor, "someone@example.test", Role.VIEWER, "organization_forbidden"],
      [viewer, "someone@example.test", Role.VIEWER, "organization_forbidden"],
      [outsider, "someone@example.test", Role.VIEWER, "organization_not_found"],
      [owner, editor.email, Role.VIEWER, "already_member"],
      [admin, owner.email.toUpperCase(), Role.VIEWER, "already_member"],
      [admin, "pending@example.test", Role.VIEWER, "invite_already_exists"],
    ];
    for (const [actor, email, role, reason] of refused) {
      expect(
        await reasonOf(h.org.createInvite({ organizationId: id, email, role }, await as(actor))),
        `${actor.name} invites ${email}`,
      ).toBe(reason);
    }
    for (const role of [Role.OWNER, Role.UNSPECIFIED]) {
      expect(
        await validationOf(
          h.org.createInvite(
            { organizationId: id, email: "x@example.test", role },
            await as(owner),
          ),
        ),
      ).toEqual([expect.objectContaining({ key: "role", source: "body" })]);
    }
    // The rule the gateway checks bodies by, for callers that reach organization directly.
    const notAddresses: [string, string][] = [
      ["not an address", "must be a valid e-mail address"],
      ["ann@localhost", "must be a valid e-mail address"],
      ["annaïs@example.test", "must be a valid e-mail address"],
      [`${"a".repeat(65)}@example.test`, "must have at most 64 characters before the @"],
      [`${"a".repeat(250)}@example.test`, "must be at most 254 characters"],
    ];
    for (const [email, message] of notAddresses) {
      expect(
        await validationOf(
          h.org.createInvite({ organizationId: id, email, role: Role.VIEWER }, await as(owner)),
        ),
        email,
      ).toEqual([{ key: "email", message, source: "body", code: expect.any(String) }]);
    }
    expect(await stateOf(h.db, id)).toEqual(before);
    await new Promise((r) => setTimeout(r, 200));
    expect(h.mail.messages.length).toBe(mails);

    // The owner may invite an admin.
    expect((await invite(id, owner, "new-admin@example.test", Role.ADMIN)).role).toBe(Role.ADMIN);
  });

  it("counts pending invites toward the free plan's 3 members, race-free", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Small");
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, async (_, i) =>
        invite(organizationId, owner, `p${i}@example.test`),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    for (const rejected of results.filter((r) => r.status === "rejected")) {
      expect(await reasonOf(Promise.reject((rejected as PromiseRejectedResult).reason))).toBe(
        "member_limit_exceeded",
      );
    }
    const before = await stateOf(h.db, organizationId);
    expect(await reasonOf(invite(organizationId, owner, "late@example.test"))).toBe(
      "member_limit_exceeded",
    );
    expect(await stateOf(h.db, organizationId)).toEqual(before);

    // Canceling one makes room again.
    const { invites } = await h.org.listInvites({ organizationId }, await as(owner));
    await h.org.cancelInvite({ organizationId, inviteId: invites[0]!.inviteId }, await as(owner));
    await invite(organizationId, owner, "late@example.test");
  });
});

describe("expiry", () => {
  it("stops counting, listing and accepting an expired invite, and allows inviting again", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Expiring");
    const invitee = await h.user();
    const old = await invite(organizationId, owner, invitee.email);
    await invite(organizationId, owner, "other@example.test");
    expect(await reasonOf(invite(organizationId, owner, "third@example.test"))).toBe(
      "member_limit_exceeded",
    );

    await expire(old.inviteId);
    expect(
      (await h.org.listInvites({ organizationId }, await as(owner))).invites.map((i) => i.email),
    ).toEqual(["other@example.test"]);
    expect((await h.org.listMyInvites({}, await as(invitee))).invites).toEqual([]);
    expect(await reasonOf(h.org.acceptInvite({ inviteId: old.inviteId }, await as(invitee)))).toBe(
      "invite_not_found",
    );
    expect(await reasonOf(h.org.declineInvite({ inviteId: old.inviteId }, await as(invitee)))).toBe(
      "invite_not_found",
    );
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId, inviteId: old.inviteId }, await as(owner)),
      ),
    ).toBe("invite_not_found");

    const renewed = await invite(organizationId, owner, invitee.email);
    expect(renewed.inviteId).not.toBe(old.inviteId);
    const { rows } = await h.db.query(
      "select id, status from organization.invites where organization_id = $1 and email = $2 order by id",
      [organizationId, invitee.email],
    );
    expect(rows.map((r) => r.status)).toEqual(["expired", "pending"]);
    await h.org.acceptInvite({ inviteId: renewed.inviteId }, await as(invitee));
    expect(await memberCount(organizationId)).toBe(2);
  });
});

describe("cancel and list", () => {
  it("lets managers cancel and list pending invites; others are refused", async () => {
    const { id, owner, admin, editor, viewer, outsider } = await team(h);
    const first = await invite(id, admin, "first@example.test");
    const second = await invite(id, owner, "second@example.test", Role.VIEWER);
    const elsewhere = await newOrganization(h, outsider, "Elsewhere");
    const foreign = await invite(elsewhere.organizationId, outsider, "foreign@example.test");

    const { invites } = await h.org.listInvites({ organizationId: id }, await as(admin));
    expect(invites.map((i) => [i.email, i.role, i.status, i.organizationName])).toEqual([
      ["first@example.test", Role.EDITOR, InviteStatus.PENDING, "Team"],
      ["second@example.test", Role.VIEWER, InviteStatus.PENDING, "Team"],
    ]);
    for (const user of [editor, viewer]) {
      expect(await reasonOf(h.org.listInvites({ organizationId: id }, await as(user)))).toBe(
        "organization_forbidden",
      );
    }
    expect(await reasonOf(h.org.listInvites({ organizationId: id }, await as(outsider)))).toBe(
      "organization_not_found",
    );

    const before = await stateOf(h.db, id);
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId: id, inviteId: first.inviteId }, await as(editor)),
      ),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId: id, inviteId: first.inviteId }, await as(outsider)),
      ),
    ).toBe("invite_not_found");
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId: id, inviteId: foreign.inviteId }, await as(owner)),
      ),
    ).toBe("invite_not_found");
    expect(await stateOf(h.db, id)).toEqual(before);

    // An admin's invite only the owner may take back.
    const promotion = await invite(id, owner, "promotion@example.test", Role.ADMIN);
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId: id, inviteId: promotion.inviteId }, await as(admin)),
      ),
    ).toBe("organization_forbidden");
    const pending = await h.org.listInvites({ organizationId: id }, await as(owner));
    expect(pending.invites.map((i) => i.inviteId)).toContain(promotion.inviteId);
    await h.org.cancelInvite({ organizationId: id, inviteId: promotion.inviteId }, await as(owner));

    await h.org.cancelInvite({ organizationId: id, inviteId: first.inviteId }, await as(admin));
    expect(
      await reasonOf(
        h.org.cancelInvite({ organizationId: id, inviteId: first.inviteId }, await as(admin)),
      ),
    ).toBe("invite_not_found");
    expect(
      (await h.org.listInvites({ organizationId: id }, await as(owner))).invites.map(
        (i) => i.inviteId,
      ),
    ).toEqual([second.inviteId]);
    await expect
      .poll(() =>
        eventsOf(h.events, "org.invite.status_changed", InviteStatusChangedSchema).find(
          (e) => e.inviteId === first.inviteId,
        ),
      )
      .toMatchObject({ organizationId: id, status: InviteStatus.CANCELED });
    await expect
      .poll(
        () =>
          auditChangesOf(
            eventsOf(h.events, "audit.invite.canceled", AuditEventSchema).find(
              (e) => e.target?.id === first.inviteId,
            )?.changesJson ?? "",
          )[0],
      )
      .toMatchObject({ key: "status" });
  });
});

describe("my invites", () => {
  it("lists live invites for the caller's verified e-mail only", async () => {
    const a = await h.user();
    const b = await h.user();
    const invitee = await h.user();
    const orgA = await newOrganization(h, a, "Org A");
    const orgB = await newOrganization(h, b, "Org B");
    await invite(orgA.organizationId, a, invitee.email, Role.VIEWER);
    await invite(orgB.organizationId, b, invitee.email, Role.ADMIN);
    await invite(orgB.organizationId, b, "someone-else@example.test");
    const { invites } = await h.org.listMyInvites({}, await as(invitee));
    expect(invites.map((i) => [i.organizationName, i.role, i.email])).toEqual([
      ["Org A", Role.VIEWER, invitee.email],
      ["Org B", Role.ADMIN, invitee.email],
    ]);

    const unverified = await h.unverifiedUser();
    const pending = await invite(orgA.organizationId, a, unverified.email);
    expect((await h.org.listMyInvites({}, await as(unverified))).invites).toEqual([]);
    expect(
      await reasonOf(h.org.acceptInvite({ inviteId: pending.inviteId }, await as(unverified))),
    ).toBe("invite_not_found");
  });
});

describe("accept and decline", () => {
  it("makes the invitee a member with the invite's role, once", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Joinable");
    const invitee = await h.user("Ivy");
    const stranger = await h.user();
    const created = await invite(organizationId, owner, invitee.email, Role.VIEWER);
    const before = await stateOf(h.db, organizationId);
    expect(
      await reasonOf(h.org.acceptInvite({ inviteId: created.inviteId }, await as(stranger))),
    ).toBe("invite_not_found");
    expect(
      await reasonOf(h.org.declineInvite({ inviteId: created.inviteId }, await as(stranger))),
    ).toBe("invite_not_found");
    expect(await stateOf(h.db, organizationId)).toEqual(before);

    await h.cache.set(membershipCacheKey(organizationId, invitee.id), "-", 60);
    await h.org.acceptInvite({ inviteId: created.inviteId }, await as(invitee));
    expect(await h.cache.get(membershipCacheKey(organizationId, invitee.id))).toBe(
      MEMBERSHIP_CHANGED,
    );
    const { members } = await h.org.listMembers({ organizationId }, await as(invitee));
    expect(members.find((m) => m.userId === invitee.id)).toMatchObject({
      role: Role.VIEWER,
      email: invitee.email,
      name: "Ivy",
    });
    expect(
      await reasonOf(h.org.acceptInvite({ inviteId: created.inviteId }, await as(invitee))),
    ).toBe("invite_not_found");
    expect((await h.org.listInvites({ organizationId }, await as(owner))).invites).toEqual([]);

    await expect
      .poll(() =>
        eventsOf(h.events, "org.member.added", MemberAddedSchema).find(
          (e) => e.organizationId === organizationId && e.userId === invitee.id,
        ),
      )
      .toMatchObject({ role: Role.VIEWER });
    await expect
      .poll(() =>
        eventsOf(h.events, "org.invite.status_changed", InviteStatusChangedSchema).find(
          (e) => e.inviteId === created.inviteId,
        ),
      )
      .toMatchObject({ status: InviteStatus.ACCEPTED, email: invitee.email });
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.invite.accepted", AuditEventSchema).find(
            (e) => e.target?.id === created.inviteId,
          )?.meta?.actor?.id,
      )
      .toBe(invitee.id);
  });

  it("checks the members limit again on acceptance", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Shrinking");
    await h.org.setPlan({ organizationId, plan: PlanName.PLUS }, await as(OPERATOR));
    const invitees = await Promise.all([h.user(), h.user(), h.user()]);
    const invites = [];
    for (const user of invitees) invites.push(await invite(organizationId, owner, user.email));
    await h.org.setPlan({ organizationId, plan: PlanName.FREE }, await as(OPERATOR));
    await h.org.acceptInvite({ inviteId: invites[0]!.inviteId }, await as(invitees[0]!));
    await h.org.acceptInvite({ inviteId: invites[1]!.inviteId }, await as(invitees[1]!));
    const before = await stateOf(h.db, organizationId);
    expect(
      await reasonOf(
        h.org.acceptInvite({ inviteId: invites[2]!.inviteId }, await as(invitees[2]!)),
      ),
    ).toBe("member_limit_exceeded");
    expect(await stateOf(h.db, organizationId)).toEqual(before);
    expect(await memberCount(organizationId)).toBe(3);
  });

  it("lets parallel acceptances fill only the room a lowered plan leaves", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Crowded");
    await h.org.setPlan({ organizationId, plan: PlanName.PLUS }, await as(OPERATOR));
    const invitees = await Promise.all(Array.from({ length: 8 }, () => h.user()));
    const invites: Awaited<ReturnType<typeof invite>>[] = [];
    for (const user of invitees) invites.push(await invite(organizationId, owner, user.email));
    // 1 member and 8 pending invites, on a plan of 3: what was sent stays sent.
    await h.org.setPlan({ organizationId, plan: PlanName.FREE }, await as(OPERATOR));
    const answers = await Promise.all(
      invitees.map(async (user, i) =>
        outcomeOf(h.org.acceptInvite({ inviteId: invites[i]!.inviteId }, await as(user))),
      ),
    );
    expect(answers.filter((a) => a === undefined)).toHaveLength(2);
    expect(answers.filter((a) => a === "member_limit_exceeded")).toHaveLength(6);
    expect(await memberCount(organizationId)).toBe(3);
    // The refused ones are still pending, and still count: no invite goes out.
    const { invites: pending } = await h.org.listInvites({ organizationId }, await as(owner));
    expect(pending.map((i) => i.inviteId).sort()).toEqual(
      invites
        .filter((_, i) => answers[i] !== undefined)
        .map((i) => i.inviteId)
        .sort(),
    );
    expect(await reasonOf(invite(organizationId, owner, "late@example.test"))).toBe(
      "member_limit_exceeded",
    );
  });

  it("gives a removed member's place to exactly one of the invites racing for it", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Full house");
    const joined = await Promise.all([h.user(), h.user()]);
    for (const user of joined) {
      const sent = await invite(organizationId, owner, user.email);
      await h.org.acceptInvite({ inviteId: sent.inviteId }, await as(user));
    }
    expect(await reasonOf(invite(organizationId, owner, "none@example.test"))).toBe(
      "member_limit_exceeded",
    );
    const { members } = await h.org.listMembers({ organizationId }, await as(owner));
    const leaving = members.find((m) => m.userId === joined[0]!.id)!;
    await h.org.removeMember({ organizationId, memberId: leaving.memberId }, await as(owner));
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        outcomeOf(invite(organizationId, owner, `room${i}@example.test`)),
      ),
    );
    expect(answers.filter((a) => a === undefined)).toHaveLength(1);
    expect(answers.filter((a) => a === "member_limit_exceeded")).toHaveLength(5);
    expect(await memberCount(organizationId)).toBe(2);
    const { invites } = await h.org.listInvites({ organizationId }, await as(owner));
    expect(invites).toHaveLength(1);
  });

  it("counts each organization's members on its own when invites race in both", async () => {
    const owner = await h.user();
    const organizations = [
      (await newOrganization(h, owner, "Left")).organizationId,
      (await newOrganization(h, owner, "Right")).organizationId,
    ];
    const answers = await Promise.all(
      organizations.flatMap((organizationId) =>
        Array.from({ length: 6 }, (_, i) =>
          outcomeOf(invite(organizationId, owner, `both${i}@example.test`)),
        ),
      ),
    );
    for (const [index, organizationId] of organizations.entries()) {
      const mine = answers.slice(index * 6, index * 6 + 6);
      expect(mine.filter((a) => a === undefined)).toHaveLength(2);
      expect(mine.filter((a) => a === "member_limit_exceeded")).toHaveLength(4);
      const { invites } = await h.org.listInvites({ organizationId }, await as(owner));
      expect(invites).toHaveLength(2);
    }
  });

  it("declines an invite: no member, no longer pending", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Declinable");
    const invitee = await h.user();
    const created = await invite(organizationId, owner, invitee.email);
    await h.org.declineInvite({ inviteId: created.inviteId }, await as(invitee));
    expect(await memberCount(organizationId)).toBe(1);
    expect((await h.org.listMyInvites({}, await as(invitee))).invites).toEqual([]);
    expect(
      await reasonOf(h.org.acceptInvite({ inviteId: created.inviteId }, await as(invitee))),
    ).toBe("invite_not_found");
    const { rows } = await h.db.query("select status from organization.invites where id = $1", [
      created.inviteId,
    ]);
    expect(rows[0].status).toBe("declined");
    await expect
      .poll(() =>
        eventsOf(h.events, "org.invite.status_changed", InviteStatusChangedSchema).find(
          (e) => e.inviteId === created.inviteId,
        ),
      )
      .toMatchObject({ status: InviteStatus.DECLINED });
  });

  it("answers an invite once when a decline and a cancellation meet: the other is not found", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(h, owner, "Contested");
    const invitee = await h.user();
    const created = await invite(organizationId, owner, invitee.email);
    const inviteId = created.inviteId;
    // Holds the invite's row: the decline queues for it first, then the cancellation.
    const blocker = await h.db.connect();
    let outcomes: (string | undefined)[];
    try {
      await blocker.query("begin");
      await blocker.query("select 1 from organization.invites where id = $1 for update", [
        inviteId.toString(),
      ]);
      const declining = outcomeOf(h.org.declineInvite({ inviteId }, await as(invitee)));
      await expect.poll(waitingOnLocks).toBe(1);
      const canceling = outcomeOf(
        h.org.cancelInvite({ organizationId, inviteId }, await as(owner)),
      );
      await expect.poll(waitingOnLocks).toBe(2);
      await blocker.query("commit");
      outcomes = await Promise.all([declining, canceling]);
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
    expect(outcomes).toEqual([undefined, "invite_not_found"]);
    const { rows } = await h.db.query("select status from organization.invites where id = $1", [
      inviteId,
    ]);
    expect(rows[0].status).toBe("declined");
    await expect
      .poll(() =>
        eventsOf(h.events, "org.invite.status_changed", InviteStatusChangedSchema).filter(
          (e) => e.inviteId === inviteId,
        ),
      )
      .toHaveLength(1);
    expect(
      eventsOf(h.events, "audit.invite.canceled", AuditEventSchema).filter(
        (e) => e.target?.id === inviteId,
      ),
    ).toEqual([]);
  });
});
