import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newEmail, type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import {
  addMember as addMemberTo,
  createOrg as createOrgIn,
  expectError,
  q,
} from "./support/organizations.js";

let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem();
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const user = () => signUp(sys, api);
const isoMillis = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const createOrg = (owner: SignedUpUser, body: Record<string, unknown> = {}) =>
  body.organization_slug === undefined ? createOrgIn(api, owner) : createOrgWithSlug(owner, body);

async function createOrgWithSlug(owner: SignedUpUser, body: Record<string, unknown>) {
  const response = await api("POST", "/organization/create", {
    token: owner.token,
    body: { name: "Org", ...body },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.organization;
}

const addMember = (owner: SignedUpUser, orgId: number, invitee: SignedUpUser, role: string) =>
  addMemberTo(api, owner, orgId, invitee, role);

describe("organizations", () => {
  it("creates, reads, lists and updates an organization", async () => {
    const owner = await user();
    const created = await api("POST", "/organization/create", {
      token: owner.token,
      body: { name: "Acme Corp" },
    });
    expect(created.status).toBe(200);
    const org = created.body.data.organization;
    expect(org).toEqual({
      organization_id: expect.any(Number),
      organization_slug: expect.stringMatching(/^acme-corp/),
      name: "Acme Corp",
      plan: "free",
      role: "owner",
      created_at: expect.stringMatching(isoMillis),
      updated_at: expect.stringMatching(isoMillis),
    });
    const byId = await api("GET", "/organization/get", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
    });
    expect(byId.body).toEqual({ message: "success", data: { organization: org } });
    const bySlug = await api("GET", "/organization/get", {
      token: owner.token,
      query: { organization_slug: org.organization_slug },
    });
    expect(bySlug.body.data.organization).toEqual(org);
    const list = await api("GET", "/organization/list", { token: owner.token });
    expect(list.body.data.organizations).toEqual([org]);

    const updated = await api("POST", "/organization/update", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
      body: { name: "Acme Inc", organization_slug: `acme-${org.organization_id}` },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.data.organization).toMatchObject({
      name: "Acme Inc",
      organization_slug: `acme-${org.organization_id}`,
    });
  });

  it("refuses a taken slug, ambiguous lookups and a sixth owned organization", async () => {
    const owner = await user();
    const first = await createOrg(owner, { organization_slug: `taken-${owner.id}` });
    expectError(
      await api("POST", "/organization/create", {
        token: owner.token,
        body: { name: "Other", organization_slug: first.organization_slug },
      }),
      400,
      "organization_slug_taken",
    );
    const both = await api("GET", "/organization/get", {
      token: owner.token,
      query: {
        organization_id: String(first.organization_id),
        organization_slug: first.organization_slug,
      },
    });
    expect(both.status).toBe(400);
    expect(both.body.status_code).toBe(400);
    expect((await api("GET", "/organization/get", { token: owner.token })).status).toBe(400);
    for (let i = 0; i < 4; i++) await createOrg(owner);
    expectError(
      await api("POST", "/organization/create", { token: owner.token, body: { name: "Sixth" } }),
      403,
      "organization_limit_exceeded",
    );
    expect(
      (await api("GET", "/organization/list", { token: owner.token })).body.data.organizations,
    ).toHaveLength(5);
  });

  it("shows the free plan's limits and usage", async () => {
    const owner = await user();
    const org = await createOrg(owner);
    const limits = await api("GET", "/organization/limits", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
    });
    expect(limits.body).toEqual({
      message: "success",
      data: {
        plan: "free",
        limits: {
          records: 1000,
          api_calls_per_month: 3000,
          file_storage_bytes: 100_000_000,
          transfer_bytes_per_month: 1_000_000_000,
          members: 3,
          max_file_bytes: 10_000_000,
          change_streams: 5,
          webhooks: 5,
          forms: 3,
        },
        usage: {
          records: 0,
          api_calls_this_month: 0,
          file_storage_bytes: 0,
          transfer_bytes_this_month: 0,
          members: 1,
        },
      },
    });
  });

  it("deletes only for the owner", async () => {
    const owner = await user();
    const admin = await user();
    const org = await createOrg(owner);
    await addMember(owner, org.organization_id, admin, "admin");
    const id = q({ organization_id: org.organization_id });
    expectError(
      await api("POST", "/organization/delete", { token: admin.token, query: id }),
      403,
      "organization_forbidden",
    );
    const deleted = await api("POST", "/organization/delete", { token: owner.token, query: id });
    expect(deleted.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("GET", "/organization/get", { token: owner.token, query: id }),
      404,
      "organization_not_found",
    );
    expectError(
      await api("GET", "/organization/get", { token: admin.token, query: id }),
      404,
      "organization_not_found",
    );
  });
});

