import {
  auditChangesOf,
  Code,
  createServiceClient,
  freePort,
  MEMBERSHIP_CHANGED,
  membershipCacheKey,
} from "@rowbase/kit";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  MemberRemovedSchema,
  MemberUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventsOf,
  failureOf,
  type Harness,
  newOrganization,
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

async function roleOf(organizationId: bigint, user: TestUser): Promise<string | undefined> {
  const { rows } = await h.db.query(
    "select role from organization.members where organization_id = $1 and user_id = $2",
    [organizationId, user.id],
  );
  return rows[0]?.role;
}

async function transferCode(owner: TestUser, send: () => Promise<unknown>): Promise<string> {
  const before = h.mail.messages.length;
  await send();
  const message = await h.mail.next(owner.email, before);
  return /transfer code: (\d{6})/.exec(message.subject)![1]!;
}

function wrongCode(code: string) {
  return code === "000000" ? "111111" : "000000";
}

describe("list", () => {
  it("lists every member with e-mail and name from identity, to any member only", async () => {
    const { id, owner, admin, editor, viewer, outsider } = await team(h);
    const { members } = await h.org.listMembers({ organizationId: id }, await as(viewer));
    expect(members.map((m) => [m.userId, m.email, m.name, m.role])).toEqual([
      [owner.id, owner.email, "Owner", Role.OWNER],
      [admin.id, admin.email, "Admin", Role.ADMIN],
      [editor.id, editor.email, "Editor", Role.EDITOR],
      [viewer.id, viewer.email, "Viewer", Role.VIEWER],
    ]);
    expect(members.every((m) => m.memberId > 0n && m.joinedAt !== undefined)).toBe(true);
    expect(await reasonOf(h.org.listMembers({ organizationId: id }, await as(outsider)))).toBe(
      "organization_not_found",
    );
  });

  it("answers another service without a role check (webhooks mails owners and admins)", async () => {
    const { id, owner, admin } = await team(h);
    const service = await as({ kind: "service", service: "webhooks" });
    const { members } = await h.org.listMembers({ organizationId: id }, service);
    expect(
      members.filter((m) => m.role === Role.OWNER || m.role === Role.ADMIN).map((m) => m.email),
    ).toEqual([owner.email, admin.email]);
    expect((await h.org.listMembers({ organizationId: 987_654_321n }, service)).members).toEqual(
      [],
    );
    const token = { kind: "api_token", tokenId: 1n, organizationId: id, access: "read" } as const;
    expect(await reasonOf(h.org.listMembers({ organizationId: id }, await as(token)))).toBe(
      "unauthorized",
    );
  });
});

