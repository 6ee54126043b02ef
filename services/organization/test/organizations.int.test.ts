import { fromBinary } from "@bufbuild/protobuf";
import {
  API_TOKEN_NOT_FOUND,
  apiTokenCacheKey,
  auditChangesOf,
  cachedPlan,
  cachePlan,
  decodeCachedPlan,
  MEMBERSHIP_CHANGED,
  membershipCacheKey,
  planCacheKey,
  versionedEntryOf,
} from "@rowbase/kit";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  ApiTokenRevokedSchema,
  MemberAddedSchema,
  MemberRemovedSchema,
  OrganizationCreatedSchema,
  OrganizationDeletedSchema,
  OrganizationUpdatedSchema,
  PlanChangedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import {
  PlanName,
  Role,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  eventsOf,
  type Harness,
  newOrganization as newOrganizationOf,
  OPERATOR,
  reasonOf,
  SERVICE,
  startHarness,
  stateOf,
  type TestUser,
  team as teamOf,
  validationOf,
} from "./harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

function newOrganization(owner: TestUser, name = "Acme Corp", slug = "") {
  return newOrganizationOf(h, owner, name, slug);
}

const team = () => teamOf(h);

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

describe("create", () => {
  it("creates a free organization owned by the caller, and announces it", async () => {
    const owner = await h.user();
    const organization = await newOrganization(owner, "Acme Corp", "acme-explicit-1");
    expect(organization).toMatchObject({
      organizationSlug: "acme-explicit-1",
      name: "Acme Corp",
      plan: PlanName.FREE,
      role: Role.OWNER,
    });
    expect(organization.createdAt).toBeDefined();
    const { rows } = await h.db.query(
      "select user_id, role from organization.members where organization_id = $1",
      [organization.organizationId],
    );
    expect(rows).toEqual([{ user_id: owner.id.toString(), role: "owner" }]);

    await expect
      .poll(
        () =>
          eventsOf(h.events, "org.organization.created", OrganizationCreatedSchema).filter(
            (e) => e.organizationId === organization.organizationId,
          ).length,
      )
      .toBe(1);
    const [created] = eventsOf(
      h.events,
      "org.organization.created",
      OrganizationCreatedSchema,
    ).filter((e) => e.organizationId === organization.organizationId);
    expect(created).toMatchObject({
      organizationSlug: "acme-explicit-1",
      name: "Acme Corp",
      ownerUserId: owner.id,
      plan: PlanName.FREE,
    });
    expect(created!.meta?.actor?.id).toBe(owner.id);
    await expect
      .poll(() =>
        eventsOf(h.events, "org.member.added", MemberAddedSchema).some(
          (e) =>
            e.organizationId === organization.organizationId &&
            e.userId === owner.id &&
            e.role === Role.OWNER,
        ),
      )
      .toBe(true);
    await expect
      .poll(() =>
        eventsOf(h.events, "audit.organization.created", AuditEventSchema).find(
          (e) => e.organizationId === organization.organizationId,
        ),
      )
      .toBeDefined();
    const audit = eventsOf(h.events, "audit.organization.created", AuditEventSchema).find(
      (e) => e.organizationId === organization.organizationId,
    )!;
    expect(audit.action).toBe("organization.created");
    expect(audit.target).toMatchObject({ type: "organization", id: organization.organizationId });
    expect(
      Object.fromEntries(auditChangesOf(audit.changesJson).map((c) => [c.key, c.new])),
    ).toEqual({
      name: "Acme Corp",
      organization_slug: "acme-explicit-1",
      plan: "free",
    });
  });

  it("derives the slug from the name with a numeric suffix on collision", async () => {
    const owner = await h.user();
    const name = `Café Zürich ${Date.now()}`;
    const first = await newOrganization(owner, name);
    const second = await newOrganization(owner, name);
    const third = await newOrganization(owner, name);
    expect(first.organizationSlug).toBe(`cafe-zurich-${name.split(" ").at(-1)}`);
    expect(second.organizationSlug).toBe(`${first.organizationSlug}-2`);
    expect(third.organizationSlug).toBe(`${first.organizationSlug}-3`);
    const short = await newOrganization(owner, "X");
    expect(short.organizationSlug).toMatch(/^x-org(-\d+)?$/);
  });

  it("refuses a taken slug, a malformed slug and a bad name", async () => {
    const owner = await h.user();
    await newOrganization(owner, "Taken", "taken-slug-1");
    expect(
      await reasonOf(
        h.org.createOrganization(
          { name: "Other", organizationSlug: "taken-slug-1" },
          await as(owner),
        ),
      ),
    ).toBe("organization_slug_taken");
    for (const slug of ["ab", "Upper-Case", "under_score", "x".repeat(49)]) {
      expect(
        await validationOf(
          h.org.createOrganization({ name: "Fine", organizationSlug: slug }, await as(owner)),
        ),
      ).toEqual([expect.objectContaining({ key: "organization_slug", source: "body" })]);
    }
    expect(await validationOf(h.org.createOrganization({ name: "   " }, await as(owner)))).toEqual([
      expect.objectContaining({ key: "name" }),
    ]);
    expect(
      await validationOf(h.org.createOrganization({ name: "\u200b \u200d" }, await as(owner))),
    ).toEqual([
      {
        key: "name",
        message: "must contain a visible character",
        source: "body",
        code: "invalid_value",
      },
    ]);
    // C1 and bidirectional controls, which organization's own check once let through.
    for (const name of ["Acme\u0085", "emca\u202e", "\u2067Acme\u2069"]) {
      expect(await validationOf(h.org.createOrganization({ name }, await as(owner)))).toEqual([
        {
          key: "name",
          message: "must not contain control characters",
          source: "body",
          code: "invalid_value",
        },
      ]);
    }
    const { organizations } = await h.org.listOrganizations({}, await as(owner));
    expect(organizations.map((o) => o.organizationSlug)).toEqual(["taken-slug-1"]);
  });

  it("lets a user own at most 5 organizations, even when creating in parallel", async () => {
    const owner = await h.user();
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, async (_, i) => newOrganization(owner, `Parallel ${i}`)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    for (const rejected of results.filter((r) => r.status === "rejected")) {
      expect(await reasonOf(Promise.reject((rejected as PromiseRejectedResult).reason))).toBe(
        "organization_limit_exceeded",
      );
    }
    const { rows } = await h.db.query(
      "select count(*)::int as n from organization.members where user_id = $1 and role = 'owner'",
      [owner.id],
    );
    expect(rows[0].n).toBe(5);
    // Being a member of other organizations does not count, owning does.
    const other = await h.user();
    const foreign = await newOrganization(other, "Foreign");
    const { invite } = await h.org.createInvite(
      { organizationId: foreign.organizationId, email: owner.email, role: Role.EDITOR },
      await as(other),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(owner));
    expect(await reasonOf(newOrganization(owner, "Sixth"))).toBe("organization_limit_exceeded");
    await h.org.deleteOrganization(
      {
        organizationId: (await h.org.listOrganizations({}, await as(owner))).organizations.find(
          (o) => o.role === Role.OWNER,
        )!.organizationId,
      },
      await as(owner),
    );
    await newOrganization(owner, "Room again");
  });

  it("answers a call without a user principal with unauthorized", async () => {
    expect(await reasonOf(h.org.createOrganization({ name: "Nobody" }))).toBe("unauthorized");
    expect(await reasonOf(h.org.createOrganization({ name: "Service" }, await as(SERVICE)))).toBe(
      "unauthorized",
    );
  });
});

