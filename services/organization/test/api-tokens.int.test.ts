import { createHash } from "node:crypto";
import { toJsonString } from "@bufbuild/protobuf";
import { API_TOKEN_NOT_FOUND, apiTokenCacheKey, errorInfoOf } from "@rowbase/kit";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  ApiTokenCreatedSchema,
  ApiTokenRevokedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { Role, TokenAccess } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { ListApiTokensResponseSchema } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventsOf,
  type Harness,
  reasonOf,
  SERVICE,
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

const sha256 = (secret: string) => createHash("sha256").update(secret).digest();

async function createToken(
  organizationId: bigint,
  by: TestUser,
  name = "ci",
  access = TokenAccess.READ_WRITE,
) {
  return h.org.createApiToken({ organizationId, name, access }, await as(by));
}

/** How many of the database's connections wait for a lock. */
/** Calls waiting on a lock; not the outbox relay, which the tests' outbox lock holds too. */
const waitingOnLocks = async () =>
  (
    await h.db.query(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and wait_event_type = 'Lock'
         and query not like '%set published_at%'`,
    )
  ).rows[0].n as number;

describe("create and list", () => {
  it("returns an rb_ secret once and stores only its SHA-256", async () => {
    const { id, owner, admin } = await team(h);
    const { apiToken, token } = await createToken(id, admin, "  zapier  ", TokenAccess.READ);
    expect(token).toMatch(/^rb_[0-9A-Za-z]{40}$/);
    expect(apiToken).toMatchObject({
      name: "zapier",
      access: TokenAccess.READ,
      tokenPrefix: token.slice(0, 8),
    });
    expect(apiToken!.tokenId).toBeGreaterThan(0n);
    expect(apiToken!.createdAt).toBeDefined();
    expect(apiToken!.lastUsedAt).toBeUndefined();

    const { rows } = await h.db.query("select * from organization.api_tokens where id = $1", [
      apiToken!.tokenId,
    ]);
    expect(rows[0].token_hash).toBe(sha256(token).toString("hex"));
    expect(rows[0].created_by).toBe(admin.id.toString());
    const everything = JSON.stringify(
      (await h.db.query("select * from organization.api_tokens")).rows,
    );
    expect(everything).not.toContain(token.slice(8));
    const outbox = (await h.db.query("select payload from organization.outbox")).rows
      .map((r) => Buffer.from(r.payload).toString("latin1"))
      .join("");
    expect(outbox).not.toContain(token.slice(8));

    const second = await createToken(id, owner, "etl");
    expect(second.token).not.toBe(token);
    const list = await h.org.listApiTokens({ organizationId: id }, await as(owner));
    expect(list.apiTokens.map((t) => [t.name, t.access, t.tokenPrefix])).toEqual([
      ["zapier", TokenAccess.READ, token.slice(0, 8)],
      ["etl", TokenAccess.READ_WRITE, second.token.slice(0, 8)],
    ]);
    const json = toJsonString(ListApiTokensResponseSchema, list);
    expect(json).not.toContain(token.slice(8));
    expect(json).not.toContain(second.token.slice(8));

    await expect
      .poll(() =>
        eventsOf(h.events, "org.api_token.created", ApiTokenCreatedSchema).find(
          (e) => e.tokenId === apiToken!.tokenId,
        ),
      )
      .toMatchObject({ organizationId: id, name: "zapier", access: TokenAccess.READ });
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.api_token.created", AuditEventSchema).find(
            (e) => e.target?.id === apiToken!.tokenId,
          )?.meta?.actor?.id,
      )
      .toBe(admin.id);
  });

  it("answers not found when the organization is deleted in the middle of a create", async () => {
    const { id, owner, admin } = await team(h);
    // Holds the deletion back after it deleted the organization's row, before its commit.
    const blocker = await h.db.connect();
    try {
      await blocker.query("begin");
      await blocker.query("lock table organization.outbox in share mode");
      const deleting = h.org.deleteOrganization({ organizationId: id }, await as(owner));
      await expect.poll(waitingOnLocks).toBe(1);
      const creating = reasonOf(createToken(id, admin));
      await expect.poll(waitingOnLocks).toBeGreaterThanOrEqual(2);
      await blocker.query("commit");
      await deleting;
      expect(await creating).toBe("organization_not_found");
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
  });

  it("is for owners and admins only, and validates the request", async () => {
    const { id, owner, editor, viewer, outsider } = await team(h);
    await createToken(id, owner);
    const before = await stateOf(h.db, id);
    for (const user of [editor, viewer]) {
      expect(await reasonOf(createToken(id, user))).toBe("organization_forbidden");
      expect(await reasonOf(h.org.listApiTokens({ organizationId: id }, await as(user)))).toBe(
        "organization_forbidden",
      );
    }
    expect(await reasonOf(createToken(id, outsider))).toBe("organization_not_found");
    expect(await reasonOf(h.org.listApiTokens({ organizationId: id }, await as(outsider)))).toBe(
      "organization_not_found",
    );
    expect(await validationOf(createToken(id, owner, ""))).toEqual([
      expect.objectContaining({ key: "name", source: "body" }),
    ]);
    expect(await validationOf(createToken(id, owner, "x".repeat(101)))).toEqual([
      expect.objectContaining({ key: "name" }),
    ]);
    // The rule for names, which organization once applied to ASCII controls only.
    for (const name of ["ci\u0085", "ci\u202e", "\u2066ci\u2069"]) {
      expect(await validationOf(createToken(id, owner, name))).toEqual([
        {
          key: "name",
          message: "must not contain control characters",
          source: "body",
          code: "invalid_value",
        },
      ]);
    }
    expect(await validationOf(createToken(id, owner, "ok", TokenAccess.UNSPECIFIED))).toEqual([
      expect.objectContaining({ key: "access" }),
    ]);
    expect(await stateOf(h.db, id)).toEqual(before);
  });
});

describe("revoke and resolve", () => {
  it("resolves a live token for services, stamping last_used_at at most once a minute", async () => {
    const { id, owner } = await team(h);
    const { apiToken, token } = await createToken(id, owner, "reader", TokenAccess.READ);
    const resolved = await h.org.resolveApiToken({ tokenSha256: sha256(token) }, await as(SERVICE));
    expect(resolved).toMatchObject({
      tokenId: apiToken!.tokenId,
      organizationId: id,
      access: TokenAccess.READ,
    });
    const lastUsed = async () =>
      (
        await h.db.query("select last_used_at from organization.api_tokens where id = $1", [
          apiToken!.tokenId,
        ])
      ).rows[0].last_used_at as Date | null;
    const first = await lastUsed();
    expect(first).toBeInstanceOf(Date);
    await h.org.resolveApiToken({ tokenSha256: sha256(token) }, await as(SERVICE));
    expect(await lastUsed()).toEqual(first);
    await h.db.query(
      "update organization.api_tokens set last_used_at = now() - interval '2 minutes' where id = $1",
      [apiToken!.tokenId],
    );
    const stale = await lastUsed();
    await h.org.resolveApiToken({ tokenSha256: sha256(token) }, await as(SERVICE));
    expect((await lastUsed())!.getTime()).toBeGreaterThan(stale!.getTime());
    const { apiTokens } = await h.org.listApiTokens({ organizationId: id }, await as(owner));
    expect(apiTokens[0]!.lastUsedAt).toBeDefined();

    expect(
      await reasonOf(h.org.resolveApiToken({ tokenSha256: sha256(token) }, await as(owner))),
    ).toBe("internal_only");
    expect(
      await reasonOf(
        h.org.resolveApiToken({ tokenSha256: sha256(`${token}x`) }, await as(SERVICE)),
      ),
    ).toBe("api_token_not_found");
    expect(
      await reasonOf(
        h.org.resolveApiToken({ tokenSha256: new Uint8Array([1, 2, 3]) }, await as(SERVICE)),
      ),
    ).toBe("api_token_not_found");
  });

  it("revokes a token of the organization at once, and nothing else", async () => {
    const a = await team(h);
    const b = await team(h);
    const { apiToken, token } = await createToken(a.id, a.owner);
    const other = await createToken(b.id, b.owner);
    const hex = sha256(token).toString("hex");
    await h.cache.set(apiTokenCacheKey(hex), "cached", 60);

    const before = await stateOf(h.db, a.id);
    const beforeB = await stateOf(h.db, b.id);
    expect(
      await reasonOf(
        h.org.revokeApiToken(
          { organizationId: a.id, tokenId: other.apiToken!.tokenId },
          await as(a.owner),
        ),
      ),
    ).toBe("api_token_not_found");
    expect(
      await reasonOf(
        h.org.revokeApiToken(
          { organizationId: b.id, tokenId: apiToken!.tokenId },
          await as(a.owner),
        ),
      ),
    ).toBe("api_token_not_found");
    expect(
      await reasonOf(
        h.org.revokeApiToken(
          { organizationId: a.id, tokenId: apiToken!.tokenId },
          await as(a.editor),
        ),
      ),
    ).toBe("organization_forbidden");
    expect(
      await reasonOf(
        h.org.revokeApiToken({ organizationId: a.id, tokenId: 999_999n }, await as(a.owner)),
      ),
    ).toBe("api_token_not_found");
    expect(await stateOf(h.db, a.id)).toEqual(before);
    expect(await stateOf(h.db, b.id)).toEqual(beforeB);
    expect(await h.cache.get(apiTokenCacheKey(hex))).toBe("cached");

    await h.org.revokeApiToken(
      { organizationId: a.id, tokenId: apiToken!.tokenId },
      await as(a.admin),
    );
    expect(await h.cache.get(apiTokenCacheKey(hex))).toBe(API_TOKEN_NOT_FOUND);
    expect(
      await reasonOf(h.org.resolveApiToken({ tokenSha256: sha256(token) }, await as(SERVICE))),
    ).toBe("api_token_not_found");
    expect(
      (await h.org.listApiTokens({ organizationId: a.id }, await as(a.owner))).apiTokens,
    ).toEqual([]);
    expect(
      await reasonOf(
        h.org.revokeApiToken(
          { organizationId: a.id, tokenId: apiToken!.tokenId },
          await as(a.owner),
        ),
      ),
    ).toBe("api_token_not_found");
    // The other organization's token still works.
    expect(
      (await h.org.resolveApiToken({ tokenSha256: sha256(other.token) }, await as(SERVICE)))
        .organizationId,
    ).toBe(b.id);

    await expect
      .poll(() =>
        eventsOf(h.events, "org.api_token.revoked", ApiTokenRevokedSchema).find(
          (e) => e.tokenId === apiToken!.tokenId,
        ),
      )
      .toBeDefined();
    const revoked = eventsOf(h.events, "org.api_token.revoked", ApiTokenRevokedSchema).find(
      (e) => e.tokenId === apiToken!.tokenId,
    )!;
    expect(revoked.organizationId).toBe(a.id);
    expect(Buffer.from(revoked.tokenSha256).toString("hex")).toBe(hex);
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.api_token.revoked", AuditEventSchema).find(
            (e) => e.target?.id === apiToken!.tokenId,
          )?.meta?.actor?.id,
      )
      .toBe(a.admin.id);
  });

  it("revokes a token once when two revocations meet: the other is not found", async () => {
    const { id, owner, admin } = await team(h);
    const { apiToken } = await createToken(id, owner);
    const tokenId = apiToken!.tokenId;
    const revocationsQueued = async () =>
      (
        await h.db.query(
          "select count(*)::int as n from organization.outbox where subject like '%api_token.revoked'",
        )
      ).rows[0].n as number;
    const queuedBefore = await revocationsQueued();
    // Holds the token's row, so that both revocations are under way before either writes.
    const blocker = await h.db.connect();
    let outcomes: (string | undefined)[];
    try {
      await blocker.query("begin");
      await blocker.query("select 1 from organization.api_tokens where id = $1 for update", [
        tokenId.toString(),
      ]);
      const revoking = [owner, admin].map(async (user) =>
        h.org.revokeApiToken({ organizationId: id, tokenId }, await as(user)).then(
          () => undefined,
          (error: unknown) => errorInfoOf(error)?.reason,
        ),
      );
      await expect.poll(waitingOnLocks).toBe(2);
      await blocker.query("commit");
      outcomes = await Promise.all(revoking);
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
    expect(outcomes.filter((reason) => reason === undefined)).toHaveLength(1);
    expect(outcomes.filter((reason) => reason === "api_token_not_found")).toHaveLength(1);
    // One org.api_token.revoked and one audit.api_token.revoked, not two of each.
    expect((await revocationsQueued()) - queuedBefore).toBe(2);
  });
});

describe("tokens of a member who loses the right to manage tokens", () => {
  /** "resolved", or the reason the token was refused. */
  const resolves = async (secret: string) =>
    h.org.resolveApiToken({ tokenSha256: sha256(secret) }, await as(SERVICE)).then(
      () => "resolved",
      (error: unknown) => errorInfoOf(error)?.reason,
    );

  it("are revoked when the member is given a lower role, is removed or leaves", async () => {
    const a = await team(h);
    const mine = await createToken(a.id, a.owner, "owner's");
    const demoted = await createToken(a.id, a.admin, "admin's");
    const hex = sha256(demoted.token).toString("hex");
    await h.cache.set(apiTokenCacheKey(hex), "cached", 60);

    await h.org.updateMember(
      { organizationId: a.id, memberId: a.memberOf(a.admin), role: Role.EDITOR },
      await as(a.owner),
    );
    expect(await resolves(demoted.token)).toBe("api_token_not_found");
    expect(await h.cache.get(apiTokenCacheKey(hex))).toBe(API_TOKEN_NOT_FOUND);
    expect(await resolves(mine.token)).toBe("resolved");
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.api_token.revoked", AuditEventSchema).find(
            (e) => e.target?.id === demoted.apiToken!.tokenId,
          )?.meta?.actor?.id,
      )
      .toBe(a.owner.id);
    await expect
      .poll(() =>
        eventsOf(h.events, "org.api_token.revoked", ApiTokenRevokedSchema).find(
          (e) => e.tokenId === demoted.apiToken!.tokenId,
        ),
      )
      .toBeDefined();

    // Made admin again, the member's new tokens go when they are removed, or when they leave.
    for (const [user, by] of [
      [a.admin, a.owner],
      [a.viewer, a.viewer],
    ] as const) {
      await h.org.updateMember(
        { organizationId: a.id, memberId: a.memberOf(user), role: Role.ADMIN },
        await as(a.owner),
      );
      const theirs = await createToken(a.id, user, "theirs");
      expect(await resolves(theirs.token)).toBe("resolved");
      await h.org.removeMember({ organizationId: a.id, memberId: a.memberOf(user) }, await as(by));
      expect(await resolves(theirs.token)).toBe("api_token_not_found");
    }
    expect(
      (await h.org.listApiTokens({ organizationId: a.id }, await as(a.owner))).apiTokens.map(
        (t) => t.name,
      ),
    ).toEqual(["owner's"]);
  });

  it("are revoked also when the member is removed in the middle of creating one", async () => {
    const a = await team(h);
    // Holds the token's insert back, so that the removal comes between the create's check of
    // the admin's role and its commit.
    const blocker = await h.db.connect();
    try {
      await blocker.query("begin");
      await blocker.query("lock table organization.api_tokens in share mode");
      const creating = createToken(a.id, a.admin, "racing");
      await expect.poll(waitingOnLocks).toBe(1);
      const removing = h.org.removeMember(
        { organizationId: a.id, memberId: a.memberOf(a.admin) },
        await as(a.owner),
      );
      // The removal either waits for the create (it must) or is done without seeing the token.
      await Promise.race([removing, expect.poll(waitingOnLocks).toBeGreaterThanOrEqual(2)]);
      await blocker.query("commit");
      const created = await creating;
      await removing;
      expect(await resolves(created.token)).toBe("api_token_not_found");
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
    const { rows } = await h.db.query(
      `select count(*)::int as n from organization.api_tokens
       where organization_id = $1 and created_by = $2 and revoked_at is null`,
      [a.id.toString(), a.admin.id.toString()],
    );
    expect(rows[0].n).toBe(0);
  });

  it("stay while their creator keeps a managing role, whatever other members' roles do", async () => {
    const a = await team(h);
    await h.org.updateMember(
      { organizationId: a.id, memberId: a.memberOf(a.editor), role: Role.ADMIN },
      await as(a.owner),
    );
    const theirs = await createToken(a.id, a.editor, "theirs");
    await h.org.updateMember(
      { organizationId: a.id, memberId: a.memberOf(a.viewer), role: Role.EDITOR },
      await as(a.editor),
    );
    await h.org.removeMember(
      { organizationId: a.id, memberId: a.memberOf(a.admin) },
      await as(a.owner),
    );
    expect(await resolves(theirs.token)).toBe("resolved");
  });
});
