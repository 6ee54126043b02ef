import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
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
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * GET /audit/list against the running system: what the gateway asks the organization
 * service for (the scope, the page, the time bounds in any offset, the action) and how it
 * presents the stored events, and how database and table scopes are resolved, from the stored
 * events or the real catalog, for members and for everyone else. Events are asynchronous:
 * everything they feed is polled for. (Test/e2e/events.e2e.test.ts follows each service's
 * events into the log.)
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

const EVENTUALLY = { timeout: 10_000, interval: 100 };

interface AuditEvent {
  event_id: string;
  at: string;
  organization_id: number;
  database_id?: number;
  table_id?: number;
  actor: { type: string; id: number };
  action: string;
  target: { type: string; id: number; field_id?: number };
  changes: { key: string; label?: string; old: unknown; new: unknown }[];
}

/** Orders values by their JSON text. */
const byJson = (a: unknown, b: unknown) => JSON.stringify(a).localeCompare(JSON.stringify(b));

interface AuditPage {
  events: AuditEvent[];
  total: number;
}

type Scope = { organization_id: number } | { database_id: number } | { table_id: number };

function auditResponse(
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
  expect(response.body.message).toBe("success");
  return response.body.data as AuditPage;
}

/** Waits until the scope holds `count` events of `action`. */
async function eventually(token: string, scope: Scope, action: string, count: number) {
  await expect
    .poll(async () => (await audit(token, scope, { action })).total, EVENTUALLY)
    .toBe(count);
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

/** The same instant written with a +01:00 offset: `2026-11-21T10:15:00.500Z` is 11:15:00.500+01:00. */
function plusOneHour(iso: string): string {
  return `${new Date(new Date(iso).getTime() + 3_600_000).toISOString().slice(0, -1)}+01:00`;
}

/** An API token with its id. */
async function apiToken(owner: SignedUpUser, orgId: number) {
  const response = await api("POST", "/api_token/create", {
    token: owner.token,
    query: q({ organization_id: orgId }),
    body: { name: "Writer", access: "read_write" },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return { id: response.body.data.api_token.token_id as number, secret: response.body.data.token };
}

describe("/audit/list", () => {
  it("asks for the one scope with the page and filters, and presents the events", async () => {
    const tenant = await createTenant(sys, api);
    const writer = await apiToken(tenant.owner, tenant.orgId);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const rowId = await createRecord(writer.secret, table, { Name: "Ada" });
    await updateRecord(writer.secret, table, rowId, { Name: null });
    await updateRecord(writer.secret, table, rowId, { Name: "Grace" });
    await updateRecord(writer.secret, table, rowId, { Name: "Hopper" });
    const scope = { table_id: table.tableId };
    await eventually(tenant.owner.token, scope, "record.updated", 3);
    const updates = (await audit(tenant.owner.token, scope, { action: "record.updated" })).events;
    const [newest, middle, oldest] = updates as [AuditEvent, AuditEvent, AuditEvent];
    expect(new Set(updates.map((e) => e.at)).size).toBe(3);

    // The third of the newest first, one to a page: the first update.
    const page = await audit(tenant.owner.token, scope, {
      limit: 1,
      offset: 2,
      action: "record.updated",
    });
    expect(page).toEqual({
      events: [
        {
          event_id: oldest.event_id,
          at: expect.stringMatching(ISO_MILLIS),
          organization_id: tenant.orgId,
          database_id: tenant.databaseId,
          table_id: table.tableId,
          actor: { type: "api_token", id: writer.id },
          action: "record.updated",
          target: { type: "record", id: rowId },
          changes: [{ key: table.id("Name"), label: "Name", old: "Ada", new: null }],
        },
      ],
      total: 3,
    });

    // since is inclusive, until exclusive, in any offset: until at the newest update, written
    // as +01:00, leaves exactly that one out.
    const bounded = await audit(tenant.owner.token, scope, {
      since: oldest.at,
      until: plusOneHour(newest.at),
      action: "record.updated",
    });
    expect(bounded.events.map((e) => e.event_id)).toEqual([middle.event_id, oldest.event_id]);
    expect(bounded.total).toBe(2);
    const shifted = await audit(tenant.owner.token, scope, {
      since: plusOneHour(middle.at),
      action: "record.updated",
    });
    expect(shifted.events.map((e) => e.event_id)).toEqual([newest.event_id, middle.event_id]);
    // Another action, another list.
    expect((await audit(tenant.owner.token, scope, { action: "record.created" })).total).toBe(1);
  });

  it("sends the defaults: 50 events from the newest, no bounds, every action", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const batch = await api("POST", v1(table.databaseId, table.tableId).batch, {
      token: tenant.writeToken,
      body: { records: Array.from({ length: 55 }, (_, i) => ({ data: { Name: `r${i}` } })) },
    });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const scope = { table_id: table.tableId };
    await eventually(tenant.owner.token, scope, "record.created", 55);
    const all = await audit(tenant.owner.token, scope, { limit: 1000 });
    // The records, the table and its field.
    expect(all.total).toBe(57);
    expect(new Set(all.events.map((e) => e.action))).toEqual(
      new Set(["record.created", "field.created", "table.created"]),
    );
    // Each record's change named by its field, the label stored once for the batch.
    const created = all.events.filter((e) => e.action === "record.created");
    expect(created.map((e) => e.changes.map((c) => [c.key, c.label, c.new])).sort(byJson)).toEqual(
      Array.from({ length: 55 }, (_, i) => [[table.id("Name"), "Name", `r${i}`]]).sort(byJson),
    );

    const response = await api("GET", "/audit/list", {
      token: tenant.owner.token,
      query: q({ table_id: table.tableId }),
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      message: "success",
      data: { events: all.events.slice(0, 50), total: 57 },
    });
    const times = all.events.map((e) => e.at);
    expect([...times].sort().reverse()).toEqual(times);
  });

  it("answers the service's 404 and its validation failures in the contract's shapes", async () => {
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const outsider = await signUp(sys, api);
    for (const [scope, reason] of [
      [{ organization_id: tenant.orgId }, "organization_not_found"],
      [{ database_id: tenant.databaseId }, "database_not_found"],
      [{ table_id: table.tableId }, "table_not_found"],
    ] as [Scope, string][]) {
      const response = await auditResponse(outsider.token, scope);
      expect({ status: response.status, body: response.body }).toEqual({
        status: 404,
        body: { message: reason, data: {} },
      });
    }
    // Within the gateway's 100 characters, but no action the service knows of.
    const response = await auditResponse(
      tenant.owner.token,
      { table_id: table.tableId },
      { action: "drop" },
    );
    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      status_code: 400,
      detail: "Validation failed for GET /audit/list",
      extra: [
        {
          key: "action",
          message: "must be an action such as record.updated",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
  });
});

/** A team: the owner, an editor and a viewer, and an outsider who owns another organization. */
async function team() {
  const [owner, editor, viewer, outsider] = await Promise.all([
    signUp(sys, api),
    signUp(sys, api),
    signUp(sys, api),
    signUp(sys, api),
  ]);
  const orgId = (await createOrg(api, owner)).organization_id;
  await addMember(api, owner, orgId, editor, "editor");
  await addMember(api, owner, orgId, viewer, "viewer");
  const otherOrgId = (await createOrg(api, outsider)).organization_id;
  return { owner, editor, viewer, outsider, orgId, otherOrgId };
}

describe("database and table scopes", () => {
  it("answer members of the owning organization, 404 to everyone else", async () => {
    const { owner, editor, viewer, outsider, orgId, otherOrgId } = await team();
    const tenant: Tenant = {
      owner,
      orgId,
      writeToken: "",
      readToken: "",
      databaseId: await createDatabase(api, owner.token, orgId),
    };
    const db1 = tenant.databaseId;
    const db2 = await createDatabase(api, owner.token, orgId);
    const t11 = await createTable(api, tenant, [{ name: "Name", type: "text" }], db1);
    const t12 = await createTable(api, tenant, [{ name: "Name", type: "text" }], db1);
    const t21 = await createTable(api, tenant, [{ name: "Name", type: "text" }], db2);

    // In order: a record updated in one table of db1 by the editor, a field created in the
    // other, db1 itself changed, a record deleted in db2's table.
    const rowId = await createRecord(editor.token, t11, { Name: "Ada" });
    await updateRecord(editor.token, t11, rowId, { Name: "Grace" });
    const field = await api("POST", "/field/create", {
      token: owner.token,
      query: q({ table_id: t12.tableId }),
      body: { name: "Score", type: "number" },
    });
    expect(field.status, JSON.stringify(field.body)).toBe(200);
    const updated = await api("POST", "/database/update", {
      token: owner.token,
      query: q({ database_id: db1 }),
      body: { description: "CRM" },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    const doomed = await createRecord(editor.token, t21, { Name: "gone" });
    const deleted = await api("DELETE", v1(db2, t21.tableId).record(doomed), {
      token: editor.token,
    });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    await eventually(viewer.token, { organization_id: orgId }, "record.deleted", 1);
    await eventually(viewer.token, { database_id: db1 }, "database.updated", 1);
    await eventually(viewer.token, { table_id: t12.tableId }, "field.created", 2);
    await eventually(viewer.token, { table_id: t11.tableId }, "record.updated", 1);

    // db1's events, and only those, newest first.
    const inDatabase = (await audit(viewer.token, { database_id: db1 })).events;
    expect(inDatabase.every((e) => e.database_id === db1)).toBe(true);
    expect(
      inDatabase
        .filter((e) => ["database.updated", "field.created", "record.updated"].includes(e.action))
        .slice(0, 3)
        .map((e) => [e.action, e.table_id]),
    ).toEqual([
      ["database.updated", undefined],
      ["field.created", t12.tableId],
      ["record.updated", t11.tableId],
    ]);
    expect(inDatabase.map((e) => e.action)).not.toContain("record.deleted");
    expect(inDatabase[0]!.changes).toEqual([{ key: "description", old: "", new: "CRM" }]);

    // t11's events, and only those.
    const inTable = (await audit(viewer.token, { table_id: t11.tableId })).events;
    expect(inTable.every((e) => e.table_id === t11.tableId)).toBe(true);
    expect(inTable.find((e) => e.action === "record.updated")).toEqual({
      event_id: expect.any(String),
      at: expect.stringMatching(ISO_MILLIS),
      organization_id: orgId,
      database_id: db1,
      table_id: t11.tableId,
      actor: { type: "user", id: editor.id },
      action: "record.updated",
      target: { type: "record", id: rowId },
      changes: [{ key: t11.id("Name"), label: "Name", old: "Ada", new: "Grace" }],
    });
    // The organization's: all of them, db2's deletion the newest.
    const inOrganization = (await audit(viewer.token, { organization_id: orgId })).events;
    expect(inOrganization[0]).toMatchObject({
      action: "record.deleted",
      database_id: db2,
      table_id: t21.tableId,
      actor: { type: "user", id: editor.id },
      target: { type: "record", id: doomed },
    });

    // A member of another organization learns nothing.
    expectError(
      await auditResponse(outsider.token, { database_id: db1 }),
      404,
      "database_not_found",
    );
    expectError(
      await auditResponse(outsider.token, { table_id: t11.tableId }),
      404,
      "table_not_found",
    );

    // A live database and table whose events are not stored (not arrived yet, or expired): the
    // catalog names their organization, so members get an empty list, everyone else the 404.
    const quietDb = await createDatabase(api, owner.token, orgId);
    const quietTable = await createTable(api, tenant, [{ name: "Name", type: "text" }], quietDb);
    await eventually(viewer.token, { table_id: quietTable.tableId }, "field.created", 1);
    await eventually(viewer.token, { table_id: quietTable.tableId }, "table.created", 1);
    await eventually(viewer.token, { database_id: quietDb }, "database.created", 1);
    await db.query("delete from organization.audit_event where database_id = $1", [quietDb]);
    expect(await audit(viewer.token, { database_id: quietDb })).toEqual({ events: [], total: 0 });
    expect(await audit(viewer.token, { table_id: quietTable.tableId })).toEqual({
      events: [],
      total: 0,
    });
    expectError(
      await auditResponse(outsider.token, { database_id: quietDb }),
      404,
      "database_not_found",
    );
    expectError(
      await auditResponse(outsider.token, { table_id: quietTable.tableId }),
      404,
      "table_not_found",
    );
    // Neither stored nor in the catalog: 404, members included.
    expectError(
      await auditResponse(owner.token, { database_id: 9_000_000_000 }),
      404,
      "database_not_found",
    );
    expectError(
      await auditResponse(owner.token, { table_id: 9_000_000_000 }),
      404,
      "table_not_found",
    );

    // The outsider's own organization's log holds only its own events.
    await eventually(outsider.token, { organization_id: otherOrgId }, "member.added", 1);
    const own = await audit(outsider.token, { organization_id: otherOrgId });
    expect(own.events.map((e) => e.action).sort()).toEqual([
      "member.added",
      "organization.created",
    ]);
    expect(own.events.every((e) => e.organization_id === otherOrgId)).toBe(true);
  });
});
