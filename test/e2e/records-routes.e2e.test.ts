import http from "node:http";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  allFields,
  byIds,
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

/** Every record route of both families, its success shape and errors. */

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

describe("v1 routes", () => {
  it("creates, gets, lists, patches and deletes a record with the documented shapes", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    const created = await api("POST", p.records, {
      token: tenant.writeToken,
      body: { data: FULL },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.message).toBe("success");
    expect(Object.keys(created.body.data)).toEqual(["record"]);
    const record = created.body.data.record as RecordShape;
    expectRecord(record, table);
    expect(record.data).toEqual(byIds(table, full(FULL, record)));
    expect(record.data[table.id("Attachment")]).toBeNull();
    expect(record.created_at).toBe(record.updated_at);

    const got = await api("GET", p.record(record.row_id), { token: tenant.readToken });
    expect(got.body).toEqual({ message: "success", data: { record } });
    const named = await api("GET", p.record(record.row_id), {
      token: tenant.readToken,
      query: { response_format: "names" },
    });
    expectRecord(named.body.data.record, table, "names");
    expect(named.body.data.record.data).toEqual(full(FULL, record));

    const listed = await api("GET", p.records, { token: tenant.readToken });
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body.data).sort()).toEqual([
      "has_more",
      "limit",
      "offset",
      "records",
      "total",
    ]);
    expect(listed.body.data).toMatchObject({ limit: 50, offset: 0, has_more: false });
    expect(listed.body.data.records).toContainEqual(record);
    expect(listed.body.data.total).toBe(listed.body.data.records.length);

    await new Promise((resolve) => setTimeout(resolve, 5));
    const patched = await api("PATCH", p.record(record.row_id), {
      token: tenant.writeToken,
      body: { data: { Text: "changed", Number: null, [table.id("Flag")]: false } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(Object.keys(patched.body.data)).toEqual(["record"]);
    const after = patched.body.data.record as RecordShape;
    expectRecord(after, table);
    expect(after.row_id).toBe(record.row_id);
    expect(after.created_at).toBe(record.created_at);
    expect(after.updated_at > record.updated_at).toBe(true);
    expect(after.data).toEqual(
      byIds(table, {
        ...full({ ...FULL, Text: "changed", Number: null, Flag: false }, after),
        Serial: record.data[table.id("Serial")],
        Created: record.created_at,
      }),
    );
    expect(
      (await api("GET", p.record(record.row_id), { token: tenant.readToken })).body.data.record,
    ).toEqual(after);

    const deleted = await api("DELETE", p.record(record.row_id), { token: tenant.writeToken });
    expect(deleted.body).toEqual({ message: "success", data: { deleted_id: record.row_id } });
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { data: { Text: "x" } }],
      ["DELETE", undefined],
    ] as const) {
      expectError(
        await api(method, p.record(record.row_id), { token: tenant.writeToken, body }),
        404,
        "record_not_found",
      );
    }
  });

  it("takes field ids as keys, converts numeric strings and leaves unnamed fields empty", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    const byId = await api("POST", p.records, {
      token: tenant.writeToken,
      body: { data: { [table.id("Text")]: "by id", [table.id("Number")]: "42" } },
    });
    expect(byId.status, JSON.stringify(byId.body)).toBe(200);
    const record = byId.body.data.record as RecordShape;
    expect(record.data).toEqual(byIds(table, full({ Text: "by id", Number: 42 }, record)));

    const empty = await api("POST", p.records, { token: tenant.writeToken, body: { data: {} } });
    expect(empty.status).toBe(200);
    const blank = empty.body.data.record as RecordShape;
    expectRecord(blank, table);
    expect(blank.data).toEqual(byIds(table, full({}, blank)));
    expect(blank.data[table.id("Serial")]).toBe((record.data[table.id("Serial")] as number) + 1);
  });

  it("counts a list as asked and says whether another page follows", async () => {
    const t = await createTable(api, tenant, [{ name: "N", type: "number" }]);
    const p = v1(t.databaseId, t.tableId);
    const records = Array.from({ length: 7 }, (_, n) => ({ data: { N: n } }));
    expect(
      (await api("POST", p.batch, { token: tenant.writeToken, body: { records } })).status,
    ).toBe(200);
    const page = async (query: Record<string, string | number>) => {
      const v1Page = await api("GET", p.records, { token: tenant.readToken, query: q(query) });
      const queryForm = await api("GET", "/public/record/list", {
        token: tenant.readToken,
        query: q({ table_id: t.tableId, database_id: t.databaseId, ...query }),
      });
      expect(v1Page.status, JSON.stringify(v1Page.body)).toBe(200);
      expect(queryForm.body).toEqual(v1Page.body);
      const { records: rows, ...rest } = v1Page.body.data;
      return { ...rest, n: (rows as RecordShape[]).map((r) => r.data[t.id("N")]) };
    };
    expect(await page({ where: "(N,gte,2)", limit: 3 })).toEqual({
      n: [2, 3, 4],
      total: 5,
      has_more: true,
      limit: 3,
      offset: 0,
    });
    expect(await page({ where: "(N,gte,2)", limit: 3, offset: 3, count: "none" })).toEqual({
      n: [5, 6],
      total: null,
      has_more: false,
      limit: 3,
      offset: 3,
    });
    expect(await page({ sort: "-N", limit: 6, count: "none" })).toMatchObject({
      n: [6, 5, 4, 3, 2, 1],
      total: null,
      has_more: true,
    });
    // Exact below 1,000 matches, so no estimate is said.
    expect(await page({ where: "(N,lt,3)", count: "estimated" })).toEqual({
      n: [0, 1, 2],
      total: 3,
      has_more: false,
      limit: 50,
      offset: 0,
    });
    const refused = await api("GET", p.records, {
      token: tenant.readToken,
      query: { count: "approximate" },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.extra).toMatchObject([{ key: "count", source: "query" }]);
  });

  it("creates, updates and deletes in batches, all or nothing", async () => {
    const t = await createTable(api, tenant, [
      { name: "Name", type: "text" },
      { name: "Qty", type: "number" },
    ]);
    const p = v1(t.databaseId, t.tableId);
    const created = await api("POST", p.batch, {
      token: tenant.writeToken,
      body: { records: [{ data: { Name: "a", Qty: 1 } }, { data: { Name: "b" } }, { data: {} }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(Object.keys(created.body.data)).toEqual(["records"]);
    const [a, b, c] = created.body.data.records as RecordShape[];
    for (const record of [a!, b!, c!]) expectRecord(record, t);
    expect([a, b, c].map((r) => r!.data)).toEqual([
      { [t.id("Name")]: "a", [t.id("Qty")]: 1 },
      { [t.id("Name")]: "b", [t.id("Qty")]: null },
      { [t.id("Name")]: null, [t.id("Qty")]: null },
    ]);
    expect(a!.row_id < b!.row_id && b!.row_id < c!.row_id).toBe(true);

    const updated = await api("PATCH", p.batch, {
      token: tenant.writeToken,
      body: {
        records: [
          { row_id: c!.row_id, data: { Name: "c" } },
          { row_id: a!.row_id, data: { Qty: 10 } },
        ],
      },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(Object.keys(updated.body.data)).toEqual(["records"]);
    expect((updated.body.data.records as RecordShape[]).map((r) => [r.row_id, r.data])).toEqual([
      [c!.row_id, { [t.id("Name")]: "c", [t.id("Qty")]: null }],
      [a!.row_id, { [t.id("Name")]: "a", [t.id("Qty")]: 10 }],
    ]);

    const snapshot = await list(api, tenant.readToken, t);
    // A missing row or a bad value anywhere in a batch update changes nothing.
    expectError(
      await api("PATCH", p.batch, {
        token: tenant.writeToken,
        body: {
          records: [
            { row_id: a!.row_id, data: { Qty: 99 } },
            { row_id: 999_999_999, data: { Qty: 1 } },
          ],
        },
      }),
      404,
      "record_not_found",
    );
    const badUpdate = await api("PATCH", p.batch, {
      token: tenant.writeToken,
      body: {
        records: [
          { row_id: a!.row_id, data: { Qty: 99 } },
          { row_id: b!.row_id, data: { Qty: "lots" } },
        ],
      },
    });
    expect(badUpdate.status).toBe(400);
    expect(badUpdate.body.status_code).toBe(400);
    // A bad value anywhere in a batch create writes nothing.
    const badCreate = await api("POST", p.batch, {
      token: tenant.writeToken,
      body: { records: [{ data: { Name: "ok" } }, { data: { Nope: 1 } }] },
    });
    expect(badCreate.status).toBe(400);
    expect(badCreate.body.extra).toEqual(
      expect.arrayContaining([expect.objectContaining({ source: "body" })]),
    );
    expect(await list(api, tenant.readToken, t)).toEqual(snapshot);

    for (const [method, path, body] of [
      ["POST", p.batch, { records: [] }],
      ["POST", p.batch, { records: Array.from({ length: 1001 }, () => ({ data: {} })) }],
      ["PATCH", p.batch, { records: [] }],
      ["POST", p.batchDelete, { row_ids: [] }],
      ["POST", p.batchDelete, { ids: [a!.row_id] }],
    ] as const) {
      const response = await api(method, path, { token: tenant.writeToken, body });
      expect(response.status, `${method} ${path} ${JSON.stringify(body).slice(0, 80)}`).toBe(400);
      expect(response.body.extra[0].source).toBe("body");
    }
    expect(await list(api, tenant.readToken, t)).toEqual(snapshot);

    const removed = await api("POST", p.batchDelete, {
      token: tenant.writeToken,
      body: { row_ids: [c!.row_id, a!.row_id] },
    });
    expect(removed.body).toEqual({
      message: "success",
      data: { deleted_ids: [c!.row_id, a!.row_id] },
    });
    const left = await list(api, tenant.readToken, t);
    expect(left.records.map((r) => r.row_id)).toEqual([b!.row_id]);
    expect(left.total).toBe(1);
    expectError(
      await api("GET", p.record(a!.row_id), { token: tenant.readToken }),
      404,
      "record_not_found",
    );
  });

  it("answers PUT with 405 and serves a per-table OpenAPI document with the real fields", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    const row = await seed(api, tenant.writeToken, table, [{ Text: "x" }]);
    for (const path of [p.records, p.record(row[0]!.row_id)]) {
      expectError(
        await api("PUT", path, { token: tenant.writeToken, body: { data: { Text: "y" } } }),
        405,
        "method_not_allowed",
      );
    }
    expect(
      (await api("GET", p.record(row[0]!.row_id), { token: tenant.readToken })).body.data.record
        .data[table.id("Text")],
    ).toBe("x");

    const t = await createTable(api, tenant, [
      { name: "Customer name", type: "text" },
      { name: "Lifetime value", type: "number" },
    ]);
    const byNames = { token: tenant.readToken, query: { response_format: "names" } };
    const doc = await api("GET", v1(t.databaseId, t.tableId).openapi, byNames);
    expect(doc.status, doc.text.slice(0, 300)).toBe(200);
    expect(doc.body.openapi).toMatch(/^3\.1/);
    expect(Object.keys(doc.body.paths).join(" ")).toContain("/records");
    const hasFieldSchema = (names: string[]) =>
      schemasWithProperties(doc.body).some((properties) =>
        names.every((name) => Object.hasOwn(properties, name)),
      );
    expect(hasFieldSchema(["Customer name", "Lifetime value"])).toBe(true);
    // The default document is keyed by field id throughout.
    const byIds = await api("GET", v1(t.databaseId, t.tableId).openapi, {
      token: tenant.readToken,
    });
    expect(byIds.body.components.schemas.RecordData.properties).toHaveProperty(
      t.id("Customer name"),
    );
    expect(schemasWithProperties(byIds.body).some((p) => Object.hasOwn(p, "Customer name"))).toBe(
      false,
    );

    const added = await api("POST", "/field/create", {
      token: tenant.owner.token,
      query: q({ table_id: t.tableId }),
      body: { name: "Renewal date", type: "date" },
    });
    expect(added.status).toBe(200);
    const again = await api("GET", v1(t.databaseId, t.tableId).openapi, byNames);
    expect(again.status).toBe(200);
    expect(again.body.info.version).not.toBe(doc.body.info.version);
    const properties = schemasWithProperties(again.body);
    expect(
      properties.some((p) =>
        ["Customer name", "Lifetime value", "Renewal date"].every((n) => Object.hasOwn(p, n)),
      ),
    ).toBe(true);
  });

  it("lists the first 100 problems a service found, and says how many there were", async () => {
    const t = await createTable(api, tenant, [{ name: "Qty", type: "number" }]);
    const p = v1(t.databaseId, t.tableId);
    await seed(api, tenant.writeToken, t, [{ Qty: 1 }]);
    const before = await list(api, tenant.readToken, t);
    const response = await api("POST", p.batch, {
      token: tenant.writeToken,
      body: { records: Array.from({ length: 150 }, () => ({ data: { Qty: "lots" } })) },
    });
    expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(400);
    expect(response.body.detail).toBe(
      `Validation failed for POST ${p.batch}: the first 100 of 150 problems are listed`,
    );
    expect(response.body.extra).toHaveLength(100);
    expect(response.body.extra[0]).toEqual(
      expect.objectContaining({ key: "records.0.data.Qty", source: "body" }),
    );
    expect(response.body.extra[99]).toEqual(
      expect.objectContaining({ key: "records.99.data.Qty", source: "body" }),
    );
    expect(await list(api, tenant.readToken, t)).toEqual(before);
  });

  it("reads percent-encoded ids as the plain ones, and answers path tricks with a 4xx", async () => {
    const [record] = await seed(api, tenant.writeToken, table, [{ Text: "encoded" }]);
    const rowId = record!.row_id;
    /** Every character of an id as `%3N`, which means the digit N (RFC 3986 6.2.2.2). */
    const encoded = (id: number) => [...String(id)].map((digit) => `%3${digit}`).join("");
    const p = v1(tenant.databaseId, table.tableId);
    const e = v1(encoded(tenant.databaseId) as never, encoded(table.tableId) as never);
    for (const path of [p.record(encoded(rowId)), e.record(rowId), e.record(encoded(rowId))]) {
      const got = await api("GET", path, { token: tenant.readToken });
      expect({ path, status: got.status }).toEqual({ path, status: 200 });
      expect(got.body.data.record.row_id).toBe(rowId);
    }
    const patched = await api("PATCH", p.record(encoded(rowId)), {
      token: tenant.writeToken,
      body: { data: { Text: "changed" } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data.record.data[table.id("Text")]).toBe("changed");

    // Sent byte for byte: fetch would resolve `%2e%2e` as `..` before sending it.
    const send = (method: string, path: string) =>
      new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const url = new URL(sys.baseUrl);
        const request = http.request(
          {
            host: url.hostname,
            port: url.port,
            method,
            path,
            headers: { authorization: `Bearer ${tenant.writeToken}` },
          },
          (response) => {
            let text = "";
            response.on("data", (chunk: Buffer) => {
              text += chunk.toString();
            });
            response.on("end", () =>
              resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as unknown }),
            );
          },
        );
        request.on("error", reject);
        request.end();
      });
    const table_ = `/public/v1/databases/${tenant.databaseId}/tables/${table.tableId}`;
    const notFound = { message: "not_found", data: {} };
    for (const [method, path, status, body] of [
      // Not an integer: the record route refuses the id as it refuses a bad database id.
      ["GET", `${table_}/records/%2e%2e`, 400, "row_id"],
      ["GET", `${table_}/records/%00`, 400, "row_id"],
      ["DELETE", `${table_}/records/${rowId}%2F1`, 400, "row_id"],
      ["GET", `${table_}/records/%`, 400, "row_id"],
      ["GET", `${table_}/records/abc`, 400, "row_id"],
      // Another segment: no route at all.
      ["DELETE", `${table_}/records/%2e%2e/%2e%2e`, 404, notFound],
      ["GET", `/public/v1/databases/%2e%2e/tables/${table.tableId}/records`, 400, "database_id"],
      ["GET", `/public/v1/databases/%2F/tables/${table.tableId}/records`, 400, "database_id"],
      ["GET", `/public/v1/databases/${tenant.databaseId}/tables/%00/records`, 400, "table_id"],
      ["GET", `/public/v1/databases/%/tables/${table.tableId}/records`, 400, "database_id"],
      ["GET", `/public/v1/databases/%C0%AF/tables/${table.tableId}/records`, 400, "database_id"],
    ] as const) {
      const answer = await send(method, path);
      expect({ path, status: answer.status }).toEqual({ path, status });
      if (typeof body === "string") {
        expect(answer.body).toMatchObject({ extra: [{ key: body, source: "path" }] });
      } else {
        expect(answer.body).toEqual(body);
      }
    }
    // None of them touched the record.
    const after = await api("GET", p.record(rowId), { token: tenant.readToken });
    expect(after.body.data.record.data[table.id("Text")]).toBe("changed");
  });

  it("answers a non-integer id in a v1 path with the 400 validation envelope on that key", async () => {
    const [record] = await seed(api, tenant.writeToken, table, [{ Text: "kept" }]);
    const before = await list(api, tenant.readToken, table);
    const message = "must be an integer between 1 and 9007199254740991";
    const bad = (key: string) => ({ key, message, source: "path", code: "invalid_value" });
    const table_ = `/public/v1/databases/${tenant.databaseId}/tables/${table.tableId}`;
    for (const [method, path, keys, body] of [
      ["GET", "/public/v1/databases/x/tables/1/records/abc", ["database_id", "row_id"]],
      ["GET", `${table_}/records/abc`, ["row_id"]],
      ["PATCH", `${table_}/records/abc`, ["row_id"], { data: { Text: "x" } }],
      ["DELETE", `${table_}/records/-1`, ["row_id"]],
      ["DELETE", `${table_}/records/${record!.row_id}.0`, ["row_id"]],
      ["GET", `/public/v1/databases/${tenant.databaseId}/tables/t1/records`, ["table_id"]],
      [
        "POST",
        `/public/v1/databases/x/tables/${table.tableId}/records`,
        ["database_id"],
        { data: {} },
      ],
      ["GET", `/public/v1/databases/x/tables/${table.tableId}/openapi.json`, ["database_id"]],
    ] as const) {
      const answer = await api(method, path, {
        token: tenant.writeToken,
        ...(body ? { body } : {}),
      });
      expect({ path, status: answer.status, body: answer.body }).toEqual({
        path,
        status: 400,
        body: {
          status_code: 400,
          detail: `Validation failed for ${method} ${path}`,
          extra: keys.map(bad),
        },
      });
    }
    expect(await list(api, tenant.readToken, table)).toEqual(before);
  });

  it("answers records that the table's own OpenAPI document describes, empty cells too", async () => {
    const p = v1(tenant.databaseId, table.tableId);
    await seed(api, tenant.writeToken, table, [FULL, {}]);
    // Formats are left to the server's own checks; types, enums and limits are what is held.
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    for (const [format, schema] of [
      ["ids", "Record"],
      ["names", "RecordByName"],
    ] as const) {
      const doc = await api("GET", p.openapi, {
        token: tenant.readToken,
        query: { response_format: format },
      });
      expect(doc.status).toBe(200);
      ajv.addSchema(doc.body, format);
      const validate = ajv.getSchema(`${format}#/components/schemas/${schema}`)!;
      const { records } = await list(api, tenant.readToken, table, { response_format: format });
      expect(records.length).toBeGreaterThanOrEqual(2);
      for (const record of records) {
        expect(validate(record), `${format}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    }
  });
});

/** Every `properties` object anywhere in an OpenAPI document. */
function schemasWithProperties(node: unknown): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  const walk = (value: unknown) => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === "object") {
      const object = value as Record<string, unknown>;
      if (object.properties && typeof object.properties === "object") {
        found.push(object.properties as Record<string, unknown>);
      }
      Object.values(object).forEach(walk);
    }
  };
  walk(node);
  return found;
}

describe("query-form routes", () => {
  it("creates, gets, lists, updates with PUT and deletes by POST and by DELETE", async () => {
    const tid = { table_id: table.tableId };
    const created = await api("POST", "/public/record/create", {
      token: tenant.writeToken,
      query: q(tid),
      body: { data: { Text: "query form", Status: "Lost" } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(Object.keys(created.body.data)).toEqual(["record"]);
    const record = created.body.data.record as RecordShape;
    expectRecord(record, table);
    expect(record.data).toEqual(byIds(table, full({ Text: "query form", Status: "Lost" }, record)));
    const row = { ...tid, row_id: record.row_id };

    const got = await api("GET", "/public/record/get", { token: tenant.readToken, query: q(row) });
    expect(got.body).toEqual({ message: "success", data: { record } });
    const inDatabase = await api("GET", "/public/record/get", {
      token: tenant.readToken,
      query: q({ ...row, database_id: tenant.databaseId, response_format: "names" }),
    });
    expect(inDatabase.status).toBe(200);
    expectRecord(inDatabase.body.data.record, table, "names");

    const listed = await api("GET", "/public/record/list", {
      token: tenant.readToken,
      query: q({ ...tid, database_id: tenant.databaseId, limit: 1000 }),
    });
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body.data).sort()).toEqual([
      "has_more",
      "limit",
      "offset",
      "records",
      "total",
    ]);
    expect(listed.body.data).toMatchObject({ limit: 1000, offset: 0, has_more: false });
    expect(listed.body.data.records).toContainEqual(record);

    const updated = await api("PUT", "/public/record/update", {
      token: tenant.writeToken,
      query: q(row),
      body: { data: { Number: "7.5" } },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(Object.keys(updated.body.data)).toEqual(["record"]);
    expect(updated.body.data.record.data).toEqual({
      ...record.data,
      [table.id("Number")]: 7.5,
      [table.id("Updated")]: updated.body.data.record.updated_at,
    });

    const byPost = await api("POST", "/public/record/delete", {
      token: tenant.writeToken,
      query: q(row),
    });
    expect(byPost.body).toEqual({ message: "success", data: { deleted_id: record.row_id } });
    const other = (await seed(api, tenant.writeToken, table, [{ Text: "second" }]))[0]!;
    const byDelete = await api("DELETE", "/public/record/delete", {
      token: tenant.writeToken,
      query: q({ ...tid, row_id: other.row_id }),
    });
    expect(byDelete.body).toEqual({ message: "success", data: { deleted_id: other.row_id } });

    for (const [method, path, body] of [
      ["GET", "/public/record/get", undefined],
      ["PUT", "/public/record/update", { data: { Text: "x" } }],
      ["POST", "/public/record/delete", undefined],
      ["DELETE", "/public/record/delete", undefined],
    ] as const) {
      expectError(
        await api(method, path, { token: tenant.writeToken, query: q(row), body }),
        404,
        "record_not_found",
      );
    }
  });

  it("refuses missing or malformed parameters with the validation shape", async () => {
    const cases: [string, string, Record<string, string | number>, string][] = [
      ["GET", "/public/record/get", { table_id: table.tableId }, "row_id"],
      ["GET", "/public/record/get", { table_id: table.tableId, row_id: "abc" }, "row_id"],
      ["GET", "/public/record/list", { table_id: table.tableId }, "database_id"],
      ["GET", "/public/record/list", { database_id: tenant.databaseId }, "table_id"],
      ["POST", "/public/record/create", {}, "table_id"],
      ["PUT", "/public/record/update", { table_id: table.tableId }, "row_id"],
      ["POST", "/public/record/delete", { row_id: 1 }, "table_id"],
    ];
    for (const [method, path, query, key] of cases) {
      const response = await api(method, path, {
        token: tenant.writeToken,
        query: q(query),
        body: method === "GET" || path.endsWith("delete") ? undefined : { data: {} },
      });
      expectValidation(response, [{ key, source: "query" }]);
    }
    // A known path with the wrong method.
    expectError(
      await api("PATCH", "/public/record/update", {
        token: tenant.writeToken,
        query: q({ table_id: table.tableId, row_id: 1 }),
        body: { data: {} },
      }),
      405,
      "method_not_allowed",
    );
  });
});
