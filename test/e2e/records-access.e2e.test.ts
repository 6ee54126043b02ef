import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import type { ApiResponse } from "./support/http.js";
import { client } from "./support/http.js";
import { addMember, expectError, q } from "./support/organizations.js";
import {
  createDatabase,
  createTable,
  createTenant,
  expectValidation,
  list,
  RECORD_TEST_RATE_LIMITS,
  type RecordShape,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** Access to the record routes: credentials, tokens, roles, tenancy, deleted parents. */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let mine: Tenant;
let theirs: Tenant;
let viewer: SignedUpUser;
let editor: SignedUpUser;
let table: TestTable;
let record: RecordShape;

const FIELDS = [
  { name: "Name", type: "text" },
  { name: "Qty", type: "number" },
];

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  [mine, theirs] = await Promise.all([
    createTenant(sys, api, { plan: "business" }),
    createTenant(sys, api, { plan: "business" }),
  ]);
  [viewer, editor] = await Promise.all([signUp(sys, api), signUp(sys, api)]);
  await addMember(api, mine.owner, mine.orgId, viewer, "viewer");
  await addMember(api, mine.owner, mine.orgId, editor, "editor");
  table = await createTable(api, mine, FIELDS);
  [record] = await seed(api, mine.writeToken, table, [{ Name: "kept", Qty: 1 }]);
});

afterAll(async () => {
  await sys?.stop();
});

interface RouteCall {
  name: string;
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  write: boolean;
  /** Names a record (its 404 may be record_not_found rather than table_not_found). */
  row: boolean;
}

/** Every record route of both families, aimed at one table and row. */
function routes(databaseId: number, tableId: number, rowId: number): RouteCall[] {
  const p = v1(databaseId, tableId);
  const tq = q({ table_id: tableId });
  const rq = q({ table_id: tableId, row_id: rowId });
  const data = { data: { Name: "changed" } };
  return [
    { name: "v1 list", method: "GET", path: p.records, write: false, row: false },
    { name: "v1 get", method: "GET", path: p.record(rowId), write: false, row: true },
    { name: "v1 openapi", method: "GET", path: p.openapi, write: false, row: false },
    { name: "v1 create", method: "POST", path: p.records, body: data, write: true, row: false },
    {
      name: "v1 patch",
      method: "PATCH",
      path: p.record(rowId),
      body: data,
      write: true,
      row: true,
    },
    { name: "v1 delete", method: "DELETE", path: p.record(rowId), write: true, row: true },
    {
      name: "v1 batch create",
      method: "POST",
      path: p.batch,
      body: { records: [data] },
      write: true,
      row: false,
    },
    {
      name: "v1 batch update",
      method: "PATCH",
      path: p.batch,
      body: { records: [{ row_id: rowId, ...data }] },
      write: true,
      row: true,
    },
    {
      name: "v1 batch delete",
      method: "POST",
      path: p.batchDelete,
      body: { row_ids: [rowId] },
      write: true,
      row: true,
    },
    {
      name: "get",
      method: "GET",
      path: "/public/record/get",
      query: rq,
      write: false,
      row: true,
    },
    {
      name: "list",
      method: "GET",
      path: "/public/record/list",
      query: { ...tq, database_id: String(databaseId) },
      write: false,
      row: false,
    },
    {
      name: "create",
      method: "POST",
      path: "/public/record/create",
      query: tq,
      body: data,
      write: true,
      row: false,
    },
    {
      name: "update",
      method: "PUT",
      path: "/public/record/update",
      query: rq,
      body: data,
      write: true,
      row: true,
    },
    {
      name: "delete by POST",
      method: "POST",
      path: "/public/record/delete",
      query: rq,
      write: true,
      row: true,
    },
    {
      name: "delete by DELETE",
      method: "DELETE",
      path: "/public/record/delete",
      query: rq,
      write: true,
      row: true,
    },
  ];
}