describe("get and list", () => {
  it("finds the caller's organization by id or slug, and hides others'", async () => {
    const { id, organization, viewer, outsider } = await team();
    const byId = await h.org.getOrganization(
      { lookup: { case: "organizationId", value: id } },
      await as(viewer),
    );
    expect(byId.organization).toMatchObject({ organizationId: id, role: Role.VIEWER });
    const bySlug = await h.org.getOrganization(
      { lookup: { case: "organizationSlug", value: organization.organizationSlug } },
      await as(viewer),
    );
    expect(bySlug.organization?.organizationId).toBe(id);
    expect(
      await reasonOf(
        h.org.getOrganization(
          { lookup: { case: "organizationId", value: id } },
          await as(outsider),
        ),
      ),
    ).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.getOrganization(
          { lookup: { case: "organizationSlug", value: organization.organizationSlug } },
          await as(outsider),
        ),
      ),
    ).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.getOrganization(
          { lookup: { case: "organizationId", value: 999_999n } },
          await as(viewer),
        ),
      ),
    ).toBe("organization_not_found");
    expect(await validationOf(h.org.getOrganization({}, await as(viewer)))).toEqual([
      expect.objectContaining({ key: "organization_id", source: "query" }),
    ]);
  });

  it("lists the caller's organizations with the caller's role", async () => {
    const { id, editor } = await team();
    const own = await newOrganization(editor, "Editor's own");
    const { organizations } = await h.org.listOrganizations({}, await as(editor));
    expect(organizations.map((o) => [o.organizationId, o.role])).toEqual([
      [id, Role.EDITOR],
      [own.organizationId, Role.OWNER],
    ]);
    expect((await h.org.listOrganizations({}, await as(await h.user()))).organizations).toEqual([]);
  });
});

