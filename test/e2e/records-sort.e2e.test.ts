import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  expectValidation,
  list,
  RECORD_TEST_RATE_LIMITS,
  type RecordShape,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** `sort`: every sortable type, both directions, nulls, ties by row_id. */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;
let table: TestTable;
/** The records in creation order; expectations name them by index. */
let rows: RecordShape[];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Six records: two empty ones (1 and 5) and pairs of equal values (0 and 4) so that nulls and
 * ties show. Numbers and instants are chosen so that comparing them as text would give another
 * order (10 < 2 as text; 10:59:59+01:00 is before 10:00:00Z).
 */
const VALUES: Record<string, unknown>[] = [
  {
    Text: "banana",
    Number: 2,
    Flag: true,
    Day: "2026-03-01",
    Moment: "2026-03-01T10:00:00Z",
    Status: "Lost",
    Email: "b@x.io",
    Site: "https://b.example",
    Phone: "+1 555 0102",
  },
  {},
  {
    Text: "apple",
    Number: 10,
    Flag: false,
    Day: "2025-12-31",
    Moment: "2025-12-31T23:59:59.999Z",
    Status: "Active",
    Email: "a@x.io",
    Site: "https://a.example",
    Phone: "+1 555 0101",
  },
  {
    Text: "cherry",
    Number: -1.5,
    Flag: true,
    Day: "2026-03-01",
    Moment: "2026-03-01T10:59:59+01:00",
    Status: "New",
    Email: "c@x.io",
    Site: "https://c.example",
    Phone: "+1 555 0103",
  },
  {
    Text: "banana",
    Number: 2,
    Flag: false,
    Day: "2027-01-01",
    Moment: "2026-03-01T10:00:00.000Z",
    Status: "Active",
    Email: "b@x.io",
    Site: "https://b.example",
    Phone: "+1 555 0102",
  },
  {},
];

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
  table = await createTable(api, tenant, [
    { name: "Text", type: "text" },
    { name: "Number", type: "number", options: { decimals: 1 } },
    { name: "Flag", type: "boolean" },
    { name: "Day", type: "date" },
    { name: "Moment", type: "datetime" },
    {
      name: "Status",
      type: "single_select",
      options: { choices: [{ name: "Active" }, { name: "Lost" }, { name: "New" }] },
    },
    { name: "Email", type: "email" },
    { name: "Site", type: "url" },
    { name: "Phone", type: "phone" },
    { name: "Note", type: "text" },
    { name: "Serial", type: "autonumber" },
    { name: "Created", type: "created_at" },
    { name: "Updated", type: "updated_at" },
  ]);
  // One by one, a few milliseconds apart, so that every record has its own created_at.
  const p = v1(tenant.databaseId, table.tableId);
  rows = [];
  for (const data of VALUES) {
    const response = await api("POST", p.records, { token: tenant.writeToken, body: { data } });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    rows.push(response.body.data.record);
    await sleep(5);
  }
  // Touch 3, then 0, then 4: updated_at order becomes 1, 2, 5, 3, 0, 4.
  for (const index of [3, 0, 4]) {
    const response = await api("PATCH", p.record(rows[index]!.row_id), {
      token: tenant.writeToken,
      body: { data: { Note: "touched" } },
    });
    expect(response.status).toBe(200);
    await sleep(5);
  }
});

afterAll(async () => {
  await sys?.stop();
});

async function order(sort: string, extra: Record<string, string | number> = {}) {
  const data = await list(api, tenant.readToken, table, { sort, ...extra });
  return data.records.map((record) => rows.findIndex((row) => row.row_id === record.row_id));
}

describe("sort", () => {
  const cases: [string, number[], number[]][] = [
    // key, ascending, descending (nulls last ascending, first descending; ties by row_id)
    ["Text", [2, 0, 4, 3, 1, 5], [1, 5, 3, 0, 4, 2]],
    ["Number", [3, 0, 4, 2, 1, 5], [1, 5, 2, 0, 4, 3]],
    ["Flag", [2, 4, 0, 3, 1, 5], [1, 5, 0, 3, 2, 4]],
    ["Day", [2, 0, 3, 4, 1, 5], [1, 5, 4, 0, 3, 2]],
    ["Moment", [2, 3, 0, 4, 1, 5], [1, 5, 0, 4, 3, 2]],
    ["Status", [2, 4, 0, 3, 1, 5], [1, 5, 3, 0, 2, 4]],
    ["Email", [2, 0, 4, 3, 1, 5], [1, 5, 3, 0, 4, 2]],
    ["Site", [2, 0, 4, 3, 1, 5], [1, 5, 3, 0, 4, 2]],
    ["Phone", [2, 0, 4, 3, 1, 5], [1, 5, 3, 0, 4, 2]],
    ["Serial", [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]],
    ["Created", [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]],
    ["created_at", [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]],
    ["Updated", [1, 2, 5, 3, 0, 4], [4, 0, 3, 5, 2, 1]],
    ["updated_at", [1, 2, 5, 3, 0, 4], [4, 0, 3, 5, 2, 1]],
    ["row_id", [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]],
  ];

  it.each(cases)("sorts by %s in both directions", async (key, ascending, descending) => {
    expect(await order(key)).toEqual(ascending);
    expect(await order(`-${key}`)).toEqual(descending);
  });

  it("sorts by field id as by name, on both route families", async () => {
    expect(await order(`-${table.id("Number")}`)).toEqual([1, 5, 2, 0, 4, 3]);
    const p = v1(tenant.databaseId, table.tableId);
    const response = await api("GET", p.records, {
      token: tenant.readToken,
      query: { sort: "-Moment" },
    });
    expect(response.status).toBe(200);
    expect(
      response.body.data.records.map((r: RecordShape) =>
        rows.findIndex((row) => row.row_id === r.row_id),
      ),
    ).toEqual([1, 5, 0, 4, 3, 2]);
  });

  it("defaults to row_id ascending", async () => {
    expect(await order("")).toEqual([0, 1, 2, 3, 4, 5]);
    const response = await api("GET", "/public/record/list", {
      token: tenant.readToken,
      query: q({ database_id: tenant.databaseId, table_id: table.tableId }),
    });
    expect(response.body.data.records.map((r: RecordShape) => r.row_id)).toEqual(
      rows.map((r) => r.row_id),
    );
  });

  it("sorts by several keys, the first deciding first", async () => {
    expect(await order("-Flag,Number")).toEqual([1, 5, 3, 0, 4, 2]);
    expect(await order("Status,-Day")).toEqual([4, 2, 0, 3, 1, 5]);
    expect(await order("Text,-row_id")).toEqual([2, 4, 0, 3, 5, 1]);
  });

  it("pages through a sorted list stably", async () => {
    const pages = [];
    for (let offset = 0; offset < 6; offset += 2) {
      pages.push(...(await order("Number", { limit: 2, offset })));
    }
    expect(pages).toEqual([3, 0, 4, 2, 1, 5]);
    const data = await list(api, tenant.readToken, table, { sort: "-Text", limit: 2, offset: 2 });
    expect(data.total).toBe(6);
  });

  it("answers 400 for a sort key that names no field", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    for (const sort of ["Nope", "Text,-Missing", "999999", "--Text"]) {
      for (const path of [p.records, "/public/record/list"]) {
        const response = await api("GET", path, {
          token: tenant.readToken,
          query:
            path === p.records
              ? { sort }
              : q({ database_id: tenant.databaseId, table_id: table.tableId, sort }),
        });
        expectValidation(response, [{ key: "sort", source: "query" }]);
      }
    }
  });
});
