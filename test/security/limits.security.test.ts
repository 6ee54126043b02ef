import { beforeAll, describe, expect, it } from "vitest";
import { newEmail, PASSWORD, signUp } from "../e2e/support/accounts.js";
import { enterprise } from "../e2e/support/files.js";
import type { ApiResponse } from "../e2e/support/http.js";
import { addMember, expectError, q } from "../e2e/support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "../e2e/support/records.js";
import { securitySystem } from "./support/fixture.js";

/**
 * Limits: parallel creates racing the record limit; X-Forwarded-For and its
 * cousins cannot buy a client a fresh rate-limit bucket (no trusted proxy is configured); login
 * answers an unknown e-mail exactly as a wrong password, in about the same time.
 */

const RESEND_PER_MINUTE = 3;
const ctx = securitySystem({
  RATE_LIMITS: RECORD_TEST_RATE_LIMITS.replace(
    /auth_resend_ip=[^,]+/,
    `auth_resend_ip=${RESEND_PER_MINUTE}/60`,
  ),
});

describe("parallel creates racing the record limit", () => {
  let tenant: Tenant;
  let table: TestTable;
  const LIMIT = 20;

  beforeAll(async () => {
    tenant = await createTenant(ctx.sys, ctx.api);
    ctx.state.track(tenant.orgId);
    await enterprise(ctx.sys, tenant, { records: LIMIT });
    table = await createTable(ctx.api, tenant, [{ name: "N", type: "number" }]);
    await seed(
      ctx.api,
      tenant.writeToken,
      table,
      Array.from({ length: LIMIT - 6 }, (_, i) => ({ N: i })),
    );
  });

  const total = async () => {
    const listed = await ctx.api("GET", "/public/record/list", {
      token: tenant.readToken,
      query: q({ database_id: table.databaseId, table_id: table.tableId, limit: 1 }),
    });
    expect(listed.status).toBe(200);
    return listed.body.data.total as number;
  };

  it("lets exactly the limit in, through every create route at once", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        i % 3 === 0
          ? ctx.api("POST", p.records, { token: tenant.writeToken, body: { data: { N: i } } })
          : i % 3 === 1
            ? ctx.api("POST", "/public/record/create", {
                token: tenant.writeToken,
                query: q({ table_id: table.tableId }),
                body: { data: { N: i } },
              })
            : ctx.api("POST", p.batch, {
                token: tenant.writeToken,
                body: { records: [{ data: { N: i } }, { data: { N: -i } }] },
              }),
      ),
    );
    let created = 0;
    for (const answer of answers) {
      if (answer.status === 200) {
        created += answer.body.data.records?.length ?? 1;
      } else {
        expectError(answer, 403, "record_limit_exceeded");
      }
    }
    // 6 places were free: a batch of two that does not fit is refused whole.
    expect(created).toBeLessThanOrEqual(6);
    expect(created).toBeGreaterThanOrEqual(5);
    expect(await total()).toBe(LIMIT - 6 + created);
    const limits = await ctx.api("GET", "/organization/limits", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
    });
    expect(limits.body.data.usage.records).toBeLessThanOrEqual(LIMIT);
  });

  it("once full, every create route answers 403 and writes nothing", async () => {
    // Fill any place a refused batch left.
    while ((await total()) < LIMIT) {
      const one = await ctx.api("POST", "/public/record/create", {
        token: tenant.writeToken,
        query: q({ table_id: table.tableId }),
        body: { data: { N: 0 } },
      });
      expect(one.status).toBe(200);
    }
    const p = v1(tenant.databaseId, table.tableId);
    await ctx.state.unchanged(
      async () => {
        const answers = await Promise.all([
          ctx.api("POST", p.records, { token: tenant.writeToken, body: { data: { N: 1 } } }),
          ctx.api("POST", p.batch, {
            token: tenant.writeToken,
            body: { records: [{ data: { N: 1 } }] },
          }),
          ctx.api("POST", "/public/record/create", {
            token: tenant.owner.token,
            query: q({ table_id: table.tableId }),
            body: { data: { N: 1 } },
          }),
        ]);
        for (const answer of answers) expectError(answer, 403, "record_limit_exceeded");
      },
      { counters: { [`api-calls:${tenant.orgId}`]: 3 } },
    );
  });
});

