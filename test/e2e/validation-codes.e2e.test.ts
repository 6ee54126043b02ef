import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  list,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * The `code` of each validation item, through the gateway on the real services: the gateway's
 * own checks and the services' (records, catalog) alike, so that a program can branch on it.
 */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;
let table: TestTable;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api);
  table = await createTable(api, tenant, [
    { name: "Name", type: "text", required: true },
    { name: "Number", type: "autonumber" },
    { name: "Qty", type: "number", options: { min: 0, max: 10 } },
  ]);
});

afterAll(async () => {
  await sys?.stop();
});

/** The (key, code) of each item of a 400's `extra`. */
function codes(response: { status: number; body: { extra?: { key: string; code: string }[] } }) {
  expect(response.status, JSON.stringify(response.body)).toBe(400);
  return (response.body.extra ?? []).map(({ key, code }) => [key, code]);
}

describe("validation codes", () => {
  it("say what is wrong with each value of a record write, and nothing is written", async () => {
    const p = v1(table.databaseId, table.tableId);
    const refused = await api("POST", p.records, {
      token: tenant.writeToken,
      body: { data: { Nope: 1, Number: 5, Qty: 11 } },
    });
    expect(codes(refused)).toEqual([
      ["Nope", "not_found"],
      ["Number", "read_only"],
      ["Qty", "out_of_range"],
      ["Name", "required"],
    ]);
    const typed = await api("POST", p.records, {
      token: tenant.writeToken,
      body: { data: { Name: 5 } },
    });
    expect(codes(typed)).toEqual([["Name", "invalid_type"]]);
    expect((await list(api, tenant.readToken, table)).total).toBe(0);
  });

  it("tell a query that does not parse from a field that does not exist", async () => {
    const p = v1(table.databaseId, table.tableId);
    const get = (query: Record<string, string>) =>
      api("GET", p.records, { token: tenant.readToken, query });
    expect(codes(await get({ where: "Name ==" }))).toEqual([["where", "invalid_syntax"]]);
    expect(codes(await get({ sort: "Nope" }))).toEqual([["sort", "not_found"]]);
    expect(codes(await get({ limit: "0", colour: "red" }))).toEqual([
      ["limit", "out_of_range"],
      ["colour", "unknown_key"],
    ]);
  });

  it("name missing, too long and badly typed values of the management routes", async () => {
    const created = await api("POST", "/table/create", {
      token: tenant.owner.token,
      query: q({ database_id: tenant.databaseId }),
      body: { name: "x".repeat(101), description: 5 },
    });
    expect(codes(created)).toEqual([
      ["name", "too_long"],
      ["description", "invalid_type"],
    ]);
    const missing = await api("GET", "/table/list", { token: tenant.owner.token });
    expect(codes(missing)).toEqual([["database_id", "required"]]);
    const blank = await api("POST", "/database/create", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
      body: { name: "" },
    });
    expect(codes(blank)).toEqual([["name", "too_short"]]);
  });
});
