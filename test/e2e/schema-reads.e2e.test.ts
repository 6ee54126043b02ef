import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
} from "./support/records.js";

/**
 * An API token reading its organization's schema through the management routes (databases,
 * tables, fields), another organization's ids answering their 404, and every other management
 * route refusing the token with a 401 whose WWW-Authenticate says why.
 */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let mine: Tenant;
let theirs: Tenant;
let myTable: TestTable;
let theirTable: TestTable;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  [mine, theirs] = await Promise.all([createTenant(sys, api), createTenant(sys, api)]);
  [myTable, theirTable] = await Promise.all([
    createTable(api, mine, [
      { name: "Name", type: "text" },
      {
        name: "Status",
        type: "single_select",
        options: { choices: [{ name: "Lead" }, { name: "Customer" }] },
      },
    ]),
    createTable(api, theirs, [{ name: "Secret", type: "text" }]),
  ]);
});

afterAll(async () => {
  await sys?.stop();
});

/** The five schema reads, aimed at a tenant's organization, database and table. */
function reads(orgId: number, databaseId: number, tableId: number): [string, Query][] {
  return [
    ["/database/list", q({ organization_id: orgId })],
    ["/database/get", q({ database_id: databaseId })],
    ["/table/list", q({ database_id: databaseId })],
    ["/table/get", q({ table_id: tableId })],
    ["/field/list", q({ table_id: tableId })],
  ];
}

type Query = Record<string, string>;

const get = (path: string, query: Query, token: string) => api("GET", path, { query, token });

describe("schema reads with an API token", () => {
  it("answer a read and a read_write token of the organization as they answer its owner", async () => {
    for (const [path, query] of reads(mine.orgId, mine.databaseId, myTable.tableId)) {
      const bySession = await get(path, query, mine.owner.token);
      expect(bySession.status, `${path} ${bySession.text}`).toBe(200);
      for (const token of [mine.readToken, mine.writeToken]) {
        const byToken = await get(path, query, token);
        expect({ path, status: byToken.status }).toEqual({ path, status: 200 });
        expect(byToken.body).toEqual(bySession.body);
      }
    }
    const fields = await get("/field/list", q({ table_id: myTable.tableId }), mine.readToken);
    expect(fields.body.data.fields.map((field: { name: string }) => field.name)).toEqual([
      "Name",
      "Status",
    ]);
  });

  it("answer another organization's ids, and ids that do not exist, with the route's 404", async () => {
    const cases: [string, Query, string][] = [
      ["/database/list", q({ organization_id: theirs.orgId }), "organization_not_found"],
      ["/database/get", q({ database_id: theirs.databaseId }), "database_not_found"],
      ["/table/list", q({ database_id: theirs.databaseId }), "database_not_found"],
      ["/table/get", q({ table_id: theirTable.tableId }), "table_not_found"],
      ["/field/list", q({ table_id: theirTable.tableId }), "table_not_found"],
      ["/database/list", q({ organization_id: 2 ** 52 }), "organization_not_found"],
      ["/database/get", q({ database_id: 2 ** 52 }), "database_not_found"],
      ["/table/get", q({ table_id: 2 ** 52 }), "table_not_found"],
    ];
    for (const token of [mine.readToken, mine.writeToken]) {
      for (const [path, query, message] of cases) {
        const response = await get(path, query, token);
        expect({ path, query, status: response.status, body: response.body }).toEqual({
          path,
          query,
          status: 404,
          body: { message, data: {} },
        });
      }
    }
  });

  it("refuse an unknown token and an expired session with 401, saying why", async () => {
    const [path, query] = reads(mine.orgId, mine.databaseId, myTable.tableId)[0] ?? ["", {}];
    const unknown = await get(path, query, `rb_${"Z".repeat(40)}`);
    expectError(unknown, 401, "unauthorized");
    expect(unknown.headers.get("www-authenticate")).toBe(
      'Bearer realm="rowbase", error="invalid_token", error_description="the API token is unknown or revoked"',
    );
    const header = Buffer.from('{"alg":"EdDSA","typ":"JWT","kid":"k"}').toString("base64url");
    const claims = Buffer.from('{"sub":"1","sid":"s","iss":"rowbase","exp":1}').toString(
      "base64url",
    );
    const expired = await get(path, query, `${header}.${claims}.c2ln`);
    expectError(expired, 401, "unauthorized");
    expect(expired.headers.get("www-authenticate")).toContain(
      'error="invalid_token", error_description="the session token has expired',
    );
    const none = await api("GET", path, { query });
    expectError(none, 401, "unauthorized");
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer realm="rowbase", error_desc/);
  });
});

describe("every other management route", () => {
  it("answers an API token 401 with the reason in WWW-Authenticate, and changes nothing", async () => {
    const before = await get("/table/get", q({ table_id: myTable.tableId }), mine.owner.token);
    const databasesBefore = await get(
      "/database/list",
      q({ organization_id: mine.orgId }),
      mine.owner.token,
    );
    const org = q({ organization_id: mine.orgId });
    const writes: [string, string, Query, unknown][] = [
      ["POST", "/database/create", org, { name: "By token" }],
      ["POST", "/database/update", q({ database_id: mine.databaseId }), { name: "Renamed" }],
      ["POST", "/database/delete", q({ database_id: mine.databaseId }), undefined],
      ["POST", "/table/create", q({ database_id: mine.databaseId }), { name: "By token" }],
      ["POST", "/table/update", q({ table_id: myTable.tableId }), { name: "Renamed" }],
      ["POST", "/table/delete", q({ table_id: myTable.tableId }), undefined],
      ["POST", "/field/create", q({ table_id: myTable.tableId }), { name: "X", type: "text" }],
      [
        "POST",
        "/field/update",
        q({ field_id: myTable.f.Name?.field_id ?? 0 }),
        { name: "Renamed" },
      ],
      ["POST", "/field/delete", q({ field_id: myTable.f.Name?.field_id ?? 0 }), undefined],
      ["GET", "/organization/get", org, undefined],
      ["GET", "/organization/list", {}, undefined],
      ["GET", "/api_token/list", org, undefined],
      ["GET", "/audit/list", org, undefined],
    ];
    for (const token of [mine.readToken, mine.writeToken]) {
      for (const [method, path, query, body] of writes) {
        const response = await api(method, path, { query, token, body });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
        expect(response.headers.get("www-authenticate")).toBe(
          'Bearer realm="rowbase", error="invalid_token", error_description="API tokens are not accepted on this route; it takes a session token"',
        );
      }
    }
    const after = await get("/table/get", q({ table_id: myTable.tableId }), mine.owner.token);
    expect(after.body).toEqual(before.body);
    const databasesAfter = await get(
      "/database/list",
      q({ organization_id: mine.orgId }),
      mine.owner.token,
    );
    expect(databasesAfter.body).toEqual(databasesBefore.body);
  });
});