describe("X-Forwarded-For spoofing against rate limits", () => {
  const resend = (headers: Record<string, string>) =>
    ctx.api("POST", "/auth/resend_code", { body: { email: newEmail("nobody") }, headers });

  it("a client cannot buy new buckets with forwarding headers", async () => {
    for (let i = 0; i < RESEND_PER_MINUTE; i++) {
      const answer = await resend({ "x-forwarded-for": `203.0.113.${i + 1}` });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    }
    const spoofs: Record<string, string>[] = [
      { "x-forwarded-for": "198.51.100.7" },
      { "x-forwarded-for": "198.51.100.8, 127.0.0.1" },
      { "x-forwarded-for": "127.0.0.2" },
      { "x-real-ip": "198.51.100.9" },
      { forwarded: "for=198.51.100.10" },
      { "x-client-ip": "198.51.100.11", "true-client-ip": "198.51.100.12" },
      {},
    ];
    await ctx.state.unchanged(async () => {
      for (const headers of spoofs) {
        const answer = await resend(headers);
        expectError(answer, 429, "too_many_requests");
        expect(Number(answer.headers.get("retry-after"))).toBeGreaterThan(0);
      }
    });
    expect(ctx.sys.mail.messages.filter((m) => m.to.some((to) => to.startsWith("nobody")))).toEqual(
      [],
    );
  });
});

describe("login: no account enumeration", () => {
  const login = (email: string, password: string) =>
    ctx.api("POST", "/auth/login", { body: { email, password } });

  it("unknown e-mail, wrong password and an unverified account answer alike", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const unverified = newEmail("unverified");
    const registered = await ctx.api("POST", "/auth/register", {
      body: { email: unverified, password: PASSWORD },
    });
    expect(registered.status).toBe(200);
    await ctx.state.unchanged(async () => {
      const answers = [
        await login(newEmail("ghost"), "wrong password 1"),
        await login(user.email, "wrong password 1"),
        await login(user.email.toUpperCase(), "wrong password 1"),
        await login(unverified, "wrong password 1"),
      ];
      for (const answer of answers) expectError(answer, 401, "invalid_credentials");
      const shape = (a: ApiResponse) =>
        [...a.headers.keys()].filter((k) => !["date", "x-request-id"].includes(k)).sort();
      for (const answer of answers.slice(1)) {
        expect(answer.text).toBe(answers[0]!.text);
        expect(shape(answer)).toEqual(shape(answers[0]!));
      }
    });
  });

  it("an unknown e-mail takes about as long as a wrong password (the hash is never skipped)", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const samples = () =>
      `known ${known.map(Math.round).join(",")} ms; unknown ${unknown.map(Math.round).join(",")} ms`;
    const timed = async (email: string) => {
      const started = performance.now();
      const answer = await login(email, "not the password");
      const elapsed = performance.now() - started;
      expectError(answer, 401, "invalid_credentials");
      return elapsed;
    };
    /** The lower quartile: load on a shared machine only ever adds time, so the low end shows
     * what a login costs by itself, and a quartile still shrugs off a single lucky sample. */
    const quartile = (values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      return sorted[Math.floor(sorted.length / 4)]!;
    };
    // Warm both paths up, then alternate (12 pairs) so that load on a shared machine hits both
    // alike; medians shrug off the odd stall.
    await timed(user.email);
    await timed(newEmail("ghost"));
    const known: number[] = [];
    const unknown: number[] = [];
    await ctx.state.unchanged(async () => {
      for (let i = 0; i < 12; i++) {
        if (i % 2 === 0) {
          known.push(await timed(user.email));
          unknown.push(await timed(newEmail("ghost")));
        } else {
          unknown.push(await timed(newEmail("ghost")));
          known.push(await timed(user.email));
        }
      }
    });
    const [k, u] = [quartile(known), quartile(unknown)];
    // The password hash (argon2id) is most of a login's time, 8-10 ms on a fast machine and more
    // on a slow one; skipping it for unknown e-mails would leave them at a fraction of the
    // known ones. Within a factor of two either way, whatever the noise; a bound in absolute
    // milliseconds would follow the machine's speed, not the code.
    expect(u / k, samples()).toBeGreaterThan(0.5);
    expect(u / k, samples()).toBeLessThan(2);
  });
});