const call = (route: RouteCall, options: { token?: string; headers?: Record<string, string> }) =>
  api(route.method, route.path, { query: route.query, body: route.body, ...options });

const label = (route: RouteCall, response: ApiResponse) =>
  `${route.name}: ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;

/** The table still holds exactly the one record, unchanged. */
async function expectUntouched() {
  const now = await list(api, mine.readToken, table, { response_format: "ids" });
  expect(now.records).toEqual([record]);
  expect(now.total).toBe(1);
}

describe("credentials", () => {
  it("answers 401 unauthorized on every record route without a valid credential", async () => {
    const expired = `${Buffer.from('{"alg":"EdDSA","typ":"JWT","kid":"k"}').toString("base64url")}.${Buffer.from('{"sub":"1","iss":"rowbase","exp":1}').toString("base64url")}.c2ln`;
    const credentials: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: `Bearer rb_${"A".repeat(40)}` },
      { authorization: "Bearer rb_short" },
      { authorization: "Bearer not-a-token" },
      { authorization: `Bearer ${expired}` },
      { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
      { authorization: mine.writeToken },
    ];
    for (const route of routes(mine.databaseId, table.tableId, record.row_id)) {
      for (const headers of credentials) {
        const response = await call(route, { headers });
        expect(response.status, `${JSON.stringify(headers)} ${label(route, response)}`).toBe(401);
        expect(response.body).toEqual({ message: "unauthorized", data: {} });
      }
    }
    await expectUntouched();
  });

  it("stops a revoked token within 5 seconds", async () => {
    const created = await api("POST", "/api_token/create", {
      token: mine.owner.token,
      query: q({ organization_id: mine.orgId }),
      body: { name: "short-lived", access: "read_write" },
    });
    const { token, api_token: info } = created.body.data;
    const p = v1(mine.databaseId, table.tableId);
    expect((await api("GET", p.records, { token })).status).toBe(200);
    const revoked = await api("POST", "/api_token/revoke", {
      token: mine.owner.token,
      query: q({ organization_id: mine.orgId, token_id: info.token_id }),
    });
    expect(revoked.status).toBe(200);
    const revokedAt = Date.now();
    let last = await api("GET", p.records, { token });
    while (last.status === 200 && Date.now() - revokedAt < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      last = await api("GET", p.records, { token });
    }
    expect(last.body).toEqual({ message: "unauthorized", data: {} });
    expect(last.status).toBe(401);
    const write = await api("POST", p.records, { token, body: { data: { Name: "late" } } });
    expect(write.status).toBe(401);
    await expectUntouched();
  });

  it("refuses a credential in the query string with the validation shape", async () => {
    const p = v1(mine.databaseId, table.tableId);
    for (const name of ["token", "access_token", "api_key"]) {
      for (const token of [undefined, mine.readToken]) {
        expectValidation(
          await api("GET", p.records, { token, query: { [name]: mine.readToken } }),
          [{ key: name, source: "query" }],
        );
      }
    }
    expectValidation(
      await api("GET", "/public/record/list", {
        query: q({
          database_id: mine.databaseId,
          table_id: table.tableId,
          access_token: mine.readToken,
        }),
      }),
      [{ key: "access_token", source: "query" }],
    );
  });
});

describe("tokens and roles", () => {
  it("lets a read token read but answers 403 token_read_only on every writing route", async () => {
    for (const route of routes(mine.databaseId, table.tableId, record.row_id)) {
      const response = await call(route, { token: mine.readToken });
      if (route.write) {
        expect(response.status, label(route, response)).toBe(403);
        expect(response.body).toEqual({ message: "token_read_only", data: {} });
      } else {
        expect(response.status, label(route, response)).toBe(200);
      }
    }
    await expectUntouched();
  });

  it("lets a viewer read but not write (403), and an editor write", async () => {
    for (const route of routes(mine.databaseId, table.tableId, record.row_id)) {
      const response = await call(route, { token: viewer.token });
      if (route.write) {
        expect(response.status, label(route, response)).toBe(403);
        expect(response.body).toEqual({ message: "organization_forbidden", data: {} });
      } else {
        expect(response.status, label(route, response)).toBe(200);
      }
    }
    await expectUntouched();

    const t = await createTable(api, mine, FIELDS);
    const rows = await seed(
      api,
      mine.writeToken,
      t,
      Array.from({ length: 10 }, (_, i) => ({ Name: `r${i}` })),
    );
    // Each writing route on a record of its own, so that every one of them succeeds.
    const writes = routes(mine.databaseId, t.tableId, 0).filter((route) => route.write);
    for (const [i, template] of writes.entries()) {
      const route = routes(mine.databaseId, t.tableId, rows[i]!.row_id).find(
        (r) => r.name === template.name,
      )!;
      const response = await call(route, { token: editor.token });
      expect(response.status, label(route, response)).toBe(200);
    }
    // Route i worked on r{i}: three creates, three updates (r1, r4, r7), four deletes (r2, r5, r8, r9).
    const after = await list(api, mine.readToken, t);
    expect(after.records.map((r) => r.data.Name)).toEqual([
      "r0",
      "changed",
      "r3",
      "changed",
      "r6",
      "changed",
      "changed",
      "changed",
      "changed",
    ]);
    expect(after.total).toBe(10 + 3 - 4);
  });

  it("answers 404 to a token or a member of another organization on every route", async () => {
    const missingTable = routes(mine.databaseId, 999_999_999, record.row_id);
    for (const [i, route] of routes(mine.databaseId, table.tableId, record.row_id).entries()) {
      for (const token of [theirs.writeToken, theirs.readToken, theirs.owner.token]) {
        const response = await call(route, { token });
        expect(response.status, label(route, response)).toBe(404);
        expect(response.body.data, label(route, response)).toEqual({});
        expect(
          route.row ? ["table_not_found", "record_not_found"] : ["table_not_found"],
          label(route, response),
        ).toContain(response.body.message);
      }
      // Indistinguishable from a table that does not exist.
      const absent = await call(missingTable[i]!, { token: theirs.writeToken });
      expect(absent.status).toBe(404);
      expect(absent.body).toEqual({ message: "table_not_found", data: {} });
    }
    // The other organization's own database does not open the table either.
    for (const route of routes(theirs.databaseId, table.tableId, record.row_id)) {
      const response = await call(route, { token: theirs.writeToken });
      expect(response.status, label(route, response)).toBe(404);
    }
    await expectUntouched();
  });
});

describe("addressing", () => {
  it("answers 404 table_not_found when database_id does not hold the table", async () => {
    const otherDatabase = await createDatabase(api, mine.owner.token, mine.orgId);
    for (const route of routes(otherDatabase, table.tableId, record.row_id)) {
      const isV1 = route.path.startsWith("/public/v1/");
      if (!isV1 && route.name !== "list") continue;
      const response = await call(route, { token: mine.writeToken });
      expect(response.status, label(route, response)).toBe(404);
      expect(response.body).toEqual({ message: "table_not_found", data: {} });
    }
    for (const database_id of [otherDatabase, theirs.databaseId, 999_999_999]) {
      expectError(
        await api("GET", "/public/record/get", {
          token: mine.writeToken,
          query: q({ table_id: table.tableId, row_id: record.row_id, database_id }),
        }),
        404,
        "table_not_found",
      );
    }
    await expectUntouched();
  });

  it("answers 404 table_not_found and record_not_found for ids that name nothing", async () => {
    for (const route of routes(mine.databaseId, 999_999_999, record.row_id)) {
      const response = await call(route, { token: mine.writeToken });
      expect(response.status, label(route, response)).toBe(404);
      expect(response.body).toEqual({ message: "table_not_found", data: {} });
    }
    // A row that does not exist, and a row of another table of the same organization.
    const sibling = await createTable(api, mine, FIELDS);
    const [foreign] = await seed(api, mine.writeToken, sibling, [{ Name: "sibling" }]);
    for (const rowId of [999_999_999, foreign!.row_id]) {
      for (const route of routes(mine.databaseId, table.tableId, rowId)) {
        if (!route.row) continue;
        const response = await call(route, { token: mine.writeToken });
        expect(response.status, label(route, response)).toBe(404);
        expect(response.body).toEqual({ message: "record_not_found", data: {} });
      }
    }
    expect((await list(api, mine.readToken, sibling)).records.map((r) => r.data)).toEqual([
      { Name: "sibling", Qty: null },
    ]);
    await expectUntouched();
  });
});

describe("deleted fields and tables", () => {
  it("drops a deleted field's key at once, and a new field of that name starts empty", async () => {
    const t = await createTable(api, mine, [...FIELDS, { name: "Temp", type: "text" }]);
    const [row] = await seed(api, mine.writeToken, t, [{ Name: "a", Temp: "secret" }]);
    const tempId = t.id("Temp");
    const deleted = await api("POST", "/field/delete", {
      token: mine.owner.token,
      query: q({ field_id: Number(tempId) }),
    });
    expect(deleted.status).toBe(200);
    const p = v1(t.databaseId, t.tableId);
    const ids = await api("GET", p.record(row!.row_id), { token: mine.readToken });
    expect(ids.body.data.record.data).toEqual({ [t.id("Name")]: "a", [t.id("Qty")]: null });
    const names = await list(api, mine.readToken, t);
    expect(names.records.map((r) => r.data)).toEqual([{ Name: "a", Qty: null }]);
    const queries: Record<string, string>[] = [
      { fields: "Temp" },
      { sort: "Temp" },
      { where: "(Temp,eq,secret)" },
    ];
    for (const query of queries) {
      const response = await api("GET", p.records, { token: mine.readToken, query });
      expect(response.status, JSON.stringify(query)).toBe(400);
    }
    for (const key of ["Temp", tempId]) {
      expectValidation(
        await api("PATCH", p.record(row!.row_id), {
          token: mine.writeToken,
          body: { data: { [key]: "x" } },
        }),
        [{ key, source: "body" }],
      );
    }
    const again = await api("POST", "/field/create", {
      token: mine.owner.token,
      query: q({ table_id: t.tableId }),
      body: { name: "Temp", type: "text" },
    });
    expect(again.status).toBe(200);
    expect((await list(api, mine.readToken, t)).records.map((r) => r.data)).toEqual([
      { Name: "a", Qty: null, Temp: null },
    ]);
    expect((await list(api, mine.readToken, t, { where: "(Temp,eq,secret)" })).total).toBe(0);
  });

  it("answers 404 table_not_found on every route once the table or its database is deleted", async () => {
    const t = await createTable(api, mine, FIELDS);
    const [row] = await seed(api, mine.writeToken, t, [{ Name: "doomed" }]);
    const deleted = await api("POST", "/table/delete", {
      token: mine.owner.token,
      query: q({ table_id: t.tableId }),
    });
    expect(deleted.status).toBe(200);
    for (const route of routes(mine.databaseId, t.tableId, row!.row_id)) {
      const response = await call(route, { token: mine.writeToken });
      expect(response.status, label(route, response)).toBe(404);
      expect(response.body).toEqual({ message: "table_not_found", data: {} });
    }

    const databaseId = await createDatabase(api, mine.owner.token, mine.orgId);
    const inside = await createTable(api, mine, FIELDS, databaseId);
    const [kept] = await seed(api, mine.writeToken, inside, [{ Name: "gone with the db" }]);
    expect(
      (
        await api("POST", "/database/delete", {
          token: mine.owner.token,
          query: q({ database_id: databaseId }),
        })
      ).status,
    ).toBe(200);
    for (const route of routes(databaseId, inside.tableId, kept!.row_id)) {
      const response = await call(route, { token: mine.readToken });
      expect(response.status, label(route, response)).toBe(404);
      expect(response.body.message).toBe("table_not_found");
    }
  });
});