describe("cross-tenant access", () => {
  it("answers 404 on every organization-scoped route to a user of another organization", async () => {
    const owner = await user();
    const stranger = await user();
    await createOrg(stranger);
    const org = await createOrg(owner);
    const member = await user();
    const memberId = await addMember(owner, org.organization_id, member, "viewer");
    const token = await api("POST", "/api_token/create", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
      body: { name: "ci", access: "read" },
    });
    const tokenId = token.body.data.api_token.token_id;
    const pending = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
      body: { email: newEmail(), role: "viewer" },
    });
    const inviteId = pending.body.data.invite.invite_id;
    const oid = org.organization_id;
    const calls: [string, string, Record<string, number>, unknown, string][] = [
      ["GET", "/organization/get", { organization_id: oid }, undefined, "organization_not_found"],
      [
        "POST",
        "/organization/update",
        { organization_id: oid },
        { name: "Mine now" },
        "organization_not_found",
      ],
      [
        "POST",
        "/organization/delete",
        { organization_id: oid },
        undefined,
        "organization_not_found",
      ],
      [
        "GET",
        "/organization/limits",
        { organization_id: oid },
        undefined,
        "organization_not_found",
      ],
      [
        "POST",
        "/organization/invite/create",
        { organization_id: oid },
        { email: newEmail(), role: "viewer" },
        "organization_not_found",
      ],
      [
        "POST",
        "/organization/invite/cancel",
        { organization_id: oid, invite_id: inviteId },
        undefined,
        "invite_not_found",
      ],
      [
        "GET",
        "/organization/invite/list",
        { organization_id: oid },
        undefined,
        "organization_not_found",
      ],
      [
        "POST",
        "/organization/my_invite/accept",
        { invite_id: inviteId },
        undefined,
        "invite_not_found",
      ],
      [
        "POST",
        "/organization/my_invite/decline",
        { invite_id: inviteId },
        undefined,
        "invite_not_found",
      ],
      [
        "GET",
        "/organization/member/list",
        { organization_id: oid },
        undefined,
        "organization_not_found",
      ],
      [
        "POST",
        "/organization/member/update",
        { organization_id: oid, member_id: memberId },
        { role: "admin" },
        "member_not_found",
      ],
      [
        "POST",
        "/organization/member/remove",
        { organization_id: oid, member_id: memberId },
        undefined,
        "member_not_found",
      ],
      [
        "POST",
        "/organization/transfer/send_code",
        { organization_id: oid },
        { member_id: memberId },
        "member_not_found",
      ],
      [
        "POST",
        "/organization/transfer/confirm",
        { organization_id: oid },
        { member_id: memberId, code: "123456" },
        "member_not_found",
      ],
      [
        "POST",
        "/api_token/create",
        { organization_id: oid },
        { name: "x", access: "read" },
        "organization_not_found",
      ],
      ["GET", "/api_token/list", { organization_id: oid }, undefined, "organization_not_found"],
      [
        "POST",
        "/api_token/revoke",
        { organization_id: oid, token_id: tokenId },
        undefined,
        "api_token_not_found",
      ],
    ];
    for (const [method, path, query, body, message] of calls) {
      const response = await api(method, path, { token: stranger.token, query: q(query), body });
      expect(response.status, `${method} ${path}: ${JSON.stringify(response.body)}`).toBe(404);
      expect([message, "organization_not_found"]).toContain(response.body.message);
    }
    // Nothing changed: the organization, its member, invite and token are all still there.
    const oidQuery = q({ organization_id: oid });
    expect(
      (await api("GET", "/organization/get", { token: owner.token, query: oidQuery })).body.data
        .organization.name,
    ).toBe(org.name);
    expect(
      (await api("GET", "/organization/member/list", { token: owner.token, query: oidQuery })).body
        .data.members,
    ).toHaveLength(2);
    expect(
      (await api("GET", "/organization/invite/list", { token: owner.token, query: oidQuery })).body
        .data.invites,
    ).toHaveLength(1);
    expect(
      (await api("GET", "/api_token/list", { token: owner.token, query: oidQuery })).body.data
        .api_tokens,
    ).toHaveLength(1);
  });
});