describe("update", () => {
  it("follows the role table: managers change roles, only the owner touches admins", async () => {
    const { id, owner, admin, editor, viewer, memberOf } = await team(h);
    // An admin moves editors and viewers between those roles.
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(editor), role: Role.VIEWER },
      await as(admin),
    );
    expect(await roleOf(id, editor)).toBe("viewer");
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(editor), role: Role.EDITOR },
      await as(admin),
    );
    expect(await roleOf(id, editor)).toBe("editor");
    // The owner gives and takes the admin role.
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(viewer), role: Role.ADMIN },
      await as(owner),
    );
    expect(await roleOf(id, viewer)).toBe("admin");
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(viewer), role: Role.VIEWER },
      await as(owner),
    );
    expect(await roleOf(id, viewer)).toBe("viewer");
  });

  it("refuses what the role table forbids and changes nothing", async () => {
    const { id, owner, admin, editor, viewer, outsider, memberOf } = await team(h);
    const before = await stateOf(h.db, id);
    const refused: [TestUser, TestUser, Role, string][] = [
      [admin, editor, Role.ADMIN, "organization_forbidden"], // giving admin needs the owner
      [admin, admin, Role.EDITOR, "organization_forbidden"], // an admin is the owner's
      [admin, owner, Role.ADMIN, "organization_forbidden"], // nobody changes the owner
      [owner, owner, Role.ADMIN, "organization_forbidden"], // not even the owner
      [editor, viewer, Role.EDITOR, "organization_forbidden"],
      [viewer, editor, Role.VIEWER, "organization_forbidden"],
      [viewer, viewer, Role.EDITOR, "organization_forbidden"],
      [outsider, editor, Role.VIEWER, "member_not_found"],
    ];
    for (const [actor, target, role, reason] of refused) {
      expect(
        await reasonOf(
          h.org.updateMember(
            { organizationId: id, memberId: memberOf(target), role },
            await as(actor),
          ),
        ),
        `${actor.name} -> ${target.name}`,
      ).toBe(reason);
    }
    expect(
      await reasonOf(
        h.org.updateMember(
          { organizationId: id, memberId: 999_999n, role: Role.VIEWER },
          await as(owner),
        ),
      ),
    ).toBe("member_not_found");
    for (const role of [Role.OWNER, Role.UNSPECIFIED]) {
      expect(
        await validationOf(
          h.org.updateMember(
            { organizationId: id, memberId: memberOf(editor), role },
            await as(owner),
          ),
        ),
      ).toEqual([expect.objectContaining({ key: "role", source: "body" })]);
    }
    expect(await stateOf(h.db, id)).toEqual(before);
  });

  it("refuses a member of another organization as not found", async () => {
    const a = await team(h);
    const b = await team(h);
    const before = await stateOf(h.db, b.id);
    expect(
      await reasonOf(
        h.org.updateMember(
          { organizationId: a.id, memberId: b.memberOf(b.editor), role: Role.VIEWER },
          await as(a.owner),
        ),
      ),
    ).toBe("member_not_found");
    expect(
      await reasonOf(
        h.org.removeMember(
          { organizationId: a.id, memberId: b.memberOf(b.editor) },
          await as(a.owner),
        ),
      ),
    ).toBe("member_not_found");
    expect(await stateOf(h.db, b.id)).toEqual(before);
  });

  it("announces and audits a role change and evicts the cached role", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    await h.cache.set(membershipCacheKey(id, editor.id), "editor", 60);
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(editor), role: Role.VIEWER },
      await as(owner),
    );
    expect(await h.cache.get(membershipCacheKey(id, editor.id))).toBe(MEMBERSHIP_CHANGED);
    await expect
      .poll(() =>
        eventsOf(h.events, "org.member.updated", MemberUpdatedSchema).find(
          (e) => e.organizationId === id,
        ),
      )
      .toMatchObject({
        memberId: memberOf(editor),
        userId: editor.id,
        role: Role.VIEWER,
        previousRole: Role.EDITOR,
      });
    await expect
      .poll(() =>
        eventsOf(h.events, "audit.member.updated", AuditEventSchema).find(
          (e) => e.organizationId === id,
        ),
      )
      .toBeDefined();
    const audit = eventsOf(h.events, "audit.member.updated", AuditEventSchema).find(
      (e) => e.organizationId === id,
    )!;
    expect(audit.meta?.actor?.id).toBe(owner.id);
    expect(audit.target).toMatchObject({ type: "member", id: memberOf(editor) });
    expect(auditChangesOf(audit.changesJson).map((c) => [c.key, c.old, c.new])).toEqual([
      ["role", "editor", "viewer"],
    ]);
  });
});

