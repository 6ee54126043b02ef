import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { addMember, expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  setPlan,
  type Tenant,
  type TestTable,
} from "./support/records.js";

/**
 * Managing webhooks through the gateway: create, list, get, update, delete, rotate; who may do
 * what; the URL rules; the plan's `webhooks`; and the audit log.
 */

type Api = ReturnType<typeof client>;

const EVENTUALLY = { timeout: 15_000, interval: 100 };

let sys: TestSystem;
let db: pg.Client;
let api: Api;
let tenant: Tenant;
let table: TestTable;
let viewer: SignedUpUser;
let admin: SignedUpUser;

beforeAll(async () => {
  sys = await startTestSystem({
    RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
    // A receiver on this port of loopback may be a target; every other loopback one may not.
    WEBHOOK_ALLOWED_TARGETS: "127.0.0.1:9",
  });
  api = client(sys.baseUrl);
  db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
  tenant = await createTenant(sys, api, { plan: "business" });
  table = await createTable(api, tenant, [
    { name: "Name", type: "text" },
    { name: "Age", type: "number" },
  ]);
  [viewer, admin] = await Promise.all([signUp(sys, api), signUp(sys, api)]);
  await addMember(api, tenant.owner, tenant.orgId, viewer, "viewer");
  await addMember(api, tenant.owner, tenant.orgId, admin, "admin");
});

afterAll(async () => {
  await db?.end();
  await sys?.stop();
});

async function create(body: Record<string, unknown>, token = tenant.owner.token, on = table) {
  return api("POST", "/webhook/create", { token, query: q({ table_id: on.tableId }), body });
}

async function created(body: Record<string, unknown>, token = tenant.owner.token, on = table) {
  const response = await create(body, token, on);
  expect(response.status, response.text).toBe(200);
  return response.body.data as { webhook: Record<string, unknown>; secret: string };
}

async function webhookCount(organizationId: number): Promise<number> {
  const { rows } = await db.query(
    "select count(*)::int as n from webhooks.webhook where organization_id = $1",
    [organizationId],
  );
  return rows[0].n;
}

