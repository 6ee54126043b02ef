import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  allFields,
  createTable,
  createTenant,
  expectRecord,
  expectValidation,
  FULL,
  list,
  RECORD_TEST_RATE_LIMITS,
  type RecordShape,
  seed,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** Reading options (formats, rich_text, fields, limit/offset) and the validation of writes. */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let tenant: Tenant;
let table: TestTable;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  tenant = await createTenant(sys, api, { plan: "business" });
  table = await createTable(api, tenant, ALL_TYPES_FIELDS);
});

afterAll(async () => {
  await sys?.stop();
});

const full = (values: Record<string, unknown>, record: RecordShape) =>
  allFields(table, values, record);

async function totalOf(t: TestTable) {
  return (await list(api, tenant.readToken, t, { limit: 1 })).total;
}

describe("writing", () => {
  /** One bad value per key: unknown, read-only and wrong-typed fields. */
  const BAD: Record<string, unknown> = {
    Nope: 1,
    "999999": "x",
    Serial: 5,
    Created: "2026-01-01T00:00:00.000Z",
    Updated: "2026-01-01T00:00:00.000Z",
    Attachment: { file_id: 1 },
    Text: 12,
    Number: "abc",
    Flag: "yes",
    Day: "2026-02-30",
    Moment: "not a time",
    Status: "Unknown",
    Tags: ["zzz"],
    Email: "not-an-email",
    Site: "not a url",
    Phone: "call me",
  };

  it("lists every bad key in one 400 and writes nothing, on every writing route", async () => {
    const [existing] = await seed(api, tenant.writeToken, table, [FULL]);
    const before = await totalOf(table);
    const p = v1(tenant.databaseId, table.tableId);
    const row = q({ table_id: table.tableId, row_id: existing!.row_id });
    const calls: [string, string, Record<string, string> | undefined, unknown][] = [
      ["POST", p.records, undefined, { data: BAD }],
      ["PATCH", p.record(existing!.row_id), undefined, { data: BAD }],
      ["POST", "/public/record/create", q({ table_id: table.tableId }), { data: BAD }],
      ["PUT", "/public/record/update", row, { data: BAD }],
    ];
    for (const [method, path, query, body] of calls) {
      const response = await api(method, path, { token: tenant.writeToken, query, body });
      expectValidation(
        response,
        Object.keys(BAD).map((key) => ({ key, source: "body", message: expect.any(String) })),
      );
      expect(response.body.extra, `${method} ${path}`).toHaveLength(Object.keys(BAD).length);
    }
    // One good key beside one bad key: still nothing written.
    const mixed = await api("PATCH", p.record(existing!.row_id), {
      token: tenant.writeToken,
      body: { data: { Text: "should not stick", Number: "abc" } },
    });
    expectValidation(mixed, [{ key: "Number", source: "body" }]);
    expect(mixed.body.extra).toHaveLength(1);
    expect(await totalOf(table)).toBe(before);
    expect(
      (await api("GET", p.record(existing!.row_id), { token: tenant.readToken })).body.data.record,
    ).toEqual(existing);
  });

  it("refuses malformed bodies and values past their size", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    const before = await totalOf(table);
    const bodies: [unknown, string][] = [
      [{}, "data"],
      [{ data: {}, extra: 1 }, "extra"],
      [{ data: [1] }, "data"],
      [{ data: "text" }, "data"],
    ];
    for (const [body, key] of bodies) {
      expectValidation(await api("POST", p.records, { token: tenant.writeToken, body }), [
        { key, source: "body" },
      ]);
    }
    for (const rawBody of ["{not json", ""]) {
      const response = await api("POST", p.records, {
        token: tenant.writeToken,
        rawBody,
        headers: { "content-type": "application/json" },
      });
      expect(response.status).toBe(400);
      expect(response.body.status_code).toBe(400);
    }
    const plain = await api("POST", p.records, {
      token: tenant.writeToken,
      rawBody: JSON.stringify({ data: {} }),
      headers: { "content-type": "text/plain" },
    });
    expect(plain.status).toBe(400);
    for (const [key, value] of [
      ["Text", "x".repeat(10_001)],
      ["Long", "y".repeat(100_001)],
      ["Meta", { blob: "z".repeat(110 * 1024) }],
    ] as const) {
      expectValidation(
        await api("POST", p.records, {
          token: tenant.writeToken,
          body: { data: { [key]: value } },
        }),
        [{ key, source: "body" }],
      );
    }
    const longest = await api("POST", p.records, {
      token: tenant.writeToken,
      body: { data: { Text: "x".repeat(10_000) } },
    });
    expect(longest.status).toBe(200);
    expect(await totalOf(table)).toBe(before + 1);
  });

  it("requires a required field on create and refuses to clear it", async () => {
    const t = await createTable(api, tenant, [
      { name: "Title", type: "text", required: true },
      { name: "Note", type: "text" },
    ]);
    const p = v1(t.databaseId, t.tableId);
    for (const data of [{ Note: "no title" }, { Title: "" }, { Title: null }]) {
      const response = await api("POST", p.records, { token: tenant.writeToken, body: { data } });
      expect(response.status, JSON.stringify(data)).toBe(400);
      expect(response.body.extra).toEqual([
        expect.objectContaining({ key: expect.stringMatching(/Title|^\d+$/), source: "body" }),
      ]);
    }
    const [record] = await seed(api, tenant.writeToken, t, [{ Title: "ok" }]);
    const cleared = await api("PATCH", p.record(record!.row_id), {
      token: tenant.writeToken,
      body: { data: { Title: null } },
    });
    expectValidation(cleared, [{ key: "Title", source: "body" }]);
    expect((await list(api, tenant.readToken, t)).records.map((r) => r.data)).toEqual([
      { Title: "ok", Note: null },
    ]);
  });
});