describe("remove", () => {
  it("lets managers remove members and members leave; the removed user is refused at once", async () => {
    const { id, owner, admin, editor, viewer, memberOf } = await team(h);
    await h.cache.set(membershipCacheKey(id, editor.id), "editor", 60);
    await h.org.removeMember({ organizationId: id, memberId: memberOf(editor) }, await as(admin));
    expect(await h.cache.get(membershipCacheKey(id, editor.id))).toBe(MEMBERSHIP_CHANGED);
    expect(await roleOf(id, editor)).toBeUndefined();
    expect(await reasonOf(h.org.listMembers({ organizationId: id }, await as(editor)))).toBe(
      "organization_not_found",
    );

    await h.org.removeMember({ organizationId: id, memberId: memberOf(viewer) }, await as(viewer));
    expect(await roleOf(id, viewer)).toBeUndefined();
    await h.org.removeMember({ organizationId: id, memberId: memberOf(admin) }, await as(owner));
    expect(await roleOf(id, admin)).toBeUndefined();

    await expect
      .poll(() =>
        eventsOf(h.events, "org.member.removed", MemberRemovedSchema)
          .filter((e) => e.organizationId === id)
          .map((e) => e.userId),
      )
      .toEqual([editor.id, viewer.id, admin.id]);
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.member.removed", AuditEventSchema).filter(
            (e) => e.organizationId === id,
          ).length,
      )
      .toBe(3);
    const [byAdmin, left] = eventsOf(h.events, "audit.member.removed", AuditEventSchema).filter(
      (e) => e.organizationId === id,
    );
    expect(byAdmin!.meta?.actor?.id).toBe(admin.id);
    expect(left!.meta?.actor?.id).toBe(viewer.id);
    expect(
      Object.fromEntries(auditChangesOf(byAdmin!.changesJson).map((c) => [c.key, c.old])),
    ).toEqual({ user_id: Number(editor.id), role: "editor" });
  });

  it("never removes the owner, and keeps admins for the owner", async () => {
    const { id, owner, admin, editor, viewer, outsider, memberOf } = await team(h);
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(viewer), role: Role.ADMIN },
      await as(owner),
    );
    const before = await stateOf(h.db, id);
    const refused: [TestUser, TestUser, string][] = [
      [owner, owner, "organization_forbidden"], // the owner cannot leave
      [admin, owner, "organization_forbidden"],
      [admin, viewer, "organization_forbidden"], // viewer is an admin now
      [editor, admin, "organization_forbidden"],
      [editor, owner, "organization_forbidden"],
      [outsider, editor, "member_not_found"],
    ];
    for (const [actor, target, reason] of refused) {
      expect(
        await reasonOf(
          h.org.removeMember({ organizationId: id, memberId: memberOf(target) }, await as(actor)),
        ),
        `${actor.name} removes ${target.name}`,
      ).toBe(reason);
    }
    expect(await stateOf(h.db, id)).toEqual(before);
  });
});