describe("invitations", () => {
  it("invites, lists for the invitee, accepts and declines", async () => {
    const owner = await user();
    const alice = await user();
    const bob = await user();
    const org = await createOrg(owner);
    const oid = q({ organization_id: org.organization_id });
    const before = sys.mail.messages.length;
    const invite = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: oid,
      body: { email: alice.email.toUpperCase(), role: "editor" },
    });
    expect(invite.status).toBe(200);
    expect(invite.body.data.invite).toEqual({
      invite_id: expect.any(Number),
      organization_id: org.organization_id,
      organization_name: org.name,
      email: alice.email,
      role: "editor",
      status: "pending",
      created_at: expect.stringMatching(isoMillis),
      expires_at: expect.stringMatching(isoMillis),
    });
    const days =
      (Date.parse(invite.body.data.invite.expires_at) -
        Date.parse(invite.body.data.invite.created_at)) /
      86_400_000;
    expect(days).toBeCloseTo(7, 3);
    await sys.mail.next(alice.email, before);

    expectError(
      await api("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: alice.email, role: "viewer" },
      }),
      400,
      "invite_already_exists",
    );
    const mine = await api("GET", "/organization/my_invite/list", { token: alice.token });
    expect(mine.body.data.invites).toEqual([invite.body.data.invite]);
    expect(
      (await api("GET", "/organization/my_invite/list", { token: bob.token })).body.data.invites,
    ).toEqual([]);
    // Bob cannot accept Alice's invite.
    expectError(
      await api("POST", "/organization/my_invite/accept", {
        token: bob.token,
        query: q({ invite_id: invite.body.data.invite.invite_id }),
      }),
      404,
      "invite_not_found",
    );
    const accepted = await api("POST", "/organization/my_invite/accept", {
      token: alice.token,
      query: q({ invite_id: invite.body.data.invite.invite_id }),
    });
    expect(accepted.body).toEqual({ message: "success", data: {} });
    const orgs = await api("GET", "/organization/list", { token: alice.token });
    expect(orgs.body.data.organizations).toEqual([
      expect.objectContaining({ organization_id: org.organization_id, role: "editor" }),
    ]);
    expectError(
      await api("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: alice.email, role: "viewer" },
      }),
      400,
      "already_member",
    );

    const bobInvite = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: oid,
      body: { email: bob.email, role: "viewer" },
    });
    const declined = await api("POST", "/organization/my_invite/decline", {
      token: bob.token,
      query: q({ invite_id: bobInvite.body.data.invite.invite_id }),
    });
    expect(declined.status).toBe(200);
    expect(
      (await api("GET", "/organization/invite/list", { token: owner.token, query: oid })).body.data
        .invites,
    ).toEqual([]);
    expect(
      (await api("GET", "/organization/member/list", { token: owner.token, query: oid })).body.data
        .members,
    ).toHaveLength(2);
  });

  it("cancels invites, refuses the owner role and counts pending invites toward the member limit", async () => {
    const owner = await user();
    const org = await createOrg(owner);
    const oid = q({ organization_id: org.organization_id });
    const asOwner = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: oid,
      body: { email: newEmail(), role: "owner" },
    });
    expect(asOwner.status).toBe(400);
    expect(asOwner.body.status_code).toBe(400);

    const first = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: oid,
      body: { email: newEmail(), role: "viewer" },
    });
    const second = await api("POST", "/organization/invite/create", {
      token: owner.token,
      query: oid,
      body: { email: newEmail(), role: "viewer" },
    });
    expect([first.status, second.status]).toEqual([200, 200]);
    // Free plan: 3 members, the owner and two pending invites fill it.
    expectError(
      await api("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: newEmail(), role: "viewer" },
      }),
      403,
      "member_limit_exceeded",
    );
    const cancelled = await api("POST", "/organization/invite/cancel", {
      token: owner.token,
      query: q({
        organization_id: org.organization_id,
        invite_id: first.body.data.invite.invite_id,
      }),
    });
    expect(cancelled.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("POST", "/organization/invite/cancel", {
        token: owner.token,
        query: q({
          organization_id: org.organization_id,
          invite_id: first.body.data.invite.invite_id,
        }),
      }),
      404,
      "invite_not_found",
    );
    expect(
      (
        await api("POST", "/organization/invite/create", {
          token: owner.token,
          query: oid,
          body: { email: newEmail(), role: "viewer" },
        })
      ).status,
    ).toBe(200);
    expect(
      (await api("GET", "/organization/invite/list", { token: owner.token, query: oid })).body.data
        .invites,
    ).toHaveLength(2);
  });
});