describe("races on organization limits and single-use codes", () => {
  const statusCounts = (answers: ApiResponse[]) => {
    const counts: Record<string, number> = {};
    for (const a of answers) {
      const key = `${a.status} ${(a.body as { message?: string })?.message ?? ""}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  };

  it("parallel organization creates never pass 5 owned organizations", async () => {
    const user = await signUp(ctx.sys, ctx.api);
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        ctx.api("POST", "/organization/create", { token: user.token, body: { name: `Race ${i}` } }),
      ),
    );
    expect(statusCounts(answers)).toEqual({
      "200 success": 5,
      "403 organization_limit_exceeded": 7,
    });
    for (const a of answers.filter((a) => a.status === 403)) {
      expectError(a, 403, "organization_limit_exceeded");
    }
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/organization/create", { token: user.token, body: { name: "6th" } }),
        403,
        "organization_limit_exceeded",
      );
    });
    const listed = await ctx.api("GET", "/organization/list", { token: user.token });
    expect(listed.body.data.organizations).toHaveLength(5);
  });

  it("parallel invites never pass the plan's members (owner + pending invites count)", async () => {
    const owner = await signUp(ctx.sys, ctx.api);
    const created = await ctx.api("POST", "/organization/create", {
      token: owner.token,
      body: { name: "Members race" },
    });
    const orgId = created.body.data.organization.organization_id as number;
    // free: 3 members, the owner is one of them.
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        ctx.api("POST", "/organization/invite/create", {
          token: owner.token,
          query: q({ organization_id: orgId }),
          body: { email: newEmail("invitee"), role: "viewer" },
        }),
      ),
    );
    expect(statusCounts(answers)).toEqual({ "200 success": 2, "403 member_limit_exceeded": 6 });
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/organization/invite/create", {
          token: owner.token,
          query: q({ organization_id: orgId }),
          body: { email: newEmail("invitee"), role: "viewer" },
        }),
        403,
        "member_limit_exceeded",
      );
    });
  });

  it("one invite accepted twice at once makes one member", async () => {
    const owner = await signUp(ctx.sys, ctx.api);
    const guest = await signUp(ctx.sys, ctx.api);
    const created = await ctx.api("POST", "/organization/create", {
      token: owner.token,
      body: { name: "Accept race" },
    });
    const orgId = created.body.data.organization.organization_id as number;
    const invite = await ctx.api("POST", "/organization/invite/create", {
      token: owner.token,
      query: q({ organization_id: orgId }),
      body: { email: guest.email, role: "editor" },
    });
    const inviteId = invite.body.data.invite.invite_id as number;
    const accept = () =>
      ctx.api("POST", "/organization/my_invite/accept", {
        token: guest.token,
        query: q({ invite_id: inviteId }),
      });
    const answers = await Promise.all([accept(), accept(), accept()]);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const a of answers.filter((a) => a.status !== 200)) {
      expectError(a, 404, "invite_not_found");
    }
    await ctx.state.unchanged(async () => {
      expectError(await accept(), 404, "invite_not_found");
    });
    const members = await ctx.api("GET", "/organization/member/list", {
      token: owner.token,
      query: q({ organization_id: orgId }),
    });
    expect(
      members.body.data.members.filter((m: { user_id: number }) => m.user_id === guest.id),
    ).toHaveLength(1);
  });

  it("an owner-transfer code confirmed twice at once makes one owner", async () => {
    const owner = await signUp(ctx.sys, ctx.api);
    const [heirA, heirB] = [await signUp(ctx.sys, ctx.api), await signUp(ctx.sys, ctx.api)];
    const created = await ctx.api("POST", "/organization/create", {
      token: owner.token,
      body: { name: "Transfer race" },
    });
    const orgId = created.body.data.organization.organization_id as number;
    const heirId = await addMember(ctx.api, owner, orgId, heirA, "admin");
    await addMember(ctx.api, owner, orgId, heirB, "editor");
    const before = ctx.sys.mail.messages.length;
    const sent = await ctx.api("POST", "/organization/transfer/send_code", {
      token: owner.token,
      query: q({ organization_id: orgId }),
      body: { member_id: heirId },
    });
    expect(sent.status).toBe(200);
    const code = /(\d{6})/.exec((await ctx.sys.mail.next(owner.email, before)).subject)![1]!;
    const confirm = () =>
      ctx.api("POST", "/organization/transfer/confirm", {
        token: owner.token,
        query: q({ organization_id: orgId }),
        body: { member_id: heirId, code },
      });
    const answers = await Promise.all([confirm(), confirm(), confirm()]);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    // The confirmations queue on the organization's lock; once the transfer is through, the
    // old owner is an admin and confirming is owner-only.
    for (const a of answers.filter((a) => a.status !== 200)) {
      expectError(a, 403, "organization_forbidden");
    }
    await ctx.state.unchanged(async () => {
      expectError(await confirm(), 403, "organization_forbidden");
    });
    const members = await ctx.api("GET", "/organization/member/list", {
      token: heirA.token,
      query: q({ organization_id: orgId }),
    });
    const roles = members.body.data.members.map((m: { role: string }) => m.role).sort();
    expect(roles).toEqual(["admin", "editor", "owner"]);
  });
});