describe("owner transfer", () => {
  it("refuses non-owners, self and strangers without sending a code", async () => {
    const { id, owner, admin, editor, outsider, memberOf } = await team(h);
    const other = await newOrganization(h, outsider, "Other");
    const { members } = await h.org.listMembers(
      { organizationId: other.organizationId },
      await as(outsider),
    );
    const before = await stateOf(h.db, id);
    const mails = h.mail.messages.length;
    expect(
      await reasonOf(
        h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(admin)),
      ),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(
        h.org.sendTransferCode(
          { organizationId: id, memberId: memberOf(editor) },
          await as(outsider),
        ),
      ),
    ).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.sendTransferCode({ organizationId: id, memberId: memberOf(owner) }, await as(owner)),
      ),
    ).toBe("cannot_transfer_to_self");
    expect(
      await reasonOf(
        h.org.sendTransferCode(
          { organizationId: id, memberId: members[0]!.memberId },
          await as(owner),
        ),
      ),
    ).toBe("member_not_found");
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(editor), code: "123456" },
          await as(owner),
        ),
      ),
    ).toBe("invalid_verification_code");
    expect(await stateOf(h.db, id)).toEqual(before);
    await new Promise((r) => setTimeout(r, 200));
    expect(h.mail.messages.slice(mails).filter((m) => m.to.includes(owner.email))).toHaveLength(0);
  });

  it("kills a code after five wrong tries", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    const code = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    for (let i = 0; i < 5; i++) {
      expect(
        await reasonOf(
          h.org.confirmTransfer(
            { organizationId: id, memberId: memberOf(editor), code: wrongCode(code) },
            await as(owner),
          ),
        ),
      ).toBe("invalid_verification_code");
    }
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(editor), code },
          await as(owner),
        ),
      ),
    ).toBe("invalid_verification_code");
    expect(await roleOf(id, owner)).toBe("owner");
    expect(await roleOf(id, editor)).toBe("editor");
  });

  it("refuses an expired code, and a code sent for another member", async () => {
    const { id, owner, admin, editor, memberOf } = await team(h);
    const expired = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    await h.db.query(
      "update organization.transfer_codes set expires_at = now() - interval '1 second' where organization_id = $1",
      [id],
    );
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(editor), code: expired },
          await as(owner),
        ),
      ),
    ).toBe("transfer_verification_code_expired");

    const forEditor = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(admin), code: forEditor },
          await as(owner),
        ),
      ),
    ).toBe("invalid_verification_code");
    expect(await roleOf(id, owner)).toBe("owner");
    expect(await roleOf(id, admin)).toBe("admin");
  });

  it("hands ownership over with the right code: the old owner becomes an admin", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    const code = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    const message = await h.mail.next(owner.email);
    expect(message.raw).toContain(`is ${code}`);
    await h.cache.set(membershipCacheKey(id, owner.id), "owner", 60);
    await h.cache.set(membershipCacheKey(id, editor.id), "editor", 60);

    const { organization } = await h.org.confirmTransfer(
      { organizationId: id, memberId: memberOf(editor), code },
      await as(owner),
    );
    expect(organization).toMatchObject({ organizationId: id, role: Role.ADMIN });
    expect(await roleOf(id, owner)).toBe("admin");
    expect(await roleOf(id, editor)).toBe("owner");
    expect(await h.cache.get(membershipCacheKey(id, owner.id))).toBe(MEMBERSHIP_CHANGED);
    expect(await h.cache.get(membershipCacheKey(id, editor.id))).toBe(MEMBERSHIP_CHANGED);
    const { rows } = await h.db.query(
      "select count(*)::int as n from organization.transfer_codes where organization_id = $1",
      [id],
    );
    expect(rows[0].n).toBe(0);
    // The code is spent; the old owner has lost the owner's rights, the new one has them.
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(editor), code },
          await as(owner),
        ),
      ),
    ).toBe("organization_forbidden");
    expect(await reasonOf(h.org.deleteOrganization({ organizationId: id }, await as(owner)))).toBe(
      "organization_forbidden",
    );
    expect(
      await reasonOf(
        h.org.removeMember({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
      ),
    ).toBe("organization_forbidden");
    await h.org.updateMember(
      { organizationId: id, memberId: memberOf(owner), role: Role.VIEWER },
      await as(editor),
    );
    expect(await roleOf(id, owner)).toBe("viewer");

    await expect
      .poll(() =>
        eventsOf(h.events, "org.member.updated", MemberUpdatedSchema)
          .filter((e) => e.organizationId === id)
          .slice(0, 2)
          .map((e) => [e.userId, e.previousRole, e.role]),
      )
      .toEqual([
        [owner.id, Role.OWNER, Role.ADMIN],
        [editor.id, Role.EDITOR, Role.OWNER],
      ]);
  });

  it("mails how long the code lives, also when that is no whole number of minutes", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    const send = (client: typeof h.org) => async () =>
      client.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner));
    const before = h.mail.messages.length;
    await send(h.org)();
    expect((await h.mail.next(owner.email, before)).raw).toContain("It is valid for 15 minutes");

    const shortLived = await h.replica({ CODE_TTL_SECONDS: "90" });
    try {
      const after = h.mail.messages.length;
      await send(createServiceClient(OrganizationService, shortLived.url))();
      expect((await h.mail.next(owner.email, after)).raw).toContain("It is valid for 90 seconds");
    } finally {
      await shortLived.stop();
    }
  });

  it("answers 503 while the mail server is away; a new code once it is back confirms", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    const unreachable = await h.replica({ SMTP_URL: `smtp://127.0.0.1:${await freePort()}` });
    try {
      const cut = createServiceClient(OrganizationService, unreachable.url);
      const refused = await failureOf(
        cut.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
      );
      expect(refused.code).toBe(Code.Unavailable);
    } finally {
      await unreachable.stop();
    }
    const code = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    await h.org.confirmTransfer(
      { organizationId: id, memberId: memberOf(editor), code },
      await as(owner),
    );
    expect(await roleOf(id, editor)).toBe("owner");
  });

  it("refuses to make a member the owner of a sixth organization", async () => {
    const { id, owner, editor, memberOf } = await team(h);
    for (let i = 0; i < 5; i++) await newOrganization(h, editor, `Editor owns ${i}`);
    const code = await transferCode(owner, async () =>
      h.org.sendTransferCode({ organizationId: id, memberId: memberOf(editor) }, await as(owner)),
    );
    expect(
      await reasonOf(
        h.org.confirmTransfer(
          { organizationId: id, memberId: memberOf(editor), code },
          await as(owner),
        ),
      ),
    ).toBe("organization_limit_exceeded");
    expect(await roleOf(id, owner)).toBe("owner");
  });

  it("gives the last owned place once when transfers and creates race for it", async () => {
    // The editor owns 4: two organizations hand it over, and it creates three of its own, at once.
    const first = await team(h);
    const second = await team(h);
    const { editor } = first;
    const secondEditor = await h.org.createInvite(
      { organizationId: second.id, email: editor.email, role: Role.EDITOR },
      await as(second.owner),
    );
    await h.org.acceptInvite({ inviteId: secondEditor.invite!.inviteId }, await as(editor));
    const { members } = await h.org.listMembers({ organizationId: second.id }, await as(editor));
    const editorInSecond = members.find((m) => m.userId === editor.id)!.memberId;
    for (let i = 0; i < 4; i++) await newOrganization(h, editor, `Editor owns ${i}`);
    const firstCode = await transferCode(first.owner, async () =>
      h.org.sendTransferCode(
        { organizationId: first.id, memberId: first.memberOf(editor) },
        await as(first.owner),
      ),
    );
    const secondCode = await transferCode(second.owner, async () =>
      h.org.sendTransferCode(
        { organizationId: second.id, memberId: editorInSecond },
        await as(second.owner),
      ),
    );
    const outcome = (call: Promise<unknown>) =>
      call.then(
        () => "ok",
        async (error: unknown) => reasonOf(Promise.reject(error)),
      );
    const answers = await Promise.all([
      outcome(
        (async () =>
          h.org.confirmTransfer(
            { organizationId: first.id, memberId: first.memberOf(editor), code: firstCode },
            await as(first.owner),
          ))(),
      ),
      outcome(
        (async () =>
          h.org.confirmTransfer(
            { organizationId: second.id, memberId: editorInSecond, code: secondCode },
            await as(second.owner),
          ))(),
      ),
      ...[0, 1, 2].map((i) => outcome(newOrganization(h, editor, `Racing ${i}`))),
    ]);
    expect(answers.filter((a) => a === "ok")).toHaveLength(1);
    expect(answers.filter((a) => a === "organization_limit_exceeded")).toHaveLength(4);
    const { rows } = await h.db.query(
      "select count(*)::int as n from organization.members where user_id = $1 and role = 'owner'",
      [editor.id],
    );
    expect(rows[0].n).toBe(5);
    // A refused transfer leaves its organization with its owner, the editor still an editor.
    for (const [index, { id, owner }] of [first, second].entries()) {
      expect(await roleOf(id, owner)).toBe(answers[index] === "ok" ? "admin" : "owner");
      expect(await roleOf(id, editor)).toBe(answers[index] === "ok" ? "owner" : "editor");
    }
  });
});

describe("schema invariants", () => {
  it("allows exactly one owner per organization, whatever writes the rows", async () => {
    const { id, editor } = await team(h);
    await expect(
      h.db.query(
        "update organization.members set role = 'owner' where organization_id = $1 and user_id = $2",
        [id, editor.id],
      ),
    ).rejects.toThrow(/members_one_owner/);
    await expect(
      h.db.query(
        "update organization.members set role = 'admin' where organization_id = $1 and role = 'owner'",
        [id],
      ),
    ).rejects.toThrow(/exactly one owner/);
    await expect(
      h.db.query("insert into organization.organizations (slug, name) values ($1, 'Ownerless')", [
        `ownerless-${id}`,
      ]),
    ).rejects.toThrow(/exactly one owner/);
  });
});