describe("update", () => {
  it("lets the owner and admins rename and re-slug, and audits the changed keys", async () => {
    const { id, owner, admin } = await team();
    const slug = `renamed-${id}`;
    const { organization } = await h.org.updateOrganization(
      { organizationId: id, name: "Renamed", organizationSlug: slug },
      await as(admin),
    );
    expect(organization).toMatchObject({
      name: "Renamed",
      organizationSlug: slug,
      role: Role.ADMIN,
    });
    const again = await h.org.updateOrganization(
      { organizationId: id, name: "Again" },
      await as(owner),
    );
    expect(again.organization).toMatchObject({ name: "Again", organizationSlug: slug });

    await expect
      .poll(
        () =>
          eventsOf(h.events, "org.organization.updated", OrganizationUpdatedSchema).filter(
            (e) => e.organizationId === id,
          ).length,
      )
      .toBe(2);
    await expect
      .poll(
        () =>
          eventsOf(h.events, "audit.organization.updated", AuditEventSchema).filter(
            (e) => e.organizationId === id,
          ).length,
      )
      .toBe(2);
    const [first, second] = eventsOf(
      h.events,
      "audit.organization.updated",
      AuditEventSchema,
    ).filter((e) => e.organizationId === id);
    expect(first!.meta?.actor?.id).toBe(admin.id);
    expect(auditChangesOf(first!.changesJson).map((c) => [c.key, c.old, c.new])).toEqual([
      ["name", "Team", "Renamed"],
      ["organization_slug", expect.any(String), slug],
    ]);
    expect(auditChangesOf(second!.changesJson).map((c) => [c.key, c.old, c.new])).toEqual([
      ["name", "Renamed", "Again"],
    ]);
  });

  it("refuses editors, viewers, outsiders and taken slugs without changing anything", async () => {
    const { id, admin, editor, viewer, outsider } = await team();
    const taken = await newOrganization(outsider, "Elsewhere");
    const before = await stateOf(h.db, id);
    for (const user of [editor, viewer]) {
      expect(
        await reasonOf(
          h.org.updateOrganization({ organizationId: id, name: "No" }, await as(user)),
        ),
      ).toBe("organization_forbidden");
    }
    expect(
      await reasonOf(
        h.org.updateOrganization({ organizationId: id, name: "No" }, await as(outsider)),
      ),
    ).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.updateOrganization(
          { organizationId: id, organizationSlug: taken.organizationSlug },
          await as(admin),
        ),
      ),
    ).toBe("organization_slug_taken");
    expect(
      await validationOf(
        h.org.updateOrganization({ organizationId: id, name: "" }, await as(admin)),
      ),
    ).toEqual([expect.objectContaining({ key: "name" })]);
    expect(
      await validationOf(
        h.org.updateOrganization({ organizationId: id, name: "Acme\u202e" }, await as(admin)),
      ),
    ).toEqual([
      {
        key: "name",
        message: "must not contain control characters",
        source: "body",
        code: "invalid_value",
      },
    ]);
    expect(await stateOf(h.db, id)).toEqual(before);
  });
  it("renames one at a time, so each audit entry's old values are what that rename replaced", async () => {
    const { id, owner, admin } = await team();
    // Holds the organization's row, so that both renames are under way before either writes.
    const blocker = await h.db.connect();
    try {
      await blocker.query("begin");
      await blocker.query("select 1 from organization.organizations where id = $1 for update", [
        id.toString(),
      ]);
      const renames = [
        h.org.updateOrganization({ organizationId: id, name: "First" }, await as(owner)),
        h.org.updateOrganization({ organizationId: id, name: "Second" }, await as(admin)),
      ];
      await expect.poll(waitingOnLocks).toBe(2);
      await blocker.query("commit");
      await Promise.all(renames);
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
    const audited = () =>
      eventsOf(h.events, "audit.organization.updated", AuditEventSchema).filter(
        (e) => e.organizationId === id,
      );
    await expect.poll(() => audited().length).toBe(2);
    const [first, second] = audited().map((e) =>
      auditChangesOf(e.changesJson).map((c) => [c.key, c.old, c.new]),
    );
    const last = (
      await h.db.query("select name from organization.organizations where id = $1", [id.toString()])
    ).rows[0].name;
    expect(second).toEqual([["name", first![0]![2], last]]);
    expect(first).toEqual([["name", "Team", expect.any(String)]]);
  });

  it("answers not found to a rename that meets the organization's deletion", async () => {
    const { id, owner, admin } = await team();
    // Holds the deletion back after it deleted the organization's row, before its commit.
    const blocker = await h.db.connect();
    try {
      await blocker.query("begin");
      await blocker.query("lock table organization.outbox in share mode");
      const deleting = h.org.deleteOrganization({ organizationId: id }, await as(owner));
      await expect.poll(waitingOnLocks).toBe(1);
      const renaming = reasonOf(
        h.org.updateOrganization({ organizationId: id, name: "Ghost" }, await as(admin)),
      );
      await expect.poll(waitingOnLocks).toBeGreaterThanOrEqual(2);
      await blocker.query("commit");
      await deleting;
      expect(await renaming).toBe("organization_not_found");
    } finally {
      await blocker.query("rollback");
      blocker.release();
    }
    await expect
      .poll(() =>
        eventsOf(h.events, "org.organization.deleted", OrganizationDeletedSchema).some(
          (e) => e.organizationId === id,
        ),
      )
      .toBe(true);
    const ghostly = (subject: string) =>
      eventsOf(h.events, subject, AuditEventSchema).filter((e) => e.organizationId === id);
    expect(
      eventsOf(h.events, "org.organization.updated", OrganizationUpdatedSchema).filter(
        (e) => e.organizationId === id,
      ),
    ).toEqual([]);
    expect(ghostly("audit.organization.updated")).toEqual([]);
  });
});