describe("roles", () => {
  it("lets each role do what the role table allows and nothing more", async () => {
    const owner = await user();
    const admin = await user();
    const editor = await user();
    const org = await createOrg(owner);
    const adminId = await addMember(owner, org.organization_id, admin, "admin");
    const editorId = await addMember(owner, org.organization_id, editor, "editor");
    const oid = q({ organization_id: org.organization_id });
    const ownerMember = (
      await api("GET", "/organization/member/list", { token: owner.token, query: oid })
    ).body.data.members.find((m: { role: string }) => m.role === "owner");

    // Everyone reads.
    for (const member of [admin, editor]) {
      expect(
        (await api("GET", "/organization/get", { token: member.token, query: oid })).status,
      ).toBe(200);
      expect(
        (await api("GET", "/organization/member/list", { token: member.token, query: oid })).status,
      ).toBe(200);
      expect(
        (await api("GET", "/organization/limits", { token: member.token, query: oid })).status,
      ).toBe(200);
    }
    // Editors cannot manage.
    for (const [method, path, query, body] of [
      ["POST", "/organization/update", oid, { name: "x" }],
      ["POST", "/organization/invite/create", oid, { email: newEmail(), role: "viewer" }],
      ["GET", "/organization/invite/list", oid, undefined],
      ["POST", "/api_token/create", oid, { name: "t", access: "read" }],
      ["GET", "/api_token/list", oid, undefined],
      [
        "POST",
        "/organization/member/update",
        q({ organization_id: org.organization_id, member_id: adminId }),
        { role: "viewer" },
      ],
      [
        "POST",
        "/organization/member/remove",
        q({ organization_id: org.organization_id, member_id: adminId }),
        undefined,
      ],
      ["POST", "/organization/delete", oid, undefined],
      ["POST", "/organization/transfer/send_code", oid, { member_id: editorId }],
    ] as const) {
      expectError(
        await api(method, path, { token: editor.token, query, body }),
        403,
        "organization_forbidden",
      );
    }
    // Admins manage, but not the owner, not other admins' roles, and not owner-only operations.
    expect(
      (
        await api("POST", "/organization/update", {
          token: admin.token,
          query: oid,
          body: { name: "Renamed" },
        })
      ).status,
    ).toBe(200);
    expect((await api("GET", "/api_token/list", { token: admin.token, query: oid })).status).toBe(
      200,
    );
    const ownerQuery = q({
      organization_id: org.organization_id,
      member_id: ownerMember.member_id,
    });
    expectError(
      await api("POST", "/organization/member/update", {
        token: admin.token,
        query: ownerQuery,
        body: { role: "viewer" },
      }),
      403,
      "organization_forbidden",
    );
    expectError(
      await api("POST", "/organization/member/remove", { token: admin.token, query: ownerQuery }),
      403,
      "organization_forbidden",
    );
    expectError(
      await api("POST", "/organization/member/update", {
        token: admin.token,
        query: q({ organization_id: org.organization_id, member_id: editorId }),
        body: { role: "admin" },
      }),
      403,
      "organization_forbidden",
    );
    expectError(
      await api("POST", "/organization/delete", { token: admin.token, query: oid }),
      403,
      "organization_forbidden",
    );
    expectError(
      await api("POST", "/organization/transfer/send_code", {
        token: admin.token,
        query: oid,
        body: { member_id: editorId },
      }),
      403,
      "organization_forbidden",
    );
    // The owner can neither be demoted nor removed, even by itself; `owner` cannot be given.
    expectError(
      await api("POST", "/organization/member/update", {
        token: owner.token,
        query: ownerQuery,
        body: { role: "admin" },
      }),
      403,
      "organization_forbidden",
    );
    expectError(
      await api("POST", "/organization/member/remove", { token: owner.token, query: ownerQuery }),
      403,
      "organization_forbidden",
    );
    const giveOwner = await api("POST", "/organization/member/update", {
      token: owner.token,
      query: q({ organization_id: org.organization_id, member_id: editorId }),
      body: { role: "owner" },
    });
    expect(giveOwner.status).toBe(400);
    // An admin changes an editor to viewer; the owner makes the editor an admin.
    const editorQuery = q({ organization_id: org.organization_id, member_id: editorId });
    expect(
      (
        await api("POST", "/organization/member/update", {
          token: admin.token,
          query: editorQuery,
          body: { role: "viewer" },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await api("POST", "/organization/member/update", {
          token: owner.token,
          query: editorQuery,
          body: { role: "admin" },
        })
      ).status,
    ).toBe(200);
    const roles = (
      await api("GET", "/organization/member/list", { token: owner.token, query: oid })
    ).body.data.members
      .map((m: { role: string }) => m.role)
      .sort();
    expect(roles).toEqual(["admin", "admin", "owner"]);
    expectError(
      await api("POST", "/organization/member/update", {
        token: owner.token,
        query: q({ organization_id: org.organization_id, member_id: 999_999 }),
        body: { role: "viewer" },
      }),
      404,
      "member_not_found",
    );
  });

  it("lets a member leave and refuses a removed member on the next call", async () => {
    const owner = await user();
    const leaver = await user();
    const removed = await user();
    const org = await createOrg(owner);
    const oid = q({ organization_id: org.organization_id });
    const leaverId = await addMember(owner, org.organization_id, leaver, "viewer");
    const removedId = await addMember(owner, org.organization_id, removed, "editor");
    expect(
      (await api("GET", "/organization/get", { token: removed.token, query: oid })).status,
    ).toBe(200);
    const left = await api("POST", "/organization/member/remove", {
      token: leaver.token,
      query: q({ organization_id: org.organization_id, member_id: leaverId }),
    });
    expect(left.body).toEqual({ message: "success", data: {} });
    const remove = await api("POST", "/organization/member/remove", {
      token: owner.token,
      query: q({ organization_id: org.organization_id, member_id: removedId }),
    });
    expect(remove.status).toBe(200);
    expectError(
      await api("GET", "/organization/get", { token: removed.token, query: oid }),
      404,
      "organization_not_found",
    );
    expectError(
      await api("GET", "/organization/get", { token: leaver.token, query: oid }),
      404,
      "organization_not_found",
    );
    const member = (
      await api("GET", "/organization/member/list", { token: owner.token, query: oid })
    ).body.data.members;
    expect(member).toEqual([
      {
        member_id: expect.any(Number),
        user_id: owner.id,
        email: owner.email,
        name: expect.any(String),
        role: "owner",
        joined_at: expect.stringMatching(isoMillis),
      },
    ]);
  });
});

describe("owner transfer", () => {
  it("refuses self, strangers and wrong codes, then hands the organization over", async () => {
    const owner = await user();
    const heir = await user();
    const org = await createOrg(owner);
    const oid = q({ organization_id: org.organization_id });
    const heirId = await addMember(owner, org.organization_id, heir, "editor");
    const ownerId = (
      await api("GET", "/organization/member/list", { token: owner.token, query: oid })
    ).body.data.members.find((m: { role: string }) => m.role === "owner").member_id;
    expectError(
      await api("POST", "/organization/transfer/send_code", {
        token: owner.token,
        query: oid,
        body: { member_id: ownerId },
      }),
      400,
      "cannot_transfer_to_self",
    );
    expectError(
      await api("POST", "/organization/transfer/send_code", {
        token: owner.token,
        query: oid,
        body: { member_id: 987_654 },
      }),
      404,
      "member_not_found",
    );
    expectError(
      await api("POST", "/organization/transfer/confirm", {
        token: owner.token,
        query: oid,
        body: { member_id: heirId, code: "123456" },
      }),
      400,
      "invalid_verification_code",
    );
    const before = sys.mail.messages.length;
    const sent = await api("POST", "/organization/transfer/send_code", {
      token: owner.token,
      query: oid,
      body: { member_id: heirId },
    });
    expect(sent.body).toEqual({ message: "success", data: {} });
    const mail = await sys.mail.next(owner.email, before);
    const code = /(\d{6})/.exec(mail.subject + mail.raw)![1]!;
    const wrong = code === "111111" ? "222222" : "111111";
    expectError(
      await api("POST", "/organization/transfer/confirm", {
        token: owner.token,
        query: oid,
        body: { member_id: heirId, code: wrong },
      }),
      400,
      "invalid_verification_code",
    );
    const confirmed = await api("POST", "/organization/transfer/confirm", {
      token: owner.token,
      query: oid,
      body: { member_id: heirId, code },
    });
    expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    expect(confirmed.body.data.organization).toMatchObject({
      organization_id: org.organization_id,
      role: "admin",
    });
    const roles = Object.fromEntries(
      (
        await api("GET", "/organization/member/list", { token: heir.token, query: oid })
      ).body.data.members.map((m: { user_id: number; role: string }) => [m.user_id, m.role]),
    );
    expect(roles).toEqual({ [owner.id]: "admin", [heir.id]: "owner" });
    expectError(
      await api("POST", "/organization/delete", { token: owner.token, query: oid }),
      403,
      "organization_forbidden",
    );
  });

  it("kills a code after five wrong tries and expires it", async () => {
    const short = await startTestSystem({ CODE_TTL_SECONDS: "3" });
    try {
      const shortApi = client(short.baseUrl);
      const owner = await signUp(short, shortApi);
      const heir = await signUp(short, shortApi);
      const org = (
        await shortApi("POST", "/organization/create", {
          token: owner.token,
          body: { name: "Short" },
        })
      ).body.data.organization;
      const oid = q({ organization_id: org.organization_id });
      const invite = await shortApi("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: heir.email, role: "viewer" },
      });
      await shortApi("POST", "/organization/my_invite/accept", {
        token: heir.token,
        query: q({ invite_id: invite.body.data.invite.invite_id }),
      });
      const heirId = (
        await shortApi("GET", "/organization/member/list", { token: owner.token, query: oid })
      ).body.data.members.find((m: { user_id: number }) => m.user_id === heir.id).member_id;

      let before = short.mail.messages.length;
      await shortApi("POST", "/organization/transfer/send_code", {
        token: owner.token,
        query: oid,
        body: { member_id: heirId },
      });
      let mail = await short.mail.next(owner.email, before);
      let code = /(\d{6})/.exec(mail.subject + mail.raw)![1]!;
      const wrong = code === "111111" ? "222222" : "111111";
      for (let i = 0; i < 5; i++) {
        await shortApi("POST", "/organization/transfer/confirm", {
          token: owner.token,
          query: oid,
          body: { member_id: heirId, code: wrong },
        });
      }
      expectError(
        await shortApi("POST", "/organization/transfer/confirm", {
          token: owner.token,
          query: oid,
          body: { member_id: heirId, code },
        }),
        400,
        "invalid_verification_code",
      );

      before = short.mail.messages.length;
      await shortApi("POST", "/organization/transfer/send_code", {
        token: owner.token,
        query: oid,
        body: { member_id: heirId },
      });
      mail = await short.mail.next(owner.email, before);
      code = /(\d{6})/.exec(mail.subject + mail.raw)![1]!;
      await new Promise((r) => setTimeout(r, 3500));
      expectError(
        await shortApi("POST", "/organization/transfer/confirm", {
          token: owner.token,
          query: oid,
          body: { member_id: heirId, code },
        }),
        400,
        "transfer_verification_code_expired",
      );
      const owners = (
        await shortApi("GET", "/organization/member/list", { token: owner.token, query: oid })
      ).body.data.members.filter((m: { role: string }) => m.role === "owner");
      expect(owners.map((m: { user_id: number }) => m.user_id)).toEqual([owner.id]);
    } finally {
      await short.stop();
    }
  });
});

describe("API tokens", () => {
  it("creates a token whose secret is shown once, lists and revokes it", async () => {
    const owner = await user();
    const org = await createOrg(owner);
    const oid = q({ organization_id: org.organization_id });
    const created = await api("POST", "/api_token/create", {
      token: owner.token,
      query: oid,
      body: { name: "Zapier", access: "read_write" },
    });
    expect(created.status).toBe(200);
    const { api_token: apiToken, token } = created.body.data;
    expect(token).toMatch(/^rb_[0-9A-Za-z]{40}$/);
    expect(apiToken).toEqual({
      token_id: expect.any(Number),
      name: "Zapier",
      access: "read_write",
      token_prefix: token.slice(0, 8),
      created_at: expect.stringMatching(isoMillis),
      last_used_at: null,
    });
    const list = await api("GET", "/api_token/list", { token: owner.token, query: oid });
    expect(list.body).toEqual({ message: "success", data: { api_tokens: [apiToken] } });
    expect(list.text).not.toContain(token);
    // A management route does not take an API token.
    expectError(await api("GET", "/organization/get", { token, query: oid }), 401, "unauthorized");

    const revoked = await api("POST", "/api_token/revoke", {
      token: owner.token,
      query: q({ organization_id: org.organization_id, token_id: apiToken.token_id }),
    });
    expect(revoked.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("POST", "/api_token/revoke", {
        token: owner.token,
        query: q({ organization_id: org.organization_id, token_id: apiToken.token_id }),
      }),
      404,
      "api_token_not_found",
    );
    expect(
      (await api("GET", "/api_token/list", { token: owner.token, query: oid })).body.data
        .api_tokens,
    ).toEqual([]);
    const bad = await api("POST", "/api_token/create", {
      token: owner.token,
      query: oid,
      body: { name: "x", access: "admin" },
    });
    expect(bad.status).toBe(400);
  });
});

describe("request validation", () => {
  it("refuses bad ids and unknown keys with the validation shape", async () => {
    const owner = await user();
    for (const query of [
      { organization_id: "abc" },
      { organization_id: "-1" },
      { organization_id: "1.5" },
      { organization_id: "99999999999999999999" },
    ]) {
      const response = await api("GET", "/organization/limits", { token: owner.token, query });
      expect(response.status, JSON.stringify(query)).toBe(400);
      expect(response.body).toMatchObject({
        status_code: 400,
        extra: [expect.objectContaining({ key: "organization_id", source: "query" })],
      });
    }
    const extra = await api("POST", "/organization/create", {
      token: owner.token,
      body: { name: "A", plan: "business" },
    });
    expect(extra.status).toBe(400);
    expect(extra.body.extra).toEqual([expect.objectContaining({ key: "plan", source: "body" })]);
    expect(
      (await api("GET", "/organization/list", { token: owner.token })).body.data.organizations,
    ).toEqual([]);
    expectError(await api("GET", "/organization/list"), 401, "unauthorized");
  });
});