describe("values at the edges of their options", () => {
  it("stores large numbers of a field with many decimals as sent, also in a required field", async () => {
    const t = await createTable(api, tenant, [
      { name: "Precise", type: "number", options: { decimals: 10 } },
      { name: "Needed", type: "number", options: { decimals: 6 }, required: true },
    ]);
    const p = v1(t.databaseId, t.tableId);
    const data = { Precise: 123_456_789_012.5, Needed: 4_000_000_000_000_000 };
    const created = await api("POST", p.records, { token: tenant.writeToken, body: { data } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const rowId = created.body.data.record.row_id as number;
    const patched = await api("PATCH", p.record(rowId), {
      token: tenant.writeToken,
      body: { data: { Precise: -1_234_567_890_123.25 } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect((await list(api, tenant.readToken, t)).records.map((r) => r.data)).toEqual([
      { Precise: -1_234_567_890_123.25, Needed: 4_000_000_000_000_000 },
    ]);
  });
});

describe("reading options", () => {
  it("keys data by field id or by name, with null for every empty field", async () => {
    const [record] = await seed(api, tenant.writeToken, table, [{ Text: "only text" }]);
    const p = v1(tenant.databaseId, table.tableId);
    const ids = await api("GET", p.record(record!.row_id), {
      token: tenant.readToken,
      query: { response_format: "ids" },
    });
    expectRecord(ids.body.data.record, table, "ids");
    expect(ids.body.data.record).toEqual(record);
    const names = await api("GET", "/public/record/get", {
      token: tenant.readToken,
      query: q({ table_id: table.tableId, row_id: record!.row_id, response_format: "names" }),
    });
    expectRecord(names.body.data.record, table, "names");
    expect(names.body.data.record.data).toEqual(full({ Text: "only text" }, record!));
    const listed = await list(api, tenant.readToken, table, { where: "(Text,eq,only text)" });
    expect(listed.records).toEqual([names.body.data.record]);
    for (const [path, query] of [
      [p.records, { response_format: "xml" }],
      [p.record(record!.row_id), { response_format: "NAMES" }],
    ] as const) {
      expectValidation(await api("GET", path, { token: tenant.readToken, query }), [
        { key: "response_format", source: "query" },
      ]);
    }
  });

  it("renders long_text as markdown, sanitised html or plain text", async () => {
    const markdown =
      "Intro *soft* and **strong**\n\n<script>alert(1)</script>\n\n" +
      "[x](javascript:alert(1))\n\n<img src=x onerror=alert(1)>\n\n[safe](https://example.com)";
    const [record] = await seed(api, tenant.writeToken, table, [
      { Long: markdown, Text: "<b>not rich</b>" },
    ]);
    const p = v1(tenant.databaseId, table.tableId);
    const read = async (rich_text?: string) => {
      const query: Record<string, string> = { response_format: "names", fields: "Long,Text" };
      if (rich_text) query.rich_text = rich_text;
      const response = await api("GET", p.record(record!.row_id), {
        token: tenant.readToken,
        query,
      });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      expect(response.body.data.record.data.Text).toBe("<b>not rich</b>");
      return response.body.data.record.data.Long as string;
    };
    expect(await read()).toBe(markdown);
    expect(await read("markdown")).toBe(markdown);

    const html = await read("html");
    expect(html).toContain("<em>soft</em>");
    expect(html).toContain("<strong>strong</strong>");
    expect(html).toMatch(/<a [^>]*href="https:\/\/example\.com\/?"[^>]*>safe<\/a>/);
    expect(html.toLowerCase()).not.toContain("<script");
    expect(html.toLowerCase()).not.toContain("<img src=x");
    // No markup carries an event handler or a javascript: URL.
    for (const tag of html.match(/<[^>]+>/g) ?? []) {
      expect(tag).not.toMatch(/\son[a-z]+\s*=/i);
      expect(tag.toLowerCase()).not.toContain("javascript:");
    }

    const listed = await list(api, tenant.readToken, table, {
      rich_text: "html",
      fields: "Long",
      where: `(Long,like,Intro)`,
    });
    expect(listed.records.map((r) => r.data.Long)).toEqual([html]);
    expectValidation(
      await api("GET", p.records, { token: tenant.readToken, query: { rich_text: "rtf" } }),
      [{ key: "rich_text", source: "query" }],
    );

    // Text only: no markup of the Markdown, and no tag, not even one written as raw HTML.
    const plain = await read("plain");
    expect(plain).toContain("Intro soft and strong");
    expect(plain).toContain("safe");
    expect(plain).not.toContain("**");
    expect(plain).not.toMatch(/<\/?[a-z][^>]*>/i);
  });

  it("returns only the fields named in `fields`, by name or id", async () => {
    const [record] = await seed(api, tenant.writeToken, table, [FULL]);
    const p = v1(tenant.databaseId, table.tableId);
    const get = (query: Record<string, string>) =>
      api("GET", p.record(record!.row_id), { token: tenant.readToken, query });
    const names = await get({ fields: "Text,Number", response_format: "names" });
    expect(names.body.data.record.data).toEqual({ Text: "hello", Number: 3.25 });
    expectRecord(names.body.data.record, table, "names", ["Text", "Number"]);
    const ids = await get({ fields: `${table.id("Text")},${table.id("Status")}` });
    expect(ids.body.data.record.data).toEqual({
      [table.id("Text")]: "hello",
      [table.id("Status")]: "Active",
    });
    const mixed = await get({
      fields: `Serial,${table.id("Attachment")},Meta`,
      response_format: "names",
    });
    expect(mixed.body.data.record.data).toEqual({
      Serial: record!.data[table.id("Serial")],
      Attachment: null,
      Meta: FULL.Meta,
    });
    const listed = await list(api, tenant.readToken, table, { fields: "Flag" });
    for (const r of listed.records) expect(Object.keys(r.data)).toEqual(["Flag"]);
    const queryForm = await api("GET", "/public/record/get", {
      token: tenant.readToken,
      query: q({ table_id: table.tableId, row_id: record!.row_id, fields: "Email" }),
    });
    expect(queryForm.body.data.record.data).toEqual({ [table.id("Email")]: "ada@example.com" });

    for (const fields of ["Text,Nope", "999999", "text2"]) {
      expectValidation(await get({ fields }), [{ key: "fields", source: "query" }]);
      expectValidation(
        await api("GET", p.records, { token: tenant.readToken, query: { fields } }),
        [{ key: "fields", source: "query" }],
      );
    }
  });

  it("pages with limit and offset and counts every record in total", async () => {
    const t = await createTable(api, tenant, [{ name: "N", type: "number" }]);
    const rows = await seed(
      api,
      tenant.writeToken,
      t,
      Array.from({ length: 7 }, (_, i) => ({ N: i })),
    );
    const ids = rows.map((r) => r.row_id);
    const page = async (query: Record<string, number>) => {
      const p = v1(t.databaseId, t.tableId);
      const response = await api("GET", p.records, { token: tenant.readToken, query: q(query) });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body.data;
    };
    const all = await page({});
    expect([all.total, all.limit, all.offset]).toEqual([7, 50, 0]);
    expect(all.records.map((r: RecordShape) => r.row_id)).toEqual(ids);
    for (const [limit, offset, expected] of [
      [3, 0, ids.slice(0, 3)],
      [3, 3, ids.slice(3, 6)],
      [3, 6, ids.slice(6)],
      [1000, 0, ids],
      [1, 10, []],
    ] as const) {
      const data = await page({ limit, offset });
      expect(data.records.map((r: RecordShape) => r.row_id)).toEqual(expected);
      expect([data.total, data.limit, data.offset]).toEqual([7, limit, offset]);
    }
    const queryForm = await list(api, tenant.readToken, t, { limit: 2, offset: 1 });
    expect(queryForm.records.map((r) => r.row_id)).toEqual(ids.slice(1, 3));
    expect(queryForm.total).toBe(7);

    for (const [key, value] of [
      ["limit", "0"],
      ["limit", "1001"],
      ["limit", "-1"],
      ["limit", "1.5"],
      ["limit", "ten"],
      ["offset", "-1"],
      ["offset", "x"],
    ]) {
      for (const [path, base] of [
        [v1(t.databaseId, t.tableId).records, {}],
        ["/public/record/list", q({ database_id: t.databaseId, table_id: t.tableId })],
      ] as const) {
        expectValidation(
          await api("GET", path, { token: tenant.readToken, query: { ...base, [key!]: value! } }),
          [{ key: key!, source: "query" }],
        );
      }
    }
  });
});