describe("delete", () => {
  it("is for the owner only; it deletes members, invites and tokens, and evicts their caches", async () => {
    const { id, owner, admin, editor, viewer, outsider } = await team();
    const { token } = await h.org.createApiToken(
      { organizationId: id, name: "ci", access: TokenAccess.READ },
      await as(owner),
    );
    await h.org.createInvite(
      { organizationId: id, email: "pending@example.test", role: Role.VIEWER },
      await as(owner),
    );
    const before = await stateOf(h.db, id);
    for (const user of [admin, editor, viewer]) {
      expect(await reasonOf(h.org.deleteOrganization({ organizationId: id }, await as(user)))).toBe(
        "organization_forbidden",
      );
    }
    expect(
      await reasonOf(h.org.deleteOrganization({ organizationId: id }, await as(outsider))),
    ).toBe("organization_not_found");
    expect(await stateOf(h.db, id)).toEqual(before);

    const tokenHash = (
      await h.db.query(
        "select token_hash from organization.api_tokens where organization_id = $1",
        [id],
      )
    ).rows[0].token_hash as string;
    await h.cache.set(membershipCacheKey(id, editor.id), "editor", 60);
    await h.cache.set(apiTokenCacheKey(tokenHash), "cached", 60);
    const getPlan = async () => h.org.getPlan({ organizationId: id }, await as(SERVICE));
    const plan = await cachedPlan(h.cache, id, getPlan);

    await h.org.deleteOrganization({ organizationId: id }, await as(owner));
    for (const table of [
      "organizations",
      "members",
      "invites",
      "api_tokens",
      "organization_usage",
    ]) {
      const column = table === "organizations" ? "id" : "organization_id";
      const { rows } = await h.db.query(
        `select count(*)::int as n from organization.${table} where ${column} = $1`,
        [id],
      );
      expect(rows[0].n, table).toBe(0);
    }
    expect(await h.cache.get(membershipCacheKey(id, editor.id))).toBe(MEMBERSHIP_CHANGED);
    expect(await h.cache.get(apiTokenCacheKey(tokenHash))).toBe(API_TOKEN_NOT_FOUND);
    // The plan entry says what GetPlan says, without asking it, and no plan read before the
    // deletion can replace that.
    expect(await reasonOf(getPlan())).toBe("organization_not_found");
    const unasked = () => Promise.reject(new Error("asked organization"));
    expect(await reasonOf(cachedPlan(h.cache, id, unasked))).toBe("organization_not_found");
    await cachePlan(h.cache, id, 0n, plan);
    expect(await reasonOf(cachedPlan(h.cache, id, unasked))).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.getOrganization({ lookup: { case: "organizationId", value: id } }, await as(owner)),
      ),
    ).toBe("organization_not_found");
    expect(
      await reasonOf(
        h.org.resolveApiToken({ tokenSha256: Buffer.from(tokenHash, "hex") }, await as(SERVICE)),
      ),
    ).toBe("api_token_not_found");
    expect(token).toMatch(/^rb_/);

    await expect
      .poll(() =>
        eventsOf(h.events, "org.organization.deleted", OrganizationDeletedSchema).some(
          (e) => e.organizationId === id,
        ),
      )
      .toBe(true);
    const removed = eventsOf(h.events, "org.member.removed", MemberRemovedSchema).filter(
      (e) => e.organizationId === id,
    );
    expect(removed.map((e) => e.userId).sort()).toEqual(
      [owner.id, admin.id, editor.id, viewer.id].sort(),
    );
    const revoked = eventsOf(h.events, "org.api_token.revoked", ApiTokenRevokedSchema).filter(
      (e) => e.organizationId === id,
    );
    expect(revoked.map((e) => Buffer.from(e.tokenSha256).toString("hex"))).toEqual([tokenHash]);
    await expect
      .poll(() =>
        eventsOf(h.events, "audit.organization.deleted", AuditEventSchema).some(
          (e) => e.organizationId === id && e.meta?.actor?.id === owner.id,
        ),
      )
      .toBe(true);
  });
});

