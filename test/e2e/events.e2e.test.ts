import { randomBytes } from "node:crypto";
import { access } from "node:fs/promises";
import path from "node:path";
import { RELAXED_RATE_LIMITS, startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { type ApiResponse, client } from "./support/http.js";
import { addMember, createOrg, expectError, q } from "./support/organizations.js";
import {
  createDatabase,
  createTable,
  createTenant,
  ISO_MILLIS,
  RECORD_TEST_RATE_LIMITS,
  setPlan,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * Events through the whole system: the audit log fed by every service's audit events,
 * the API statistics fed by the gateway's usage events, the monthly counters rebuilt
 * from them when Redis loses its keys, and the deletion sagas that clear what hangs off a deleted
 * organization, database, table, field or record in every service, bytes on disk included.
 * Events are asynchronous: everything they feed is polled for (up to 10 s).
 */

type Api = ReturnType<typeof client>;

let sys: TestSystem;
let api: Api;
let db: pg.Client;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await sys?.stop();
});

const EVENTUALLY = { timeout: 10_000, interval: 200 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface AuditChange {
  key: string;
  label?: string;
  old: unknown;
  new: unknown;
}

interface AuditEvent {
  event_id: string;
  at: string;
  organization_id: number;
  database_id?: number;
  table_id?: number;
  actor: { type: string; id: number };
  action: string;
  target: { type: string; id: number; field_id?: number };
  changes: AuditChange[];
}

interface AuditPage {
  events: AuditEvent[];
  total: number;
}

type Scope = { organization_id: number } | { database_id: number } | { table_id: number };

async function auditResponse(
  token: string,
  scope: Scope,
  params: Record<string, string | number> = {},
): Promise<ApiResponse> {
  return api("GET", "/audit/list", { token, query: q({ ...scope, ...params }) });
}

async function audit(
  token: string,
  scope: Scope,
  params: Record<string, string | number> = {},
): Promise<AuditPage> {
  const response = await auditResponse(token, scope, params);
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data as AuditPage;
}

/** The scope's events of one action, once `count` of them are there. */
async function eventually(
  token: string,
  scope: Scope,
  action: string,
  count: number,
): Promise<AuditEvent[]> {
  await expect
    .poll(async () => (await audit(token, scope, { action })).total, EVENTUALLY)
    .toBe(count);
  return (await audit(token, scope, { action })).events;
}

/** An API token with its id (the support helper keeps only the secret). */
async function apiToken(owner: SignedUpUser, orgId: number, name: string, access: string) {
  const response = await api("POST", "/api_token/create", {
    token: owner.token,
    query: q({ organization_id: orgId }),
    body: { name, access },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return { id: response.body.data.api_token.token_id as number, secret: response.body.data.token };
}

async function createRecord(token: string, table: TestTable, data: Record<string, unknown>) {
  const response = await api("POST", v1(table.databaseId, table.tableId).records, {
    token,
    body: { data },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.record.row_id as number;
}

async function updateRecord(
  token: string,
  table: TestTable,
  rowId: number,
  data: Record<string, unknown>,
) {
  const response = await api("PATCH", v1(table.databaseId, table.tableId).record(rowId), {
    token,
    body: { data },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
}

async function post(token: string, route: string, query: Record<string, number>, body?: unknown) {
  const response = await api("POST", route, { token, query: q(query), body });
  expect(response.status, `${route}: ${JSON.stringify(response.body)}`).toBe(200);
  return response.body.data;
}

/** Uploads through the gateway; answers the stored file's storage key and its path on disk. */
async function upload(token: string, rowId: number, fieldId: number, bytes: Buffer) {
  const form = new FormData();
  form.append("file", new Blob([bytes]), `f-${rowId}-${fieldId}.bin`);
  const response = await fetch(
    new URL(`/file/upload?row_id=${rowId}&field_id=${fieldId}`, sys.baseUrl),
    { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form },
  );
  expect(response.status, await response.clone().text()).toBe(200);
  const { rows } = await db.query<{ storage_key: string }>(
    "select storage_key from files.file where row_id = $1 and field_id = $2 and deleted_at is null",
    [rowId, fieldId],
  );
  const key = rows[0]!.storage_key;
  return { key, path: path.join(sys.filesDir, key.slice(0, 2), key) };
}

async function onDisk(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await db.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}

/** `count` of a statement on `record`: none once the records service's upgrade dropped it. */
async function countInRecord(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await db.query("select to_regclass('records.record') is not null as kept");
  return rows[0]?.kept ? count(sql, params) : 0;
}

/**
 * The records an organization stores, counted row by row: in every table of its schema
 * (`org_<id>`, a user table per table), and in `record` for tables still stored there (while
 * the upgrade has not dropped it).
 */
async function organizationRecords(orgId: number): Promise<number> {
  const { rows: tables } = await db.query<{ relation: string }>(
    `select format('%I.%I', n.nspname, c.relname) as relation
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relkind = 'r'`,
    [`org_${orgId}`],
  );
  let n = await countInRecord(
    "select count(*) as n from records.record where organization_id = $1",
    [orgId],
  );
  for (const { relation } of tables) n += await count(`select count(*) as n from ${relation}`, []);
  return n;
}

/**
 * The records of a table (in its user table, none once that is dropped, and in `record`), or
 * only those that hold a value in `fieldId`'s column (none once the column is dropped).
 */
async function tableRecords(orgId: number, tableId: number, fieldId?: number): Promise<number> {
  const condition = fieldId === undefined ? "true" : `f_${fieldId} is not null`;
  const legacy = await countInRecord(
    `select count(*) as n from records.record where table_id = $1 ${fieldId === undefined ? "" : "and data ? $2"}`,
    fieldId === undefined ? [tableId] : [tableId, String(fieldId)],
  );
  try {
    return (
      legacy +
      (await count(`select count(*) as n from org_${orgId}.t_${tableId} where ${condition}`, []))
    );
  } catch (error) {
    // undefined_table, undefined_column: dropped, with its values.
    if (["42P01", "42703"].includes((error as { code?: string }).code ?? "")) return legacy;
    throw error;
  }
}

const todayUtc = () => new Date().toISOString().slice(0, 10);

describe("the audit log", () => {
  it("shows a record update at table, database and organization level, newest first", async () => {
    const tenant = await createTenant(sys, api);
    const writer = await apiToken(tenant.owner, tenant.orgId, "Writer", "read_write");
    const table = await createTable(api, tenant, [
      { name: "Name", type: "text" },
      { name: "Score", type: "number" },
    ]);
    const [nameId, scoreId] = [table.id("Name"), table.id("Score")];
    const rowId = await createRecord(writer.secret, table, { Name: "Ada", Score: 1 });
    await updateRecord(writer.secret, table, rowId, { Name: "Grace", Score: 2 });
    // The field's name at the time labels the change: renamed, the next change says so.
    await post(tenant.owner.token, "/field/update", { field_id: Number(nameId) }, { name: "Who" });
    await updateRecord(tenant.owner.token, table, rowId, { [nameId]: "Hopper" });

    const updates = await eventually(
      tenant.owner.token,
      { table_id: table.tableId },
      "record.updated",
      2,
    );
    const [byOwner, byToken] = updates;
    expect(byToken).toEqual({
      event_id: expect.any(String),
      at: expect.stringMatching(ISO_MILLIS),
      organization_id: tenant.orgId,
      database_id: tenant.databaseId,
      table_id: table.tableId,
      actor: { type: "api_token", id: writer.id },
      action: "record.updated",
      target: { type: "record", id: rowId },
      changes: [
        { key: nameId, label: "Name", old: "Ada", new: "Grace" },
        { key: scoreId, label: "Score", old: 1, new: 2 },
      ],
    });
    expect(byOwner).toMatchObject({
      actor: { type: "user", id: tenant.owner.id },
      target: { type: "record", id: rowId },
      changes: [{ key: nameId, label: "Who", old: "Grace", new: "Hopper" }],
    });
    expect(byOwner!.at >= byToken!.at).toBe(true);

    const created = await eventually(
      tenant.owner.token,
      { table_id: table.tableId },
      "record.created",
      1,
    );
    expect(created[0]).toMatchObject({
      actor: { type: "api_token", id: writer.id },
      target: { type: "record", id: rowId },
      changes: expect.arrayContaining([
        { key: nameId, label: "Name", old: null, new: "Ada" },
        { key: scoreId, label: "Score", old: null, new: 1 },
      ]),
    });

    // The same events, with the same ids, at database and organization level.
    for (const scope of [
      { database_id: tenant.databaseId },
      { organization_id: tenant.orgId },
    ] as Scope[]) {
      const there = await audit(tenant.owner.token, scope, { action: "record.updated" });
      expect(there).toEqual({ events: updates, total: 2 });
    }

    // The whole table log, newest first, in pages that add up to it.
    const all = await audit(tenant.owner.token, { table_id: table.tableId });
    expect(all.events.map((e) => e.action)).toEqual([
      "record.updated",
      "field.updated",
      "record.updated",
      "record.created",
      ...all.events.slice(4).map(() => expect.stringMatching(/^(table|field)\.created$/)),
    ]);
    const times = all.events.map((e) => e.at);
    expect([...times].sort().reverse()).toEqual(times);
    const pages: AuditEvent[] = [];
    for (let offset = 0; offset < all.total; offset += 2) {
      const page = await audit(
        tenant.owner.token,
        { table_id: table.tableId },
        {
          limit: 2,
          offset,
        },
      );
      expect(page.total).toBe(all.total);
      expect(page.events.length).toBeLessThanOrEqual(2);
      pages.push(...page.events);
    }
    expect(pages).toEqual(all.events);
    expect(
      await audit(tenant.owner.token, { table_id: table.tableId }, { offset: all.total }),
    ).toEqual({ events: [], total: all.total });

    // since is inclusive, until exclusive.
    const newest = all.events[0]!;
    const since = await audit(
      tenant.owner.token,
      { table_id: table.tableId },
      { since: newest.at },
    );
    expect(since.events.map((e) => e.event_id)).toContain(newest.event_id);
    expect(since.events.every((e) => e.at >= newest.at)).toBe(true);
    const until = await audit(
      tenant.owner.token,
      { table_id: table.tableId },
      { until: newest.at },
    );
    expect(until.events.map((e) => e.event_id)).not.toContain(newest.event_id);
    expect(until.total).toBe(all.total - since.total);

    // A viewer reads it too.
    const viewer = await signUp(sys, api);
    await addMember(api, tenant.owner, tenant.orgId, viewer, "viewer");
    expect((await audit(viewer.token, { table_id: table.tableId })).total).toBe(all.total);
  });

  it("shows field changes with the property names as keys", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const field = await post(
      tenant.owner.token,
      "/field/create",
      { table_id: table.tableId },
      { name: "Score", type: "number", options: { decimals: 1 } },
    );
    const fieldId = field.field.field_id as number;
    await post(tenant.owner.token, "/field/update", { field_id: fieldId }, { name: "Points" });
    await post(tenant.owner.token, "/field/delete", { field_id: fieldId });

    const scope = { table_id: table.tableId };
    const [createdEvent] = await eventually(tenant.owner.token, scope, "field.created", 2);
    const [updated] = await eventually(tenant.owner.token, scope, "field.updated", 1);
    const [deleted] = await eventually(tenant.owner.token, scope, "field.deleted", 1);
    expect(createdEvent).toMatchObject({
      organization_id: tenant.orgId,
      database_id: tenant.databaseId,
      table_id: table.tableId,
      actor: { type: "user", id: tenant.owner.id },
      target: { type: "field", id: fieldId },
    });
    expect(createdEvent!.changes).toEqual(
      expect.arrayContaining([
        { key: "name", old: null, new: "Score" },
        { key: "type", old: null, new: "number" },
      ]),
    );
    expect(updated).toMatchObject({
      actor: { type: "user", id: tenant.owner.id },
      target: { type: "field", id: fieldId },
      changes: [{ key: "name", old: "Score", new: "Points" }],
    });
    // Not a record value: no label.
    expect(Object.keys(updated!.changes[0]!)).toEqual(["key", "old", "new"]);
    expect(deleted).toMatchObject({ target: { type: "field", id: fieldId } });
    expect(deleted!.changes).toEqual(
      expect.arrayContaining([{ key: "name", old: "Points", new: null }]),
    );
    for (const wider of [
      { database_id: tenant.databaseId },
      { organization_id: tenant.orgId },
    ] as Scope[]) {
      const there = await audit(tenant.owner.token, wider, { action: "field.updated" });
      expect(there.events).toEqual([updated]);
    }
  });

  it("shows member changes at organization level, to members only", async () => {
    const owner = await signUp(sys, api);
    const orgId = (await createOrg(api, owner)).organization_id;
    const member = await signUp(sys, api);
    const memberId = await addMember(api, owner, orgId, member, "viewer");
    await post(
      owner.token,
      "/organization/member/update",
      {
        organization_id: orgId,
        member_id: memberId,
      },
      { role: "editor" },
    );

    const scope = { organization_id: orgId };
    const [added] = await eventually(member.token, scope, "member.added", 2);
    expect(added).toMatchObject({
      organization_id: orgId,
      actor: { type: "user", id: member.id },
      target: { type: "member", id: memberId },
    });
    expect(added!.changes).toEqual(
      expect.arrayContaining([
        { key: "user_id", old: null, new: member.id },
        { key: "role", old: null, new: "viewer" },
      ]),
    );
    const [updated] = await eventually(member.token, scope, "member.updated", 1);
    expect(updated).toEqual({
      event_id: expect.any(String),
      at: expect.stringMatching(ISO_MILLIS),
      organization_id: orgId,
      actor: { type: "user", id: owner.id },
      action: "member.updated",
      target: { type: "member", id: memberId },
      changes: [{ key: "role", old: "viewer", new: "editor" }],
    });

    await post(owner.token, "/organization/member/remove", {
      organization_id: orgId,
      member_id: memberId,
    });
    const [removed] = await eventually(owner.token, scope, "member.removed", 1);
    expect(removed).toMatchObject({
      actor: { type: "user", id: owner.id },
      target: { type: "member", id: memberId },
    });
    expect(removed!.changes).toEqual(
      expect.arrayContaining([{ key: "role", old: "editor", new: null }]),
    );
    // The removed member's access ended with the membership.
    expectError(await auditResponse(member.token, scope), 404, "organization_not_found");
  });

  it("answers 404 to a non-member for every scope, and refuses anything but one scope", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const outsider = await signUp(sys, api);
    await createOrg(api, outsider);
    const cases: [Scope, string][] = [
      [{ organization_id: tenant.orgId }, "organization_not_found"],
      [{ database_id: tenant.databaseId }, "database_not_found"],
      [{ table_id: table.tableId }, "table_not_found"],
      [{ organization_id: 9_000_000_000 }, "organization_not_found"],
      [{ database_id: 9_000_000_000 }, "database_not_found"],
      [{ table_id: 9_000_000_000 }, "table_not_found"],
    ];
    for (const [scope, message] of cases) {
      expectError(await auditResponse(outsider.token, scope), 404, message);
    }
    // The owner sees them (a database without events yet answers an empty page, not a 404).
    await expect
      .poll(
        async () => (await auditResponse(tenant.owner.token, { table_id: table.tableId })).status,
      )
      .toBe(200);
    for (const [scope] of cases.slice(0, 3)) {
      expect((await auditResponse(tenant.owner.token, scope)).status).toBe(200);
    }
    // An API token is not a session.
    expectError(
      await auditResponse(tenant.readToken, { organization_id: tenant.orgId }),
      401,
      "unauthorized",
    );

    const none = await api("GET", "/audit/list", { token: tenant.owner.token });
    expect(none.status).toBe(400);
    expect(none.body.extra.map((item: { key: string }) => item.key)).toEqual([
      "organization_id",
      "database_id",
      "table_id",
    ]);
    const two = await api("GET", "/audit/list", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId, table_id: table.tableId }),
    });
    expect(two.status).toBe(400);
    expect(two.body).toEqual({
      status_code: 400,
      detail: "Validation failed for GET /audit/list",
      extra: [
        {
          key: "organization_id",
          message: "give only one of organization_id, database_id and table_id",
          source: "query",
          code: "invalid_value",
        },
        {
          key: "table_id",
          message: "give only one of organization_id, database_id and table_id",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    const badAction = await auditResponse(
      tenant.owner.token,
      { organization_id: tenant.orgId },
      { action: "drop table" },
    );
    expect(badAction.status).toBe(400);
    expect(badAction.body.extra).toMatchObject([{ key: "action", source: "query" }]);
  });
});

interface ApiStats {
  period: { from: string; to: string };
  api_calls: number;
  transfer_bytes: number;
  daily: { date: string; api_calls: number; transfer_bytes: number }[];
  by_token: { token_id: number; name: string; api_calls: number }[];
}

async function apiStats(
  owner: SignedUpUser,
  orgId: number,
  params: Record<string, string> = {},
): Promise<ApiStats> {
  const response = await api("GET", "/organization/api_stats", {
    token: owner.token,
    query: q({ organization_id: orgId, ...params }),
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data as ApiStats;
}

/** An enterprise plan with these many API calls a month and generous everything else. */
async function allowCalls(orgId: number, calls: number) {
  await setPlan(
    sys,
    orgId,
    "enterprise",
    "--records=1000",
    `--api-calls-per-month=${calls}`,
    "--file-storage-bytes=100000000",
    "--transfer-bytes-per-month=1000000000",
    "--members=3",
    "--max-file-bytes=10000000",
  );
}

const month = () => new Date().toISOString().slice(0, 7);
/** The gateway does not rebuild counters in a month's first two minutes (clock skew). */
const monthJustBegan = () =>
  Date.now() - Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1) < 3 * 60_000;

describe("api_stats", () => {
  it("counts exactly the calls made, per day and per token, and not the refused ones", async () => {
    const owner = await signUp(sys, api);
    const orgId = (await createOrg(api, owner)).organization_id;
    await allowCalls(orgId, 12);
    const alpha = await apiToken(owner, orgId, "Alpha", "read_write");
    const beta = await apiToken(owner, orgId, "Beta", "read");
    const tenant: Tenant = {
      owner,
      orgId,
      writeToken: alpha.secret,
      readToken: beta.secret,
      databaseId: await createDatabase(api, owner.token, orgId),
    };
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const p = v1(tenant.databaseId, table.tableId);
    const call = (token: string) => api("GET", p.records, { token });

    // 6 with Alpha (one a write), 2 with Beta, 2 with the owner's session: 10.
    const rowId = await createRecord(alpha.secret, table, { Name: "one" });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(alpha.secret)).status);
    for (let i = 0; i < 2; i++) statuses.push((await call(beta.secret)).status);
    statuses.push(
      (
        await api("GET", "/public/record/get", {
          token: owner.token,
          query: q({ table_id: table.tableId, row_id: rowId }),
        })
      ).status,
    );
    statuses.push((await call(owner.token)).status);
    // 5 more with Beta: 2 fit the allowance of 12, 3 are refused and not counted.
    for (let i = 0; i < 5; i++) statuses.push((await call(beta.secret)).status);
    expect(statuses).toEqual([...Array(11).fill(200), 429, 429, 429]);

    await expect.poll(async () => (await apiStats(owner, orgId)).api_calls, EVENTUALLY).toBe(12);
    await sleep(1000);
    const stats = await apiStats(owner, orgId);
    const today = todayUtc();
    const first = `${today.slice(0, 8)}01`;
    expect(stats).toEqual({
      period: { from: first, to: today },
      api_calls: 12,
      transfer_bytes: 0,
      daily: expect.any(Array),
      by_token: [
        { token_id: alpha.id, name: "Alpha", api_calls: 6 },
        { token_id: beta.id, name: "Beta", api_calls: 4 },
      ],
    });
    expect(stats.daily).toHaveLength(Number(today.slice(8)));
    expect(stats.daily[0]!.date).toBe(first);
    expect(stats.daily.at(-1)).toEqual({ date: today, api_calls: 12, transfer_bytes: 0 });
    expect(stats.daily.slice(0, -1).every((d) => d.api_calls === 0)).toBe(true);

    // One day asked for explicitly; a period that ends before the organization existed.
    const oneDay = await apiStats(owner, orgId, { from: today, to: today });
    expect(oneDay).toMatchObject({
      period: { from: today, to: today },
      api_calls: 12,
      daily: [{ date: today, api_calls: 12, transfer_bytes: 0 }],
    });
    const before = await apiStats(owner, orgId, { from: "2025-01-01", to: "2025-01-31" });
    expect(before).toMatchObject({ api_calls: 0, by_token: [] });
    expect(before.daily).toHaveLength(31);

    // The limits agree, and other people learn nothing.
    const limits = await api("GET", "/organization/limits", {
      token: owner.token,
      query: q({ organization_id: orgId }),
    });
    expect(limits.body.data.usage.api_calls_this_month).toBe(12);
    const outsider = await signUp(sys, api);
    expectError(
      await api("GET", "/organization/api_stats", {
        token: outsider.token,
        query: q({ organization_id: orgId }),
      }),
      404,
      "organization_not_found",
    );
    const reversed = await api("GET", "/organization/api_stats", {
      token: owner.token,
      query: q({ organization_id: orgId, from: today, to: "2025-01-01" }),
    });
    expect(reversed.status, JSON.stringify(reversed.body)).toBe(400);
    expect(reversed.body.extra[0]).toMatchObject({ source: "query" });
    expect(["from", "to"]).toContain(reversed.body.extra[0].key);

    // Redis loses the month's counter: it is rebuilt from the 12 stored calls, so the spent
    // allowance stays spent instead of starting over.
    if (!monthJustBegan()) {
      const key = `api-calls:${orgId}:${month()}`;
      expect(await sys.system.cache.get(key)).toBe("12");
      await sys.system.cache.del(key);
      const refused = await call(alpha.secret);
      expectError(refused, 429, "api_call_limit_exceeded");
      expect(await sys.system.cache.get(key)).toBe("12");
    }
  });

  it("does not count calls refused by the per-token rate limit (429 too_many_requests)", async () => {
    const limited = await startTestSystem({
      RATE_LIMITS: `${RELAXED_RATE_LIMITS},org_write_user=1000/60,records_token=4/60`,
    });
    try {
      const limitedApi = client(limited.baseUrl);
      const tenant = await createTenant(limited, limitedApi);
      const table = await createTable(limitedApi, tenant, [{ name: "Name", type: "text" }]);
      const p = v1(tenant.databaseId, table.tableId);
      const responses: ApiResponse[] = [];
      for (let i = 0; i < 7; i++) {
        responses.push(await limitedApi("GET", p.records, { token: tenant.readToken }));
      }
      expect(responses.map((response) => response.status)).toEqual([
        200, 200, 200, 200, 429, 429, 429,
      ]);
      // Every answer says the policy and what is left, so a client can slow down before a 429.
      for (const [i, response] of responses.entries()) {
        expect(response.headers.get("ratelimit-policy")).toBe('"records_token";q=4;w=60');
        const left = /^"records_token";r=(\d+);t=(\d+)$/.exec(
          response.headers.get("ratelimit") ?? "",
        );
        expect(Number(left?.[1]), response.headers.get("ratelimit") ?? "").toBe(Math.max(0, 3 - i));
        expect(Number(left?.[2])).toBeGreaterThan(0);
      }
      const throttled = responses[4]!;
      expect(throttled.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
      const stats = async () => {
        const response = await limitedApi("GET", "/organization/api_stats", {
          token: tenant.owner.token,
          query: q({ organization_id: tenant.orgId }),
        });
        expect(response.status).toBe(200);
        return response.body.data as ApiStats;
      };
      await expect.poll(async () => (await stats()).api_calls, EVENTUALLY).toBe(4);
      await sleep(500);
      expect((await stats()).by_token).toEqual([
        { token_id: expect.any(Number), name: expect.any(String), api_calls: 4 },
      ]);
      expect((await stats()).api_calls).toBe(4);
    } finally {
      await limited.stop();
    }
  });

  it.skipIf(monthJustBegan())(
    "rebuilds lost Redis counters from the stored usage: stored + this call",
    async () => {
      const tenant = await createTenant(sys, api);
      const table = await createTable(api, tenant, [{ name: "Doc", type: "file" }]);
      const p = v1(tenant.databaseId, table.tableId);
      const rowId = await createRecord(tenant.writeToken, table, {});
      for (let i = 0; i < 3; i++) {
        expect((await api("GET", p.records, { token: tenant.readToken })).status).toBe(200);
      }
      const bytes = randomBytes(3000);
      await upload(tenant.writeToken, rowId, table.f.Doc!.field_id, bytes);
      // 1 create, 3 lists, 1 upload; 3000 bytes moved.
      await expect
        .poll(async () => {
          const stats = await apiStats(tenant.owner, tenant.orgId);
          return [stats.api_calls, stats.transfer_bytes];
        }, EVENTUALLY)
        .toEqual([5, 3000]);

      const calls = `api-calls:${tenant.orgId}:${month()}`;
      const transfer = `transfer:${tenant.orgId}:${month()}`;
      expect(await sys.system.cache.get(calls)).toBe("5");
      await sys.system.cache.del(calls, transfer);
      expect((await api("GET", p.records, { token: tenant.readToken })).status).toBe(200);
      expect(await sys.system.cache.get(calls)).toBe("6");
      // The transfer counter is rebuilt by the next transfer: stored bytes + the served ones.
      const served = await fetch(
        new URL(`/file/serve?row_id=${rowId}&field_id=${table.f.Doc!.field_id}`, sys.baseUrl),
        { headers: { authorization: `Bearer ${tenant.readToken}` } },
      );
      expect(served.status).toBe(200);
      expect(Buffer.from(await served.arrayBuffer())).toEqual(bytes);
      await expect.poll(() => sys.system.cache.get(transfer), EVENTUALLY).toBe("6000");
      expect(await sys.system.cache.get(calls)).toBe("7");
      await expect
        .poll(async () => {
          const stats = await apiStats(tenant.owner, tenant.orgId);
          return [stats.api_calls, stats.transfer_bytes];
        }, EVENTUALLY)
        .toEqual([7, 6000]);
    },
  );
});

/** What an organization holds in each service, counted in their schemas. */
async function holdings(orgId: number, tableIds: number[], fieldIds: number[]) {
  return {
    organizations: await count(
      "select count(*) as n from organization.organizations where id = $1",
      [orgId],
    ),
    api_tokens: await count(
      "select count(*) as n from organization.api_tokens where organization_id = $1",
      [orgId],
    ),
    databases: await count(
      "select count(*) as n from catalog.databases where organization_id = $1",
      [orgId],
    ),
    tables: await count("select count(*) as n from catalog.tables where id = any($1)", [tableIds]),
    fields: await count("select count(*) as n from catalog.fields where id = any($1)", [fieldIds]),
    records: await organizationRecords(orgId),
    files: await count("select count(*) as n from files.file where organization_id = $1", [orgId]),
  };
}

async function filesOnDisk(paths: string[]): Promise<number> {
  let n = 0;
  for (const file of paths) if (await onDisk(file)) n += 1;
  return n;
}

/** A table with a text and a file field, `rows` records, and a file in each. */
async function filledTable(tenant: Tenant, databaseId = tenant.databaseId, rows = 2) {
  const table = await createTable(
    api,
    tenant,
    [
      { name: "Title", type: "text" },
      { name: "Doc", type: "file" },
    ],
    databaseId,
  );
  const rowIds: number[] = [];
  const paths: string[] = [];
  for (let i = 0; i < rows; i++) {
    const rowId = await createRecord(tenant.writeToken, table, { Title: `r${i}` });
    rowIds.push(rowId);
    paths.push(
      (await upload(tenant.writeToken, rowId, table.f.Doc!.field_id, randomBytes(500))).path,
    );
  }
  return { table, rowIds, paths, fieldIds: table.fields.map((f) => f.field_id) };
}

describe("deleting", () => {
  it("an organization removes its databases, tables, fields, records and files in every service", async () => {
    const tenant = await createTenant(sys, api);
    const other = await createDatabase(api, tenant.owner.token, tenant.orgId);
    const one = await filledTable(tenant);
    const two = await filledTable(tenant, other);
    const tableIds = [one.table.tableId, two.table.tableId];
    const fieldIds = [...one.fieldIds, ...two.fieldIds];
    const paths = [...one.paths, ...two.paths];
    expect(await holdings(tenant.orgId, tableIds, fieldIds)).toEqual({
      organizations: 1,
      api_tokens: 2,
      databases: 2,
      tables: 2,
      fields: 4,
      records: 4,
      files: 4,
    });
    expect(await filesOnDisk(paths)).toBe(4);
    // A neighbour's data stays.
    const neighbour = await createTenant(sys, api);
    const theirs = await filledTable(neighbour, neighbour.databaseId, 1);

    await post(tenant.owner.token, "/organization/delete", { organization_id: tenant.orgId });
    await expect
      .poll(() => holdings(tenant.orgId, tableIds, fieldIds), EVENTUALLY)
      .toEqual({
        organizations: 0,
        api_tokens: 0,
        databases: 0,
        tables: 0,
        fields: 0,
        records: 0,
        files: 0,
      });
    await expect.poll(() => filesOnDisk(paths), EVENTUALLY).toBe(0);
    // The organization's tokens stop working with it.
    await expect
      .poll(
        async () =>
          (
            await api("GET", v1(one.table.databaseId, one.table.tableId).records, {
              token: tenant.readToken,
            })
          ).status,
        EVENTUALLY,
      )
      .toBe(401);
    expect(await holdings(neighbour.orgId, [theirs.table.tableId], theirs.fieldIds)).toMatchObject({
      databases: 1,
      tables: 1,
      fields: 2,
      records: 1,
      files: 1,
    });
    expect(await filesOnDisk(theirs.paths)).toBe(1);
  });

  it("a database removes its tables, their fields, records and files", async () => {
    const tenant = await createTenant(sys, api);
    const doomed = await createDatabase(api, tenant.owner.token, tenant.orgId);
    const gone = await filledTable(tenant, doomed);
    const kept = await filledTable(tenant, tenant.databaseId, 1);
    await post(tenant.owner.token, "/database/delete", { database_id: doomed });
    const left = async () => ({
      databases: await count("select count(*) as n from catalog.databases where id = $1", [doomed]),
      tables: await count("select count(*) as n from catalog.tables where id = $1", [
        gone.table.tableId,
      ]),
      fields: await count("select count(*) as n from catalog.fields where id = any($1)", [
        gone.fieldIds,
      ]),
      records: await tableRecords(tenant.orgId, gone.table.tableId),
      files: await count("select count(*) as n from files.file where table_id = $1", [
        gone.table.tableId,
      ]),
      onDisk: await filesOnDisk(gone.paths),
    });
    await expect
      .poll(left, EVENTUALLY)
      .toEqual({ databases: 0, tables: 0, fields: 0, records: 0, files: 0, onDisk: 0 });
    expect(await holdings(tenant.orgId, [kept.table.tableId], kept.fieldIds)).toMatchObject({
      databases: 1,
      tables: 1,
      fields: 2,
      records: 1,
      files: 1,
    });
    expect(await filesOnDisk(kept.paths)).toBe(1);
    // The organization's record count gave the deleted records back.
    await expect
      .poll(async () => {
        const limits = await api("GET", "/organization/limits", {
          token: tenant.owner.token,
          query: q({ organization_id: tenant.orgId }),
        });
        return limits.body.data.usage.records;
      }, EVENTUALLY)
      .toBe(1);
  });

  it("a table removes its records and files; a field its values and files", async () => {
    const tenant = await createTenant(sys, api);
    const doomed = await filledTable(tenant);
    const kept = await filledTable(tenant);
    await post(tenant.owner.token, "/table/delete", { table_id: doomed.table.tableId });
    await expect
      .poll(
        async () => ({
          records: await tableRecords(tenant.orgId, doomed.table.tableId),
          files: await count("select count(*) as n from files.file where table_id = $1", [
            doomed.table.tableId,
          ]),
          fields: await count("select count(*) as n from catalog.fields where table_id = $1", [
            doomed.table.tableId,
          ]),
          onDisk: await filesOnDisk(doomed.paths),
        }),
        EVENTUALLY,
      )
      .toEqual({ records: 0, files: 0, fields: 0, onDisk: 0 });

    // The text field's values leave every record; the file field's files leave the disk.
    const { table } = kept;
    expect(await tableRecords(tenant.orgId, table.tableId, table.f.Title!.field_id)).toBe(2);
    await post(tenant.owner.token, "/field/delete", { field_id: table.f.Title!.field_id });
    await post(tenant.owner.token, "/field/delete", { field_id: table.f.Doc!.field_id });
    await expect
      .poll(
        async () => ({
          values: await tableRecords(tenant.orgId, table.tableId, table.f.Title!.field_id),
          records: await tableRecords(tenant.orgId, table.tableId),
          files: await count("select count(*) as n from files.file where field_id = $1", [
            table.f.Doc!.field_id,
          ]),
          onDisk: await filesOnDisk(kept.paths),
        }),
        EVENTUALLY,
      )
      .toEqual({ values: 0, records: 2, files: 0, onDisk: 0 });
  });

  it("a record takes its files with it, bytes on disk included", async () => {
    const tenant = await createTenant(sys, api);
    const { table, rowIds, paths } = await filledTable(tenant);
    const [doomed, kept] = rowIds as [number, number];
    const removed = await api("DELETE", v1(table.databaseId, table.tableId).record(doomed), {
      token: tenant.writeToken,
    });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    const files = () =>
      db
        .query<{ row_id: string; deleted: boolean }>(
          "select row_id, deleted_at is not null as deleted from files.file where table_id = $1 order by row_id",
          [table.tableId],
        )
        .then(({ rows }) => rows.map((row) => [Number(row.row_id), row.deleted]));
    await expect.poll(files, EVENTUALLY).toEqual([[kept, false]]);
    await expect.poll(() => filesOnDisk(paths), EVENTUALLY).toBe(1);
    expect(await onDisk(paths[1]!)).toBe(true);
    const serve = await api("GET", "/file/serve", {
      token: tenant.readToken,
      query: q({ row_id: doomed, field_id: table.f.Doc!.field_id }),
    });
    expect(serve.status).toBe(404);
  });
});