describe("webhook management", () => {
  it("creates a webhook with its secret once, and lists, gets and deletes it", async () => {
    const { webhook, secret } = await created({
      url: "https://hooks.example.com/rowbase",
      events: ["record.deleted", "record.created"],
      where: "(Age,gt,30)",
      description: "  to the CRM ",
    });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhook).toEqual({
      webhook_id: expect.any(Number),
      organization_id: tenant.orgId,
      database_id: table.databaseId,
      table_id: table.tableId,
      url: "https://hooks.example.com/rowbase",
      events: ["record.created", "record.deleted"],
      where: "(Age,gt,30)",
      description: "to the CRM",
      active: true,
      disabled_reason: null,
      consecutive_failures: 0,
      last_delivery_at: null,
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/),
    });
    const id = webhook.webhook_id as number;

    // Any member reads it; nowhere is the secret shown again.
    const got = await api("GET", "/webhook/get", {
      token: viewer.token,
      query: q({ webhook_id: id }),
    });
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual({ webhook });
    const listed = await api("GET", "/webhook/list", {
      token: viewer.token,
      query: q({ table_id: table.tableId }),
    });
    expect(listed.status).toBe(200);
    expect(listed.body.data.webhooks).toContainEqual(webhook);
    expect(listed.text).not.toContain(secret);

    const defaults = await created({ url: "https://hooks.example.com/all" });
    expect(defaults.webhook).toMatchObject({
      events: ["record.created", "record.updated", "record.deleted"],
      where: null,
      description: "",
      active: true,
    });

    const deleted = await api("POST", "/webhook/delete", {
      token: admin.token,
      query: q({ webhook_id: id }),
    });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ message: "success", data: {} });
    expectError(
      await api("GET", "/webhook/get", { token: tenant.owner.token, query: q({ webhook_id: id }) }),
      404,
      "webhook_not_found",
    );
    expectError(
      await api("POST", "/webhook/delete", {
        token: tenant.owner.token,
        query: q({ webhook_id: id }),
      }),
      404,
      "webhook_not_found",
    );
  });

  it("deletes a webhook while one of its deliveries' outcome is being written", async () => {
    // Switched off: no follower queues deliveries of its own.
    const { webhook } = await created({ url: "https://hooks.example.com/busy", active: false });
    const id = webhook.webhook_id as number;
    const { rows } = await db.query(
      `insert into webhooks.delivery (webhook_id, message_id, event, payload, next_attempt_at)
       values ($1, 'msg_busy', 'record.created', '{}', now()) returning id`,
      [id],
    );
    // An outcome as the deliverer writes it: its delivery's row, then its webhook's.
    const outcome = new pg.Client({ connectionString: sys.databaseUrl });
    await outcome.connect();
    try {
      await outcome.query("begin");
      await outcome.query("update webhooks.delivery set attempts = 1 where id = $1", [rows[0].id]);
      const deleting = api("POST", "/webhook/delete", {
        token: tenant.owner.token,
        query: q({ webhook_id: id }),
      });
      // The delete reaches a row the outcome holds and waits there.
      const [{ pid }] = (await outcome.query("select pg_backend_pid() as pid")).rows;
      await expect
        .poll(async () => {
          const waiting = await db.query(
            `select count(*)::int as n from pg_stat_activity
             where wait_event_type = 'Lock' and datname = current_database() and pid <> $1`,
            [pid],
          );
          return waiting.rows[0].n;
        }, EVENTUALLY)
        .toBe(1);
      await outcome.query("update webhooks.webhook set last_delivery_at = now() where id = $1", [
        id,
      ]);
      await outcome.query("commit");
      const deleted = await deleting;
      expect(deleted.status, deleted.text).toBe(200);
    } finally {
      await outcome.end();
    }
    const left = await db.query(
      "select count(*)::int as n from webhooks.delivery where webhook_id = $1",
      [id],
    );
    expect(left.rows[0].n).toBe(0);
    expectError(
      await api("GET", "/webhook/get", { token: tenant.owner.token, query: q({ webhook_id: id }) }),
      404,
      "webhook_not_found",
    );
  });

  it("updates the given keys, switches a webhook off and on, and rotates its secret", async () => {
    const { webhook, secret } = await created({ url: "https://hooks.example.com/a" });
    const id = webhook.webhook_id as number;
    const update = (body: Record<string, unknown>, token = tenant.owner.token) =>
      api("POST", "/webhook/update", { token, query: q({ webhook_id: id }), body });

    const changed = await update({ events: ["record.updated"], where: "(Name,eq,x)" });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.data.webhook).toMatchObject({
      url: "https://hooks.example.com/a",
      events: ["record.updated"],
      where: "(Name,eq,x)",
    });
    const off = await update({ active: false, where: null });
    expect(off.body.data.webhook).toMatchObject({
      active: false,
      disabled_reason: null,
      where: null,
    });
    const on = await update({ active: true, url: "https://hooks.example.com/b" });
    expect(on.body.data.webhook).toMatchObject({
      active: true,
      url: "https://hooks.example.com/b",
    });

    const rotated = await api("POST", "/webhook/rotate_secret", {
      token: admin.token,
      query: q({ webhook_id: id }),
    });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(secret);
    expect(rotated.body.data.webhook.webhook_id).toBe(id);
    // The old secret signs on beside the new one for 24 hours.
    const { rows } = await db.query(
      `select secret, previous_secret,
         previous_secret_expires_at between now() + interval '23 hours 59 minutes'
           and now() + interval '24 hours' as one_day
       from webhooks.webhook where id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({
      secret: rotated.body.data.secret,
      previous_secret: secret,
      one_day: true,
    });
  });

  it("refuses bad bodies with the validation answer, changing nothing", async () => {
    const before = await webhookCount(tenant.orgId);
    const cases: [Record<string, unknown>, string][] = [
      [{}, "url"],
      [{ url: "ftp://example.com/x" }, "url"],
      [{ url: "https://user:pw@example.com/x" }, "url"],
      [{ url: "not a url" }, "url"],
      [{ url: `https://example.com/${"a".repeat(2048)}` }, "url"],
      [{ url: "https://example.com/x", events: [] }, "events"],
      [{ url: "https://example.com/x", events: ["record.moved"] }, "events"],
      [{ url: "https://example.com/x", where: "(Nope,eq,1)" }, "where"],
      [{ url: "https://example.com/x", where: "(Age,gt" }, "where"],
      [{ url: "https://example.com/x", active: "yes" }, "active"],
      [{ url: "https://example.com/x", secret: "whsec_x" }, "secret"],
    ];
    for (const [body, key] of cases) {
      const response = await create(body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.status_code).toBe(400);
      expect(
        response.body.extra.map((item: { key: string }) => item.key.split(".")[0]),
        JSON.stringify(body),
      ).toContain(key);
      expect(
        response.body.extra.every((item: { source: string }) => item.source === "body"),
        JSON.stringify(response.body),
      ).toBe(true);
    }
    const { webhook } = await created({ url: "https://hooks.example.com/c", where: "(Age,gt,1)" });
    const refused = await api("POST", "/webhook/update", {
      token: tenant.owner.token,
      query: q({ webhook_id: webhook.webhook_id as number }),
      body: { where: "(Nope,eq,2)", url: "https://hooks.example.com/d" },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.extra[0]).toMatchObject({ key: "where", source: "body" });
    const kept = await api("GET", "/webhook/get", {
      token: tenant.owner.token,
      query: q({ webhook_id: webhook.webhook_id as number }),
    });
    expect(kept.body.data.webhook).toMatchObject({
      url: "https://hooks.example.com/c",
      where: "(Age,gt,1)",
    });
    expect(await webhookCount(tenant.orgId)).toBe(before + 1);
  });

  it("refuses literal targets webhooks may not reach, unless WEBHOOK_ALLOWED_TARGETS lists them", async () => {
    const before = await webhookCount(tenant.orgId);
    for (const url of [
      "http://127.0.0.1:8080/x",
      "http://10.0.0.1/x",
      "http://169.254.169.254/latest/meta-data",
      "http://100.64.0.1/x",
      "http://[::1]/x",
      "http://[fd00::1]/x",
      "http://[::ffff:192.168.0.1]/x",
      "http://0.0.0.0/x",
    ]) {
      expectError(await create({ url }), 400, "webhook_url_forbidden");
    }
    expect(await webhookCount(tenant.orgId)).toBe(before);
    const allowed = await created({ url: "http://127.0.0.1:9/hook" });
    expectError(
      await api("POST", "/webhook/update", {
        token: tenant.owner.token,
        query: q({ webhook_id: allowed.webhook.webhook_id as number }),
        body: { url: "http://192.168.1.1/x" },
      }),
      400,
      "webhook_url_forbidden",
    );
  });

  it("lets the owner and admins manage, members read, and no one else see anything", async () => {
    const { webhook } = await created({ url: "https://hooks.example.com/roles" }, admin.token);
    const id = webhook.webhook_id as number;
    const before = await webhookCount(tenant.orgId);
    expectError(
      await create({ url: "https://hooks.example.com/v" }, viewer.token),
      403,
      "organization_forbidden",
    );
    for (const [path, body] of [
      ["/webhook/update", { description: "x" }],
      ["/webhook/delete", undefined],
      ["/webhook/rotate_secret", undefined],
    ] as const) {
      expectError(
        await api("POST", path, { token: viewer.token, query: q({ webhook_id: id }), body }),
        403,
        "organization_forbidden",
      );
    }
    expect(await webhookCount(tenant.orgId)).toBe(before);

    // Another organization's member: the same 404 as for nothing at all.
    const stranger = await createTenant(sys, api);
    expectError(
      await create({ url: "https://hooks.example.com/s" }, stranger.owner.token),
      404,
      "table_not_found",
    );
    expectError(
      await api("GET", "/webhook/list", {
        token: stranger.owner.token,
        query: q({ table_id: table.tableId }),
      }),
      404,
      "table_not_found",
    );
    for (const [method, path] of [
      ["GET", "/webhook/get"],
      ["POST", "/webhook/delete"],
      ["POST", "/webhook/rotate_secret"],
    ] as const) {
      expectError(
        await api(method, path, { token: stranger.owner.token, query: q({ webhook_id: id }) }),
        404,
        "webhook_not_found",
      );
    }
    expectError(
      await api("POST", "/webhook/update", {
        token: stranger.owner.token,
        query: q({ webhook_id: id }),
        body: { active: false },
      }),
      404,
      "webhook_not_found",
    );
    expectError(
      await create({ url: "https://hooks.example.com/t" }, tenant.owner.token, {
        ...table,
        tableId: 987_654_321,
      }),
      404,
      "table_not_found",
    );
    // API tokens do not manage webhooks.
    const byToken = await api("GET", "/webhook/list", {
      token: tenant.writeToken,
      query: q({ table_id: table.tableId }),
    });
    expect(byToken.status).toBe(401);
    expect(byToken.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const kept = await api("GET", "/webhook/get", {
      token: tenant.owner.token,
      query: q({ webhook_id: id }),
    });
    expect(kept.body.data.webhook.description).toBe("");
  });

  it("holds an organization to its plan's webhooks, parallel creates included", async () => {
    const small = await createTenant(sys, api);
    const smallTable = await createTable(api, small, [{ name: "Name", type: "text" }]);
    const attempts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        create({ url: `https://hooks.example.com/${i}` }, small.owner.token, smallTable),
      ),
    );
    expect(attempts.filter((r) => r.status === 200)).toHaveLength(5);
    for (const refused of attempts.filter((r) => r.status !== 200)) {
      expectError(refused, 403, "webhook_limit_exceeded");
    }
    expect(await webhookCount(small.orgId)).toBe(5);
    await setPlan(sys, small.orgId, "plus");
    await created({ url: "https://hooks.example.com/6" }, small.owner.token, smallTable);
    expect(await webhookCount(small.orgId)).toBe(6);
  });

  it("audits creates, updates and deletes without the secret", async () => {
    const own = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const { webhook, secret } = await created(
      { url: "https://hooks.example.com/audit", description: "first" },
      tenant.owner.token,
      own,
    );
    const id = webhook.webhook_id as number;
    await api("POST", "/webhook/update", {
      token: tenant.owner.token,
      query: q({ webhook_id: id }),
      body: { description: "second" },
    });
    await api("POST", "/webhook/delete", {
      token: tenant.owner.token,
      query: q({ webhook_id: id }),
    });
    const events = async () => {
      const response = await api("GET", "/audit/list", {
        token: tenant.owner.token,
        query: q({ table_id: own.tableId }),
      });
      expect(response.status).toBe(200);
      return (response.body.data.events as { action: string }[]).filter((event) =>
        event.action.startsWith("webhook."),
      ) as {
        action: string;
        target: unknown;
        changes: { key: string; old?: unknown; new?: unknown }[];
        text?: string;
      }[];
    };
    await expect
      .poll(async () => (await events()).map((e) => e.action), EVENTUALLY)
      .toEqual(["webhook.deleted", "webhook.updated", "webhook.created"]);
    const [gone, updated, made] = await events();
    for (const event of [gone, updated, made]) {
      expect(event!.target).toEqual({ type: "webhook", id });
      expect(JSON.stringify(event)).not.toContain(secret);
      expect(JSON.stringify(event)).not.toContain("whsec_");
    }
    expect(made!.changes).toContainEqual(
      expect.objectContaining({ key: "url", new: "https://hooks.example.com/audit" }),
    );
    expect(updated!.changes).toEqual([{ key: "description", old: "first", new: "second" }]);
    expect(gone!.changes).toContainEqual(
      expect.objectContaining({ key: "description", old: "second" }),
    );
  });
});