describe("plans and limits", () => {
  it("reports the free plan's limits and the usage, members counted for real", async () => {
    const { id, viewer, outsider } = await team();
    await h.org.setPlan({ organizationId: id, plan: PlanName.FREE }, await as(OPERATOR));
    const limits = await h.org.getLimits({ organizationId: id }, await as(viewer));
    expect(limits.plan).toBe(PlanName.FREE);
    expect(limits.limits).toMatchObject({
      records: 1_000n,
      apiCallsPerMonth: 3_000n,
      fileStorageBytes: 100_000_000n,
      transferBytesPerMonth: 1_000_000_000n,
      members: 3n,
      maxFileBytes: 10_000_000n,
    });
    expect(limits.usage).toMatchObject({
      records: 0n,
      apiCallsThisMonth: 0n,
      fileStorageBytes: 0n,
      transferBytesThisMonth: 0n,
      members: 4n,
    });
    expect(await reasonOf(h.org.getLimits({ organizationId: id }, await as(outsider)))).toBe(
      "organization_not_found",
    );

    // Records and storage come from organization_usage; the monthly counters from the daily
    // usage aggregates, where days of an earlier month do not count.
    await h.db.query(
      `update organization.organization_usage set records = 12, file_storage_bytes = 34
       where organization_id = $1`,
      [id],
    );
    await h.db.query(
      `insert into organization.usage_daily (organization_id, day, api_calls, transfer_bytes)
       values ($1, date '2000-01-31', 1000, 2000)`,
      [id],
    );
    expect((await h.org.getLimits({ organizationId: id }, await as(viewer))).usage).toMatchObject({
      records: 12n,
      fileStorageBytes: 34n,
      apiCallsThisMonth: 0n,
      transferBytesThisMonth: 0n,
    });
    // Today and the first of this month (the same day on the 1st: then added up).
    for (const [day, calls, bytes] of [
      ["(now() at time zone 'utc')::date", 50, 70],
      ["date_trunc('month', now() at time zone 'utc')::date", 6, 8],
    ] as const) {
      await h.db.query(
        `insert into organization.usage_daily (organization_id, day, api_calls, transfer_bytes)
         values ($1, ${day}, $2, $3)
         on conflict (organization_id, day) do update
           set api_calls = usage_daily.api_calls + excluded.api_calls,
               transfer_bytes = usage_daily.transfer_bytes + excluded.transfer_bytes`,
        [id, calls, bytes],
      );
    }
    expect((await h.org.getLimits({ organizationId: id }, await as(viewer))).usage).toMatchObject({
      apiCallsThisMonth: 56n,
      transferBytesThisMonth: 78n,
    });
  });

  it("lets only operators set plans; enterprise takes its own limits", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(owner, "Planned");
    expect(
      await reasonOf(h.org.setPlan({ organizationId, plan: PlanName.BUSINESS }, await as(owner))),
    ).toBe("operator_only");
    expect(
      await reasonOf(h.org.setPlan({ organizationId, plan: PlanName.BUSINESS }, await as(SERVICE))),
    ).toBe("operator_only");
    expect(
      await validationOf(
        h.org.setPlan({ organizationId, plan: PlanName.ENTERPRISE }, await as(OPERATOR)),
      ),
    ).toEqual([expect.objectContaining({ key: "enterprise_limits" })]);
    const enterpriseLimits = {
      records: 5_000_000n,
      apiCallsPerMonth: 20_000_000n,
      fileStorageBytes: 500_000_000_000n,
      transferBytesPerMonth: 2_000_000_000_000n,
      members: 100n,
      maxFileBytes: 5_000_000_000n,
    };
    expect(
      await validationOf(
        h.org.setPlan(
          { organizationId, plan: PlanName.PLUS, enterpriseLimits },
          await as(OPERATOR),
        ),
      ),
    ).toEqual([expect.objectContaining({ key: "enterprise_limits" })]);
    expect(
      await validationOf(
        h.org.setPlan(
          {
            organizationId,
            plan: PlanName.ENTERPRISE,
            enterpriseLimits: { ...enterpriseLimits, members: 0n },
          },
          await as(OPERATOR),
        ),
      ),
    ).toEqual([expect.objectContaining({ key: "enterprise_limits.members" })]);
    expect(
      await reasonOf(
        h.org.setPlan({ organizationId: 999_999n, plan: PlanName.PLUS }, await as(OPERATOR)),
      ),
    ).toBe("organization_not_found");
    // Refused changes leave the plan's version where it started.
    expect((await h.org.getPlan({ organizationId }, await as(SERVICE))).planVersion).toBe(0n);

    const set = await h.org.setPlan(
      { organizationId, plan: PlanName.ENTERPRISE, enterpriseLimits },
      await as(OPERATOR),
    );
    expect(set.plan).toBe(PlanName.ENTERPRISE);
    expect(set.limits).toMatchObject(enterpriseLimits);
    const limits = await h.org.getLimits({ organizationId }, await as(owner));
    expect(limits.plan).toBe(PlanName.ENTERPRISE);
    expect(limits.limits).toMatchObject(enterpriseLimits);
    const plan = await h.org.getPlan({ organizationId }, await as(SERVICE));
    expect(plan.limits).toMatchObject(enterpriseLimits);
    // The change's commit wrote the new limits into the shared plan entry, at the new version.
    const key = planCacheKey(organizationId);
    expect(plan.planVersion).toBe(1n);
    expect(versionedEntryOf(await h.cache.get(key))?.version).toBe(1n);
    expect(decodeCachedPlan(await h.cache.get(key))).toEqual(plan.limits);
    expect(await reasonOf(h.org.getPlan({ organizationId }, await as(owner)))).toBe(
      "internal_only",
    );

    const business = await h.org.setPlan(
      { organizationId, plan: PlanName.BUSINESS },
      await as(OPERATOR),
    );
    expect(business.limits).toMatchObject({ members: 30n, maxFileBytes: 1_000_000_000n });
    const { rows } = await h.db.query(
      "select plan, enterprise_limits from organization.organizations where id = $1",
      [organizationId],
    );
    expect(rows[0]).toEqual({ plan: "business", enterprise_limits: null });
    // Setting the plan it has changes nothing, its version included.
    await h.org.setPlan({ organizationId, plan: PlanName.BUSINESS }, await as(OPERATOR));
    const businessPlan = await h.org.getPlan({ organizationId }, await as(SERVICE));
    expect(businessPlan.planVersion).toBe(2n);
    expect(versionedEntryOf(await h.cache.get(key))?.version).toBe(2n);
    expect(decodeCachedPlan(await h.cache.get(key))).toEqual(businessPlan.limits);

    await expect
      .poll(
        () =>
          eventsOf(h.events, "org.plan.changed", PlanChangedSchema).filter(
            (e) => e.organizationId === organizationId,
          ).length,
      )
      .toBe(2);
    const [toEnterprise] = eventsOf(h.events, "org.plan.changed", PlanChangedSchema).filter(
      (e) => e.organizationId === organizationId,
    );
    expect(toEnterprise).toMatchObject({ plan: PlanName.ENTERPRISE });
    expect(toEnterprise!.limits).toMatchObject(enterpriseLimits);
    await expect
      .poll(() =>
        eventsOf(h.events, "audit.organization.plan_changed", AuditEventSchema).some(
          (e) =>
            e.organizationId === organizationId &&
            auditChangesOf(e.changesJson).some((c) => c.key === "plan" && c.new === "enterprise"),
        ),
      )
      .toBe(true);
  });

  it("answers GetMembership to services only", async () => {
    const { id, editor, outsider } = await team();
    const member = await h.org.getMembership(
      { organizationId: id, userId: editor.id },
      await as(SERVICE),
    );
    expect(member).toMatchObject({ member: true, role: Role.EDITOR });
    expect(member.memberId).toBeGreaterThan(0n);
    expect(
      await h.org.getMembership({ organizationId: id, userId: outsider.id }, await as(SERVICE)),
    ).toMatchObject({ member: false, role: Role.UNSPECIFIED, memberId: 0n });
    expect(
      await reasonOf(
        h.org.getMembership({ organizationId: id, userId: editor.id }, await as(editor)),
      ),
    ).toBe("internal_only");
  });
});

// Every member event starts with meta, organization_id, member_id, user_id (kit's Authorizer
// relies on it to evict any of them).
describe("event layout", () => {
  it("decodes member events as MemberRemoved for cache eviction", async () => {
    const owner = await h.user();
    const { organizationId } = await newOrganization(owner, "Layout");
    await expect
      .poll(() =>
        h.events.find(
          (e) =>
            e.subject === "org.member.added" &&
            fromBinary(MemberRemovedSchema, e.data).organizationId === organizationId,
        ),
      )
      .toBeDefined();
    const added = h.events.find(
      (e) =>
        e.subject === "org.member.added" &&
        fromBinary(MemberRemovedSchema, e.data).organizationId === organizationId,
    )!;
    expect(fromBinary(MemberRemovedSchema, added.data).userId).toBe(owner.id);
  });
});
