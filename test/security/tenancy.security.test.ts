import { beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "../e2e/support/accounts.js";
import { filePart, fileTable, PNG, raw } from "../e2e/support/files.js";
import type { ApiResponse } from "../e2e/support/http.js";
import { addMember, expectError, q } from "../e2e/support/organizations.js";
import {
  createTable,
  createTenant,
  expectValidation,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "../e2e/support/records.js";
import { securitySystem } from "./support/fixture.js";

/**
 * Tenancy and roles: ids of another organization on every route family answer the
 * resource's 404; a read token on every writing route answers 403 `token_read_only`; members
 * cannot raise themselves or touch the owner; removed members lose access at once; unknown body
 * keys are refused. Every case proves, with snapshots of the database and the quota counters,
 * that nothing changed.
 */

const ctx = securitySystem();

/** The attacker's organization (A) and the victim's (B) with one of everything. */
let attacker: Tenant;
let victim: Tenant;
let attackerTable: TestTable;
let victimTable: TestTable;
let victimRow: number;
let victimFileRow: number;
let victimFileField: number;
let victimMemberId: number;
let victimInviteId: number;
let victimTokenId: number;
let victimSlug: string;
let attackerFileRow: number;
let attackerFileField: number;

beforeAll(async () => {
  const { api, sys } = ctx;
  [attacker, victim] = await Promise.all([
    createTenant(sys, api, { plan: "business" }),
    createTenant(sys, api, { plan: "business" }),
  ]);
  ctx.state.track(attacker.orgId, victim.orgId);
  [attackerTable, victimTable] = await Promise.all([
    createTable(api, attacker, [{ name: "Name", type: "text" }]),
    createTable(api, victim, [{ name: "Name", type: "text" }]),
  ]);
  [{ row_id: victimRow }] = await seed(api, victim.writeToken, victimTable, [{ Name: "secret" }]);
  await seed(api, attacker.writeToken, attackerTable, [{ Name: "mine" }]);
  const victimFiles = await fileTable(api, victim);
  victimFileRow = victimFiles.rowIds[0]!;
  victimFileField = victimFiles.fieldId;
  const uploaded = await raw(
    sys.baseUrl,
    "POST",
    `/file/upload?row_id=${victimFileRow}&field_id=${victimFileField}`,
    { token: victim.writeToken, body: filePart(PNG, "victim.png", "image/png") },
  );
  expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
  const attackerFiles = await fileTable(api, attacker);
  attackerFileRow = attackerFiles.rowIds[0]!;
  attackerFileField = attackerFiles.fieldId;
  const mine = await raw(
    sys.baseUrl,
    "POST",
    `/file/upload?row_id=${attackerFileRow}&field_id=${attackerFileField}`,
    { token: attacker.writeToken, body: filePart(PNG, "mine.png", "image/png") },
  );
  expect(mine.status).toBe(200);

  const member = await signUp(sys, api);
  victimMemberId = await addMember(api, victim.owner, victim.orgId, member, "editor");
  const invite = await api("POST", "/organization/invite/create", {
    token: victim.owner.token,
    query: q({ organization_id: victim.orgId }),
    body: { email: "pending@example.test", role: "viewer" },
  });
  expect(invite.status).toBe(200);
  victimInviteId = invite.body.data.invite.invite_id;
  const tokens = await api("GET", "/api_token/list", {
    token: victim.owner.token,
    query: q({ organization_id: victim.orgId }),
  });
  victimTokenId = tokens.body.data.api_tokens[0].token_id;
  const organization = await api("GET", "/organization/get", {
    token: victim.owner.token,
    query: q({ organization_id: victim.orgId }),
  });
  victimSlug = organization.body.data.organization.organization_slug;
});

interface Attack {
  name: string;
  method: string;
  path: string | (() => string);
  query?: () => Record<string, number | string>;
  body?: unknown;
  /** `session` (A's owner), `write`/`read` (A's API tokens). */
  as: "session" | "write" | "read";
  status: number;
  code: string;
  /** A counted record/file-route call of A (every call on a record route counts). */
  counted?: boolean;
}

function send(attack: Attack): Promise<ApiResponse> {
  const token =
    attack.as === "session"
      ? attacker.owner.token
      : attack.as === "write"
        ? attacker.writeToken
        : attacker.readToken;
  const query = attack.query?.() ?? {};
  const path = typeof attack.path === "function" ? attack.path() : attack.path;
  return ctx.api(attack.method, path, {
    token,
    query: q(query),
    body: attack.body,
  });
}

async function run(attack: Attack) {
  await ctx.state.unchanged(
    async () => {
      const response = await send(attack);
      expectError(response, attack.status, attack.code);
    },
    attack.counted ? { counters: { [`api-calls:${attacker.orgId}`]: 1 } } : {},
  );
}

describe("another organization's ids on every route family: the resource's 404", () => {
  const attacks: Attack[] = [
    {
      name: "organization/update",
      method: "POST",
      path: "/organization/update",
      query: () => ({ organization_id: victim.orgId }),
      body: { name: "Owned" },
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "organization/delete",
      method: "POST",
      path: "/organization/delete",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "member/update (B's member through A)",
      method: "POST",
      path: "/organization/member/update",
      query: () => ({ organization_id: attacker.orgId, member_id: victimMemberId }),
      body: { role: "viewer" },
      as: "session",
      status: 404,
      code: "member_not_found",
    },
    {
      name: "member/remove (B's member through B)",
      method: "POST",
      path: "/organization/member/remove",
      query: () => ({ organization_id: victim.orgId, member_id: victimMemberId }),
      as: "session",
      status: 404,
      code: "member_not_found",
    },
    {
      name: "invite/cancel (B's invite through A)",
      method: "POST",
      path: "/organization/invite/cancel",
      query: () => ({ organization_id: attacker.orgId, invite_id: victimInviteId }),
      as: "session",
      status: 404,
      code: "invite_not_found",
    },
    {
      name: "my_invite/accept (an invite to someone else)",
      method: "POST",
      path: "/organization/my_invite/accept",
      query: () => ({ invite_id: victimInviteId }),
      as: "session",
      status: 404,
      code: "invite_not_found",
    },
    {
      name: "invite/create in B",
      method: "POST",
      path: "/organization/invite/create",
      query: () => ({ organization_id: victim.orgId }),
      body: { email: "friend@example.test", role: "admin" },
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "api_token/revoke (B's token through A)",
      method: "POST",
      path: "/api_token/revoke",
      query: () => ({ organization_id: attacker.orgId, token_id: victimTokenId }),
      as: "session",
      status: 404,
      code: "api_token_not_found",
    },
    {
      name: "api_token/create in B",
      method: "POST",
      path: "/api_token/create",
      query: () => ({ organization_id: victim.orgId }),
      body: { name: "backdoor", access: "read_write" },
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "database/update",
      method: "POST",
      path: "/database/update",
      query: () => ({ database_id: victim.databaseId }),
      body: { name: "Owned" },
      as: "session",
      status: 404,
      code: "database_not_found",
    },
    {
      name: "database/delete",
      method: "POST",
      path: "/database/delete",
      query: () => ({ database_id: victim.databaseId }),
      as: "session",
      status: 404,
      code: "database_not_found",
    },
    {
      name: "table/create in B's database",
      method: "POST",
      path: "/table/create",
      query: () => ({ database_id: victim.databaseId }),
      body: { name: "Planted" },
      as: "session",
      status: 404,
      code: "database_not_found",
    },
    {
      name: "table/update",
      method: "POST",
      path: "/table/update",
      query: () => ({ table_id: victimTable.tableId }),
      body: { name: "Owned" },
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "table/delete",
      method: "POST",
      path: "/table/delete",
      query: () => ({ table_id: victimTable.tableId }),
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "field/create in B's table",
      method: "POST",
      path: "/field/create",
      query: () => ({ table_id: victimTable.tableId }),
      body: { name: "Planted", type: "text" },
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "field/update",
      method: "POST",
      path: "/field/update",
      query: () => ({ field_id: victimTable.f.Name!.field_id }),
      body: { name: "Owned" },
      as: "session",
      status: 404,
      code: "field_not_found",
    },
    {
      name: "field/delete",
      method: "POST",
      path: "/field/delete",
      query: () => ({ field_id: victimTable.f.Name!.field_id }),
      as: "session",
      status: 404,
      code: "field_not_found",
    },
    {
      name: "record create in B's table (A's token)",
      method: "POST",
      path: "/public/record/create",
      query: () => ({ table_id: victimTable.tableId }),
      body: { data: { Name: "planted" } },
      as: "write",
      status: 404,
      code: "table_not_found",
      counted: true,
    },
    {
      name: "record update of B's row through A's table (A's token)",
      method: "PUT",
      path: "/public/record/update",
      query: () => ({ table_id: attackerTable.tableId, row_id: victimRow }),
      body: { data: { Name: "owned" } },
      as: "write",
      status: 404,
      code: "record_not_found",
      counted: true,
    },
    {
      name: "record delete of B's row in B's table (A's owner session)",
      method: "DELETE",
      path: "/public/record/delete",
      query: () => ({ table_id: victimTable.tableId, row_id: victimRow }),
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "file upload onto B's record (A's token)",
      method: "POST",
      path: "/file/storage_check",
      query: () => ({ row_id: victimFileRow, file_size: 10 }),
      as: "write",
      status: 404,
      code: "record_not_found",
      counted: true,
    },
    {
      name: "file rename of B's file (A's token)",
      method: "POST",
      path: "/file/rename",
      query: () => ({ row_id: victimFileRow, field_id: victimFileField }),
      body: { file_name: "owned.png" },
      as: "write",
      status: 404,
      code: "record_not_found",
      counted: true,
    },
    {
      name: "file delete of B's file (A's owner session)",
      method: "POST",
      path: "/file/delete",
      query: () => ({ row_id: victimFileRow, field_id: victimFileField }),
      as: "session",
      status: 404,
      code: "record_not_found",
    },
    {
      name: "audit/list of B's organization",
      method: "GET",
      path: "/audit/list",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "audit/list of B's table",
      method: "GET",
      path: "/audit/list",
      query: () => ({ table_id: victimTable.tableId }),
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "read: organization/get",
      method: "GET",
      path: "/organization/get",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: organization/get by B's slug",
      method: "GET",
      path: "/organization/get",
      query: () => ({ organization_slug: victimSlug }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: the per-table OpenAPI document of B's table (A's read token)",
      method: "GET",
      path: () => v1(victim.databaseId, victimTable.tableId).openapi,
      as: "read",
      status: 404,
      code: "table_not_found",
      counted: true,
    },
    {
      name: "read: member/list",
      method: "GET",
      path: "/organization/member/list",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: invite/list",
      method: "GET",
      path: "/organization/invite/list",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: api_token/list",
      method: "GET",
      path: "/api_token/list",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: organization/limits",
      method: "GET",
      path: "/organization/limits",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: organization/api_stats",
      method: "GET",
      path: "/organization/api_stats",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: database/list",
      method: "GET",
      path: "/database/list",
      query: () => ({ organization_id: victim.orgId }),
      as: "session",
      status: 404,
      code: "organization_not_found",
    },
    {
      name: "read: database/get",
      method: "GET",
      path: "/database/get",
      query: () => ({ database_id: victim.databaseId }),
      as: "session",
      status: 404,
      code: "database_not_found",
    },
    {
      name: "read: table/list",
      method: "GET",
      path: "/table/list",
      query: () => ({ database_id: victim.databaseId }),
      as: "session",
      status: 404,
      code: "database_not_found",
    },
    {
      name: "read: table/get",
      method: "GET",
      path: "/table/get",
      query: () => ({ table_id: victimTable.tableId }),
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "read: field/list",
      method: "GET",
      path: "/field/list",
      query: () => ({ table_id: victimTable.tableId }),
      as: "session",
      status: 404,
      code: "table_not_found",
    },
    {
      name: "read: record/get of B's row (A's read token)",
      method: "GET",
      path: "/public/record/get",
      query: () => ({ table_id: victimTable.tableId, row_id: victimRow }),
      as: "read",
      status: 404,
      code: "table_not_found",
      counted: true,
    },
    {
      name: "read: record/list of B's table with A's database id (A's read token)",
      method: "GET",
      path: "/public/record/list",
      query: () => ({ table_id: victimTable.tableId, database_id: attacker.databaseId }),
      as: "read",
      status: 404,
      code: "table_not_found",
      counted: true,
    },
    {
      name: "read: file/serve of B's file (A's read token)",
      method: "GET",
      path: "/file/serve",
      query: () => ({ row_id: victimFileRow, field_id: victimFileField }),
      as: "read",
      status: 404,
      code: "record_not_found",
      counted: true,
    },
    {
      name: "read: file/url of B's file (A's read token)",
      method: "GET",
      path: "/file/url",
      query: () => ({ row_id: victimFileRow, field_id: victimFileField }),
      as: "read",
      status: 404,
      code: "record_not_found",
      counted: true,
    },
    {
      name: "read: audit/list of B's database",
      method: "GET",
      path: "/audit/list",
      query: () => ({ database_id: victim.databaseId }),
      as: "session",
      status: 404,
      code: "database_not_found",
    },
  ];

  it.each(attacks.map((a) => [a.name, a] as const))("%s", async (_name, attack) => {
    await run(attack);
  });

  it("v1 batch routes with B's row ids inside A's own table change nothing of B", async () => {
    const p = v1(attacker.databaseId, attackerTable.tableId);
    await ctx.state.unchanged(
      async () => {
        expectError(
          await ctx.api("PATCH", p.batch, {
            token: attacker.writeToken,
            body: { records: [{ row_id: victimRow, data: { Name: "owned" } }] },
          }),
          404,
          "record_not_found",
        );
        expectError(
          await ctx.api("POST", p.batchDelete, {
            token: attacker.writeToken,
            body: { row_ids: [victimRow] },
          }),
          404,
          "record_not_found",
        );
        expectError(
          await ctx.api("POST", v1(victim.databaseId, victimTable.tableId).records, {
            token: attacker.writeToken,
            body: { data: { Name: "planted" } },
          }),
          404,
          "table_not_found",
        );
      },
      { counters: { [`api-calls:${attacker.orgId}`]: 3 } },
    );
  });
});

describe("another organization's field ids inside A's own table", () => {
  it("as record data, filter, sort and fields keys, and as a file field: refused, nothing leaks", async () => {
    const foreign = String(victimTable.f.Name!.field_id);
    const listWith = (query: Record<string, string>) =>
      ctx.api("GET", "/public/record/list", {
        token: attacker.readToken,
        query: {
          table_id: String(attackerTable.tableId),
          database_id: String(attacker.databaseId),
          ...query,
        },
      });
    await ctx.state.unchanged(
      async () => {
        expectValidation(
          await ctx.api("POST", "/public/record/create", {
            token: attacker.writeToken,
            query: q({ table_id: attackerTable.tableId }),
            body: { data: { [foreign]: "planted" } },
          }),
          [{ key: foreign, source: "body" }],
        );
        expectValidation(await listWith({ where: `(${foreign},notblank)` }), [
          { key: "where", source: "query" },
        ]);
        expectValidation(await listWith({ sort: foreign }), [{ key: "sort", source: "query" }]);
        expectValidation(await listWith({ fields: foreign }), [{ key: "fields", source: "query" }]);
        const upload = await raw(
          ctx.sys.baseUrl,
          "POST",
          `/file/upload?row_id=${attackerFileRow}&field_id=${victimFileField}`,
          { token: attacker.writeToken, body: filePart(PNG, "x.png", "image/png") },
        );
        // The same answer as for a field that exists nowhere: existence does not leak.
        expectError({ status: upload.status, body: upload.json }, 404, "field_not_found");
        const nowhere = await raw(
          ctx.sys.baseUrl,
          "POST",
          `/file/upload?row_id=${attackerFileRow}&field_id=987654321`,
          { token: attacker.writeToken, body: filePart(PNG, "x.png", "image/png") },
        );
        expect(nowhere.status).toBe(upload.status);
        expect(nowhere.json).toEqual(upload.json);
      },
      { counters: { [`api-calls:${attacker.orgId}`]: 6 } },
    );
  });
});

describe("another table's rows inside one organization", () => {
  it("cannot be read, changed or deleted through a table they are not in", async () => {
    const other = await createTable(ctx.api, attacker, [{ name: "Name", type: "text" }]);
    const [{ row_id: otherRow }] = await seed(ctx.api, attacker.writeToken, other, [
      { Name: "elsewhere" },
    ]);
    const p = v1(attacker.databaseId, attackerTable.tableId);
    const token = attacker.writeToken;
    await ctx.state.unchanged(
      async () => {
        for (const [method, path, body] of [
          ["GET", p.record(otherRow), undefined],
          ["PATCH", p.record(otherRow), { data: { Name: "moved" } }],
          ["DELETE", p.record(otherRow), undefined],
          ["PATCH", p.batch, { records: [{ row_id: otherRow, data: { Name: "moved" } }] }],
          ["POST", p.batchDelete, { row_ids: [otherRow] }],
        ] as const) {
          expectError(await ctx.api(method, path, { token, body }), 404, "record_not_found");
        }
      },
      { counters: { [`api-calls:${attacker.orgId}`]: 5 } },
    );
  });
});

describe("a read token on every writing route: 403 token_read_only", () => {
  const writes = (): [string, () => Promise<ApiResponse>][] => {
    const p = v1(attacker.databaseId, attackerTable.tableId);
    const token = attacker.readToken;
    const tq = q({ table_id: attackerTable.tableId });
    const data = { data: { Name: "x" } };
    const rowId = 0;
    return [
      ["v1 create", () => ctx.api("POST", p.records, { token, body: data })],
      ["v1 patch", () => ctx.api("PATCH", p.record(rowId + 1), { token, body: data })],
      ["v1 delete", () => ctx.api("DELETE", p.record(rowId + 1), { token })],
      ["v1 batch create", () => ctx.api("POST", p.batch, { token, body: { records: [data] } })],
      [
        "v1 batch update",
        () => ctx.api("PATCH", p.batch, { token, body: { records: [{ row_id: 1, ...data }] } }),
      ],
      ["v1 batch delete", () => ctx.api("POST", p.batchDelete, { token, body: { row_ids: [1] } })],
      [
        "query create",
        () => ctx.api("POST", "/public/record/create", { token, query: tq, body: data }),
      ],
      [
        "query update",
        () =>
          ctx.api("PUT", "/public/record/update", {
            token,
            query: { ...tq, row_id: "1" },
            body: data,
          }),
      ],
      [
        "query delete (POST)",
        () => ctx.api("POST", "/public/record/delete", { token, query: { ...tq, row_id: "1" } }),
      ],
      [
        "query delete (DELETE)",
        () => ctx.api("DELETE", "/public/record/delete", { token, query: { ...tq, row_id: "1" } }),
      ],
      [
        "file storage_check",
        () =>
          ctx.api("POST", "/file/storage_check", {
            token,
            query: q({ row_id: attackerFileRow, file_size: 10 }),
          }),
      ],
      [
        "file upload",
        async () => {
          const r = await raw(
            ctx.sys.baseUrl,
            "POST",
            `/file/upload?row_id=${attackerFileRow}&field_id=${attackerFileField}`,
            { token, body: filePart(PNG, "x.png", "image/png") },
          );
          return { status: r.status, body: r.json, headers: r.headers, text: "" };
        },
      ],
      [
        "file rename",
        () =>
          ctx.api("POST", "/file/rename", {
            token,
            query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
            body: { file_name: "renamed.png" },
          }),
      ],
      [
        "file delete",
        () =>
          ctx.api("POST", "/file/delete", {
            token,
            query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
          }),
      ],
      [
        "file restore",
        () =>
          ctx.api("POST", "/file/restore", {
            token,
            query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
          }),
      ],
    ];
  };

  it("refuses each of the 15 writing record and file routes and changes nothing", async () => {
    const routes = writes();
    expect(routes).toHaveLength(15);
    for (const [name, call] of routes) {
      await ctx.state.unchanged(
        async () => {
          const response = await call();
          expect(response.status, `${name}: ${JSON.stringify(response.body)}`).toBe(403);
          expect(response.body, name).toEqual({ message: "token_read_only", data: {} });
        },
        { counters: { [`api-calls:${attacker.orgId}`]: 1 } },
      );
    }
  });
});

describe("the state probe itself", () => {
  it("sees a write (so the 'nothing changed' checks can fail)", async () => {
    const before = await ctx.state.settled();
    const created = await ctx.api("POST", "/public/record/create", {
      token: attacker.writeToken,
      query: q({ table_id: attackerTable.tableId }),
      body: { data: { Name: "probe" } },
    });
    expect(created.status).toBe(200);
    const after = await ctx.state.settled();
    const changed = Object.keys(after.tables).filter((k) => after.tables[k] !== before.tables[k]);
    // The record is in the table's user table, in its organization's schema.
    expect(changed).toEqual(
      expect.arrayContaining([
        `org_${attacker.orgId}.t_${attackerTable.tableId}`,
        "organization.audit_event",
      ]),
    );
    expect(after.counters[`api-calls:${attacker.orgId}`]).toBe(
      before.counters[`api-calls:${attacker.orgId}`]! + 1,
    );
  });
});

describe("members cannot raise themselves or touch the owner", () => {
  let owner: SignedUpUser;
  let orgId: number;
  let ownerMemberId: number;
  const people = {} as Record<"admin" | "admin2" | "editor" | "viewer", SignedUpUser>;
  const ids = {} as Record<"admin" | "admin2" | "editor" | "viewer", number>;

  beforeAll(async () => {
    owner = attacker.owner;
    orgId = attacker.orgId;
    for (const role of ["admin", "admin2", "editor", "viewer"] as const) {
      people[role] = await signUp(ctx.sys, ctx.api);
      ids[role] = await addMember(
        ctx.api,
        owner,
        orgId,
        people[role],
        role === "admin2" ? "admin" : role,
      );
    }
    const members = await ctx.api("GET", "/organization/member/list", {
      token: owner.token,
      query: q({ organization_id: orgId }),
    });
    ownerMemberId = members.body.data.members.find(
      (m: { role: string }) => m.role === "owner",
    ).member_id;
  });

  const memberUpdate = (who: SignedUpUser, memberId: number, role: string) =>
    ctx.api("POST", "/organization/member/update", {
      token: who.token,
      query: q({ organization_id: orgId, member_id: memberId }),
      body: { role },
    });
  const memberRemove = (who: SignedUpUser, memberId: number) =>
    ctx.api("POST", "/organization/member/remove", {
      token: who.token,
      query: q({ organization_id: orgId, member_id: memberId }),
    });

  const forbidden: [string, () => Promise<ApiResponse>][] = [
    ["an editor making itself admin", () => memberUpdate(people.editor, ids.editor, "admin")],
    ["a viewer making itself editor", () => memberUpdate(people.viewer, ids.viewer, "editor")],
    [
      "an admin giving an editor the admin role",
      () => memberUpdate(people.admin, ids.editor, "admin"),
    ],
    ["an admin demoting another admin", () => memberUpdate(people.admin, ids.admin2, "viewer")],
    [
      "an admin changing the owner's role",
      () => memberUpdate(people.admin, ownerMemberId, "viewer"),
    ],
    ["an admin removing the owner", () => memberRemove(people.admin, ownerMemberId)],
    ["an admin removing another admin", () => memberRemove(people.admin, ids.admin2)],
    ["the owner leaving", () => memberRemove(owner, ownerMemberId)],
    [
      "an admin inviting an admin",
      () =>
        ctx.api("POST", "/organization/invite/create", {
          token: people.admin.token,
          query: q({ organization_id: orgId }),
          body: { email: "new-admin@example.test", role: "admin" },
        }),
    ],
    [
      "an admin sending an owner-transfer code to itself",
      () =>
        ctx.api("POST", "/organization/transfer/send_code", {
          token: people.admin.token,
          query: q({ organization_id: orgId }),
          body: { member_id: ids.admin },
        }),
    ],
    [
      "an admin deleting the organization",
      () =>
        ctx.api("POST", "/organization/delete", {
          token: people.admin.token,
          query: q({ organization_id: orgId }),
        }),
    ],
    [
      "an editor creating an API token",
      () =>
        ctx.api("POST", "/api_token/create", {
          token: people.editor.token,
          query: q({ organization_id: orgId }),
          body: { name: "mine now", access: "read_write" },
        }),
    ],
    [
      "a viewer creating a database",
      () =>
        ctx.api("POST", "/database/create", {
          token: people.viewer.token,
          query: q({ organization_id: orgId }),
          body: { name: "viewer's" },
        }),
    ],
  ];

  it.each(forbidden)("%s: 403 organization_forbidden, nothing changes", async (_name, call) => {
    await ctx.state.unchanged(async () => {
      expectError(await call(), 403, "organization_forbidden");
    });
  });

  it("a viewer's session on the record and file write routes: 403, nothing changes", async () => {
    await ctx.state.unchanged(
      async () => {
        expectError(
          await ctx.api("POST", "/public/record/create", {
            token: people.viewer.token,
            query: q({ table_id: attackerTable.tableId }),
            body: { data: { Name: "viewer" } },
          }),
          403,
          "organization_forbidden",
        );
        expectError(
          await ctx.api("POST", "/file/delete", {
            token: people.viewer.token,
            query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
          }),
          403,
          "organization_forbidden",
        );
      },
      { counters: { [`api-calls:${attacker.orgId}`]: 2 } },
    );
  });

  it.each([
    ["an admin", "admin"],
    ["a viewer", "viewer"],
  ] as const)(
    "%s giving itself the owner role: 400 validation, nothing changes",
    async (_n, who) => {
      await ctx.state.unchanged(async () => {
        expectValidation(await memberUpdate(people[who], ids[who], "owner"), [
          { key: "role", source: "body" },
        ]);
      });
    },
  );

  it("a removed member's session loses every route of the organization at once", async () => {
    const leaver = await signUp(ctx.sys, ctx.api);
    const leaverId = await addMember(ctx.api, owner, orgId, leaver, "editor");
    // Warm every cache with the membership first.
    const warm = await ctx.api("POST", "/public/record/create", {
      token: leaver.token,
      query: q({ table_id: attackerTable.tableId }),
      body: { data: { Name: "while a member" } },
    });
    expect(warm.status).toBe(200);
    expect((await memberRemove(owner, leaverId)).status).toBe(200);
    // A fresh access token from the member's refresh token is no way back in either.
    const refreshed = await ctx.api("POST", "/auth/refresh", {
      body: { refresh_token: leaver.refreshToken },
    });
    expect(refreshed.status).toBe(200);
    const fresh = refreshed.body.data.access_token as string;
    await ctx.state.unchanged(async () => {
      expectError(
        await ctx.api("POST", "/table/create", {
          token: fresh,
          query: q({ database_id: attacker.databaseId }),
          body: { name: "comeback" },
        }),
        404,
        "database_not_found",
      );
      expectError(
        await ctx.api("POST", "/public/record/create", {
          token: leaver.token,
          query: q({ table_id: attackerTable.tableId }),
          body: { data: { Name: "after removal" } },
        }),
        404,
        "table_not_found",
      );
      expectError(
        await ctx.api("POST", "/database/create", {
          token: leaver.token,
          query: q({ organization_id: orgId }),
          body: { name: "after removal" },
        }),
        404,
        "organization_not_found",
      );
      expectError(
        await ctx.api("POST", "/file/delete", {
          token: leaver.token,
          query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
        }),
        404,
        "record_not_found",
      );
      expectError(
        await ctx.api("GET", "/audit/list", {
          token: leaver.token,
          query: q({ organization_id: orgId }),
        }),
        404,
        "organization_not_found",
      );
    });
  });
});

describe("mass assignment: unknown body keys are refused and nothing is written", () => {
  const cases: [string, () => Promise<ApiResponse>, string][] = [
    [
      "organization/create with a plan",
      () =>
        ctx.api("POST", "/organization/create", {
          token: attacker.owner.token,
          body: { name: "Free lunch", plan: "enterprise" },
        }),
      "plan",
    ],
    [
      "organization/update with a plan",
      () =>
        ctx.api("POST", "/organization/update", {
          token: attacker.owner.token,
          query: q({ organization_id: attacker.orgId }),
          body: { name: "Renamed", plan: "business" },
        }),
      "plan",
    ],
    [
      "api_token/create naming another organization",
      () =>
        ctx.api("POST", "/api_token/create", {
          token: attacker.owner.token,
          query: q({ organization_id: attacker.orgId }),
          body: { name: "x", access: "read", organization_id: victim.orgId },
        }),
      "organization_id",
    ],
    [
      "database/create naming another organization",
      () =>
        ctx.api("POST", "/database/create", {
          token: attacker.owner.token,
          query: q({ organization_id: attacker.orgId }),
          body: { name: "x", organization_id: victim.orgId },
        }),
      "organization_id",
    ],
    [
      "api_token/create with an access level above read_write",
      () =>
        ctx.api("POST", "/api_token/create", {
          token: attacker.owner.token,
          query: q({ organization_id: attacker.orgId }),
          body: { name: "x", access: "admin" },
        }),
      "access",
    ],
    [
      "member/update with a user id",
      () =>
        ctx.api("POST", "/organization/member/update", {
          token: attacker.owner.token,
          query: q({ organization_id: attacker.orgId, member_id: 1 }),
          body: { role: "viewer", user_id: victim.owner.id },
        }),
      "user_id",
    ],
    [
      "record create with row_id and table_id beside data",
      () =>
        ctx.api("POST", "/public/record/create", {
          token: attacker.writeToken,
          query: q({ table_id: attackerTable.tableId }),
          body: { data: { Name: "x" }, table_id: victimTable.tableId },
        }),
      "table_id",
    ],
    [
      "register with email_verified",
      () =>
        ctx.api("POST", "/auth/register", {
          body: {
            email: "mass-assign@example.test",
            password: "correct horse battery",
            email_verified: true,
          },
        }),
      "email_verified",
    ],
    [
      "file rename with a size",
      () =>
        ctx.api("POST", "/file/rename", {
          token: attacker.writeToken,
          query: q({ row_id: attackerFileRow, field_id: attackerFileField }),
          body: { file_name: "ok.png", size: 1 },
        }),
      "size",
    ],
  ];

  it.each(cases)("%s: 400 naming the key", async (_name, call, key) => {
    // Refused before anything is charged: a validation failure is not a counted call.
    await ctx.state.unchanged(async () => {
      expectValidation(await call(), [{ key, source: "body" }]);
    });
  });
});
